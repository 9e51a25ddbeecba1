//! `acp_get_file_context`: one file entry, re-serialised the way acp-cli writes it.
//!
//! acp-mcp answers with the cache's `FileEntry` after a round trip through acp-cli's types: known
//! fields in declaration order, absent optionals and empty defaults omitted, unknown and
//! spec-only fields dropped. The entry is rebuilt from its columns plus `extra` and reshaped with
//! the same rules. This module also holds the entry-shaping helpers the symbol and domain tools
//! share.

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OptionalExtension, Row};
use schemars::JsonSchema;
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::{Map, Value};

use super::names::{find_file, not_found, suggest_files};
use super::QueryResult;
use crate::cache::fields::{self, Cell, Field};

/// Arguments of `acp_get_file_context`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct GetFileContextParams {
    /// Path to the file (relative to project root)
    pub path: String,
}

/// A JSON object that keeps its members in insertion order when serialised.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OrderedObject(pub Vec<(String, Value)>);

impl OrderedObject {
    /// The value of member `key`, if present.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// Converts to a `serde_json` value (member order then follows `serde_json`'s map).
    pub fn to_value(&self) -> Value {
        Value::Object(self.0.iter().cloned().collect())
    }
}

impl Serialize for OrderedObject {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (key, value) in &self.0 {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

/// Finds a file like acp-mcp's `Cache::get_file` does (exact key, then normalised forms) and
/// returns its entry in acp-cli's shape. Also accepts paths whose canonical form names an
/// indexed file (absolute paths under the project root, Windows separators in keys).
pub fn file_context(conn: &Connection, params: &GetFileContextParams) -> QueryResult<OrderedObject> {
    let found = match find_file(conn, &params.path)? {
        Some(file) => Some(file),
        None => {
            let normalized = acp_cli_normalize_path(&params.path);
            if normalized == params.path {
                None
            } else {
                find_file(conn, &normalized)?
            }
        }
    };
    let Some(file) = found else {
        return Err(not_found(
            "File",
            &params.path,
            suggest_files(conn, &params.path)?,
        ));
    };
    let entry = file_entry(conn, file.id)?
        .ok_or_else(|| not_found("File", &params.path, Vec::new()))?;
    Ok(cli_file_entry(entry))
}

/// acp-cli's `normalize_path`: `\` → `/`, empty and `.` segments dropped, `..` pops (and is
/// dropped at the start), no leading `/`.
pub(crate) fn acp_cli_normalize_path(path: &str) -> String {
    let slashed = path.replace('\\', "/");
    let mut parts: Vec<&str> = Vec::new();
    for part in slashed.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            other => parts.push(other),
        }
    }
    parts.join("/")
}

const FILE_COLUMNS: &str = "path_field, lines, language, module, summary, purpose, owner, layer, stability, exports_json, imports_json, imported_by_json, domains_json, inline_json, extra";
const SYMBOL_COLUMNS: &str = "name, qualified_name, type, file, line_start, line_end, exported, signature, summary, purpose, async, visibility, calls_json, called_by_json, constraints_json, extra";
const DOMAIN_COLUMNS: &str = "name, description, files_json, symbols_json, extra";

/// The original file entry of row `id` (columns plus `extra`).
pub(crate) fn file_entry(conn: &Connection, id: i64) -> QueryResult<Option<Map<String, Value>>> {
    entry_by(conn, "files", FILE_COLUMNS, "id", id, fields::FILE_FIELDS)
}

/// The original symbol entry of row `id` (columns plus `extra`).
pub(crate) fn symbol_entry(conn: &Connection, id: i64) -> QueryResult<Option<Map<String, Value>>> {
    entry_by(conn, "symbols", SYMBOL_COLUMNS, "id", id, fields::SYMBOL_FIELDS)
}

/// The original domain entry whose map key is `key` (columns plus `extra`).
pub(crate) fn domain_entry(conn: &Connection, key: &str) -> QueryResult<Option<Map<String, Value>>> {
    entry_by(conn, "domains", DOMAIN_COLUMNS, "key", key, fields::DOMAIN_FIELDS)
}

