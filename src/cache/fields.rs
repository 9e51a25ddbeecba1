//! How a cache entry maps to table columns, and back.
//!
//! Each entry kind has a fixed list of modelled fields. A field goes to its column only when
//! its JSON value has the column's type; anything else (unknown fields, other spellings,
//! unexpected types, explicit `null`s of typed columns) stays verbatim in the `extra` object.
//! Rebuilding an entry from the columns plus `extra` therefore gives back the original object.

use std::borrow::Cow;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::{Map, Number, Value};

/// The storage type of a modelled field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A JSON string.
    Text,
    /// A JSON integer that fits in `i64`.
    Int,
    /// A JSON boolean (stored as 0/1).
    Bool,
    /// Any JSON value, stored as JSON text.
    Json,
    /// A `[start, end]` pair of integers, stored in two columns.
    Lines,
}

/// A modelled field: its JSON name, storage type and column(s).
#[derive(Debug, Clone, Copy)]
pub struct Field {
    /// The JSON member name.
    pub name: &'static str,
    /// How it is stored.
    pub kind: Kind,
    /// The column list it occupies (two columns for [`Kind::Lines`]).
    pub columns: &'static str,
}

const fn f(name: &'static str, kind: Kind, columns: &'static str) -> Field {
    Field {
        name,
        kind,
        columns,
    }
}

/// File entry fields, in column order (`path` is stored in `path_field`).
pub const FILE_FIELDS: &[Field] = &[
    f("path", Kind::Text, "path_field"),
    f("lines", Kind::Int, "lines"),
    f("language", Kind::Text, "language"),
    f("module", Kind::Text, "module"),
    f("summary", Kind::Text, "summary"),
    f("purpose", Kind::Text, "purpose"),
    f("owner", Kind::Text, "owner"),
    f("layer", Kind::Text, "layer"),
    f("stability", Kind::Text, "stability"),
    f("exports", Kind::Json, "exports_json"),
    f("imports", Kind::Json, "imports_json"),
    f("imported_by", Kind::Json, "imported_by_json"),
    f("domains", Kind::Json, "domains_json"),
    f("inline", Kind::Json, "inline_json"),
];

/// Symbol entry fields, in column order (`lines` takes two columns).
pub const SYMBOL_FIELDS: &[Field] = &[
    f("name", Kind::Text, "name"),
    f("qualified_name", Kind::Text, "qualified_name"),
    f("type", Kind::Text, "type"),
    f("file", Kind::Text, "file"),
    f("lines", Kind::Lines, "line_start, line_end"),
    f("exported", Kind::Bool, "exported"),
    f("signature", Kind::Text, "signature"),
    f("summary", Kind::Text, "summary"),
    f("purpose", Kind::Text, "purpose"),
    f("async", Kind::Bool, "async"),
    f("visibility", Kind::Text, "visibility"),
    f("calls", Kind::Json, "calls_json"),
    f("called_by", Kind::Json, "called_by_json"),
    f("constraints", Kind::Json, "constraints_json"),
];

/// Domain entry fields, in column order.
pub const DOMAIN_FIELDS: &[Field] = &[
    f("name", Kind::Text, "name"),
    f("description", Kind::Text, "description"),
    f("files", Kind::Json, "files_json"),
    f("symbols", Kind::Json, "symbols_json"),
];

/// Variable entry fields, in column order.
pub const VAR_FIELDS: &[Field] = &[
    f("type", Kind::Text, "type"),
    f("value", Kind::Text, "value"),
    f("description", Kind::Text, "description"),
    f("refs", Kind::Json, "refs_json"),
    f("source", Kind::Text, "source"),
    f("lines", Kind::Json, "lines_json"),
];

/// One stored value; `Null` means the field was absent (or kept in `extra`).
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    /// Absent.
    Null,
    /// Text or JSON text.
    Text(String),
    /// Integer (also booleans as 0/1).
    Int(i64),
}

impl Cell {
    /// The text, if this is a text cell.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Cell::Text(s) => Some(s),
            _ => None,
        }
    }
}

/// The column list of `fields` followed by `extra`, for a `SELECT` (the one place these lists
/// are spelled; the importer's `INSERT` and every reader derive theirs from it).
pub fn select_list(fields: &[Field]) -> String {
    let mut list: Vec<&str> = fields.iter().map(|f| f.columns).collect();
    list.push("extra");
    list.join(", ")
}

/// Number of columns a field list occupies.
pub fn column_count(fields: &[Field]) -> usize {
    fields.iter().map(Field::width).sum()
}

