//! Parity of the query functions with the reference server acp-mcp 0.2.0.
//!
//! Every golden project (`fixtures/golden/<name>.json`) is imported with the real binary, then
//! each recorded call of the eight reference tools is answered by the query function and compared
//! with the recorded response: JSON values for results, the exact text for literal answers, code
//! and message prefix for errors. Lists acp-mcp leaves in hash order (see
//! `fixtures/golden/README.md`) are compared as sets, or by membership where the reference's
//! content itself varies. Deliberate differences are asserted explicitly (see
//! [`deliberate_difference`]).

use crate::common;

use std::collections::BTreeSet;
use std::path::Path;

use acpdb::query::architecture::architecture;
use acpdb::query::check_constraints::{
    check_constraints, CheckConstraints, CheckConstraintsParams,
};
use acpdb::query::context::{context, GetContextParams};
use acpdb::query::domain_files::{domain_files, GetDomainFilesParams};
use acpdb::query::file_context::{file_context, GetFileContextParams};
use acpdb::query::hotpaths::hotpaths;
use acpdb::query::primer::{generate_primer, GeneratePrimerParams};
use acpdb::query::symbol_context::{symbol_context, GetSymbolContextParams};
use acpdb::query::QueryError;
use common::{fixture, TempProject};
use rusqlite::Connection;
use serde_json::{json, Value};

/// What one of our query functions answered.
enum Ours {
    /// A JSON value and its pretty-printed text (serialised straight from the typed answer).
    Json(Value, String),
    /// Literal tool text.
    Literal(String),
    /// An error: JSON-RPC code and message.
    Error(i64, String),
}

fn error(err: QueryError) -> Ours {
    match err {
        QueryError::InvalidParams { message, .. } => Ours::Error(-32602, message),
        QueryError::Internal(message) => Ours::Error(-32603, message),
    }
}

/// The reference tools answered by the query functions under test (`acp_expand_variable` is not
/// one of them).
const TOOLS: [&str; 8] = [
    "acp_get_architecture",
    "acp_get_hotpaths",
    "acp_get_file_context",
    "acp_get_symbol_context",
    "acp_get_domain_files",
    "acp_check_constraints",
    "acp_generate_primer",
    "acp_context",
];

/// Answers one golden call of one of [`TOOLS`] through the dispatcher the MCP server, the CLI
/// and the benchmark share.
fn answer(conn: &Connection, tool: &str, arguments: &Value) -> Ours {
    assert!(
        TOOLS.contains(&tool),
        "{tool} is not one of the tools under test"
    );
    match acpdb::tools::call(conn, tool, arguments) {
        Ok(text) if text.starts_with("{\"message\": ") => Ours::Literal(text),
        Ok(text) => Ours::Json(serde_json::from_str(&text).expect("answers are JSON"), text),
        Err(err) => error(err),
    }
}

/// The reference's answer: result text or error.
enum Reference {
    Text(String),
    Error(i64, String),
}

fn reference(response: &Value) -> Reference {
    if let Some(error) = response.get("error") {
        return Reference::Error(
            error["code"].as_i64().expect("error code"),
            error["message"]
                .as_str()
                .expect("error message")
                .to_string(),
        );
    }
    let text = response["result"]["content"][0]["text"]
        .as_str()
        .expect("tool result text");
    Reference::Text(text.to_string())
}

/// One golden project imported into a temporary copy.
struct Imported {
    _project: TempProject,
    conn: Connection,
    name: String,
}

fn import(name: &str, dir: &Path) -> Imported {
    let project = TempProject::copy_of(dir);
    project.import();
    let conn = acpdb::db::open_read_only(&project.db()).expect("open the imported database");
    Imported {
        _project: project,
        conn,
        name: name.to_string(),
    }
}