fn entry_by(
    conn: &Connection,
    table: &str,
    columns: &str,
    by: &str,
    value: impl rusqlite::ToSql,
    fields: &[Field],
) -> QueryResult<Option<Map<String, Value>>> {
    let count = fields::column_count(fields);
    let sql = format!("SELECT {columns} FROM {table} WHERE {by} = ?1");
    let row = conn
        .prepare_cached(&sql)?
        .query_row([value], |row| {
            let cells = (0..count)
                .map(|i| cell(row, i))
                .collect::<rusqlite::Result<Vec<_>>>()?;
            let extra: String = row.get(count)?;
            Ok((cells, extra))
        })
        .optional()?;
    let Some((cells, extra)) = row else {
        return Ok(None);
    };
    let extra: Map<String, Value> = serde_json::from_str(&extra)?;
    Ok(Some(fields::rebuild(fields, &cells, extra)?))
}

fn cell(row: &Row, i: usize) -> rusqlite::Result<Cell> {
    Ok(match row.get_ref(i)? {
        ValueRef::Null => Cell::Null,
        ValueRef::Integer(n) => Cell::Int(n),
        ValueRef::Real(f) => Cell::Text(f.to_string()),
        ValueRef::Text(t) | ValueRef::Blob(t) => Cell::Text(String::from_utf8_lossy(t).into_owned()),
    })
}