/// The position of field `name`'s (first) cell in a record split by `fields`; a compile-time
/// constant, so a position is never written by hand (see the `*_CELL` constants).
pub const fn cell_index(fields: &[Field], name: &str) -> usize {
    let mut cell = 0;
    let mut i = 0;
    while i < fields.len() {
        if same(fields[i].name, name) {
            return cell;
        }
        cell += fields[i].width();
        i += 1;
    }
    panic!("no such field")
}

const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Cell of a file's `language`.
pub const FILE_LANGUAGE_CELL: usize = cell_index(FILE_FIELDS, "language");
/// Cell of a file's `imported_by`.
pub const FILE_IMPORTED_BY_CELL: usize = cell_index(FILE_FIELDS, "imported_by");
/// Cell of a file's `domains`.
pub const FILE_DOMAINS_CELL: usize = cell_index(FILE_FIELDS, "domains");
/// Cell of a file's `inline` annotations.
pub const FILE_INLINE_CELL: usize = cell_index(FILE_FIELDS, "inline");
/// Cell of a symbol's simple `name`.
pub const SYMBOL_NAME_CELL: usize = cell_index(SYMBOL_FIELDS, "name");
/// Cell of a symbol's `qualified_name`.
pub const SYMBOL_QUALIFIED_NAME_CELL: usize = cell_index(SYMBOL_FIELDS, "qualified_name");
/// Cell of a symbol's `type`.
pub const SYMBOL_TYPE_CELL: usize = cell_index(SYMBOL_FIELDS, "type");
/// Cell of a symbol's `file`.
pub const SYMBOL_FILE_CELL: usize = cell_index(SYMBOL_FIELDS, "file");
/// Cell of a symbol's `signature`.
pub const SYMBOL_SIGNATURE_CELL: usize = cell_index(SYMBOL_FIELDS, "signature");
/// Cell of a symbol's `summary`.
pub const SYMBOL_SUMMARY_CELL: usize = cell_index(SYMBOL_FIELDS, "summary");
/// Cell of a symbol's `purpose`.
pub const SYMBOL_PURPOSE_CELL: usize = cell_index(SYMBOL_FIELDS, "purpose");
/// Cell of a symbol's `visibility`.
pub const SYMBOL_VISIBILITY_CELL: usize = cell_index(SYMBOL_FIELDS, "visibility");
/// Cell of a symbol's `calls` (its forward call-graph list).
pub const SYMBOL_CALLS_CELL: usize = cell_index(SYMBOL_FIELDS, "calls");
/// Cell of a symbol's `called_by` (its reverse call-graph list).
pub const SYMBOL_CALLED_BY_CELL: usize = cell_index(SYMBOL_FIELDS, "called_by");
/// Cell of a domain's `name`.
pub const DOMAIN_NAME_CELL: usize = cell_index(DOMAIN_FIELDS, "name");
/// Cell of a domain's `files`.
pub const DOMAIN_FILES_CELL: usize = cell_index(DOMAIN_FIELDS, "files");
/// Cell of a domain's `symbols`.
pub const DOMAIN_SYMBOLS_CELL: usize = cell_index(DOMAIN_FIELDS, "symbols");
/// Cell of a variable's `type`.
pub const VAR_TYPE_CELL: usize = cell_index(VAR_FIELDS, "type");

/// An entry split into its columns and the JSON text of its `extra` remainder.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// One cell per column of `fields` (see [`column_count`]).
    pub cells: Vec<Cell>,
    /// The fields no column models, as a JSON object.
    pub extra: String,
}

/// Splits an entry into column cells (in field order) and the `extra` remainder.
pub fn split(mut entry: Map<String, Value>, fields: &[Field]) -> (Vec<Cell>, Map<String, Value>) {
    let mut cells = vec![Cell::Null; column_count(fields)];
    let mut extra = Map::new();
    let mut cell = 0;
    for field in fields {
        if let Some(value) = entry.remove(field.name) {
            place(field, cell, value, &mut cells, &mut extra);
        }
        cell += field.width();
    }
    extra.append(&mut entry);
    (cells, extra)
}

/// Puts `value` of `field`, whose first cell is `cell`, in its cells when it has the field's
/// type, else in `extra`.
fn place(
    field: &Field,
    cell: usize,
    value: Value,
    cells: &mut [Cell],
    extra: &mut Map<String, Value>,
) {
    match take_typed(value, field.kind) {
        Ok(typed) => {
            for (slot, typed) in cells[cell..cell + field.width()].iter_mut().zip(typed) {
                *slot = typed;
            }
        }
        Err(value) => {
            extra.insert(field.name.to_string(), value);
        }
    }
}