/// Runs every golden call of the eight tools for one project and returns the deliberate
/// differences met (as `tool(arguments)` lines).
fn check_project(name: &str, dir: &str) -> Vec<String> {
    let golden_path = fixture(&format!("golden/{name}.json"));
    let golden: Value =
        serde_json::from_str(&std::fs::read_to_string(&golden_path).expect("golden file"))
            .expect("golden JSON");
    let imported = import(name, &fixture(dir));
    let mut checked = 0;
    let mut deliberate = Vec::new();
    let mut failures = Vec::new();
    for call in golden["calls"].as_array().expect("calls") {
        let Some(tool) = call.get("tool").and_then(Value::as_str) else {
            continue;
        };
        if !TOOLS.contains(&tool) {
            continue;
        }
        let arguments = call.get("arguments").cloned().unwrap_or_else(|| json!({}));
        let ours = answer(&imported.conn, tool, &arguments);
        checked += 1;
        let expected = reference(&call["response"]);
        match compare(&imported, tool, &arguments, &ours, &expected) {
            Verdict::Same => {}
            Verdict::Deliberate(why) => deliberate.push(format!("{tool}({arguments}): {why}")),
            Verdict::Differs(why) => failures.push(format!("{tool}({arguments}): {why}")),
        }
    }
    assert!(checked > 40, "{name}: only {checked} golden calls checked");
    assert!(
        failures.is_empty(),
        "{name}: {} of {checked} calls differ from acp-mcp:\n{}",
        failures.len(),
        failures.join("\n")
    );
    eprintln!(
        "{name}: {checked} calls checked, {} deliberate differences:\n  {}",
        deliberate.len(),
        deliberate.join("\n  ")
    );
    deliberate
}

enum Verdict {
    Same,
    Deliberate(String),
    Differs(String),
}

fn compare(
    db: &Imported,
    tool: &str,
    arguments: &Value,
    ours: &Ours,
    expected: &Reference,
) -> Verdict {
    let same = match (ours, expected) {
        (Ours::Error(code, message), Reference::Error(ref_code, ref_message)) => {
            code == ref_code && message.starts_with(ref_message.as_str())
        }
        (Ours::Literal(text), Reference::Text(ref_text)) => text == ref_text,
        (Ours::Json(value, text), Reference::Text(ref_text)) => {
            match serde_json::from_str::<Value>(ref_text) {
                Ok(ref_value) if *value == ref_value => {
                    if text != ref_text && !hash_ordered_members(tool, &ref_value) {
                        return Verdict::Differs(format!(
                            "same value, other text:\n{text}\nreference\n{ref_text}"
                        ));
                    }
                    true
                }
                Ok(ref_value) => unordered_equal(db, tool, arguments, value, &ref_value),
                Err(_) => false,
            }
        }
        _ => false,
    };
    if same {
        Verdict::Same
    } else {
        deliberate_difference(db, tool, arguments, ours, expected)
    }
}

/// Whether the reference text has object members in hash order (a file's `annotations` map
/// with more than one member), so only the value can be compared.
fn hash_ordered_members(tool: &str, reference: &Value) -> bool {
    tool == "acp_get_file_context"
        && reference["annotations"]
            .as_object()
            .is_some_and(|a| a.len() > 1)
}

/// Equality modulo the hash-ordered parts listed in `fixtures/golden/README.md`.
fn unordered_equal(
    db: &Imported,
    tool: &str,
    arguments: &Value,
    ours: &Value,
    reference: &Value,
) -> bool {
    let (mut ours, mut reference) = (ours.clone(), reference.clone());
    match tool {
        "acp_get_architecture" => {
            for key in ["domains", "languages"] {
                sort_list(&mut ours[key]);
                sort_list(&mut reference[key]);
            }
            ours == reference
        }
        "acp_get_hotpaths" => hotpaths_equal(db, &ours, &reference),
        "acp_context" => {
            if ours["operation"] != reference["operation"] {
                return false;
            }
            match ours["operation"].as_str() {
                Some("explore") => {
                    sort_list(&mut ours["domains"]);
                    sort_list(&mut reference["domains"]);
                    let ok = key_files_equal(db, &ours["key_files"], &reference["key_files"]);
                    ours["key_files"] = Value::Null;
                    reference["key_files"] = Value::Null;
                    ok && ours == reference
                }
                Some("create") => {
                    let directory = arguments["target"].as_str().unwrap_or_default();
                    let ok = similar_files_equal(
                        directory,
                        &ours["similar_files"],
                        &reference["similar_files"],
                    );
                    ours["similar_files"] = Value::Null;
                    reference["similar_files"] = Value::Null;
                    ok && ours == reference
                }
                Some("modify") => {
                    let file = arguments["target"].as_str().unwrap_or_default();
                    let ok = match (&ours["domain"], &reference["domain"]) {
                        (Value::String(a), Value::String(b)) => {
                            a == b || (domain_lists(db, a, file) && domain_lists(db, b, file))
                        }
                        (a, b) => a == b,
                    };
                    ours["domain"] = Value::Null;
                    reference["domain"] = Value::Null;
                    ok && ours == reference
                }
                Some("debug") => {
                    sort_list(&mut ours["hotpaths"]);
                    sort_list(&mut reference["hotpaths"]);
                    ours == reference
                }
                _ => false,
            }
        }
        _ => false,
    }
}

