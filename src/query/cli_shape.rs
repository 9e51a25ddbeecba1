//! acp-cli's shapes of cache entries, as the reference server answers them.
//!
//! acp-mcp answers with the cache's entries after a round trip through acp-cli's types: known
//! fields in declaration order, absent optionals and empty defaults omitted, unknown and
//! spec-only fields dropped. The file, symbol and domain tools rebuild an entry from its columns
//! plus `extra` and reshape it here with the same rules.

use serde_json::{Map, Value};

use super::ordered::{Entry, Ordered};

/// How acp-cli writes a member when it re-serialises an entry.
#[derive(Clone, Copy)]
enum Emit {
    /// Written when present (absent optionals are omitted).
    Present,
    /// Always written, `[]` when absent.
    List,
    /// Always written, `false` when absent.
    Flag,
    /// Always written, `0` when absent.
    Zero,
    /// Omitted when absent or an empty list/object.
    NonEmpty,
    /// Omitted when absent or `false`.
    True,
    /// Omitted when absent or equal to the given default text.
    NotDefault(&'static str),
    /// File `bridge`: omitted unless enabled or with converted/merged counts.
    Bridge,
}

/// The shape of a member's value.
#[derive(Clone, Copy)]
enum Nested {
    /// Kept as is (nested `null`s dropped).
    Plain,
    /// An object of the given shape.
    Object(&'static [Member]),
    /// A list of objects of the given shape.
    List(&'static [Member]),
    /// A map whose values are objects of the given shape.
    Map(&'static [Member]),
}

/// One member of an entry: its name, omission rule and value shape.
type Member = (&'static str, Emit, Nested);

const P: Nested = Nested::Plain;

const FILE_SHAPE: &[Member] = &[
    ("path", Emit::Present, P),
    ("lines", Emit::Present, P),
    ("language", Emit::Present, P),
    ("exports", Emit::List, P),
    ("imports", Emit::List, P),
    ("imported_by", Emit::NonEmpty, P),
    ("module", Emit::Present, P),
    ("summary", Emit::Present, P),
    ("purpose", Emit::Present, P),
    ("owner", Emit::Present, P),
    ("inline", Emit::NonEmpty, Nested::List(INLINE_SHAPE)),
    ("domains", Emit::NonEmpty, P),
    ("layer", Emit::Present, P),
    ("stability", Emit::Present, P),
    ("ai_hints", Emit::NonEmpty, P),
    ("git", Emit::Present, Nested::Object(FILE_GIT_SHAPE)),
    ("annotations", Emit::NonEmpty, Nested::Map(PROVENANCE_SHAPE)),
    ("bridge", Emit::Bridge, Nested::Object(BRIDGE_SHAPE)),
    ("version", Emit::Present, P),
    ("since", Emit::Present, P),
    ("license", Emit::Present, P),
    ("author", Emit::Present, P),
    ("lifecycle", Emit::Present, Nested::Object(LIFECYCLE_SHAPE)),
    ("refs", Emit::NonEmpty, Nested::List(REF_SHAPE)),
    ("style", Emit::Present, Nested::Object(STYLE_SHAPE)),
];

const SYMBOL_SHAPE: &[Member] = &[
    ("name", Emit::Present, P),
    ("qualified_name", Emit::Present, P),
    ("type", Emit::Present, P),
    ("file", Emit::Present, P),
    ("lines", Emit::Present, P),
    ("exported", Emit::Present, P),
    ("signature", Emit::Present, P),
    ("summary", Emit::Present, P),
    ("purpose", Emit::Present, P),
    (
        "constraints",
        Emit::Present,
        Nested::Object(SYMBOL_CONSTRAINT_SHAPE),
    ),
    ("async", Emit::True, P),
    ("visibility", Emit::NotDefault("public"), P),
    ("calls", Emit::NonEmpty, P),
    ("called_by", Emit::NonEmpty, P),
    ("git", Emit::Present, Nested::Object(SYMBOL_GIT_SHAPE)),
    ("annotations", Emit::NonEmpty, Nested::Map(PROVENANCE_SHAPE)),
    (
        "behavioral",
        Emit::Present,
        Nested::Object(BEHAVIORAL_SHAPE),
    ),
    ("lifecycle", Emit::Present, Nested::Object(LIFECYCLE_SHAPE)),
    (
        "documentation",
        Emit::Present,
        Nested::Object(DOCUMENTATION_SHAPE),
    ),
    (
        "performance",
        Emit::Present,
        Nested::Object(PERFORMANCE_SHAPE),
    ),
    ("type_info", Emit::Present, Nested::Object(TYPE_INFO_SHAPE)),
];

const DOMAIN_SHAPE: &[Member] = &[
    ("name", Emit::Present, P),
    ("files", Emit::List, P),
    ("symbols", Emit::List, P),
    ("description", Emit::Present, P),
];

const INLINE_SHAPE: &[Member] = &[
    ("line", Emit::Present, P),
    ("type", Emit::Present, P),
    ("value", Emit::Present, P),
    ("directive", Emit::Present, P),
    ("expires", Emit::Present, P),
    ("ticket", Emit::Present, P),
    ("auto_generated", Emit::True, P),
];

const FILE_GIT_SHAPE: &[Member] = &[
    ("last_commit", Emit::Present, P),
    ("last_author", Emit::Present, P),
    ("last_modified", Emit::Present, P),
    ("commit_count", Emit::Present, P),
    ("contributors", Emit::Present, P),
];

const SYMBOL_GIT_SHAPE: &[Member] = &[
    ("last_commit", Emit::Present, P),
    ("last_author", Emit::Present, P),
    ("code_age_days", Emit::Present, P),
];

const PROVENANCE_SHAPE: &[Member] = &[
    ("value", Emit::Present, P),
    ("source", Emit::NotDefault("explicit"), P),
    ("confidence", Emit::Present, P),
    ("needsReview", Emit::True, P),
    ("reviewed", Emit::True, P),
    ("reviewedAt", Emit::Present, P),
    ("generatedAt", Emit::Present, P),
    ("generationId", Emit::Present, P),
];

const BRIDGE_SHAPE: &[Member] = &[
    ("enabled", Emit::Flag, P),
    ("detectedFormat", Emit::Present, P),
    ("convertedCount", Emit::Zero, P),
    ("mergedCount", Emit::Zero, P),
    ("explicitCount", Emit::Zero, P),
];

const REF_SHAPE: &[Member] = &[
    ("url", Emit::Present, P),
    ("sourceId", Emit::Present, P),
    ("version", Emit::Present, P),
    ("section", Emit::Present, P),
    ("fetch", Emit::Flag, P),
];

const STYLE_SHAPE: &[Member] = &[
    ("name", Emit::Present, P),
    ("extends", Emit::Present, P),
    ("source", Emit::Present, P),
    ("url", Emit::Present, P),
    ("rules", Emit::NonEmpty, P),
];

const LIFECYCLE_SHAPE: &[Member] = &[
    ("deprecated", Emit::Present, P),
    ("experimental", Emit::True, P),
    ("beta", Emit::True, P),
    ("internal", Emit::True, P),
    ("publicApi", Emit::True, P),
    ("since", Emit::Present, P),
];

const BEHAVIORAL_SHAPE: &[Member] = &[
    ("pure", Emit::True, P),
    ("idempotent", Emit::True, P),
    ("memoized", Emit::Present, P),
    ("async", Emit::True, P),
    ("generator", Emit::True, P),
    ("throttled", Emit::Present, P),
    ("transactional", Emit::True, P),
    ("sideEffects", Emit::NonEmpty, P),
];

const DOCUMENTATION_SHAPE: &[Member] = &[
    ("examples", Emit::NonEmpty, P),
    ("seeAlso", Emit::NonEmpty, P),
    ("links", Emit::NonEmpty, P),
    ("notes", Emit::NonEmpty, P),
    ("warnings", Emit::NonEmpty, P),
    ("todos", Emit::NonEmpty, P),
];

const PERFORMANCE_SHAPE: &[Member] = &[
    ("complexity", Emit::Present, P),
    ("memory", Emit::Present, P),
    ("cached", Emit::Present, P),
];

const TYPE_INFO_SHAPE: &[Member] = &[
    ("params", Emit::NonEmpty, Nested::List(TYPE_PARAM_SHAPE)),
    ("returns", Emit::Present, Nested::Object(TYPE_RETURN_SHAPE)),
    (
        "typeParams",
        Emit::NonEmpty,
        Nested::List(TYPE_TYPE_PARAM_SHAPE),
    ),
];

const TYPE_PARAM_SHAPE: &[Member] = &[
    ("name", Emit::Present, P),
    ("type", Emit::Present, P),
    ("typeSource", Emit::Present, P),
    ("optional", Emit::True, P),
    ("default", Emit::Present, P),
    ("directive", Emit::Present, P),
];

const TYPE_RETURN_SHAPE: &[Member] = &[
    ("type", Emit::Present, P),
    ("typeSource", Emit::Present, P),
    ("directive", Emit::Present, P),
];

const TYPE_TYPE_PARAM_SHAPE: &[Member] = &[
    ("name", Emit::Present, P),
    ("constraint", Emit::Present, P),
    ("directive", Emit::Present, P),
];

const SYMBOL_CONSTRAINT_SHAPE: &[Member] = &[
    ("level", Emit::Present, P),
    ("directive", Emit::Present, P),
    ("auto_generated", Emit::True, P),
];

/// A file entry in acp-cli's field order and omission rules.
pub(crate) fn cli_file_entry(entry: Map<String, Value>) -> Entry {
    shape(entry, FILE_SHAPE)
}

/// A symbol entry in acp-cli's field order and omission rules.
pub(crate) fn cli_symbol_entry(entry: Map<String, Value>) -> Entry {
    shape(entry, SYMBOL_SHAPE)
}

/// A domain entry in acp-cli's field order (`name, files, symbols, description`).
pub(crate) fn cli_domain_entry(entry: Map<String, Value>) -> Entry {
    shape(entry, DOMAIN_SHAPE)
}

/// Keeps the members of `entry` that `members` lists, in that order, with acp-cli's omission
/// rules; other members are dropped.
fn shape(mut entry: Map<String, Value>, members: &[Member]) -> Entry {
    let mut out = Entry(Vec::with_capacity(members.len()));
    for &(name, emit, nested) in members {
        let value = entry.remove(name).filter(|v| !v.is_null());
        let value = match (emit, value) {
            (Emit::List, None) => Some(Value::Array(Vec::new())),
            (Emit::Flag, None) => Some(Value::Bool(false)),
            (Emit::Zero, None) => Some(Value::from(0)),
            (_, None) => None,
            (Emit::Present | Emit::List | Emit::Flag | Emit::Zero, Some(v)) => Some(v),
            (Emit::NonEmpty, Some(v)) => Some(v).filter(|v| !is_empty(v)),
            (Emit::True, Some(v)) => Some(v).filter(|v| *v != Value::Bool(false)),
            (Emit::NotDefault(default), Some(v)) => Some(v).filter(|v| v.as_str() != Some(default)),
            (Emit::Bridge, Some(v)) => Some(v).filter(|v| !bridge_is_empty(v)),
        };
        if let Some(value) = value {
            out.0.push((name.to_string(), nest(value, nested)));
        }
    }
    out
}

fn nest(value: Value, nested: Nested) -> Ordered {
    match (nested, value) {
        (Nested::Object(members), Value::Object(map)) => Ordered::Object(shape(map, members)),
        (Nested::List(members), Value::Array(items)) => Ordered::Array(
            items
                .into_iter()
                .map(|item| nest(item, Nested::Object(members)))
                .collect(),
        ),
        (Nested::Map(members), Value::Object(map)) => Ordered::Object(Entry(
            map.into_iter()
                .map(|(key, item)| (key, nest(item, Nested::Object(members))))
                .collect(),
        )),
        (_, mut value) => {
            strip_null_members(&mut value);
            Ordered::Plain(value)
        }
    }
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Array(items) => items.is_empty(),
        Value::Object(members) => members.is_empty(),
        _ => false,
    }
}

fn bridge_is_empty(bridge: &Value) -> bool {
    let enabled = bridge
        .get("enabled")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let count = |key: &str| bridge.get(key).and_then(Value::as_u64).unwrap_or(0);
    !enabled && count("convertedCount") == 0 && count("mergedCount") == 0
}

/// Drops `null` members of nested objects (acp-cli omits absent optionals).
fn strip_null_members(value: &mut Value) {
    match value {
        Value::Object(members) => {
            members.retain(|_, v| !v.is_null());
            members.values_mut().for_each(strip_null_members);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_null_members),
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
    fn file_entry_follows_cli_order_and_omissions() {
        let entry = object(json!({
            "domains": [], "language": "typescript", "path": "./a.ts", "lines": 3,
            "x_unknown": 1, "params": [], "summary": null, "layer": "api",
            "inline": [{"type": "todo", "line": 2, "directive": "d", "auto_generated": false, "ticket": null}],
            "bridge": {"enabled": false, "convertedCount": 0, "mergedCount": 0, "explicitCount": 4}
        }));
        let shaped = cli_file_entry(entry);
        let keys: Vec<&str> = shaped.0.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            ["path", "lines", "language", "exports", "imports", "inline", "layer"]
        );
        assert_eq!(
            shaped.member("inline").map(Ordered::to_value),
            Some(json!([{"line": 2, "type": "todo", "directive": "d"}]))
        );
    }

    #[test]
    fn symbol_entry_drops_defaults() {
        let entry = object(json!({
            "name": "f", "qualified_name": "a.ts:f", "type": "function", "file": "a.ts",
            "lines": [1, 2], "exported": true, "async": false, "visibility": "public", "calls": []
        }));
        let keys: Vec<String> = cli_symbol_entry(entry)
            .0
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(
            keys,
            [
                "name",
                "qualified_name",
                "type",
                "file",
                "lines",
                "exported"
            ]
        );
    }

    #[test]
    fn entries_serialise_in_order() {
        let mut object = Entry::default();
        object.push("b", json!(1));
        object.push("a", json!({"d": 1, "c": 2}));
        assert_eq!(
            serde_json::to_string(&object).unwrap(),
            r#"{"b":1,"a":{"c":2,"d":1}}"#
        );
    }
}