impl Field {
    /// Number of cells the field takes.
    const fn width(&self) -> usize {
        match self.kind {
            Kind::Lines => 2,
            _ => 1,
        }
    }
}

/// The field's cells from `value` when it has the field's type (a second cell only for
/// [`Kind::Lines`]), else the value back.
fn take_typed(value: Value, kind: Kind) -> Result<[Cell; 2], Value> {
    let one = |cell| [cell, Cell::Null];
    match (kind, value) {
        (Kind::Text, Value::String(s)) => Ok(one(Cell::Text(s))),
        (Kind::Int, Value::Number(n)) if !n.is_f64() && n.as_i64().is_some() => {
            Ok(one(Cell::Int(n.as_i64().unwrap_or_default())))
        }
        (Kind::Bool, Value::Bool(b)) => Ok(one(Cell::Int(i64::from(b)))),
        (Kind::Json, v) => Ok(one(Cell::Text(v.to_string()))),
        (Kind::Lines, Value::Array(items)) if items.len() == 2 => {
            let int = |v: &Value| v.as_i64().filter(|_| !v.is_f64());
            match (int(&items[0]), int(&items[1])) {
                (Some(start), Some(end)) => Ok([Cell::Int(start), Cell::Int(end)]),
                _ => Err(Value::Array(items)),
            }
        }
        (_, value) => Err(value),
    }
}

/// Deserializes an entry object straight into its [`Record`]: the same cells and `extra` as
/// [`split`] of the parsed object (a repeated member counts once, the last one, as in
/// a parsed object), without building a map of every member first.
pub struct RecordSeed(pub &'static [Field]);

impl<'de> DeserializeSeed<'de> for RecordSeed {
    type Value = Record;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Record, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for RecordSeed {
    type Value = Record;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Record, A::Error> {
        let fields = self.0;
        let mut cells = vec![Cell::Null; column_count(fields)];
        let mut extra = Map::new();
        while let Some(MemberName(name)) = map.next_key()? {
            let mut cell = 0;
            let modelled = fields.iter().find(|field| {
                let found = field.name == name;
                if !found {
                    cell += field.width();
                }
                found
            });
            let value: Value = map.next_value()?;
            match modelled {
                Some(field) => {
                    // A repeated member replaces what the earlier one gave.
                    extra.remove(field.name);
                    for slot in &mut cells[cell..cell + field.width()] {
                        *slot = Cell::Null;
                    }
                    place(field, cell, value, &mut cells, &mut extra);
                }
                None => {
                    extra.insert(name.into_owned(), value);
                }
            }
        }
        Ok(Record {
            cells,
            extra: Value::Object(extra).to_string(),
        })
    }
}

/// An object member's name, borrowed from the input when it has no escapes.
struct MemberName<'de>(Cow<'de, str>);

impl<'de> Deserialize<'de> for MemberName<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct NameVisitor;
        impl<'de> Visitor<'de> for NameVisitor {
            type Value = MemberName<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a member name")
            }
            fn visit_borrowed_str<E>(self, name: &'de str) -> Result<Self::Value, E> {
                Ok(MemberName(Cow::Borrowed(name)))
            }
            fn visit_str<E>(self, name: &str) -> Result<Self::Value, E> {
                Ok(MemberName(Cow::Owned(name.to_string())))
            }
            fn visit_string<E>(self, name: String) -> Result<Self::Value, E> {
                Ok(MemberName(Cow::Owned(name)))
            }
        }
        deserializer.deserialize_str(NameVisitor)
    }
}