fn sort_list(value: &mut Value) {
    if let Value::Array(items) = value {
        items.sort_by_key(|item| item.to_string());
    }
}

/// Hotpaths are equal up to the order of equal counts; where the 20th slot is a tie, the
/// entries at the lowest count shown may differ (they must still be real ties).
fn hotpaths_equal(db: &Imported, ours: &Value, reference: &Value) -> bool {
    let entries = |v: &Value| -> Vec<Value> { v.as_array().cloned().unwrap_or_default() };
    let (mut a, mut b) = (entries(ours), entries(reference));
    let key = |e: &Value| {
        (
            -e["caller_count"].as_i64().unwrap_or(0),
            e["name"].to_string(),
        )
    };
    a.sort_by_key(key);
    b.sort_by_key(key);
    if a == b {
        return true;
    }
    if !["real-anyhow", "real-demo-ts"].contains(&db.name.as_str()) {
        return false;
    }
    let floor = a
        .iter()
        .chain(&b)
        .filter_map(|e| e["caller_count"].as_i64())
        .min()
        .unwrap_or(0);
    let above = |v: &[Value]| -> Vec<Value> {
        v.iter()
            .filter(|e| e["caller_count"].as_i64().unwrap_or(0) > floor)
            .cloned()
            .collect()
    };
    above(&a) == above(&b) && a.len() <= 20
}

fn importer_count(db: &Imported, key: &str) -> i64 {
    db.conn
        .query_row(
            "SELECT coalesce(json_array_length(imported_by_json), 0) FROM files WHERE key = ?1",
            [key],
            |r| r.get(0),
        )
        .unwrap_or(-1)
}