/// How acp-cli writes a member when it re-serialises an entry.
#[derive(Clone, Copy)]
enum Emit {
    /// Written when present (absent optionals are omitted).
    Present,
    /// Always written, `[]` when absent.
    List,
    /// Omitted when absent or an empty list/object.
    NonEmpty,
    /// Omitted when absent or `false`.
    True,
    /// Omitted when absent or equal to the given default text.
    NotDefault(&'static str),
    /// File `bridge`: omitted unless enabled or with converted/merged counts.
    Bridge,
}

const FILE_SHAPE: &[(&str, Emit)] = &[
    ("path", Emit::Present),
    ("lines", Emit::Present),
    ("language", Emit::Present),
    ("exports", Emit::List),
    ("imports", Emit::List),
    ("imported_by", Emit::NonEmpty),
    ("module", Emit::Present),
    ("summary", Emit::Present),
    ("purpose", Emit::Present),
    ("owner", Emit::Present),
    ("inline", Emit::NonEmpty),
    ("domains", Emit::NonEmpty),
    ("layer", Emit::Present),
    ("stability", Emit::Present),
    ("ai_hints", Emit::NonEmpty),
    ("git", Emit::Present),
    ("annotations", Emit::NonEmpty),
    ("bridge", Emit::Bridge),
    ("version", Emit::Present),
    ("since", Emit::Present),
    ("license", Emit::Present),
    ("author", Emit::Present),
    ("lifecycle", Emit::Present),
    ("refs", Emit::NonEmpty),
    ("style", Emit::Present),
];

const SYMBOL_SHAPE: &[(&str, Emit)] = &[
    ("name", Emit::Present),
    ("qualified_name", Emit::Present),
    ("type", Emit::Present),
    ("file", Emit::Present),
    ("lines", Emit::Present),
    ("exported", Emit::Present),
    ("signature", Emit::Present),
    ("summary", Emit::Present),
    ("purpose", Emit::Present),
    ("constraints", Emit::Present),
    ("async", Emit::True),
    ("visibility", Emit::NotDefault("public")),
    ("calls", Emit::NonEmpty),
    ("called_by", Emit::NonEmpty),
    ("git", Emit::Present),
    ("annotations", Emit::NonEmpty),
    ("behavioral", Emit::Present),
    ("lifecycle", Emit::Present),
    ("documentation", Emit::Present),
    ("performance", Emit::Present),
    ("type_info", Emit::Present),
];

const DOMAIN_SHAPE: &[(&str, Emit)] = &[
    ("name", Emit::Present),
    ("files", Emit::List),
    ("symbols", Emit::List),
    ("description", Emit::Present),
];

const INLINE_SHAPE: &[(&str, Emit)] = &[
    ("line", Emit::Present),
    ("type", Emit::Present),
    ("value", Emit::Present),
    ("directive", Emit::Present),
    ("expires", Emit::Present),
    ("ticket", Emit::Present),
    ("auto_generated", Emit::True),
];

const PROVENANCE_SHAPE: &[(&str, Emit)] = &[
    ("value", Emit::Present),
    ("source", Emit::NotDefault("explicit")),
    ("confidence", Emit::Present),
    ("needsReview", Emit::True),
    ("reviewed", Emit::True),
    ("reviewedAt", Emit::Present),
    ("generatedAt", Emit::Present),
    ("generationId", Emit::Present),
];

const LIFECYCLE_SHAPE: &[(&str, Emit)] = &[
    ("deprecated", Emit::Present),
    ("experimental", Emit::True),
    ("beta", Emit::True),
    ("internal", Emit::True),
    ("publicApi", Emit::True),
    ("since", Emit::Present),
];

const BEHAVIORAL_SHAPE: &[(&str, Emit)] = &[
    ("pure", Emit::True),
    ("idempotent", Emit::True),
    ("memoized", Emit::Present),
    ("async", Emit::True),
    ("generator", Emit::True),
    ("throttled", Emit::Present),
    ("transactional", Emit::True),
    ("sideEffects", Emit::NonEmpty),
];

const DOCUMENTATION_SHAPE: &[(&str, Emit)] = &[
    ("examples", Emit::NonEmpty),
    ("seeAlso", Emit::NonEmpty),
    ("links", Emit::NonEmpty),
    ("notes", Emit::NonEmpty),
    ("warnings", Emit::NonEmpty),
    ("todos", Emit::NonEmpty),
];

const SYMBOL_CONSTRAINT_SHAPE: &[(&str, Emit)] = &[
    ("level", Emit::Present),
    ("directive", Emit::Present),
    ("auto_generated", Emit::True),
];

/// A file entry in acp-cli's field order and omission rules.
pub(crate) fn cli_file_entry(mut entry: Map<String, Value>) -> OrderedObject {
    if let Some(Value::Array(items)) = entry.get_mut("inline") {
        for item in items.iter_mut() {
            reshape_in_place(item, INLINE_SHAPE);
        }
    }
    reshape_map_values(&mut entry, "annotations", PROVENANCE_SHAPE);
    if let Some(lifecycle) = entry.get_mut("lifecycle") {
        reshape_in_place(lifecycle, LIFECYCLE_SHAPE);
    }
    shape(entry, FILE_SHAPE)
}

/// A symbol entry in acp-cli's field order and omission rules.
pub(crate) fn cli_symbol_entry(mut entry: Map<String, Value>) -> OrderedObject {
    reshape_map_values(&mut entry, "annotations", PROVENANCE_SHAPE);
    for (key, nested) in [
        ("constraints", SYMBOL_CONSTRAINT_SHAPE),
        ("lifecycle", LIFECYCLE_SHAPE),
        ("behavioral", BEHAVIORAL_SHAPE),
        ("documentation", DOCUMENTATION_SHAPE),
    ] {
        if let Some(value) = entry.get_mut(key) {
            reshape_in_place(value, nested);
        }
    }
    shape(entry, SYMBOL_SHAPE)
}

/// A domain entry in acp-cli's field order (`name, files, symbols, description`).
pub(crate) fn cli_domain_entry(entry: Map<String, Value>) -> OrderedObject {
    shape(entry, DOMAIN_SHAPE)
}

fn reshape_map_values(entry: &mut Map<String, Value>, key: &str, nested: &[(&str, Emit)]) {
    if let Some(Value::Object(members)) = entry.get_mut(key) {
        for value in members.values_mut() {
            reshape_in_place(value, nested);
        }
    }
}

fn reshape_in_place(value: &mut Value, nested: &[(&str, Emit)]) {
    if let Value::Object(map) = value {
        *value = shape(std::mem::take(map), nested).to_value();
    }
}

fn shape(mut entry: Map<String, Value>, order: &[(&str, Emit)]) -> OrderedObject {
    let mut out = Vec::with_capacity(order.len());
    for (name, emit) in order {
        let value = entry.remove(*name).filter(|v| !v.is_null());
        let value = match (emit, value) {
            (Emit::List, None) => Some(Value::Array(Vec::new())),
            (_, None) => None,
            (Emit::Present | Emit::List, Some(v)) => Some(v),
            (Emit::NonEmpty, Some(v)) => Some(v).filter(|v| !is_empty(v)),
            (Emit::True, Some(v)) => Some(v).filter(|v| *v != Value::Bool(false)),
            (Emit::NotDefault(default), Some(v)) => {
                Some(v).filter(|v| v.as_str() != Some(default))
            }
            (Emit::Bridge, Some(v)) => Some(v).filter(|v| !bridge_is_empty(v)),
        };
        if let Some(mut value) = value {
            strip_nulls(&mut value);
            out.push((name.to_string(), value));
        }
    }
    OrderedObject(out)
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Array(items) => items.is_empty(),
        Value::Object(members) => members.is_empty(),
        _ => false,
    }
}