/// Rebuilds an entry from its cells (in field order) and its `extra` object.
pub fn rebuild(
    fields: &[Field],
    cells: &[Cell],
    extra: Map<String, Value>,
) -> Result<Map<String, Value>, serde_json::Error> {
    let mut entry = Map::new();
    let mut i = 0;
    for field in fields {
        let cell = &cells[i];
        i += 1;
        let value = match (field.kind, cell) {
            (_, Cell::Null) => {
                if field.kind == Kind::Lines {
                    i += 1;
                }
                continue;
            }
            (Kind::Text, Cell::Text(s)) => Value::String(s.clone()),
            (Kind::Int, Cell::Int(n)) => Value::Number(Number::from(*n)),
            (Kind::Bool, Cell::Int(n)) => Value::Bool(*n != 0),
            (Kind::Json, Cell::Text(s)) => serde_json::from_str(s)?,
            (Kind::Lines, Cell::Int(start)) => {
                let end = match &cells[i] {
                    Cell::Int(e) => *e,
                    _ => *start,
                };
                i += 1;
                Value::Array(vec![Value::from(*start), Value::from(end)])
            }
            (_, other) => {
                return Err(serde::de::Error::custom(format!(
                    "column for `{}` holds an unexpected value {other:?}",
                    field.name
                )))
            }
        };
        entry.insert(field.name.to_string(), value);
    }
    entry.extend(extra);
    Ok(entry)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn round_trip(value: Value, fields: &[Field]) {
        let Value::Object(map) = value.clone() else {
            panic!("object expected")
        };
        let (cells, extra) = split(map, fields);
        assert_eq!(cells.len(), column_count(fields));
        let rebuilt = rebuild(fields, &cells, extra).unwrap();
        assert_eq!(Value::Object(rebuilt), value);
    }

    #[test]
    fn typed_values_go_to_columns() {
        let entry =
            json!({"name": "f", "lines": [1, 9], "exported": true, "calls": ["g"], "x_unknown": 5});
        let Value::Object(map) = entry.clone() else {
            unreachable!()
        };
        let (cells, extra) = split(map, SYMBOL_FIELDS);
        assert_eq!(cells[0], Cell::Text("f".into()));
        assert_eq!(cells[4], Cell::Int(1));
        assert_eq!(cells[5], Cell::Int(9));
        assert_eq!(cells[6], Cell::Int(1));
        assert_eq!(extra.len(), 1);
        round_trip(entry, SYMBOL_FIELDS);
    }

    /// The record the seed gives for `raw`, and the one splitting the parsed object gives.
    fn both_ways(raw: &str, fields: &'static [Field]) -> (Record, Record) {
        let mut de = serde_json::Deserializer::from_str(raw);
        let seeded = RecordSeed(fields).deserialize(&mut de).unwrap();
        let Value::Object(map) = serde_json::from_str(raw).unwrap() else {
            panic!("object expected")
        };
        let (cells, extra) = split(map, fields);
        let split = Record {
            cells,
            extra: Value::Object(extra).to_string(),
        };
        (seeded, split)
    }

    #[test]
    fn the_seed_splits_as_the_parsed_object_does() {
        for raw in [
            r#"{"name": "f", "lines": [1, 9], "exported": true, "calls": ["g"], "x_unknown": 5}"#,
            r#"{"name": 7, "lines": "ten", "exported": null, "signature": null, "async": false}"#,
            r#"{"lines": [1.5, 2], "calls": null, "visibility": ["public"], "z": {"a": [1]}}"#,
            r#"{"name": "a", "name": 5, "x": 1, "x": 2, "lines": [1, 2], "lines": [3]}"#,
            r#"{"name": 5, "name": "b", "lines": "x", "lines": [4, 5], "na\u006de": "c"}"#,
            r#"{"qualified_name": "m::f", "\u0071ualified_name": 3, "é": "\u00e9"}"#,
            r#"{"constraints": {}, "called_by": ["h"], "calls": ["g"], "qualified_name": "q", "name": "n"}"#,
            "{}",
        ] {
            let (seeded, split) = both_ways(raw, SYMBOL_FIELDS);
            assert_eq!(seeded, split, "{raw}");
        }
        let (seeded, split) = both_ways(
            r#"{"inline": [1], "domains": ["d"], "path": "a", "lines": 3.0, "lines": 4}"#,
            FILE_FIELDS,
        );
        assert_eq!(seeded, split);
        assert_eq!(seeded.cells[1], Cell::Int(4));
        assert_eq!(seeded.cells[FILE_INLINE_CELL], Cell::Text("[1]".into()));
    }

    #[test]
    fn unexpected_types_and_nulls_stay_in_extra() {
        round_trip(
            json!({"name": 7, "lines": "ten", "exported": null, "signature": null, "async": false}),
            SYMBOL_FIELDS,
        );
        round_trip(
            json!({"lines": [1.5, 2], "calls": null, "visibility": ["public"]}),
            SYMBOL_FIELDS,
        );
        round_trip(
            json!({"path": "a", "lines": 3.0, "inline": [{"line": 1}], "importedBy": []}),
            FILE_FIELDS,
        );
        round_trip(json!({"lines": 18446744073709551615u64}), FILE_FIELDS);
        round_trip(json!({}), DOMAIN_FIELDS);
    }
}