/// Key files agree on the importer counts shown, and on the files above the lowest count.
fn key_files_equal(db: &Imported, ours: &Value, reference: &Value) -> bool {
    let list = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|items| {
                items
                    .iter()
                    .filter_map(|i| i.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    let (ours, reference) = (list(ours), list(reference));
    let counts = |files: &[String]| -> Vec<i64> {
        let mut counts: Vec<i64> = files.iter().map(|f| importer_count(db, f)).collect();
        counts.sort_unstable_by(|a, b| b.cmp(a));
        counts
    };
    if counts(&ours) != counts(&reference) || counts(&ours).contains(&-1) {
        return false;
    }
    let floor = counts(&ours).last().copied().unwrap_or(0);
    let above = |files: &[String]| -> BTreeSet<String> {
        files
            .iter()
            .filter(|f| importer_count(db, f) > floor)
            .cloned()
            .collect()
    };
    above(&ours) == above(&reference)
}

/// Similar files are equal as sets; when the reference shows the maximum of 5, ours must be 5
/// files of the same directory.
fn similar_files_equal(directory: &str, ours: &Value, reference: &Value) -> bool {
    let set = |v: &Value| -> BTreeSet<String> {
        v.as_array()
            .map(|items| {
                items
                    .iter()
                    .filter_map(|i| i.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    let (ours, reference) = (set(ours), set(reference));
    if ours == reference {
        return true;
    }
    reference.len() == 5
        && ours.len() == 5
        && ours.iter().all(|f| {
            Path::new(f)
                .parent()
                .is_some_and(|p| p.to_string_lossy() == directory)
        })
}

/// Whether domain `domain` lists `file` exactly.
fn domain_lists(db: &Imported, domain: &str, file: &str) -> bool {
    db.conn
        .query_row(
            "SELECT EXISTS (SELECT 1 FROM domains d, json_each(d.files_json) j WHERE d.key = ?1 AND j.value = ?2)",
            [domain, file],
            |r| r.get(0),
        )
        .unwrap_or(false)
}

/// The documented places where acpdb answers where acp-mcp does not:
///
/// * `acp_get_symbol_context` also resolves qualified names and unique simple names that are not
///   map keys (acp-mcp: `Symbol not found`); an ambiguous simple name is an error listing the
///   candidates instead.
/// * `acp_check_constraints` falls back to the canonical path, so `src/a.ts` finds the entry
///   keyed `./src/a.ts` (acp-mcp: `No constraints found for this file`).
fn deliberate_difference(
    db: &Imported,
    tool: &str,
    arguments: &Value,
    ours: &Ours,
    expected: &Reference,
) -> Verdict {
    match (tool, ours, expected) {
        ("acp_get_symbol_context", Ours::Json(value, _), Reference::Error(-32602, message))
            if message.starts_with("Symbol not found: ") =>
        {
            let name = arguments["name"].as_str().unwrap_or_default();
            let symbol = &value["symbol"];
            if symbol["qualified_name"] == name || symbol["name"] == name {
                Verdict::Deliberate(format!("resolved to {}", symbol["qualified_name"]))
            } else {
                Verdict::Differs(format!("resolved {name:?} to unrelated {symbol}"))
            }
        }
        (
            "acp_get_symbol_context",
            Ours::Error(-32602, ours),
            Reference::Error(-32602, message),
        ) if message.starts_with("Symbol not found: ")
            && ours.starts_with("Symbol name is ambiguous: ") =>
        {
            Verdict::Deliberate("ambiguous simple name, candidates listed".into())
        }
        ("acp_check_constraints", Ours::Json(value, _), Reference::Text(text))
            if text == r#"{"message": "No constraints found for this file"}"# =>
        {
            let path = arguments["path"].as_str().unwrap_or_default();
            let canonical = acpdb::cache::paths::canonical_path(path, None);
            let same_file: bool = db
                .conn
                .query_row(
                    "SELECT EXISTS (SELECT 1 FROM constraints WHERE path = ?1 AND key <> ?2)",
                    [&canonical, path],
                    |r| r.get(0),
                )
                .unwrap_or(false);
            if same_file && value.is_object() {
                Verdict::Deliberate(format!("found by canonical path {canonical}"))
            } else {
                Verdict::Differs(format!("ours {value}, reference {text}"))
            }
        }
        (_, Ours::Error(-32602, ours), Reference::Error(-32602, message))
            if message.starts_with("invalid type: ") && names_a_field(arguments, ours) =>
        {
            Verdict::Deliberate(format!("type error names the field: {ours}"))
        }
        (_, Ours::Json(..), Reference::Error(-32602, message))
            if message.starts_with("invalid type: string ") && has_numeric_string(arguments) =>
        {
            Verdict::Deliberate(format!("numeric string accepted: {arguments}"))
        }
        ("acp_context", Ours::Json(value, _), Reference::Text(text)) => {
            context_resolved(db, arguments, value, text)
        }
        ("acp_context", Ours::Error(-32602, message), Reference::Text(text))
            if message.contains("not found: ")
                && message.contains(arguments["target"].as_str().unwrap_or("\0"))
                && context_found_nothing(text) =>
        {
            Verdict::Deliberate(format!("unknown context target is an error: {message}"))
        }
        (_, Ours::Error(code, message), Reference::Text(text)) => Verdict::Differs(format!(
            "error {code} {message:?}, reference answered {text}"
        )),
        (_, Ours::Json(value, _), Reference::Error(code, message)) => Verdict::Differs(format!(
            "answered {value}, reference error {code} {message:?}"
        )),
        (_, Ours::Literal(text), Reference::Error(code, message)) => Verdict::Differs(format!(
            "answered {text}, reference error {code} {message:?}"
        )),
        (_, Ours::Json(value, _), Reference::Text(text)) => {
            Verdict::Differs(format!("ours {value}, reference {text}"))
        }
        (_, ours, expected) => Verdict::Differs(format!(
            "unexpected pair: ours {}, reference {}",
            describe(ours),
            match expected {
                Reference::Text(t) => t.clone(),
                Reference::Error(c, m) => format!("error {c} {m}"),
            }
        )),
    }
}

/// Whether an error message starts with one of the call's argument names (`limit: expected …`).
fn names_a_field(arguments: &Value, message: &str) -> bool {
    arguments.as_object().is_some_and(|members| {
        members
            .keys()
            .any(|key| message.starts_with(&format!("{key}: expected ")))
    })
}

/// Whether an argument is a number spelled as a string.
fn has_numeric_string(arguments: &Value) -> bool {
    arguments.as_object().is_some_and(|members| {
        members
            .values()
            .any(|v| v.as_str().is_some_and(|s| s.trim().parse::<f64>().is_ok()))
    })
}

/// Whether an `acp_context` answer of the reference found nothing for its target: a debug
/// `error` member, or a modify briefing with no importers, exports, constraints or domain.
fn context_found_nothing(text: &str) -> bool {
    let Ok(reference) = serde_json::from_str::<Value>(text) else {
        return false;
    };
    match reference["operation"].as_str() {
        Some("debug") => reference["error"].is_string(),
        Some("modify") => {
            reference["importer_count"] == 0
                && reference["symbols"] == serde_json::json!([])
                && reference["constraints"].is_null()
                && reference["domain"].is_null()
        }
        _ => false,
    }
}

/// A modify or debug briefing the reference could not give because the target was not spelled
/// as the cache's key: ours must name the file the target's canonical path (or qualified
/// symbol name) stands for, where the reference found nothing.
fn context_resolved(db: &Imported, arguments: &Value, ours: &Value, text: &str) -> Verdict {
    let target = arguments["target"].as_str().unwrap_or_default();
    let file = ours["file"].as_str().unwrap_or_default();
    let canonical = acpdb::cache::paths::canonical_path(target, None);
    let file_is_target: bool = db
        .conn
        .query_row(
            "SELECT EXISTS (SELECT 1 FROM files WHERE key = ?1 AND (path = ?2 OR key = ?2))
                 OR EXISTS (SELECT 1 FROM symbols WHERE file_path = (SELECT path FROM files WHERE key = ?1)
                            AND (qualified_name = ?3 OR name = ?3))",
            [file, &canonical, target],
            |r| r.get(0),
        )
        .unwrap_or(false);
    if context_found_nothing(text) && file != target && file_is_target {
        Verdict::Deliberate(format!("context target {target:?} resolved to {file}"))
    } else {
        Verdict::Differs(format!("ours {ours}, reference {text}"))
    }
}

fn describe(ours: &Ours) -> String {
    match ours {
        Ours::Json(v, _) => v.to_string(),
        Ours::Literal(t) => t.to_string(),
        Ours::Error(c, m) => format!("error {c} {m}"),
    }
}

#[test]
fn demo_matches_reference() {
    let deliberate = check_project("demo", "demo");
    let expected = [
        "src/billing/tax.ts:computeTax",
        "\"format\"",
        "\"Claims\"",
        "src/auth/session.ts\"",
        "context target \"src/auth/session.ts\" resolved to ./src/auth/session.ts",
        "unknown context target is an error",
        "numeric string accepted",
        "type error names the field: operation: expected a string",
    ];
    for needle in expected {
        assert!(
            deliberate.iter().any(|d| d.contains(needle)),
            "expected a deliberate difference mentioning {needle}, got:\n{}",
            deliberate.join("\n")
        );
    }
}

#[test]
fn real_anyhow_matches_reference() {
    check_project("real-anyhow", "real/anyhow");
}

#[test]
fn real_demo_ts_matches_reference() {
    check_project("real-demo-ts", "real/demo-ts");
}

#[test]
fn real_python_stdlib_matches_reference() {
    check_project("real-python-stdlib", "real/python-stdlib");
}

/// The example cache of cache-format §19.1, with acp-mcp's outputs quoted in tools-reference.md.
fn spec_example() -> (TempProject, Connection) {
    let cache = std::fs::read_to_string(common::data("samples/cache-cli-shaped.json")).unwrap();
    let project = TempProject::with_cache(&cache, None);
    project.import();
    let conn = acpdb::db::open_read_only(&project.db()).unwrap();
    (project, conn)
}

#[test]
fn spec_example_answers() {
    let (_project, conn) = spec_example();
    assert_eq!(
        serde_json::to_value(architecture(&conn).unwrap()).unwrap(),
        json!({"project_name": "project", "total_files": 3, "total_symbols": 4,
               "domains": [{"name": "orders", "description": null, "file_count": 2}],
               "languages": ["Typescript"]})
    );
    assert_eq!(
        serde_json::to_value(hotpaths(&conn).unwrap()).unwrap(),
        json!([
            {"name": "computeTax", "caller_count": 2, "file": "src/orders/tax.ts", "symbol_type": "Function"},
            {"name": "toCsv", "caller_count": 1, "file": "src/legacy/export.ts", "symbol_type": "Function"}
        ])
    );
    let file = file_context(
        &conn,
        &GetFileContextParams {
            path: "src\\orders\\tax.ts".into(),
        },
    )
    .unwrap();
    assert_eq!(
        serde_json::to_string(&file).unwrap(),
        r#"{"path":"./src/orders/tax.ts","lines":33,"language":"typescript","exports":[],"imports":[],"domains":["orders"]}"#
    );
    let symbol = symbol_context(
        &conn,
        &GetSymbolContextParams {
            name: "computeTax".into(),
            limit: None,
            cursor: None,
        },
    )
    .unwrap();
    assert_eq!(symbol.callers, [json!("placeOrder"), json!("placeOrder")]);
    assert!(symbol.callees.is_empty());
    assert_eq!(symbol.truncated, None);
    let constraints = check_constraints(
        &conn,
        &CheckConstraintsParams {
            path: "./src/orders/checkout.ts".into(),
        },
    )
    .unwrap();
    assert_eq!(
        serde_json::to_string(&constraints).unwrap(),
        r#"{"mutation":{"level":"restricted","requires_approval":false,"requires_tests":false,"requires_docs":false},"directive":"Explain proposed changes and wait for explicit approval"}"#
    );
    let missing = check_constraints(
        &conn,
        &CheckConstraintsParams {
            path: "nope.ts".into(),
        },
    )
    .unwrap();
    assert_eq!(missing, CheckConstraints::NoEntry);
    let context = context(
        &conn,
        &GetContextParams {
            operation: "create".into(),
            target: Some("./src/orders".into()),
            find_usages: false,
        },
    )
    .unwrap();
    assert_eq!(
        context,
        json!({"directory": "./src/orders", "import_style": null, "language": "typescript",
               "naming_convention": null, "operation": "create", "recommended_pattern": null,
               "similar_files": ["./src/orders/checkout.ts", "./src/orders/tax.ts"]})
    );
}

#[test]
fn spec_example_primer() {
    let (_project, conn) = spec_example();
    let primer = generate_primer(&conn, &GeneratePrimerParams::default()).unwrap();
    assert_eq!(primer.tokens_used, 838);
    assert_eq!(primer.sections_included, 31);
    assert_eq!(primer.sections_excluded, 0);
    assert!(primer.content.starts_with(
        "This codebase uses **AI Context Protocol (ACP)** for structured AI assistance.\n\n"
    ));
    assert!(primer
        .content
        .contains("### Protected Files\n\n\n**`approval-required`**"));
    let small = generate_primer(
        &conn,
        &GeneratePrimerParams {
            token_budget: 200,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(
        (
            small.sections_included,
            small.tokens_used,
            small.sections_excluded
        ),
        (9, 196, 22)
    );
    let json = generate_primer(
        &conn,
        &GeneratePrimerParams {
            format: "json".into(),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(json.content, "[\n\n]");
    let mcp = generate_primer(
        &conn,
        &GeneratePrimerParams {
            capabilities: vec!["mcp".into()],
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!((mcp.sections_included, mcp.tokens_used), (28, 728));
}

#[test]
fn long_lists_are_paged() {
    let mut cache: Value = serde_json::from_str(
        &std::fs::read_to_string(common::data("samples/cache-cli-shaped.json")).unwrap(),
    )
    .unwrap();
    let callers: Vec<String> = (0..450).map(|i| format!("caller{i:03}")).collect();
    cache["graph"]["reverse"]["computeTax"] = json!(callers);
    let files: Vec<String> = (0..5).map(|i| format!("./src/orders/f{i}.ts")).collect();
    cache["domains"]["orders"]["files"] = json!(files);
    let project = TempProject::with_cache(&cache.to_string(), None);
    project.import();
    let conn = acpdb::db::open_read_only(&project.db()).unwrap();

    let params = |cursor: Option<String>| GetSymbolContextParams {
        name: "computeTax".into(),
        limit: None,
        cursor,
    };
    let first = symbol_context(&conn, &params(None)).unwrap();
    assert_eq!(first.callers.len(), 200);
    assert_eq!(first.callers[0], "caller000");
    assert_eq!(first.truncated, Some(true));
    let second = symbol_context(&conn, &params(first.next_cursor.clone())).unwrap();
    assert_eq!(second.callers[0], "caller200");
    let last = symbol_context(&conn, &params(second.next_cursor.clone())).unwrap();
    assert_eq!(last.callers.len(), 50);
    assert_eq!(last.callers[0], "caller400");
    assert_eq!(last.truncated, None);
    let value = serde_json::to_value(&last).unwrap();
    assert!(value.get("truncated").is_none() && value.get("next_cursor").is_none());

    let domain_params = |limit, cursor| GetDomainFilesParams {
        name: "orders".into(),
        limit,
        cursor,
    };
    let page = domain_files(&conn, &domain_params(Some(2), None))
        .unwrap()
        .to_value();
    assert_eq!(
        page["files"],
        json!(["./src/orders/f0.ts", "./src/orders/f1.ts"])
    );
    assert_eq!(page["truncated"], json!(true));
    let cursor = page["next_cursor"].as_str().map(String::from);
    let page = domain_files(&conn, &domain_params(Some(2), cursor))
        .unwrap()
        .to_value();
    assert_eq!(
        page["files"],
        json!(["./src/orders/f2.ts", "./src/orders/f3.ts"])
    );
    let cursor = page["next_cursor"].as_str().map(String::from);
    let page = domain_files(&conn, &domain_params(Some(2), cursor))
        .unwrap()
        .to_value();
    assert_eq!(
        page,
        json!({"name": "orders", "files": ["./src/orders/f4.ts"], "symbols": []})
    );
    assert!(matches!(
        domain_files(&conn, &domain_params(None, first.next_cursor.clone())),
        Err(QueryError::InvalidParams { .. })
    ));
    assert!(matches!(
        domain_files(&conn, &domain_params(None, Some("o:2".into()))),
        Err(QueryError::InvalidParams { .. })
    ));
    for limit in [0, 1001, u32::MAX] {
        let refused = |result: Result<(), QueryError>| match result {
            Err(QueryError::InvalidParams { message, .. }) => message,
            other => panic!("limit {limit}: {other:?}"),
        };
        let domain = domain_files(&conn, &domain_params(Some(limit), None)).map(|_| ());
        let symbol = symbol_context(
            &conn,
            &GetSymbolContextParams {
                limit: Some(limit),
                ..params(None)
            },
        )
        .map(|_| ());
        for message in [refused(domain), refused(symbol)] {
            assert_eq!(message, format!("Invalid limit: {limit} (must be 1-1000)"));
        }
    }
    // The largest page holds the whole list of 450.
    let all = symbol_context(
        &conn,
        &GetSymbolContextParams {
            limit: Some(1000),
            ..params(None)
        },
    )
    .unwrap();
    assert_eq!((all.callers.len(), all.truncated), (450, None));
    assert_eq!(all.callers[449], "caller449");
}

fn schema<T: schemars::JsonSchema>() -> Value {
    serde_json::to_value(schemars::schema_for!(T)).expect("schema JSON")
}

#[test]
fn input_schemas_match_reference() {
    let golden: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("golden/demo.json")).expect("golden file"),
    )
    .expect("golden JSON");
    let reference = |tool: &str| -> Value {
        golden["tools_list"]["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .find(|t| t["name"] == tool)
            .map(|t| t["inputSchema"].clone())
            .expect("tool listed")
    };
    assert_eq!(
        schema::<GetFileContextParams>(),
        reference("acp_get_file_context")
    );
    assert_eq!(
        schema::<CheckConstraintsParams>(),
        reference("acp_check_constraints")
    );
    assert_eq!(
        schema::<GeneratePrimerParams>(),
        reference("acp_generate_primer")
    );
    assert_eq!(schema::<GetContextParams>(), reference("acp_context"));
    for (mut ours, tool) in [
        (schema::<GetSymbolContextParams>(), "acp_get_symbol_context"),
        (schema::<GetDomainFilesParams>(), "acp_get_domain_files"),
    ] {
        let properties = ours["properties"].as_object_mut().expect("properties");
        for extra in ["limit", "cursor"] {
            assert!(
                properties.remove(extra).is_some(),
                "{tool} documents {extra}"
            );
        }
        assert_eq!(ours, reference(tool), "{tool}");
    }
}
