//! Stored cache entries read back from their rows: the modelled columns of a section (derived
//! from `cache::fields`) plus the verbatim `extra` remainder, rebuilt into the original object.
//! Every reader of entries (the tools, the resources, `export-cache`) goes through here.

use rusqlite::types::ValueRef;
use rusqlite::{Connection, Row, ToSql};
use serde_json::{Map, Value};

use super::QueryResult;
use crate::cache::fields::{self, Cell, Field};

/// A section of the cache stored as one row per entry.
#[derive(Debug, Clone, Copy)]
pub struct Section {
    /// Its table.
    pub table: &'static str,
    /// Its modelled fields, in column order.
    pub fields: &'static [Field],
}

/// `files`.
pub const FILES: Section = Section {
    table: "files",
    fields: fields::FILE_FIELDS,
};
/// `symbols`.
pub const SYMBOLS: Section = Section {
    table: "symbols",
    fields: fields::SYMBOL_FIELDS,
};
/// `domains`.
pub const DOMAINS: Section = Section {
    table: "domains",
    fields: fields::DOMAIN_FIELDS,
};
/// The vars file's `variables`.
pub const VARS: Section = Section {
    table: "vars",
    fields: fields::VAR_FIELDS,
};

impl Section {
    /// `SELECT <leading, >columns…, extra FROM table <tail>`.
    pub fn select(&self, leading: &str, tail: &str) -> String {
        format!(
            "SELECT {leading}{} FROM {} {tail}",
            fields::select_list(self.fields),
            self.table
        )
    }

    /// The entry of the row whose column `by` equals `key`.
    pub fn load(
        &self,
        conn: &Connection,
        by: &str,
        key: &dyn ToSql,
    ) -> QueryResult<Option<Map<String, Value>>> {
        let sql = self.select("", &format!("WHERE {by} = ?1"));
        let mut stmt = conn.prepare_cached(&sql)?;
        let mut rows = stmt.query([key])?;
        match rows.next()? {
            Some(row) => Ok(Some(self.from_row(row, 0)?)),
            None => Ok(None),
        }
    }

    /// The entry held by `row`, whose columns start at `first`.
    pub fn from_row(&self, row: &Row, first: usize) -> QueryResult<Map<String, Value>> {
        let count = fields::column_count(self.fields);
        let cells = (0..count)
            .map(|i| cell(row, first + i))
            .collect::<rusqlite::Result<Vec<_>>>()?;
        let extra: String = row.get(first + count)?;
        let extra: Map<String, Value> = serde_json::from_str(&extra)?;
        Ok(fields::rebuild(self.fields, &cells, extra)?)
    }
}

/// One stored column value as a [`Cell`].
pub fn cell(row: &Row, i: usize) -> rusqlite::Result<Cell> {
    Ok(match row.get_ref(i)? {
        ValueRef::Null => Cell::Null,
        ValueRef::Integer(n) => Cell::Int(n),
        ValueRef::Real(f) => Cell::Text(f.to_string()),
        ValueRef::Text(t) | ValueRef::Blob(t) => {
            Cell::Text(String::from_utf8_lossy(t).into_owned())
        }
    })
}
