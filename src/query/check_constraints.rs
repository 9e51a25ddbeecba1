//! `acp_check_constraints`: the `constraints.by_file` entry of one file.
//!
//! Found entries in acp-cli's nested shape (`mutation`, `style`, …) are re-serialised the way
//! acp-cli's `Constraints` type writes them (field order, defaults filled, absent optionals
//! omitted). Spec-shaped (flat) entries are returned as stored. When there is no entry, acp-mcp
//! answers with one of two literal texts, which [`CheckConstraints::literal`] gives verbatim.

use rusqlite::{Connection, OptionalExtension};
use schemars::JsonSchema;
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::{Map, Value};

use super::names::user_path;
use super::ordered::{Entry, Ordered};
use super::without_description;
use super::QueryResult;

/// Arguments of `acp_check_constraints`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[schemars(transform = without_description)]
pub struct CheckConstraintsParams {
    /// Path to the file to check constraints for
    pub path: String,
}

/// Answer of `acp_check_constraints`.
///
/// Rendering: [`CheckConstraints::Found`] as pretty-printed JSON; for the two message variants
/// the tool text must be [`CheckConstraints::literal`] exactly (acp-mcp sends these compact, with
/// one space after the colon). Serialising any variant gives the equivalent JSON value.
#[derive(Debug, Clone, PartialEq)]
pub enum CheckConstraints {
    /// The file's constraint entry.
    Found(Entry),
    /// The cache has a constraint index but no entry for this file.
    NoEntry,
    /// The cache has no constraint index at all.
    NoIndex,
}

const NO_ENTRY: &str = "No constraints found for this file";
const NO_INDEX: &str = "No constraints defined in cache";

impl CheckConstraints {
    /// The exact tool text for the message variants, `None` for a found entry.
    pub fn literal(&self) -> Option<&'static str> {
        match self {
            CheckConstraints::Found(_) => None,
            CheckConstraints::NoEntry => {
                Some(r#"{"message": "No constraints found for this file"}"#)
            }
            CheckConstraints::NoIndex => Some(r#"{"message": "No constraints defined in cache"}"#),
        }
    }
}

impl Serialize for CheckConstraints {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let message = match self {
            CheckConstraints::Found(entry) => return entry.serialize(serializer),
            CheckConstraints::NoEntry => NO_ENTRY,
            CheckConstraints::NoIndex => NO_INDEX,
        };
        let mut map = serializer.serialize_map(Some(1))?;
        map.serialize_entry("message", message)?;
        map.end()
    }
}

/// Looks `path` up in `constraints.by_file`: the exact key first (as acp-mcp), then the
/// canonical path, so `src/a.ts` also finds an entry keyed `./src/a.ts`.
pub fn check_constraints(
    conn: &Connection,
    params: &CheckConstraintsParams,
) -> QueryResult<CheckConstraints> {
    let exact: Option<String> = conn
        .prepare_cached("SELECT raw_json FROM constraints WHERE key = ?1")?
        .query_row([&params.path], |r| r.get(0))
        .optional()?;
    let raw = match exact {
        Some(raw) => Some(raw),
        None => {
            let canonical = user_path(conn, &params.path)?;
            conn.prepare_cached(
                "SELECT raw_json FROM constraints WHERE path = ?1 ORDER BY id LIMIT 1",
            )?
            .query_row([canonical], |r| r.get(0))
            .optional()?
        }
    };
    if let Some(raw) = raw {
        let entry: Value = serde_json::from_str(&raw)?;
        return Ok(CheckConstraints::Found(cli_constraints(entry)));
    }
    let has_index = conn
        .prepare_cached("SELECT value_json IS NULL FROM cache_root WHERE key = 'constraints'")?
        .query_row([], |r| r.get::<_, bool>(0))
        .optional()?
        .unwrap_or(false);
    Ok(if has_index {
        CheckConstraints::NoEntry
    } else {
        CheckConstraints::NoIndex
    })
}

