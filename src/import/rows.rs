//! How entries become rows: the column lists of `files` and `symbols` (from the modelled
//! fields of `cache::fields`) and the values of an entry's row in their order, a call-graph
//! list as stored, the call-graph names of a symbol's own lists, and the SQL that inserts a
//! row. Used alike by the full import's writer and the delta's.

use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::ToSql;
use serde_json::Value;

use crate::cache::fields::{
    self, Cell, SYMBOL_CALLED_BY_CELL, SYMBOL_CALLS_CELL, SYMBOL_QUALIFIED_NAME_CELL,
};
use crate::db;

/// A cell as a SQL value.
pub(super) struct Sql<'a>(pub(super) &'a Cell);

impl ToSql for Sql<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(cell_value(self.0)))
    }
}

/// The columns of `files` a file entry fills, in the order of its values: key, canonical path,
/// the modelled columns from `cache::fields`, `extra`, the entry's digest.
pub(super) fn file_columns() -> String {
    format!(
        "key, path, {}, digest",
        fields::select_list(fields::FILE_FIELDS)
    )
}

/// The columns of `symbols` a symbol entry fills, in the order of its values.
pub(super) fn symbol_columns() -> String {
    format!(
        "key, file_path, {}, digest",
        fields::select_list(fields::SYMBOL_FIELDS)
    )
}

/// The values of an entry's row, in the order of [`file_columns`] or [`symbol_columns`].
pub(super) fn entry_values<'a>(
    key: &'a str,
    path: Option<&'a str>,
    cells: &'a [Cell],
    extra: &'a str,
    digest: i64,
) -> impl Iterator<Item = ValueRef<'a>> + 'a {
    let text = |s: &'a str| ValueRef::Text(s.as_bytes());
    std::iter::once(text(key))
        .chain(std::iter::once(path.map_or(ValueRef::Null, text)))
        .chain(cells.iter().map(cell_value))
        .chain([text(extra), ValueRef::Integer(digest)])
}

/// Values as statement parameters.
pub(super) fn sql_params<'a, I: IntoIterator<Item = ValueRef<'a>>>(
    values: I,
) -> impl rusqlite::Params + use<'a, I> {
    rusqlite::params_from_iter(values.into_iter().map(ToSqlOutput::Borrowed))
}

/// A cell as a SQL value.
pub(super) fn cell_value(cell: &Cell) -> ValueRef<'_> {
    match cell {
        Cell::Null => ValueRef::Null,
        Cell::Text(s) => ValueRef::Text(s.as_bytes()),
        Cell::Int(i) => ValueRef::Integer(*i),
    }
}

/// A symbol's own call-graph node name (its qualified name, else its key) and the names in its
/// `calls` (forward) and `called_by` lists, when either is a list.
pub(super) fn symbol_calls(key: &str, cells: &[Cell]) -> Option<(String, Vec<(String, bool)>)> {
    let mut calls = Vec::new();
    let mut any_list = false;
    for (column, forward) in [(SYMBOL_CALLS_CELL, true), (SYMBOL_CALLED_BY_CELL, false)] {
        let Some(list) = cells[column].as_str() else {
            continue;
        };
        let Ok(Value::Array(items)) = serde_json::from_str::<Value>(list) else {
            continue;
        };
        any_list = true;
        calls.extend(items.into_iter().filter_map(|v| match v {
            Value::String(s) => Some((s, forward)),
            _ => None,
        }));
    }
    any_list.then(|| {
        let own_name = cells[SYMBOL_QUALIFIED_NAME_CELL].as_str().unwrap_or(key);
        (own_name.to_string(), calls)
    })
}

/// How a call-graph list is stored: the node ids of its items when every item is a name (see
/// `db::encode_graph_items`), otherwise the list verbatim as JSON text.
pub(super) fn list_items(items: &[Value], ids: &[u32]) -> rusqlite::types::Value {
    if ids.len() == items.len() {
        rusqlite::types::Value::Blob(db::encode_graph_items(ids))
    } else {
        rusqlite::types::Value::Text(Value::Array(items.to_vec()).to_string())
    }
}

pub(super) fn insert_sql(table: &str, columns: &str, or_ignore: bool) -> String {
    let n = columns.split(',').count();
    let placeholders = (1..=n)
        .map(|i| format!("?{i}"))
        .collect::<Vec<_>>()
        .join(", ");
    let verb = if or_ignore {
        "INSERT OR IGNORE"
    } else {
        "INSERT"
    };
    format!("{verb} INTO {table}({columns}) VALUES ({placeholders})")
}

/// `UPDATE table SET (c1, c2, ...) = (?1, ?2, ...) WHERE id = ?N` for the `columns` an update
/// changes: an index on none of them is left untouched (setting a column to its own value would
/// still rewrite each index entry on it).
pub(super) fn update_columns_sql<'a>(
    table: &str,
    columns: impl Iterator<Item = &'a str>,
) -> String {
    let columns: Vec<&str> = columns.collect();
    let placeholders = (1..=columns.len())
        .map(|i| format!("?{i}"))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "UPDATE {table} SET ({}) = ({placeholders}) WHERE id = ?{}",
        columns.join(", "),
        columns.len() + 1
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_sql_has_one_placeholder_per_column() {
        assert_eq!(
            insert_sql("t", "a, b", true),
            "INSERT OR IGNORE INTO t(a, b) VALUES (?1, ?2)"
        );
    }
}