fn bridge_is_empty(bridge: &Value) -> bool {
    let enabled = bridge.get("enabled").and_then(Value::as_bool).unwrap_or(false);
    let count = |key: &str| bridge.get(key).and_then(Value::as_u64).unwrap_or(0);
    !enabled && count("convertedCount") == 0 && count("mergedCount") == 0
}

/// Drops `null` members of nested objects (acp-cli omits absent optionals).
fn strip_nulls(value: &mut Value) {
    match value {
        Value::Object(members) => {
            members.retain(|_, v| !v.is_null());
            members.values_mut().for_each(strip_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            _ => panic!("object expected"),
        }
    }

    #[test]
    fn normalises_like_acp_cli() {
        assert_eq!(acp_cli_normalize_path("../src/a.ts"), "src/a.ts");
        assert_eq!(acp_cli_normalize_path("/src/a.ts"), "src/a.ts");
        assert_eq!(acp_cli_normalize_path(".\\src\\a.ts"), "src/a.ts");
        assert_eq!(acp_cli_normalize_path("src//b/./../a.ts/"), "src/a.ts");
    }

    #[test]
    fn file_entry_follows_cli_order_and_omissions() {
        let entry = object(json!({
            "domains": [], "language": "typescript", "path": "./a.ts", "lines": 3,
            "x_unknown": 1, "params": [], "summary": null, "layer": "api",
            "inline": [{"type": "todo", "line": 2, "directive": "d", "auto_generated": false, "ticket": null}],
            "bridge": {"enabled": false, "convertedCount": 0, "mergedCount": 0, "explicitCount": 4}
        }));
        let shaped = cli_file_entry(entry);
        let keys: Vec<&str> = shaped.0.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["path", "lines", "language", "exports", "imports", "inline", "layer"]);
        assert_eq!(
            shaped.get("inline"),
            Some(&json!([{"line": 2, "type": "todo", "directive": "d"}]))
        );
    }

    #[test]
    fn symbol_entry_drops_defaults() {
        let entry = object(json!({
            "name": "f", "qualified_name": "a.ts:f", "type": "function", "file": "a.ts",
            "lines": [1, 2], "exported": true, "async": false, "visibility": "public", "calls": []
        }));
        let keys: Vec<String> = cli_symbol_entry(entry).0.into_iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["name", "qualified_name", "type", "file", "lines", "exported"]);
    }

    #[test]
    fn ordered_object_serialises_in_order() {
        let object = OrderedObject(vec![("b".into(), json!(1)), ("a".into(), json!(2))]);
        assert_eq!(serde_json::to_string(&object).unwrap(), r#"{"b":1,"a":2}"#);
    }
}