/// One member of a nested constraint object and how acp-cli writes it.
#[derive(Clone, Copy)]
enum Member {
    /// Written when present.
    Optional(&'static str),
    /// Always written; `false` when absent.
    Flag(&'static str),
    /// Always written; `[]` when absent.
    List(&'static str),
    /// Always written; the given text when absent.
    Text(&'static str, &'static str),
    /// Written when present, as a float.
    Float(&'static str),
}

const MUTATION: &[Member] = &[
    Member::Text("level", "normal"),
    Member::Optional("reason"),
    Member::Optional("contact"),
    Member::Flag("requires_approval"),
    Member::Flag("requires_tests"),
    Member::Flag("requires_docs"),
    Member::Optional("max_lines_changed"),
    Member::Optional("allowed_operations"),
    Member::Optional("forbidden_operations"),
];

const STYLE: &[Member] = &[
    Member::Optional("guide"),
    Member::Optional("reference"),
    Member::List("rules"),
    Member::Optional("linter"),
];

const BEHAVIOR: &[Member] = &[
    Member::Optional("approach"),
    Member::Optional("priority"),
    Member::Flag("explain"),
    Member::Flag("step_by_step"),
    Member::Flag("verify"),
    Member::Flag("ask_first"),
];

const QUALITY: &[Member] = &[
    Member::Flag("tests_required"),
    Member::Float("min_coverage"),
    Member::Flag("security_review"),
    Member::Optional("max_complexity"),
    Member::Optional("accessibility"),
    Member::List("browser_support"),
    Member::Optional("performance_budget"),
];

const DEPRECATION: &[Member] = &[
    Member::Flag("deprecated"),
    Member::Optional("since"),
    Member::Optional("removal_version"),
    Member::Optional("replacement"),
    Member::Optional("migration_guide"),
    Member::Text("action", "warn"),
];

const REFERENCE: &[Member] = &[
    Member::Optional("url"),
    Member::Optional("description"),
    Member::Flag("fetch"),
];

/// Re-serialises a `by_file` entry with acp-cli's `Constraints` type rules: members it does not
/// know (such as the flat shape's `lock_level` and `lock_reason`) are dropped, as acp-mcp does.
/// Flat entries acp-cli cannot read at all (string `style`/`behavior`, list `quality`) are
/// returned as stored.
fn cli_constraints(entry: Value) -> Entry {
    let Value::Object(mut entry) = entry else {
        return Entry::default();
    };
    let unreadable = entry.get("style").is_some_and(Value::is_string)
        || entry.get("behavior").is_some_and(Value::is_string)
        || entry.get("quality").is_some_and(Value::is_array);
    if unreadable {
        return Entry(entry.into_iter().map(|(k, v)| (k, v.into())).collect());
    }
    let mut out: Vec<(String, Ordered)> = Vec::new();
    for (key, members) in [
        ("style", STYLE),
        ("mutation", MUTATION),
        ("behavior", BEHAVIOR),
        ("quality", QUALITY),
        ("deprecation", DEPRECATION),
    ] {
        if let Some(Value::Object(nested)) = entry.remove(key) {
            out.push((key.to_string(), nested_object(nested, members)));
        }
    }
    if let Some(Value::Array(references)) = entry.remove("references") {
        if !references.is_empty() {
            let references = references
                .into_iter()
                .map(|r| match r {
                    Value::Object(r) => nested_object(r, REFERENCE),
                    other => other.into(),
                })
                .collect();
            out.push(("references".into(), Ordered::Array(references)));
        }
    }
    if let Some(directive) = entry.remove("directive").filter(|v| !v.is_null()) {
        out.push(("directive".into(), directive.into()));
    }
    if entry.get("auto_generated") == Some(&Value::Bool(true)) {
        out.push(("auto_generated".into(), Value::Bool(true).into()));
    }
    Entry(out)
}

fn nested_object(mut nested: Map<String, Value>, members: &[Member]) -> Ordered {
    let mut out = Entry::default();
    for member in members {
        let (name, value) = match *member {
            Member::Optional(name) => (name, nested.remove(name).filter(|v| !v.is_null())),
            Member::Flag(name) => (
                name,
                Some(
                    nested
                        .remove(name)
                        .filter(|v| !v.is_null())
                        .unwrap_or(Value::Bool(false)),
                ),
            ),
            Member::List(name) => (
                name,
                Some(
                    nested
                        .remove(name)
                        .filter(|v| !v.is_null())
                        .unwrap_or(Value::Array(Vec::new())),
                ),
            ),
            Member::Text(name, default) => (
                name,
                Some(
                    nested
                        .remove(name)
                        .filter(|v| !v.is_null())
                        .unwrap_or_else(|| default.into()),
                ),
            ),
            Member::Float(name) => (
                name,
                nested
                    .remove(name)
                    .and_then(|v| v.as_f64())
                    .and_then(serde_json::Number::from_f64)
                    .map(Value::Number),
            ),
        };
        if let Some(value) = value {
            out.push(name, value);
        }
    }
    Ordered::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nested_entries_get_cli_defaults_and_order() {
        let shaped = cli_constraints(json!({
            "directive": "d", "auto_generated": false,
            "mutation": {"requires_tests": true, "level": "tests-required"},
            "quality": {"min_coverage": 80}
        }));
        let keys: Vec<&str> = shaped.0.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["mutation", "quality", "directive"]);
        assert_eq!(
            shaped.member("mutation").map(Ordered::to_value),
            Some(
                json!({"level": "tests-required", "requires_approval": false, "requires_tests": true, "requires_docs": false})
            )
        );
        assert_eq!(
            shaped.member("quality").map(Ordered::to_value),
            Some(
                json!({"tests_required": false, "min_coverage": 80.0, "security_review": false, "browser_support": []})
            )
        );
    }

    #[test]
    fn flat_entries_keep_what_acp_cli_reads() {
        let entry = json!({"lock_level": "frozen", "lock_reason": "r", "directive": "d"});
        assert_eq!(cli_constraints(entry).to_value(), json!({"directive": "d"}));
        let unreadable = json!({"lock_level": "frozen", "quality": ["tests-required"]});
        assert_eq!(cli_constraints(unreadable.clone()).to_value(), unreadable);
    }

    #[test]
    fn messages_are_literal_and_serialise_to_the_same_value() {
        let answer = CheckConstraints::NoEntry;
        let literal: Value = serde_json::from_str(answer.literal().unwrap()).unwrap();
        assert_eq!(serde_json::to_value(&answer).unwrap(), literal);
        assert_eq!(
            CheckConstraints::NoIndex.literal(),
            Some(r#"{"message": "No constraints defined in cache"}"#)
        );
    }
}
