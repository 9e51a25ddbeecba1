//! Query tests: `acp_query`, `acp_expand`, `acp_expand_variable`, `acp_constraints` and the
//! resources, over databases imported by the real binary from the acp-cli-shaped sample cache
//! and from a generated 3,000-symbol cache.

use crate::common;

use std::collections::HashSet;
use std::fs;
use std::sync::OnceLock;

use acpdb::query::acp_query::{acp_query, QueryParams, QueryResponse};
use acpdb::query::constraints::{acp_constraints, ConstraintsParams};
use acpdb::query::expand::{
    acp_expand, acp_expand_variable, ExpandParams, ExpandResponse, ExpandVariableParams,
    MAX_EXPANDED_BYTES,
};
use acpdb::query::graph::{step_sql, Direction, TOTAL_CAP as WALK_TOTAL_CAP};
use acpdb::query::lookup::FILE_SYMBOLS_SQL;
use acpdb::query::resources::{list_resources, read_resource, resource_templates, ResourceError};
use acpdb::query::search::{page_statement, TOTAL_CAP};
use acpdb::query::{QueryError, QueryResult};
use common::{acpdb, data, TempProject};
use rusqlite::Connection;
use serde_json::{json, Value};

/// The vars file of vars-and-expansion.md §2.
const VARS: &str = r#"{
  "$schema": "https://acp-protocol.dev/schemas/v1/vars.schema.json",
  "version": "0.7.0",
  "variables": {
    "SYM_PLACEORDER": {
      "type": "symbol",
      "value": "src/orders/checkout.ts:placeOrder",
      "description": "Charges the customer and persists the order",
      "source": "src/orders/checkout.ts",
      "lines": [20, 64]
    },
    "DOM_ORDERS": { "type": "domain", "value": "orders", "description": "Domain: orders (2 files)" },
    "FILE___SRC_ORDERS_CHECKOUT_TS": { "type": "file", "value": "./src/orders/checkout.ts", "description": "Turns a cart into a paid order" },
    "LAYER_SERVICE": { "type": "layer", "value": "service", "description": "Layer: service (1 files)" }
  }
}"#;

/// Variables whose values refer to other variables.
const NESTED_VARS: &str = r#"{
  "version": "1.0.0",
  "variables": {
    "CTX_A": { "type": "context", "value": "see $CTX_B" },
    "CTX_B": { "type": "context", "value": "then $CTX_A" },
    "CTX_C": { "type": "pattern", "value": "uses $SYM_TAX and $NOPE_X, $$5" },
    "SYM_TAX": { "type": "symbol", "value": "computeTax" },
    "SYM_GONE": { "type": "symbol", "value": "src/gone.ts:gone", "description": "Removed  long\n ago" },
    "DOM_NONE": { "type": "domain", "value": "missing" }
  }
}"#;

fn read(name: &str) -> String {
    fs::read_to_string(data(name)).unwrap()
}

fn project(cache: &str, vars: Option<&str>) -> TempProject {
    let project = TempProject::with_cache(cache, vars);
    project.import();
    project
}

fn open(project: &TempProject) -> Connection {
    let conn = Connection::open(project.db()).unwrap();
    acpdb::db::configure_query_connection(&conn).unwrap();
    conn
}

fn cli() -> &'static TempProject {
    static PROJECT: OnceLock<TempProject> = OnceLock::new();
    PROJECT.get_or_init(|| project(&read("samples/cache-cli-shaped.json"), Some(VARS)))
}

fn nested() -> &'static TempProject {
    static PROJECT: OnceLock<TempProject> = OnceLock::new();
    PROJECT.get_or_init(|| project(&read("samples/cache-cli-shaped.json"), Some(NESTED_VARS)))
}

fn no_vars() -> &'static TempProject {
    static PROJECT: OnceLock<TempProject> = OnceLock::new();
    PROJECT.get_or_init(|| project(&read("samples/cache-cli-shaped.json"), None))
}

/// 300 files × 10 symbols from `acpdb gen-fixture`.
fn generated() -> &'static TempProject {
    static PROJECT: OnceLock<TempProject> = OnceLock::new();
    PROJECT.get_or_init(|| TempProject::generated(300))
}

fn query(conn: &Connection, args: Value) -> QueryResult<Value> {
    let params: QueryParams = serde_json::from_value(args).unwrap();
    acp_query(conn, &params).map(|r| serde_json::to_value(r).unwrap())
}

fn ok(conn: &Connection, args: Value) -> Value {
    query(conn, args.clone()).unwrap_or_else(|e| panic!("{args}: {e}"))
}

fn invalid(result: QueryResult<impl std::fmt::Debug>) -> String {
    match result {
        Err(QueryError::InvalidParams { message, .. }) => message,
        other => panic!("expected invalid params, got {other:?}"),
    }
}

fn expand(conn: &Connection, text: &str, mode: Option<&str>) -> ExpandResponse {
    acp_expand(
        conn,
        &ExpandParams {
            text: Some(text.into()),
            mode: mode.map(str::to_string),
        },
    )
    .unwrap()
}

fn expanded(conn: &Connection, text: &str, mode: &str) -> String {
    expand(conn, text, Some(mode)).expanded
}

/// Collects every page of a list query; returns the items and the first page's total.
fn walk_pages(conn: &Connection, mut args: Value, list: &str) -> (Vec<Value>, u64) {
    let mut items = Vec::new();
    let mut total = None;
    for _ in 0..10_000 {
        let answer = ok(conn, args.clone());
        let (page, page_total, truncated, next) = match list {
            "search" => (
                answer["result"]["matches"].clone(),
                answer["result"]["total"].as_u64().unwrap(),
                answer["result"]["truncated"].as_bool().unwrap(),
                answer["result"]["next_cursor"].clone(),
            ),
            _ => (
                answer["result"].clone(),
                answer["total"].as_u64().unwrap(),
                answer["truncated"].as_bool().unwrap(),
                answer["next_cursor"].clone(),
            ),
        };
        assert_eq!(
            *total.get_or_insert(page_total),
            page_total,
            "total changed"
        );
        let page = page.as_array().unwrap().clone();
        assert!(!page.is_empty() || items.is_empty(), "empty page mid-walk");
        items.extend(page);
        assert_eq!(truncated, next.is_string());
        match next {
            Value::String(cursor) => {
                args = json!({"type": args["type"], "cursor": cursor, "limit": args["limit"]})
            }
            _ => return (items, total.unwrap()),
        }
    }
    panic!("pagination did not end");
}

// ---------------------------------------------------------------- acp_query: lookups

#[test]
fn symbol_query_returns_entry_with_callers_and_callees() {
    let conn = open(cli());
    let answer = ok(&conn, json!({"type": "symbol", "name": "placeOrder"}));
    assert_eq!(answer["type"], "symbol");
    let result = &answer["result"];
    assert_eq!(
        result["qualified_name"],
        "src/orders/checkout.ts:placeOrder"
    );
    assert_eq!(result["lines"], json!([20, 64]));
    assert_eq!(result["async"], true);
    assert_eq!(result["callers"], json!([]));
    assert_eq!(
        result["callees"],
        json!(["save", "src/orders/tax.ts:computeTax"])
    );
    let text = serde_json::to_string(
        &acp_query(
            &conn,
            &serde_json::from_value(json!({"type": "symbol", "name": "placeOrder"})).unwrap(),
        )
        .unwrap(),
    )
    .unwrap();
    assert!(
        text.starts_with(r#"{"type":"symbol","result":{"name":"placeOrder","qualified_name""#),
        "{text}"
    );

    for name in [
        "src/orders/tax.ts:computeTax",
        "./src/orders/tax.ts:computeTax",
        "computeTax",
    ] {
        let answer = ok(&conn, json!({"type": "symbol", "name": name}));
        assert_eq!(
            answer["result"]["callers"],
            json!(["src/orders/checkout.ts:placeOrder"])
        );
    }
    let message = invalid(query(&conn, json!({"type": "symbol", "name": "nope"})));
    assert!(message.starts_with("Symbol not found: nope"), "{message}");
}

#[test]
fn file_and_domain_queries() {
    let conn = open(cli());
    for name in [
        "./src/orders/checkout.ts",
        "src/orders/checkout.ts",
        "src\\orders\\checkout.ts",
        "src/orders/checkout.ts/",
    ] {
        let answer = ok(&conn, json!({"type": "file", "name": name}));
        assert_eq!(answer["result"]["path"], "./src/orders/checkout.ts");
        assert_eq!(
            answer["result"]["symbols"],
            json!([
                "src/orders/checkout.ts:placeOrder",
                "src/orders/checkout.ts:CheckoutError"
            ])
        );
        assert_eq!(answer["total"], 2);
        assert_eq!(answer["truncated"], false);
    }
    let first = ok(
        &conn,
        json!({"type": "file", "name": "src/orders/checkout.ts", "limit": 1}),
    );
    assert_eq!(
        first["result"]["symbols"],
        json!(["src/orders/checkout.ts:placeOrder"])
    );
    assert_eq!(first["truncated"], true);
    let second = ok(
        &conn,
        json!({"type": "file", "cursor": first["next_cursor"], "limit": 1}),
    );
    assert_eq!(
        second["result"]["symbols"],
        json!(["src/orders/checkout.ts:CheckoutError"])
    );
    assert_eq!(second["truncated"], false);
    assert!(second.get("next_cursor").is_none());
    assert!(
        invalid(query(&conn, json!({"type": "file", "name": "src/none.ts"})))
            .starts_with("File not found: src/none.ts")
    );

    let answer = ok(&conn, json!({"type": "domain", "name": "orders"}));
    assert_eq!(
        answer["result"],
        json!({"name": "orders", "files": ["./src/orders/checkout.ts", "./src/orders/tax.ts"], "symbols": []})
    );
    assert_eq!(answer["total"], 2);
    let page = ok(
        &conn,
        json!({"type": "domain", "name": "orders", "limit": 1}),
    );
    assert_eq!(page["result"]["files"], json!(["./src/orders/checkout.ts"]));
    assert_eq!(page["truncated"], true);
    let message = invalid(query(&conn, json!({"type": "domain", "name": "Orders"})));
    assert!(message.starts_with("Domain not found: Orders"), "{message}");
}

#[test]
fn stats_query() {
    let conn = open(cli());
    let answer = ok(&conn, json!({"type": "stats"}));
    assert_eq!(
        answer,
        json!({"type": "stats", "result": {
            "files": 3, "symbols": 4, "lines": 151, "domains": 1,
            "constraints": {"frozen": 1, "restricted": 1, "normal": 1},
            "languages": ["typescript"]
        }, "source": {
            "indexed_commit": "4f1c2b7a9d0e3f5a6b7c8d9e0f1a2b3c4d5e6f70",
            "head_moved": false,
            "message": "Indexed at commit 4f1c2b7a9d0e; the project has no git HEAD to compare with."
        }})
    );
    let text = serde_json::to_string(
        &acp_query(
            &conn,
            &serde_json::from_value(json!({"type": "stats"})).unwrap(),
        )
        .unwrap(),
    )
    .unwrap();
    assert!(text.contains(r#""constraints":{"frozen":1,"restricted":1,"normal":1}"#));
}

#[test]
fn parameter_errors() {
    let conn = open(cli());
    let cases = [
        (json!({}), "Missing required parameter: type"),
        (json!({"type": "nope"}), "Invalid query type: nope"),
        (
            json!({"type": "symbol"}),
            "'name' required for symbol query",
        ),
        (
            json!({"type": "callers", "name": ""}),
            "'name' required for callers query",
        ),
        (
            json!({"type": "search"}),
            "'pattern' required for search query",
        ),
        (
            json!({"type": "search", "pattern": ""}),
            "'pattern' required for search query",
        ),
        (
            json!({"type": "file", "name": "x", "limit": 0}),
            "Invalid limit: 0 (must be 1-100); 0 gives the totals only, with search, callers or callees",
        ),
        (
            json!({"type": "search", "pattern": "x", "limit": 101}),
            "Invalid limit: 101 (must be 1-100)",
        ),
        (
            json!({"type": "stats", "limit": -1}),
            "Invalid limit: -1 (must be 1-100)",
        ),
        (
            json!({"type": "callers", "name": "placeOrder", "depth": 6}),
            "Invalid depth: 6 (must be 1-5)",
        ),
        (
            json!({"type": "search", "pattern": "x", "cursor": "00ff"}),
            "Invalid cursor",
        ),
    ];
    for (args, expected) in cases {
        let message = invalid(query(&conn, args.clone()));
        assert!(message.starts_with(expected), "{args}: {message}");
    }
}

// ---------------------------------------------------------------- acp_query: call graph

#[test]
fn callers_and_callees_include_dangling_names() {
    let conn = open(cli());
    let answer = ok(&conn, json!({"type": "callees", "name": "placeOrder"}));
    assert_eq!(answer["name"], "src/orders/checkout.ts:placeOrder");
    assert_eq!(
        answer["result"],
        json!([
            {"name": "save", "depth": 1, "resolved": false},
            {"name": "src/orders/tax.ts:computeTax", "depth": 1, "resolved": true, "file": "src/orders/tax.ts"}
        ])
    );
    assert_eq!(answer["total"], 2);

    let answer = ok(&conn, json!({"type": "callers", "name": "toCsv"}));
    assert_eq!(
        answer["result"],
        json!([{"name": "<module>", "depth": 1, "resolved": false}])
    );
    let answer = ok(
        &conn,
        json!({"type": "callers", "name": "save", "depth": 3}),
    );
    assert_eq!(answer["name"], "save");
    assert_eq!(
        answer["result"],
        json!([{"name": "src/orders/checkout.ts:placeOrder", "depth": 1, "resolved": true, "file": "src/orders/checkout.ts"}])
    );
    let answer = ok(&conn, json!({"type": "callees", "name": "CheckoutError"}));
    assert_eq!(answer["result"], json!([]));
    assert_eq!(answer["truncated"], false);
    assert!(
        invalid(query(&conn, json!({"type": "callers", "name": "nothing"})))
            .starts_with("Symbol not found: nothing")
    );
}

#[test]
fn deep_walks_over_cycles_terminate() {
    let mut cache: Value = serde_json::from_str(&read("samples/cache-cli-shaped.json")).unwrap();
    cache["graph"] = json!({
        "forward": {"placeOrder": ["computeTax"], "computeTax": ["toCsv"], "toCsv": ["placeOrder", "toCsv"]},
        "reverse": {}
    });
    let project = project(&cache.to_string(), None);
    let conn = open(&project);
    let answer = ok(
        &conn,
        json!({"type": "callers", "name": "placeOrder", "depth": 3}),
    );
    let got: Vec<(String, u64)> = answer["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_string(),
                r["depth"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("src/legacy/export.ts:toCsv".to_string(), 1),
            ("src/orders/tax.ts:computeTax".to_string(), 2),
            ("src/orders/checkout.ts:placeOrder".to_string(), 3),
        ]
    );
    let answer = ok(
        &conn,
        json!({"type": "callees", "name": "toCsv", "depth": 5}),
    );
    assert_eq!(answer["total"], 3);
    assert_eq!(answer["result"][0]["name"], "src/legacy/export.ts:toCsv");
    assert_eq!(answer["result"][0]["depth"], 1);
}

#[test]
fn generated_callers_pages_have_no_gaps_or_duplicates() {
    let conn = open(generated());
    let hot: String = conn
        .query_row(
            "SELECT s.qualified_name FROM graph_nodes n JOIN symbols s ON s.id = n.symbol_id ORDER BY n.callers DESC, n.id LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    for (kind, depth) in [("callers", 1), ("callers", 3), ("callees", 2)] {
        let args = json!({"type": kind, "name": hot, "depth": depth, "limit": 7});
        let (items, total) = walk_pages(&conn, args, kind);
        assert_eq!(items.len() as u64, total, "{kind} depth {depth}");
        let names: HashSet<&str> = items.iter().map(|r| r["name"].as_str().unwrap()).collect();
        assert_eq!(
            names.len(),
            items.len(),
            "duplicates in {kind} depth {depth}"
        );
        let depths: Vec<u64> = items.iter().map(|r| r["depth"].as_u64().unwrap()).collect();
        assert!(depths.windows(2).all(|w| w[0] <= w[1]));
        assert!(depths.iter().all(|d| (1..=depth).contains(d)));
        if kind == "callers" && depth == 1 {
            let direct: i64 = conn
                .query_row(
                    "SELECT count(DISTINCT coalesce(c.symbol_id, -c.id)) FROM graph_nodes n
                     JOIN call_edges e ON e.callee_id = n.id JOIN graph_nodes c ON c.id = e.caller_id
                     JOIN symbols s ON s.id = n.symbol_id WHERE s.qualified_name = ?1",
                    [&hot],
                    |r| r.get(0),
                )
                .unwrap();
            assert_eq!(total as i64, direct);
            assert!(total > 7, "the hottest symbol should need several pages");
        }
    }
    let first = ok(
        &conn,
        json!({"type": "callers", "name": hot, "depth": 2, "limit": 3}),
    );
    let message = invalid(query(
        &conn,
        json!({"type": "callers", "name": hot, "depth": 3, "cursor": first["next_cursor"]}),
    ));
    assert!(
        message.starts_with("Cursor does not match this query"),
        "{message}"
    );
    let message = invalid(query(
        &conn,
        json!({"type": "callees", "cursor": first["next_cursor"]}),
    ));
    assert!(message.starts_with("Invalid cursor"), "{message}");
}

/// Every caller or callee of the symbol `start` within `depth`, as (name, depth) in page order,
/// by one recursive query over the whole graph.
fn walk_by_recursive_query(
    conn: &Connection,
    kind: &str,
    start: &str,
    depth: u32,
) -> Vec<(String, u64)> {
    let (from, to) = if kind == "callers" {
        ("callee_id", "caller_id")
    } else {
        ("caller_id", "callee_id")
    };
    let sql = format!(
        "WITH RECURSIVE
         walk(ent, depth) AS (
             SELECT (SELECT id FROM symbols WHERE qualified_name = ?1), 0
             UNION
             SELECT coalesce(c.symbol_id, -c.id), w.depth + 1 FROM walk w
             JOIN graph_nodes n ON (n.symbol_id = w.ent OR n.id = -w.ent)
             JOIN call_edges e ON e.{from} = n.id JOIN graph_nodes c ON c.id = e.{to}
             WHERE w.depth < ?2),
         reached(ent, depth) AS (SELECT ent, min(depth) FROM walk WHERE depth > 0 GROUP BY ent)
         SELECT CASE WHEN r.ent > 0 THEN coalesce(s.qualified_name, s.key) ELSE g.name END AS label,
                r.depth
         FROM reached r LEFT JOIN symbols s ON s.id = r.ent LEFT JOIN graph_nodes g ON g.id = -r.ent
         ORDER BY r.depth, label, r.ent"
    );
    let mut stmt = conn.prepare(&sql).unwrap();
    stmt.query_map(rusqlite::params![start, depth], |r| {
        Ok((r.get(0)?, r.get::<_, i64>(1)? as u64))
    })
    .unwrap()
    .collect::<Result<_, _>>()
    .unwrap()
}

/// SQLite virtual-machine steps (in units of 100) spent by `f` on `conn`.
fn vm_steps<T>(conn: &Connection, f: impl FnOnce() -> T) -> (T, u64) {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    let steps = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&steps);
    conn.progress_handler(
        100,
        Some(move || {
            counter.fetch_add(1, Ordering::Relaxed);
            false
        }),
    )
    .unwrap();
    let out = f();
    conn.progress_handler(100, None::<fn() -> bool>).unwrap();
    (out, steps.load(Ordering::Relaxed))
}

/// 1,500 files × 10 symbols from `acpdb gen-fixture`, every name resolving: walks from its hub
/// pass the walk cap.
fn large() -> &'static TempProject {
    static PROJECT: OnceLock<TempProject> = OnceLock::new();
    PROJECT.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let out = acpdb()
            // Every name resolving: a graph dense enough that a depth-4 walk is capped.
            .args([
                "gen-fixture",
                "--files",
                "1500",
                "--unresolved-percent",
                "0",
                "--out",
            ])
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", common::stderr(&out));
        let project = TempProject { dir };
        project.import();
        project
    })
}

#[test]
fn deep_walks_page_like_the_recursive_query_and_resume_cheaply() {
    let conn = open(large());
    let hot: String = conn
        .query_row(
            "SELECT s.qualified_name FROM graph_nodes n JOIN symbols s ON s.id = n.symbol_id ORDER BY n.callers DESC, n.id LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    for (kind, depth) in [
        ("callers", 1),
        ("callers", 2),
        ("callees", 3),
        ("callers", 4),
    ] {
        let want = walk_by_recursive_query(&conn, kind, &hot, depth);
        let args = json!({"type": kind, "name": hot, "depth": depth, "limit": 100});
        let first = ok(&conn, args.clone());
        let (items, total) = walk_pages(&conn, args, kind);
        let got: Vec<(String, u64)> = items
            .iter()
            .map(|r| {
                (
                    r["name"].as_str().unwrap().to_string(),
                    r["depth"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(got, want, "{kind} depth {depth}");
        let capped = want.len() as u64 > WALK_TOTAL_CAP;
        assert_eq!(
            total,
            (want.len() as u64).min(WALK_TOTAL_CAP),
            "{kind} depth {depth}"
        );
        assert_eq!(first["total_capped"].as_bool().unwrap_or(false), capped);
        if depth == 4 {
            assert!(capped, "the fixture should need a capped count");
        }
    }

    // Pages inside levels already computed cost a small fraction of the pages that compute a
    // level (at most one per depth).
    let args = json!({"type": "callers", "name": hot, "depth": 3, "limit": 50});
    let (first, spent) = vm_steps(&conn, || ok(&conn, args));
    let mut cursor = first["next_cursor"].clone();
    let mut steps = vec![spent];
    while let Value::String(token) = cursor {
        let next = json!({"type": "callers", "cursor": token, "limit": 50});
        let (answer, spent) = vm_steps(&conn, || ok(&conn, next));
        steps.push(spent);
        cursor = answer["next_cursor"].clone();
    }
    steps.sort_unstable_by(|a, b| b.cmp(a));
    assert!(steps.len() > 20, "{} pages", steps.len());
    assert!(
        steps[3..].iter().all(|s| s * 10 < steps[0]),
        "VM steps per page: {steps:?}"
    );
}

#[test]
fn ambiguous_simple_names_list_candidates() {
    let conn = open(generated());
    let name: String = conn
        .query_row(
            "SELECT name FROM symbols GROUP BY name HAVING count(*) > 1 ORDER BY count(*) DESC, name LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    for kind in ["symbol", "callers", "callees"] {
        match query(&conn, json!({"type": kind, "name": name})) {
            Err(QueryError::InvalidParams {
                message,
                data: Some(data),
            }) => {
                assert!(message.contains("ambiguous"), "{message}");
                assert!(data["candidates"].as_array().unwrap().len() > 1);
            }
            other => panic!("{kind} {name}: {other:?}"),
        }
    }
}

/// The demo project, imported.
fn demo() -> &'static TempProject {
    static PROJECT: OnceLock<TempProject> = OnceLock::new();
    PROJECT.get_or_init(|| {
        let project = TempProject::copy_of(&common::fixture("demo"));
        project.import();
        project
    })
}

/// The suggestions of a not-found error.
fn suggestions(result: QueryResult<impl std::fmt::Debug>) -> Vec<String> {
    match result {
        Err(QueryError::InvalidParams {
            message,
            data: Some(data),
        }) => {
            assert!(message.contains("not found"), "{message}");
            serde_json::from_value(data["suggestions"].clone()).unwrap()
        }
        other => panic!("expected a not-found error with suggestions, got {other:?}"),
    }
}

#[test]
fn unknown_names_get_suggestions_a_few_typos_away() {
    let conn = open(demo());
    let symbol = |name: &str| suggestions(query(&conn, json!({"type": "symbol", "name": name})));
    assert_eq!(
        symbol("validateSesion"),
        vec!["src/auth/session.ts:validateSession"]
    );
    assert_eq!(
        symbol("computeTaxes"),
        vec!["src/billing/tax.ts:computeTax"]
    );
    assert_eq!(
        symbol("src/billing/tax.ts:computTax"),
        vec!["src/billing/tax.ts:computeTax"]
    );
    // A qualified name: its file's symbols first (two files have a `format`)...
    assert_eq!(
        symbol("src/util/format.ts:formt"),
        vec!["src/util/format.ts:format"]
    );
    assert_eq!(
        symbol("formt"),
        vec!["src/billing/report.ts:format", "src/util/format.ts:format"]
    );
    // ... else the names close to its member anywhere.
    assert_eq!(
        symbol("src/auth/session.ts:verifyTokn"),
        vec!["src/auth/token.ts:verifyToken"]
    );
    assert_eq!(
        suggestions(query(
            &conn,
            json!({"type": "callers", "name": "verifyTokn"})
        )),
        vec!["src/auth/token.ts:verifyToken"]
    );
    assert_eq!(
        suggestions(query(
            &conn,
            json!({"type": "file", "name": "src/billing/taxes.ts"})
        )),
        vec!["src/billing/tax.ts"]
    );
    let variable = |name: &str| {
        suggestions(acp_expand_variable(
            &conn,
            &ExpandVariableParams { name: name.into() },
        ))
    };
    assert_eq!(
        variable("SYM_VALIDATESESION"),
        vec!["SYM_VALIDATESESSION", "SYM_validateSession"]
    );
    assert_eq!(variable("$SYM_COMPUTETAXES"), vec!["SYM_COMPUTETAX"]);
    assert_eq!(
        expand(&conn, "see $SYM_VALIDATESESION", None).warnings,
        vec!["Undefined variable: $SYM_VALIDATESESION (did you mean $SYM_VALIDATESESSION, $SYM_validateSession?)"]
    );
    // Suggestions for the first 20 distinct undefined names of a text, then plain warnings.
    let names: Vec<String> = ('A'..='Y').map(|c| format!("$SYM_COMPUTETAX{c}")).collect();
    let text = format!("{} {}", names.join(" "), names[0]);
    let warnings = expand(&conn, &text, None).warnings;
    assert_eq!(warnings.len(), 25);
    assert!(warnings[..20]
        .iter()
        .all(|w| w.ends_with("(did you mean $SYM_COMPUTETAX?)")));
    assert_eq!(warnings[20], "Undefined variable: $SYM_COMPUTETAXU");
    // Names far from every name get no suggestion at all.
    let message = invalid(query(
        &conn,
        json!({"type": "symbol", "name": "qqqqqqqqqq"}),
    ));
    assert_eq!(message, "Symbol not found: qqqqqqqqqq");
}

/// Trigram counts are kept between answers for one import only: a name the next import adds
/// is suggested at once, although an earlier answer counted its rarest trigram as held by no
/// name.
#[test]
fn kept_trigram_counts_belong_to_one_import() {
    let project = TempProject::copy_of(&common::fixture("demo"));
    project.import();
    // No name starts with `x` (no prefix range helps): the suggestion can come from the
    // trigram pieces alone.
    let typo = json!({"type": "symbol", "name": "xeconcileLedgerz"});
    let conn = open(&project);
    match query(&conn, typo.clone()) {
        Err(QueryError::InvalidParams { data: None, .. }) => {}
        other => panic!("expected no suggestion, got {other:?}"),
    }
    drop(conn);
    let mut cache: Value =
        serde_json::from_str(&fs::read_to_string(project.cache_path()).unwrap()).unwrap();
    cache["symbols"]["src/billing/tax.ts:reconcileLedger"] = json!({"name": "reconcileLedger", "qualified_name": "src/billing/tax.ts:reconcileLedger", "type": "function", "file": "src/billing/tax.ts", "lines": [40, 41]});
    fs::write(project.cache_path(), cache.to_string()).unwrap();
    project.import();
    let conn = open(&project);
    let after = suggestions(query(&conn, typo));
    assert!(
        after.contains(&"src/billing/tax.ts:reconcileLedger".to_string()),
        "{after:?}"
    );
}

#[test]
fn suggestion_reads_are_bounded() {
    use acpdb::query::similar::{FILE_PATHS, SYMBOL_NAMES, VARIABLE_NAMES};
    let conn = open(generated());
    for index in [SYMBOL_NAMES, FILE_PATHS, VARIABLE_NAMES] {
        for sql in index.neighbours_sql {
            let p = positional_plan(&conn, sql, ("abc", 50));
            assert_indexed(sql, &p);
            assert!(p.iter().all(|l| !l.contains("TEMP B-TREE")), "{p:?}");
        }
        if let Some(sql) = index.trigram_sql {
            let rows = positional_plan(&conn, sql.rows, ("\"abc\"", 1, 99, 50));
            assert_indexed(sql.rows, &rows);
            assert!(rows.iter().all(|l| !l.contains("TEMP B-TREE")), "{rows:?}");
            let names = positional_plan(&conn, sql.names, ("[1, 2]", "abc"));
            assert_indexed(sql.names, &names);
            assert_indexed(
                sql.count,
                &positional_plan(&conn, sql.count, ("\"abc\"", 50)),
            );
        }
    }
    // A typo in a 3,000-symbol index finds the name it was made from, on every kind of list.
    let name: String = conn
        .query_row(
            "SELECT name FROM symbols WHERE length(name) >= 10 ORDER BY id LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    for typo in [
        name.chars().skip(1).collect::<String>(),
        name.chars().take(4).chain(name.chars().skip(5)).collect(),
        format!("{name}x"),
    ] {
        let found = suggestions(query(&conn, json!({"type": "symbol", "name": typo})));
        assert!(
            found.iter().any(|q| q.ends_with(&format!(":{name}"))),
            "{typo}: {found:?}"
        );
    }
}

/// `containing` lists only names that hold the text, and every one of them when one of the
/// text's trigrams is held by fewer than `PROBE_CAP` names (its list is read whole); the lists
/// of the other trigrams only narrow which names are read.
#[test]
fn names_containing_a_text_are_those_holding_it() {
    use acpdb::query::similar::{
        containing, TrigramCounts, PIECE_CAP, PROBE_CAP, SYMBOL_NAME_TRIGRAMS,
    };
    let conn = open(generated());
    let names: Vec<String> = conn
        .prepare("SELECT DISTINCT name FROM symbols WHERE name IS NOT NULL")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let folded: Vec<String> = names.iter().map(|n| n.to_lowercase()).collect();
    let holding = |text: &str| -> HashSet<String> {
        let text = text.to_lowercase();
        names
            .iter()
            .zip(&folded)
            .filter(|(_, f)| f.contains(&text))
            .map(|(n, _)| n.clone())
            .collect()
    };
    let mut whole = 0;
    // Pieces of names: their middles and ends, of 3 to 7 characters.
    for name in names.iter().step_by(97).take(40) {
        let chars: Vec<char> = name.chars().collect();
        for (from, len) in [(1, 3), (2, 5), (chars.len().saturating_sub(7), 7)] {
            if from + len > chars.len() {
                continue;
            }
            let text: String = chars[from..from + len].iter().collect();
            let found: HashSet<String> = containing(
                &conn,
                SYMBOL_NAME_TRIGRAMS,
                &text,
                PIECE_CAP,
                &mut TrigramCounts::default(),
            )
            .unwrap()
            .into_iter()
            .collect();
            let expected = holding(&text);
            assert!(found.is_subset(&expected), "{text}: {found:?}");
            assert!(!found.is_empty(), "{text}: the name it was taken from");
            let lowered = text.to_lowercase();
            let rarest = lowered
                .chars()
                .collect::<Vec<_>>()
                .windows(3)
                .map(|w| holding(&w.iter().collect::<String>()).len())
                .min()
                .unwrap();
            if rarest < PROBE_CAP {
                whole += 1;
                assert_eq!(found, expected, "{text}");
            }
        }
    }
    assert!(whole >= 10, "only {whole} pieces had a rare trigram");
}

/// The first page of a walk is a point lookup while the walk reads at most `SMALL_WALK` edges,
/// as the node counts say; walks through a hub and later pages are not.
#[test]
fn small_walks_count_as_point_lookups() {
    use acpdb::query::acp_query::SMALL_WALK;
    let callers: Vec<String> = (0..=SMALL_WALK).map(|i| format!("caller{i}")).collect();
    // `ring` has 60 % of the budget in callers and calls the first of them back.
    let ring: Vec<String> = (0..SMALL_WALK * 6 / 10)
        .map(|i| format!("ring{i}"))
        .collect();
    let cache = json!({
        "version": "0.5.1",
        "project": {"name": "hub"},
        "files": {"src/a.ts": {"path": "src/a.ts", "lines": 9, "language": "typescript"}},
        "symbols": {
            "hub": {"name": "hub", "qualified_name": "src/a.ts:hub", "type": "function", "file": "src/a.ts", "lines": [1, 2]},
            "leaf": {"name": "leaf", "qualified_name": "src/a.ts:leaf", "type": "function", "file": "src/a.ts", "lines": [3, 4]},
            "mid": {"name": "mid", "qualified_name": "src/a.ts:mid", "type": "function", "file": "src/a.ts", "lines": [5, 6]}
        },
        "graph": {
            "forward": {"caller0": ["hub", "leaf"], "hub": ["mid"], "ring": ["ring0"]},
            "reverse": {"hub": callers, "leaf": ["caller0"], "mid": ["hub"], "ring": ring}
        }
    });
    let project = project(&cache.to_string(), None);
    let conn = open(&project);
    let params = |args: Value| -> QueryParams { serde_json::from_value(args).unwrap() };
    let small = |args: Value| params(args).is_small_walk(&conn).unwrap();
    assert!(small(json!({"type": "callers", "name": "leaf"})));
    assert!(small(
        json!({"type": "callers", "name": "src/a.ts:leaf", "depth": 5})
    ));
    assert!(!small(json!({"type": "callers", "name": "hub"})));
    assert!(small(json!({"type": "callees", "name": "hub", "depth": 5})));
    assert!(small(
        json!({"type": "callees", "name": "caller0", "depth": 3})
    ));
    // One hop from `mid` reads one edge; two hops reach the hub's callers.
    assert!(small(json!({"type": "callers", "name": "mid"})));
    assert!(!small(
        json!({"type": "callers", "name": "mid", "depth": 2})
    ));
    // A walk that comes back to its start reads the start's edges again, as the walk does.
    assert!(small(
        json!({"type": "callers", "name": "ring", "depth": 2})
    ));
    assert!(!small(
        json!({"type": "callers", "name": "ring", "depth": 3})
    ));
    // A name that resolves to nothing, or a depth out of range, costs no walk: its error is
    // answered at once.
    assert!(small(json!({"type": "callers", "name": "nowhere"})));
    assert!(small(json!({"type": "callers", "name": "hub", "depth": 9})));
    // Later pages and other types are not first pages of a walk.
    assert!(!small(
        json!({"type": "callers", "name": "leaf", "cursor": "x"})
    ));
    assert!(!small(json!({"type": "search", "pattern": "leaf"})));
    assert!(!params(json!({"type": "symbol", "name": "leaf"})).is_first_page_walk());
    // The counts it reads are the walk's.
    let answer = ok(
        &conn,
        json!({"type": "callers", "name": "mid", "depth": 2, "limit": 0}),
    );
    assert_eq!(answer["total"], SMALL_WALK + 2, "{answer}");
}

// ---------------------------------------------------------------- acp_query: search

fn match_names(answer: &Value) -> Vec<String> {
    answer["result"]["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            m.get("qualified_name")
                .or_else(|| m.get("path"))
                .and_then(Value::as_str)
                .unwrap()
                .to_string()
        })
        .collect()
}

#[test]
fn search_on_the_sample_cache() {
    let conn = open(cli());
    let answer = ok(&conn, json!({"type": "search", "pattern": "tax"}));
    assert_eq!(
        match_names(&answer),
        vec!["src/orders/tax.ts:computeTax", "src/orders/tax.ts"]
    );
    assert_eq!(answer["result"]["matches"][0]["type"], "symbol");
    assert_eq!(
        answer["result"]["matches"][1],
        json!({"type": "file", "name": "tax.ts", "path": "src/orders/tax.ts"})
    );
    assert_eq!(answer["result"]["total"], 2);
    assert_eq!(answer["result"]["truncated"], false);
    assert_eq!(answer["pattern"], "tax");

    let answer = ok(&conn, json!({"type": "search", "pattern": "regional VAT"}));
    assert_eq!(match_names(&answer), vec!["src/orders/tax.ts:computeTax"]);
    let answer = ok(&conn, json!({"type": "search", "pattern": "checkout*"}));
    assert_eq!(
        match_names(&answer),
        vec![
            "src/orders/checkout.ts:CheckoutError",
            "src/orders/checkout.ts"
        ]
    );
    let answer = ok(
        &conn,
        json!({"type": "search", "pattern": "*.ts", "limit": 100}),
    );
    let mut names = match_names(&answer);
    names.sort();
    assert_eq!(
        names,
        vec![
            "src/legacy/export.ts",
            "src/orders/checkout.ts",
            "src/orders/tax.ts"
        ]
    );
    let answer = ok(&conn, json!({"type": "search", "pattern": "to"}));
    assert_eq!(match_names(&answer), vec!["src/legacy/export.ts:toCsv"]);
}

/// Each match is found once, in its best tier, whatever the case of non-ASCII letters.
#[test]
fn search_tiers_do_not_depend_on_ascii_case_folding() {
    let cache = json!({
        "version": "0.5.1",
        "project": {"name": "unicode"},
        "files": {
            "src/école/plan.ts": {"path": "src/école/plan.ts", "lines": 30, "language": "typescript", "purpose": "Plans the ÉCOLE term"},
            "src/other.ts": {"path": "src/other.ts", "lines": 5, "language": "typescript"}
        },
        "symbols": {
            "ÉcoleManager": {"name": "ÉcoleManager", "qualified_name": "src/other.ts:ÉcoleManager", "type": "class", "file": "src/other.ts", "lines": [1, 5], "exported": true},
            "planTerm": {"name": "planTerm", "qualified_name": "src/école/plan.ts:planTerm", "type": "function", "file": "src/école/plan.ts", "lines": [1, 30], "exported": true},
            "grade": {"name": "grade", "qualified_name": "src/other.ts:grade", "type": "function", "file": "src/other.ts", "lines": [2, 3], "exported": true, "purpose": "Grades an école exam"}
        }
    });
    let project = project(&cache.to_string(), None);
    let conn = open(&project);
    let answer = ok(&conn, json!({"type": "search", "pattern": "école"}));
    assert_eq!(
        match_names(&answer),
        vec![
            // name contains it (É folded to é), then qualified name, then purpose words;
            // then the files.
            "src/other.ts:ÉcoleManager",
            "src/école/plan.ts:planTerm",
            "src/other.ts:grade",
            "src/école/plan.ts",
        ]
    );
    assert_eq!(answer["result"]["total"], 4);
}

/// The trigram indexes hold no positions: a name with every trigram of the pattern, but not
/// in a row, is a candidate that the check against the name turns away, in every tier and in
/// suggestions.
#[test]
fn search_keeps_only_names_that_contain_the_pattern() {
    let cache = json!({
        "version": "0.5.1",
        "project": {"name": "trigrams"},
        "files": {
            "src/abcd/a.ts": {"path": "src/abcd/a.ts", "lines": 9, "language": "typescript"},
            "src/b.ts": {"path": "src/b.ts", "lines": 9, "language": "typescript"}
        },
        "symbols": {
            "abcXbcd": {"name": "abcXbcd", "qualified_name": "src/b.ts:abcXbcd", "type": "function", "file": "src/b.ts", "lines": [1, 2]},
            "bcdabc": {"name": "bcdabc", "qualified_name": "src/b.ts:bcdabc", "type": "function", "file": "src/b.ts", "lines": [3, 4]},
            "makeABCD": {"name": "makeABCD", "qualified_name": "src/b.ts:makeABCD", "type": "function", "file": "src/b.ts", "lines": [5, 6]},
            "run": {"name": "run", "qualified_name": "src/abcd/a.ts:run", "type": "function", "file": "src/abcd/a.ts", "lines": [1, 9]}
        }
    });
    let project = project(&cache.to_string(), None);
    let conn = open(&project);
    let answer = ok(&conn, json!({"type": "search", "pattern": "abcd"}));
    assert_eq!(
        match_names(&answer),
        vec!["src/b.ts:makeABCD", "src/abcd/a.ts:run", "src/abcd/a.ts"]
    );
    let answer = ok(&conn, json!({"type": "search", "pattern": "*bcd*"}));
    let mut names = match_names(&answer);
    names.sort();
    assert_eq!(
        names,
        vec![
            "src/abcd/a.ts",
            "src/abcd/a.ts:run",
            "src/b.ts:abcXbcd",
            "src/b.ts:bcdabc",
            "src/b.ts:makeABCD"
        ]
    );
    let answer = ok(&conn, json!({"type": "search", "pattern": "*cdab*"}));
    assert_eq!(match_names(&answer), vec!["src/b.ts:bcdabc"]);
    let message = invalid(query(&conn, json!({"type": "symbol", "name": "abcd"})));
    assert!(message.contains("src/b.ts:makeABCD"), "{message}");
    assert!(!message.contains("abcXbcd"), "{message}");
}

#[test]
fn search_ranks_exact_names_first() {
    let conn = open(generated());
    let name: String = conn
        .query_row(
            "SELECT name FROM symbols s WHERE length(name) >= 4
               AND (SELECT count(*) FROM symbols t WHERE t.name <> s.name AND instr(lower(t.name), lower(s.name)) > 0) >= 2
             GROUP BY name ORDER BY count(*) DESC, name LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let exact: i64 = conn
        .query_row(
            "SELECT count(*) FROM symbols WHERE name = ?1",
            [&name],
            |r| r.get(0),
        )
        .unwrap();
    let answer = ok(
        &conn,
        json!({"type": "search", "pattern": name, "limit": 100}),
    );
    let matches = answer["result"]["matches"].as_array().unwrap();
    assert!(matches.len() as i64 > exact);
    for (i, m) in matches.iter().enumerate() {
        let is_exact = m["type"] == "symbol" && m["name"] == name.as_str();
        assert_eq!(is_exact, (i as i64) < exact, "match {i}: {m}");
    }
    let lower = ok(
        &conn,
        json!({"type": "search", "pattern": name.to_lowercase(), "limit": 100}),
    );
    assert!(lower["result"]["matches"][0]["name"]
        .as_str()
        .unwrap()
        .eq_ignore_ascii_case(&name));
    let mut seen_file = false;
    for m in matches {
        if m["type"] == "file" {
            seen_file = true;
        } else {
            assert!(!seen_file, "symbols rank before files");
        }
    }
}

#[test]
fn search_globs_and_substrings_match_what_they_say() {
    let conn = open(generated());
    let glob_matches = |glob: &str, text: &str| -> bool {
        fn go(p: &[char], t: &[char]) -> bool {
            match (p.first(), t.first()) {
                (None, None) => true,
                (Some('*'), _) => go(&p[1..], t) || (!t.is_empty() && go(p, &t[1..])),
                (Some('?'), Some(_)) => go(&p[1..], &t[1..]),
                (Some(a), Some(b)) => a == b && go(&p[1..], &t[1..]),
                _ => false,
            }
        }
        let p: Vec<char> = glob.to_lowercase().chars().collect();
        let t: Vec<char> = text.to_lowercase().chars().collect();
        go(&p, &t)
    };
    for glob in [
        "validate*",
        // Only a prefix: the name index's range alone, case-insensitively.
        "VALIDATE*",
        "*Session",
        "get?ser*",
        "src/auth/*.ts",
        "*token*",
        // A common prefix with other literal runs: read through the trigrams of every run.
        "src*Token",
        "src/*/*Sess?on*",
        "val*ate*",
        "*ate*Sess*",
    ] {
        let (items, total) = walk_pages(
            &conn,
            json!({"type": "search", "pattern": glob, "limit": 50}),
            "search",
        );
        assert_eq!(items.len() as u64, total, "{glob}");
        for m in &items {
            let ok = if m["type"] == "symbol" {
                glob_matches(glob, m["name"].as_str().unwrap())
                    || glob_matches(glob, m["qualified_name"].as_str().unwrap())
            } else {
                glob_matches(glob, m["path"].as_str().unwrap())
                    || glob_matches(glob, m["name"].as_str().unwrap())
            };
            assert!(ok, "{glob} returned {m}");
        }
        let expected: i64 = conn
            .query_row(
                "SELECT (SELECT count(*) FROM symbols WHERE lower(name) GLOB lower(?1) OR lower(qualified_name) GLOB lower(?1))
                      + (SELECT count(*) FROM files WHERE lower(path) GLOB lower(?1)
                           OR lower(replace(path, rtrim(path, replace(path, '/', '')), '')) GLOB lower(?1))",
                [glob],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(total as i64, expected, "{glob}");
    }

    let substring: String = conn
        .query_row(
            "SELECT substr(name, 3, 5) FROM symbols WHERE length(name) > 9 ORDER BY id LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let (items, _) = walk_pages(
        &conn,
        json!({"type": "search", "pattern": substring, "limit": 100}),
        "search",
    );
    let needle = substring.to_lowercase();
    let by_name: i64 = conn
        .query_row(
            "SELECT count(*) FROM symbols WHERE instr(lower(name), ?1) > 0",
            [&needle],
            |r| r.get(0),
        )
        .unwrap();
    let found_by_name = items
        .iter()
        .filter(|m| {
            m["type"] == "symbol" && m["name"].as_str().unwrap().to_lowercase().contains(&needle)
        })
        .count();
    assert_eq!(found_by_name as i64, by_name, "{substring}");
}

/// The generated cache, with symbols whose qualified names are not `path:name`, and `path:name`
/// ones with colons and non-ASCII letters in their paths and names.
fn mixed_qualified_names() -> &'static TempProject {
    static PROJECT: OnceLock<TempProject> = OnceLock::new();
    PROJECT.get_or_init(|| {
        let generated = TempProject::generated(30);
        let mut cache: Value =
            serde_json::from_slice(&fs::read(generated.cache_path()).unwrap()).unwrap();
        let symbols = cache["symbols"].as_object_mut().unwrap();
        for (i, symbol) in symbols.values_mut().enumerate() {
            if i % 3 == 0 {
                let name = symbol["name"].as_str().unwrap().to_string();
                symbol["qualified_name"] = json!(format!("pkg{}::Outer::{name}", i % 4));
            }
        }
        for (file, name) in [
            ("src/\u{dc}bung/stra\u{df}e.rs", "\u{c4}rger"),
            ("src/\u{dc}bung/stra\u{df}e.rs", "\u{e4}rgerlich"),
            ("src/a:b/c.rs", "colon:name"),
            ("src/q.rs", "x"),
            ("src/q.rs", "Run"),
            // A letter the trigram indexes do not fold (`İ`), in a path holding `ist`.
            ("src/list.ts", "\u{130}stanbul"),
            // A path holding a NUL, where `GLOB` stops reading the qualified name.
            ("src/init.it\u{0}b", "initial"),
        ] {
            symbols.insert(
                format!("{file}:{name}"),
                json!({"name": name, "qualified_name": format!("{file}:{name}"),
                       "type": "function", "file": file, "lines": [1, 2]}),
            );
        }
        symbols.insert(
            "odd".into(),
            json!({"name": "Run", "qualified_name": "src/q.rs:Run()", "file": "src/q.rs"}),
        );
        project(&cache.to_string(), None)
    })
}

/// `text` lower-cased a character at a time, as search folds case.
fn folded(text: &str) -> String {
    text.chars()
        .map(|c| c.to_lowercase().next().unwrap_or(c))
        .collect()
}

/// Every symbol match of a search (all pages, fewer than the cap): kept when `keep` says so,
/// as qualified names in order.
fn symbol_matches(conn: &Connection, pattern: &str, keep: impl Fn(&Value) -> bool) -> Vec<String> {
    let (items, total) = walk_pages(
        conn,
        json!({"type": "search", "pattern": pattern, "limit": 100}),
        "search",
    );
    assert!(total < TOTAL_CAP, "{pattern}: {total}");
    let mut found: Vec<String> = items
        .iter()
        .filter(|m| m["type"] == "symbol" && keep(m))
        .map(|m| m["qualified_name"].as_str().unwrap().to_string())
        .collect();
    found.sort();
    found
}

/// The qualified names (else keys) of the symbols `condition` holds for, `?1` bound to
/// `pattern`, in order.
fn symbols_where(conn: &Connection, condition: &str, pattern: &str) -> Vec<String> {
    let mut names: Vec<String> = conn
        .prepare(&format!(
            "SELECT coalesce(qualified_name, key) FROM symbols WHERE {condition}"
        ))
        .unwrap()
        .query_map([pattern], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    names.sort();
    names
}

#[test]
fn qualified_names_are_found_whatever_their_shape() {
    let project = mixed_qualified_names();
    let conn = open(project);
    common::check_full_text_indexes(&conn).unwrap();
    let sample = common::strings(
        &conn,
        "SELECT substr(qualified_name, length(file_path) - 1, 5) FROM symbols
         WHERE qualified_name = file_path || ':' || name ORDER BY id LIMIT 3",
    );
    let mut substrings = vec![
        "bung/str",
        "e.rs:\u{e4}r",
        "s:\u{e4}",
        "STRASSE",
        "stra\u{df}e.rs:",
        ":b/c.rs:co",
        "a:b",
        "b/c",
        "q.rs:x",
        "s:x",
        ":ru",
        "rs:Run(",
        "pkg1::",
        "::outer::",
        "r::",
        "auth/",
        "ession.go",
        "buffer.go:",
        "r.go:c",
    ];
    substrings.extend(sample.iter().map(String::as_str));
    for pattern in substrings {
        let needle = folded(pattern);
        let found = symbol_matches(&conn, pattern, |m| {
            folded(m["name"].as_str().unwrap()).contains(&needle)
                || folded(m["qualified_name"].as_str().unwrap()).contains(&needle)
        });
        let expected = symbols_where(
            &conn,
            "instr(acpdb_fold(name), acpdb_fold(?1)) > 0
             OR instr(acpdb_fold(qualified_name), acpdb_fold(?1)) > 0",
            pattern,
        );
        assert_eq!(found, expected, "{pattern}");
    }
    for glob in [
        "*bung/str*",
        "*.rs:\u{c4}r*",
        "src/a:b/*",
        "*:colon:*",
        "*::Outer::*",
        "*s:x",
        "*q.rs:run*",
        "src/*.go:*e*",
        "*/buffer.go:*",
        "*bung*rger*",
        "*orders*.go:*",
        "*s*r.go:c*",
        "*ist*",
        // Suffixes: of simple names, and of a qualified name not of the `path:name` shape.
        "*rger",
        "*un()",
        // Endings after other runs: one run long, two characters, and holding a colon.
        "*bung*ich",
        "*\u{e4}rg*ch",
        "*q.rs:run",
        // An ending the qualified name has before a NUL in its path, not its simple name.
        "*init*it",
        "*init.it",
    ] {
        let found = symbol_matches(&conn, glob, |_| true);
        let expected = symbols_where(
            &conn,
            "lower(name) GLOB lower(?1) OR lower(qualified_name) GLOB lower(?1)",
            glob,
        );
        assert!(!expected.is_empty(), "{glob} matches nothing");
        assert_eq!(found, expected, "{glob}");
    }
}

#[test]
fn search_pages_cover_every_match_once() {
    let conn = open(generated());
    let (items, total) = walk_pages(
        &conn,
        json!({"type": "search", "pattern": "session", "limit": 7}),
        "search",
    );
    assert!(total > 21, "{total}");
    assert_eq!(items.len() as u64, total);
    let keys: HashSet<String> = items.iter().map(|m| m.to_string()).collect();
    assert_eq!(keys.len(), items.len());
    let (again, _) = walk_pages(
        &conn,
        json!({"type": "search", "pattern": "session", "limit": 100}),
        "search",
    );
    assert_eq!(again, items, "page size does not change the order");
    let message = invalid(query(
        &conn,
        json!({"type": "search", "pattern": "token", "cursor": ok(&conn, json!({"type": "search", "pattern": "session"}))["result"]["next_cursor"]}),
    ));
    assert!(
        message.starts_with("Cursor does not match this query"),
        "{message}"
    );
}

#[test]
fn hostile_search_patterns_never_break_the_query() {
    let conn = open(generated());
    let long = "a".repeat(10 * 1024);
    let patterns = [
        "\"",
        "*",
        "a\"b",
        "NEAR(",
        "-",
        ":",
        "()",
        "",
        " ",
        "x",
        "**",
        "*?*",
        "a*b*c",
        "\"session\"",
        "session AND token",
        "session OR",
        "NOT token",
        "name:session",
        "{name}: x",
        "ses*sion",
        "a-b",
        "^session$",
        "(session|token)",
        "[abc]*",
        "sess[",
        "%_%",
        "\\",
        "'",
        "'; DROP TABLE symbols; --",
        "NEAR(session token, 2)",
        "session*",
        "*ession",
        "é",
        "日本",
        &long,
    ];
    for pattern in patterns {
        let result = query(&conn, json!({"type": "search", "pattern": pattern}));
        match result {
            Ok(answer) => {
                let text = answer.to_string();
                assert!(text.len() < 30_000, "{pattern}: {} bytes", text.len());
                assert!(
                    answer["result"]["total"].as_u64().unwrap()
                        >= answer["result"]["matches"].as_array().unwrap().len() as u64
                );
            }
            Err(QueryError::InvalidParams { message, .. }) => {
                assert!(
                    message.starts_with("'pattern' required")
                        || message.starts_with("Pattern too broad")
                        || message.starts_with("Pattern too long"),
                    "{pattern:?}: {message}"
                );
            }
            Err(err) => panic!("{pattern:?}: {err}"),
        }
    }
    let answer = ok(
        &conn,
        json!({"type": "search", "pattern": "session AND token"}),
    );
    assert_eq!(answer["result"]["total"], 0);
    assert!(
        invalid(query(&conn, json!({"type": "search", "pattern": long})))
            .starts_with("Pattern too long")
    );
    assert!(
        invalid(query(&conn, json!({"type": "search", "pattern": "*"})))
            .starts_with("Pattern too broad")
    );
}

#[test]
fn total_is_capped_beyond_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    let out = acpdb()
        .args([
            "gen-fixture",
            "--files",
            "150",
            "--symbols-per-file",
            "10",
            "--edges-per-symbol",
            "1",
            "--out",
        ])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::stderr(&out));
    let project = TempProject { dir };
    project.import();
    let conn = open(&project);
    let answer = ok(&conn, json!({"type": "search", "pattern": "src/"}));
    assert_eq!(answer["result"]["total"], TOTAL_CAP);
    assert_eq!(answer["result"]["total_capped"], true);
    assert_eq!(answer["result"]["truncated"], true);
    let answer = ok(&conn, json!({"type": "search", "pattern": "session"}));
    assert!(answer["result"].get("total_capped").is_none());
    // Substring (disjoint sources), short (overlapping sources) and glob patterns.
    for pattern in ["src/", "s", "src/*"] {
        let (items, total) = walk_pages(
            &conn,
            json!({"type": "search", "pattern": pattern, "limit": 100}),
            "search",
        );
        assert_eq!(total, TOTAL_CAP, "{pattern}");
        assert_eq!(
            items.len() as u64,
            total,
            "{pattern}: pages cover the capped total"
        );
        let keys: HashSet<String> = items.iter().map(|m| m.to_string()).collect();
        assert_eq!(keys.len(), items.len(), "{pattern}: duplicates");
    }
}

#[test]
fn default_answers_stay_small() {
    let conn = open(generated());
    let hot: String = conn
        .query_row(
            "SELECT s.qualified_name FROM graph_nodes n JOIN symbols s ON s.id = n.symbol_id ORDER BY n.callers DESC LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let file: String = conn
        .query_row("SELECT path FROM files LIMIT 1", [], |r| r.get(0))
        .unwrap();
    for args in [
        json!({"type": "symbol", "name": hot}),
        json!({"type": "callers", "name": hot, "depth": 5}),
        json!({"type": "callees", "name": hot, "depth": 5}),
        json!({"type": "search", "pattern": "src"}),
        json!({"type": "file", "name": file}),
        json!({"type": "domain", "name": "auth"}),
        json!({"type": "stats"}),
        json!({"type": "search", "pattern": "s", "limit": 100}),
    ] {
        let text = serde_json::to_string_pretty(&ok(&conn, args.clone())).unwrap();
        assert!(text.len() < 30_000, "{args}: {} bytes", text.len());
    }
}

/// The overview tools read the domains' counts, not their lists (see `domains` in migration
/// V13 for why the order matters).
#[test]
fn domain_counts_are_stored_before_the_lists_they_count() {
    let conn = open(cli());
    let columns = common::strings(
        &conn,
        "SELECT name FROM pragma_table_info('domains') ORDER BY cid",
    );
    let at = |name: &str| columns.iter().position(|c| c == name).unwrap();
    for (count, list) in [
        ("file_count", "files_json"),
        ("symbol_count", "symbols_json"),
    ] {
        assert!(at(count) < at(list), "{count} after {list}: {columns:?}");
    }
}

// ---------------------------------------------------------------- query plans

fn plan(conn: &Connection, sql: &str, params: &[(&str, &dyn rusqlite::ToSql)]) -> Vec<String> {
    let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
    let rows = stmt
        .query_map(params, |r| r.get::<_, String>(3))
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    rows
}

fn positional_plan(conn: &Connection, sql: &str, params: impl rusqlite::Params) -> Vec<String> {
    let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
    stmt.query_map(params, |r| r.get::<_, String>(3))
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap()
}

/// Fails on a full scan of an index table (by name or by the aliases the queries use).
fn assert_indexed(what: &str, plan: &[String]) {
    const TABLES: &[&str] = &[
        "symbols",
        "files",
        "call_edges",
        "graph_nodes",
        "constraints",
        "domains",
        "vars",
        "s",
        "f",
        "e",
        "c",
        "n",
        "g",
    ];
    for line in plan {
        if let Some(rest) = line.strip_prefix("SCAN ") {
            let name = rest.split_whitespace().next().unwrap_or("");
            assert!(
                !TABLES.contains(&name),
                "{what}: full scan `{line}` in plan:\n{}",
                plan.join("\n")
            );
        }
    }
}

#[test]
fn hot_paths_use_indexes() {
    let conn = open(generated());
    for direction in [Direction::Callers, Direction::Callees] {
        let p = positional_plan(&conn, &step_sql(direction, true), [1]);
        assert_indexed("walk step from a symbol", &p);
        assert!(p.iter().any(|l| l.contains("graph_nodes_symbol")), "{p:?}");
        let p = positional_plan(&conn, &step_sql(direction, false), [-1]);
        assert_indexed("walk step from a graph node", &p);
    }
    assert_indexed(
        "file symbols",
        &positional_plan(&conn, FILE_SYMBOLS_SQL, ("src/a.ts", 20, 0)),
    );
    assert_indexed(
        "file constraints",
        &positional_plan(
            &conn,
            acpdb::query::constraints::FILE_CONSTRAINTS_SQL,
            ("./src/a.ts", "src/a.ts"),
        ),
    );
    assert_indexed(
        "symbol constraints",
        &positional_plan(
            &conn,
            acpdb::query::constraints::SYMBOL_CONSTRAINTS_SQL,
            ["src/a.ts"],
        ),
    );
    for pattern in ["session", "se", "validate*", "*Session", "v?l*", "a\"b"] {
        let (sql, params) = page_statement(pattern).unwrap();
        let bound: Vec<(&str, &dyn rusqlite::ToSql)> = params
            .iter()
            .map(|(n, v)| (n.as_str(), v as &dyn rusqlite::ToSql))
            .collect();
        assert_indexed(pattern, &plan(&conn, &sql, &bound));
    }
    for sql in [
        "SELECT type FROM vars WHERE name = ?1",
        "SELECT id FROM symbols WHERE key = ?1",
        "SELECT id FROM symbols WHERE coalesce(qualified_name, key) = ?1 COLLATE NOCASE AND qualified_name = ?1 ORDER BY id LIMIT 1",
        "SELECT id FROM symbols WHERE name = ?1 COLLATE NOCASE AND name = ?1 AND (SELECT count(*) FROM (SELECT 1 FROM symbols WHERE name = ?1 COLLATE NOCASE AND name = ?1 LIMIT 2)) = 1",
        "SELECT id FROM files WHERE path = ?1 ORDER BY id LIMIT 1",
        "SELECT id FROM domains WHERE key = ?1",
        "SELECT count(*) FROM symbols WHERE file_path = ?1",
    ] {
        assert_indexed(sql, &positional_plan(&conn, sql, ["x"]));
    }
}

/// The summary tables filled at import agree with the tables they summarise.
#[test]
fn overview_summaries_match_the_tables() {
    for project in [generated(), cli(), no_vars()] {
        let conn = open(project);
        let count = |sql: &str| conn.query_row(sql, [], |r| r.get::<_, i64>(0)).unwrap();
        for (column, direct) in [
            ("files", "SELECT count(*) FROM files"),
            ("symbols", "SELECT count(*) FROM symbols"),
            ("lines", "SELECT coalesce(sum(lines), 0) FROM files"),
            ("domains", "SELECT count(*) FROM domains"),
            (
                "layers",
                "SELECT count(DISTINCT layer) FROM files WHERE layer IS NOT NULL",
            ),
            ("call_edges", "SELECT count(*) FROM call_edges"),
        ] {
            assert_eq!(
                count(&format!("SELECT {column} FROM index_summary")),
                count(direct),
                "{column}"
            );
        }
        let rows = |sql: &str| -> Vec<(Option<String>, i64)> {
            let mut stmt = conn.prepare(sql).unwrap();
            let mut rows: Vec<_> = stmt
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            rows.sort();
            rows
        };
        let hot = |sql: &str| -> Vec<(String, i64)> {
            let mut stmt = conn.prepare(sql).unwrap();
            let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
            rows.collect::<Result<_, _>>().unwrap()
        };
        assert_eq!(
            hot("SELECT name, reverse_len FROM hot_nodes ORDER BY rank"),
            hot(&format!(
                "SELECT name, reverse_len FROM graph_nodes WHERE reverse_len > 0
                 ORDER BY reverse_len DESC, name LIMIT {}",
                acpdb::db::HOTPATH_SLOTS
            ))
        );
        assert_eq!(
            rows("SELECT language, files FROM file_languages"),
            rows("SELECT language, count(*) FROM files WHERE language IS NOT NULL GROUP BY 1")
        );
        assert_eq!(
            rows("SELECT level, entries FROM constraint_mutation_levels"),
            rows(
                "SELECT CAST(coalesce(json_extract(raw_json, '$.mutation.level'), 'normal') AS TEXT),
                        count(*) FROM constraints
                 WHERE json_type(raw_json, '$.mutation') = 'object' GROUP BY 1
                 UNION ALL
                 SELECT NULL, count(*) FROM constraints
                 WHERE json_type(raw_json, '$.mutation') IS NOT 'object' HAVING count(*) > 0"
            )
        );
        // Strictest level per file, recomputed with the library's own ranking.
        let mut expected = std::collections::BTreeMap::<usize, i64>::new();
        let mut stmt = conn
            .prepare(
                "SELECT (SELECT group_concat(c.lock_level, char(31)) FROM constraints c WHERE c.path = f.path) FROM files f",
            )
            .unwrap();
        for levels in stmt
            .query_map([], |r| r.get::<_, Option<String>>(0))
            .unwrap()
        {
            let rank = levels
                .unwrap()
                .map(|l| {
                    l.split('\u{1f}')
                        .map(acpdb::cache::lock_level_rank)
                        .min()
                        .unwrap()
                })
                .unwrap_or(acpdb::cache::lock_level_rank("normal"));
            *expected.entry(rank).or_default() += 1;
        }
        let summary: std::collections::BTreeMap<usize, i64> = conn
            .prepare("SELECT rank, lock_level, files FROM file_lock_levels")
            .unwrap()
            .query_map([], |r| {
                let rank = r.get::<_, i64>(0)? as usize;
                assert_eq!(r.get::<_, String>(1)?, acpdb::cache::LOCK_LEVELS[rank]);
                Ok((rank, r.get(2)?))
            })
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(summary, expected);
    }
}

#[test]
fn overview_queries_read_no_big_table() {
    let conn = open(generated());
    // Read in index order, stopping after the limit: no sort of all files.
    let p = positional_plan(&conn, acpdb::query::context::KEY_FILES_SQL, [10]);
    assert_eq!(
        p,
        ["SCAN files USING COVERING INDEX files_imported_by_count"],
        "key files"
    );
    for sql in [
        "SELECT files, symbols, lines, domains FROM index_summary",
        "SELECT language FROM file_languages ORDER BY language",
        "SELECT lock_level, files FROM file_lock_levels WHERE files > 0 ORDER BY rank",
    ] {
        assert_indexed(sql, &positional_plan(&conn, sql, []));
    }
}

// ---------------------------------------------------------------- acp_expand

#[test]
fn expand_worked_examples() {
    let conn = open(cli());
    let cases = [
        ("Fix $SYM_PLACEORDER now", "summary", "Fix placeOrder (src/orders/checkout.ts:20-64) - Charges the customer and persists the order now"),
        ("Fix $SYM_PLACEORDER.ref", "summary", "Fix src/orders/checkout.ts:20-64"),
        ("$DOM_ORDERS", "summary", "orders (2 files) - Domain: orders (2 files)"),
        ("$DOM_ORDERS", "inline", "orders"),
        ("$DOM_ORDERS", "annotated", "$DOM_ORDERS \u{2192} orders (2 files) - Domain: orders (2 files)"),
        ("$LAYER_SERVICE", "summary", "service - Layer: service (1 files)"),
        ("$FILE___SRC_ORDERS_CHECKOUT_TS.signature", "summary", "src/orders/checkout.ts - Turns a cart into a paid order"),
        ("cost $5, $$SYM_PLACEORDER", "summary", "cost $5, $SYM_PLACEORDER"),
        ("$SYM_NOPE and $shell", "summary", "$SYM_NOPE and $shell"),
    ];
    for (text, mode, want) in cases {
        assert_eq!(expanded(&conn, text, mode), want, "{text} ({mode})");
    }
    let answer = expand(&conn, "$FILE___SRC_ORDERS_CHECKOUT_TS.signature", None);
    assert_eq!(
        answer.warnings,
        vec![
            "Modifier '.signature' does not apply to file variable $FILE___SRC_ORDERS_CHECKOUT_TS"
        ]
    );
    let answer = expand(&conn, "cost $5, $$SYM_PLACEORDER", None);
    assert!(answer.variables_found.is_empty() && answer.warnings.is_empty());
    let answer = expand(&conn, "$SYM_NOPE and $shell", None);
    assert_eq!(answer.variables_found, vec!["SYM_NOPE"]);
    assert_eq!(answer.variables_unresolved, vec!["SYM_NOPE"]);
    assert_eq!(answer.warnings, vec!["Undefined variable: $SYM_NOPE"]);
}

#[test]
fn expand_response_shape() {
    let conn = open(cli());
    let text = "Fix $SYM_PLACEORDER in $FILE___SRC_ORDERS_CHECKOUT_TS, not $SYM_NOPE; again $SYM_PLACEORDER.value";
    let answer = serde_json::to_string(&expand(&conn, text, None)).unwrap();
    let want = json!({
        "original": text,
        "expanded": "Fix placeOrder (src/orders/checkout.ts:20-64) - Charges the customer and persists the order in src/orders/checkout.ts - Turns a cart into a paid order, not $SYM_NOPE; again src/orders/checkout.ts:placeOrder",
        "variables_found": ["SYM_PLACEORDER", "FILE___SRC_ORDERS_CHECKOUT_TS", "SYM_NOPE"],
        "variables_resolved": ["SYM_PLACEORDER", "FILE___SRC_ORDERS_CHECKOUT_TS"],
        "variables_unresolved": ["SYM_NOPE"],
        "expansions": {
            "SYM_PLACEORDER": {"type": "symbol", "value": "src/orders/checkout.ts:placeOrder", "source": "placeOrder (src/orders/checkout.ts:20-64) - Charges the customer and persists the order"},
            "FILE___SRC_ORDERS_CHECKOUT_TS": {"type": "file", "value": "./src/orders/checkout.ts", "source": "src/orders/checkout.ts - Turns a cart into a paid order"}
        },
        "warnings": ["Undefined variable: $SYM_NOPE"]
    });
    assert_eq!(serde_json::from_str::<Value>(&answer).unwrap(), want);
    assert!(answer.starts_with(r#"{"original":"#));
    assert!(answer.contains(r#""expansions":{"SYM_PLACEORDER":{"type":"symbol","value""#));

    let plain = serde_json::to_value(expand(&conn, "nothing to see", None)).unwrap();
    assert_eq!(
        plain,
        json!({"original": "nothing to see", "expanded": "nothing to see", "variables_found": [],
               "variables_resolved": [], "variables_unresolved": [], "expansions": {}})
    );
}

#[test]
fn an_expansion_stops_at_its_size_limit_with_a_clear_error() {
    let conn = open(cli());
    let full = expanded(&conn, "$SYM_PLACEORDER", "full");
    // Just enough references to stay under the limit, then one more than enough.
    let fits = MAX_EXPANDED_BYTES / (full.len() + 1);
    let text = "$SYM_PLACEORDER ".repeat(fits);
    let answer = expanded(&conn, &text, "full");
    assert!(answer.len() <= MAX_EXPANDED_BYTES);
    let text = "$SYM_PLACEORDER ".repeat(fits + 2);
    let err = acp_expand(
        &conn,
        &ExpandParams {
            text: Some(text),
            mode: Some("full".into()),
        },
    );
    assert!(invalid(err.map(|_| ())).starts_with("The expansion grows past 4 MiB by offset"),);
}

#[test]
fn expand_modes_and_modifiers() {
    let conn = open(cli());
    let full = expanded(&conn, "$SYM_PLACEORDER", "full");
    assert!(
        full.starts_with("{\n  \"name\": \"placeOrder\",\n  \"qualified_name\""),
        "{full}"
    );
    assert_eq!(
        serde_json::from_str::<Value>(&full).unwrap()["signature"],
        "function placeOrder(cart: Cart): Promise<Order>"
    );
    assert_eq!(expanded(&conn, "$SYM_PLACEORDER.full", "summary"), full);
    let layer_full: Value =
        serde_json::from_str(&expanded(&conn, "$LAYER_SERVICE", "full")).unwrap();
    assert_eq!(
        layer_full,
        json!({"type": "layer", "value": "service", "description": "Layer: service (1 files)"})
    );
    let domain_full: Value = serde_json::from_str(&expanded(&conn, "$DOM_ORDERS", "full")).unwrap();
    assert_eq!(domain_full["files"][1], "./src/orders/tax.ts");

    let cases = [
        ("$SYM_PLACEORDER", "inline", "src/orders/checkout.ts:placeOrder"),
        ("$SYM_PLACEORDER", "annotated", "$SYM_PLACEORDER \u{2192} placeOrder (src/orders/checkout.ts:20-64) - Charges the customer and persists the order"),
        ("$SYM_PLACEORDER.signature", "inline", "function placeOrder(cart: Cart): Promise<Order>"),
        ("$SYM_PLACEORDER.type", "summary", "symbol"),
        ("$SYM_PLACEORDER.value", "annotated", "src/orders/checkout.ts:placeOrder"),
        ("$SYM_PLACEORDER.description", "full", "Charges the customer and persists the order"),
        ("$FILE___SRC_ORDERS_CHECKOUT_TS.ref", "summary", "src/orders/checkout.ts"),
        ("$FILE___SRC_ORDERS_CHECKOUT_TS.summary", "inline", "Turns a cart into a paid order"),
        ("$DOM_ORDERS.ref", "inline", "orders"),
        ("$SYM_PLACEORDER.Ref", "inline", "src/orders/checkout.ts:placeOrder.Ref"),
        ("$SYM_PLACEORDER. ref", "inline", "src/orders/checkout.ts:placeOrder. ref"),
        ("$SYM_PLACEORDER.bogus!", "inline", "src/orders/checkout.ts:placeOrder!"),
        ("($SYM_PLACEORDER.ref)$DOM_ORDERS.value.", "summary", "(src/orders/checkout.ts:20-64)orders."),
        ("$SYM_PLACEORDERS", "summary", "$SYM_PLACEORDERS"),
        ("$$$DOM_ORDERS", "inline", "$orders"),
        ("é $DOM_ORDERS ü", "inline", "é orders ü"),
        ("trailing $", "summary", "trailing $"),
    ];
    for (text, mode, want) in cases {
        assert_eq!(expanded(&conn, text, mode), want, "{text} ({mode})");
    }
    assert_eq!(
        expand(&conn, "$SYM_PLACEORDER.bogus", None).warnings,
        vec!["Unknown modifier '.bogus' on $SYM_PLACEORDER"]
    );
    assert_eq!(
        expand(&conn, "$DOM_ORDERS.ref", None).warnings,
        vec!["Modifier '.ref' does not apply to domain variable $DOM_ORDERS"]
    );
    let answer = expand(&conn, "$DOM_ORDERS.ref $DOM_ORDERS", Some("inline"));
    assert_eq!(answer.variables_found, vec!["DOM_ORDERS"]);
    assert_eq!(answer.expansions.0.len(), 1);

    let err = acp_expand(
        &conn,
        &ExpandParams {
            text: Some("x".into()),
            mode: Some("verbose".into()),
        },
    );
    assert_eq!(
        invalid(err),
        "Invalid mode: verbose. Use: summary, full, inline, annotated"
    );
    assert_eq!(
        invalid(acp_expand(&conn, &ExpandParams::default())),
        "Missing required parameter: text"
    );
    let params: ExpandParams = serde_json::from_value(json!({"text": "$DOM_ORDERS"})).unwrap();
    assert_eq!(
        acp_expand(&conn, &params).unwrap().expanded,
        "orders (2 files) - Domain: orders (2 files)"
    );
}

/// A text naming many variables, most unknown and some twice, lists each once in the order first
/// met, known or not (a text of 1 MiB names about 175,000: whether a name was met is a set lookup).
#[test]
fn expand_lists_each_of_many_names_once_in_order() {
    let conn = open(cli());
    let unknown: Vec<String> = (0..20_000).map(|i| format!("UNKNOWN_{i}")).collect();
    let mut text = String::from("$DOM_ORDERS ");
    for name in unknown.iter().chain(&unknown[..100]) {
        text.push_str(&format!("${name} "));
    }
    text.push_str("$DOM_ORDERS");
    let answer = expand(&conn, &text, None);
    let mut found = vec!["DOM_ORDERS".to_string()];
    found.extend(unknown.iter().cloned());
    assert_eq!(answer.variables_found, found);
    assert_eq!(answer.variables_resolved, vec!["DOM_ORDERS"]);
    assert_eq!(answer.variables_unresolved, unknown);
    assert_eq!(answer.expansions.0.len(), 1);
}

#[test]
fn expand_nested_values_and_cycles() {
    let conn = open(nested());
    let answer = expand(&conn, "$CTX_A", Some("inline"));
    assert_eq!(
        answer.expanded,
        "see then [CIRCULAR: $CTX_A -> $CTX_B -> $CTX_A]"
    );
    assert_eq!(
        answer.warnings,
        vec!["Circular reference: $CTX_A -> $CTX_B -> $CTX_A"]
    );
    assert_eq!(answer.variables_found, vec!["CTX_A"]);
    assert_eq!(
        expanded(&conn, "$CTX_C", "inline"),
        "uses computeTax and $NOPE_X, $5"
    );
    assert_eq!(
        expanded(&conn, "$CTX_C", "summary"),
        "uses $SYM_TAX and $NOPE_X, $$5"
    );
    assert_eq!(
        expanded(&conn, "$SYM_TAX", "summary"),
        "computeTax (src/orders/tax.ts:5-30) - Applies the regional VAT table"
    );
    assert_eq!(
        expanded(&conn, "$SYM_GONE", "summary"),
        "src/gone.ts:gone - Removed long ago"
    );
    assert_eq!(
        expanded(&conn, "$SYM_GONE.ref", "summary"),
        "src/gone.ts:gone - Removed long ago"
    );
    assert_eq!(
        expanded(&conn, "$SYM_GONE.description", "inline"),
        "Removed long ago"
    );
    assert_eq!(
        expanded(&conn, "$DOM_NONE", "annotated"),
        "$DOM_NONE \u{2192} missing"
    );
}

#[test]
fn expand_without_vars_file() {
    let conn = open(no_vars());
    let answer = expand(&conn, "Fix $SYM_PLACEORDER and $x", None);
    assert_eq!(answer.expanded, "Fix $SYM_PLACEORDER and $x");
    assert_eq!(answer.variables_unresolved, vec!["SYM_PLACEORDER"]);
    assert_eq!(answer.warnings, vec!["No vars file loaded"]);
    let err = acp_expand_variable(
        &conn,
        &ExpandVariableParams {
            name: "SYM_PLACEORDER".into(),
        },
    );
    assert_eq!(invalid(err), "No vars file loaded");
}

#[test]
fn expand_variable_returns_the_raw_entry() {
    let conn = open(cli());
    for name in ["SYM_PLACEORDER", "$SYM_PLACEORDER"] {
        let entry =
            acp_expand_variable(&conn, &ExpandVariableParams { name: name.into() }).unwrap();
        assert_eq!(
            serde_json::to_string(&entry).unwrap(),
            r#"{"type":"symbol","value":"src/orders/checkout.ts:placeOrder","description":"Charges the customer and persists the order","source":"src/orders/checkout.ts","lines":[20,64]}"#
        );
    }
    let err = acp_expand_variable(
        &conn,
        &ExpandVariableParams {
            name: "$$SYM_X".into(),
        },
    );
    assert_eq!(invalid(err), "Variable not found: $$SYM_X");
}

// ---------------------------------------------------------------- acp_constraints

fn constraints(conn: &Connection, file: Option<&str>) -> QueryResult<Value> {
    acp_constraints(
        conn,
        &ConstraintsParams {
            file: file.map(str::to_string),
        },
    )
    .map(|r| serde_json::to_value(r).unwrap())
}

#[test]
fn constraints_per_file() {
    let conn = open(cli());
    for file in [
        "./src/orders/checkout.ts",
        "src/orders/checkout.ts",
        "src\\orders\\checkout.ts",
        "src/orders/checkout.ts/",
    ] {
        assert_eq!(
            constraints(&conn, Some(file)).unwrap(),
            json!({
                "file": "src/orders/checkout.ts", "exists": true, "lock_level": "restricted",
                "lock_reason": null, "directive": "Explain proposed changes and wait for explicit approval",
                "style": null, "behavior": null, "quality": [],
                "can_modify": {"allowed": true, "approval_needed": true, "requirements": ["Explain changes before making them"]},
                "lock_level_meaning": "Explain proposed changes and obtain explicit approval before any change."
            }),
            "{file}"
        );
    }
    let frozen = constraints(&conn, Some("src/orders/tax.ts")).unwrap();
    assert_eq!(
        frozen["can_modify"],
        json!({"allowed": false, "approval_needed": false, "requirements": ["Do not modify this file"]})
    );
    let unknown = constraints(&conn, Some("src/new/thing.ts")).unwrap();
    assert_eq!(unknown["exists"], false);
    assert_eq!(unknown["lock_level"], "normal");
    assert_eq!(unknown["can_modify"]["requirements"], json!([]));
    for outside in ["../secrets.txt", "src/../../x", "/etc/passwd"] {
        assert_eq!(
            invalid(constraints(&conn, Some(outside))),
            format!("Path outside project root: {outside}")
        );
    }
    assert_eq!(
        invalid(constraints(&conn, None)),
        "Missing required parameter: file"
    );
    for alias in ["path", "filepath", "file"] {
        let params: ConstraintsParams =
            serde_json::from_value(json!({alias: "src/orders/tax.ts"})).unwrap();
        assert_eq!(
            acp_constraints(&conn, &params).unwrap().lock_level,
            "frozen"
        );
    }
    let text = serde_json::to_string(
        &acp_constraints(
            &conn,
            &ConstraintsParams {
                file: Some("src/orders/tax.ts".into()),
            },
        )
        .unwrap(),
    )
    .unwrap();
    assert!(text.starts_with(r#"{"file":"src/orders/tax.ts","exists":true,"lock_level":"frozen","lock_reason":null,"directive""#));
}

#[test]
fn an_absolute_path_inside_the_project_is_its_file_for_every_path_tool() {
    let project = cli();
    let conn = open(project);
    let absolute = project.root().join("src/orders/tax.ts");
    let absolute = absolute.to_str().unwrap();
    assert_eq!(
        constraints(&conn, Some(absolute)).unwrap()["lock_level"],
        "frozen"
    );
    let call = |tool: &str, args: Value| -> Value {
        serde_json::from_str(&acpdb::tools::call(&conn, tool, &args).unwrap()).unwrap()
    };
    let relative = call(
        "acp_check_constraints",
        json!({"path": "src/orders/tax.ts"}),
    );
    assert!(relative.to_string().contains("frozen"), "{relative}");
    assert_eq!(
        call("acp_check_constraints", json!({"path": absolute})),
        relative,
        "an absolute path must not read as a file without constraints"
    );
    assert_eq!(
        call("acp_get_file_context", json!({"path": absolute})),
        call("acp_get_file_context", json!({"path": "src/orders/tax.ts"}))
    );
}

#[test]
fn constraints_spec_shape_and_symbol_level() {
    let mut cache: Value = serde_json::from_str(&read("samples/cache-cli-shaped.json")).unwrap();
    cache["constraints"]["by_file"]["./src/orders/checkout.ts"] = json!({
        "lock_level": "approval-required", "lock_reason": "Payments", "directive": "Ask first",
        "style": "google-typescript", "behavior": "conservative", "quality": ["security-review"]
    });
    cache["constraints"]["by_file"]["src/orders/checkout.ts"] =
        json!({"mutation": {"level": "tests-required"}});
    cache["symbols"]["placeOrder"]["constraints"] =
        json!({"level": "frozen", "directive": "Do not touch the charge flow"});
    let project = project(&cache.to_string(), None);
    let conn = open(&project);
    let answer = constraints(&conn, Some("src/orders/checkout.ts")).unwrap();
    assert_eq!(answer["lock_level"], "approval-required");
    assert_eq!(answer["lock_reason"], "Payments");
    assert_eq!(answer["style"], "google-typescript");
    assert_eq!(answer["behavior"], "conservative");
    assert_eq!(answer["quality"], json!(["security-review"]));
    assert_eq!(
        answer["can_modify"],
        json!({"allowed": true, "approval_needed": true, "requirements": ["Get approval before significant changes"]})
    );
    assert_eq!(
        answer["symbols"],
        json!([{"symbol": "src/orders/checkout.ts:placeOrder", "lines": [20, 64], "lock_level": "frozen", "directive": "Do not touch the charge flow"}])
    );
    assert!(constraints(&conn, Some("src/orders/tax.ts"))
        .unwrap()
        .get("symbols")
        .is_none());
}

// ---------------------------------------------------------------- resources

fn resource(conn: &Connection, uri: &str) -> Value {
    let content = read_resource(conn, uri).unwrap_or_else(|e| panic!("{uri}: {e}"));
    assert_eq!(content.uri, uri);
    assert_eq!(content.mime_type, "application/json");
    serde_json::from_str(&content.text).unwrap()
}

#[test]
fn resource_lists() {
    let conn = open(cli());
    let uris: Vec<String> = list_resources(&conn).into_iter().map(|r| r.uri).collect();
    assert_eq!(uris, ["acp://cache", "acp://vars", "acp://constraints"]);
    assert!(list_resources(&conn)[0].description.contains("(3 files)"));
    let templates: Vec<String> = resource_templates()
        .into_iter()
        .map(|t| t.uri_template)
        .collect();
    assert_eq!(
        templates,
        [
            "acp://file/{path}",
            "acp://symbol/{qualified_name}",
            "acp://domain/{name}"
        ]
    );
}

#[test]
fn static_resources() {
    let conn = open(cli());
    let cache = resource(&conn, "acp://cache");
    assert_eq!(cache["version"], "0.7.0");
    assert_eq!(cache["generated_at"], "2026-01-05T09:30:12.481516Z");
    assert_eq!(cache["project"], json!({"name": "project", "root": "."}));
    assert_eq!(
        cache["counts"],
        json!({"files": 3, "symbols": 4, "call_edges": 3, "domains": 1, "constraints": 3, "hacks": 1, "variables": 4})
    );
    assert_eq!(cache["languages"], json!(["typescript"]));
    assert_eq!(cache["domains"], json!(["orders"]));
    assert!(cache.get("files").is_none() && cache.get("symbols").is_none());
    let text = read_resource(&conn, "acp://cache").unwrap().text;
    assert!(text.starts_with("{\n  \"project\""), "{text}");

    let vars = resource(&conn, "acp://vars");
    assert_eq!(vars["version"], "0.7.0");
    assert_eq!(vars["variables"]["DOM_ORDERS"]["value"], "orders");
    assert_eq!(vars["variables"].as_object().unwrap().len(), 4);
    let vars_none = resource(&open(no_vars()), "acp://vars");
    assert_eq!(vars_none, json!({"version": "1.0.0", "variables": {}}));

    let constraints = resource(&conn, "acp://constraints");
    assert_eq!(
        constraints["by_lock_level"],
        json!({"frozen": ["src/orders/tax.ts"], "restricted": ["src/orders/checkout.ts"], "normal": ["src/legacy/export.ts"]})
    );
    let text = read_resource(&conn, "acp://constraints").unwrap().text;
    assert!(
        text.find("\"frozen\"").unwrap() < text.find("\"restricted\"").unwrap(),
        "levels in severity order"
    );
    assert_eq!(
        constraints["by_file"]["src/orders/tax.ts"]["lock_level"],
        "frozen"
    );
    assert_eq!(constraints["hacks"][0]["ticket"], "OPS77");
}

#[test]
fn template_resources() {
    let conn = open(cli());
    for uri in [
        "acp://file/src/orders/tax.ts",
        "acp://file/src%2Forders%2Ftax.ts",
        "acp://file/./src/orders/tax.ts",
    ] {
        assert_eq!(resource(&conn, uri)["path"], "./src/orders/tax.ts", "{uri}");
    }
    for uri in [
        "acp://symbol/src/orders/tax.ts:computeTax",
        "acp://symbol/src%2Forders%2Ftax.ts%3AcomputeTax",
        "acp://symbol/computeTax",
    ] {
        let symbol = resource(&conn, uri);
        assert_eq!(symbol["qualified_name"], "src/orders/tax.ts:computeTax");
        assert!(symbol.get("callers").is_none());
    }
    let text = read_resource(&conn, "acp://domain/orders").unwrap().text;
    assert_eq!(
        serde_json::from_str::<Value>(&text).unwrap(),
        json!({"name": "orders", "files": ["./src/orders/checkout.ts", "./src/orders/tax.ts"], "symbols": []})
    );
    for uri in [
        "acp://nope",
        "acp://file/",
        "acp://file/src/none.ts",
        "acp://symbol/none",
        "acp://domain/Orders",
        "acp://other/x",
        "http://cache",
        "acp://file/%ff",
    ] {
        match read_resource(&conn, uri) {
            Err(ResourceError::NotFound { uri: got }) => assert_eq!(got, uri),
            other => panic!("{uri}: {other:?}"),
        }
    }
    assert_eq!(
        read_resource(&conn, "acp://nope").unwrap_err().to_string(),
        "Resource not found: acp://nope"
    );
}

// ---------------------------------------------------------------- schemas

#[test]
fn parameter_schemas() {
    let query = serde_json::to_value(schemars::schema_for!(QueryParams)).unwrap();
    assert_eq!(query["required"], json!(["type"]));
    assert_eq!(
        query["properties"]["type"]["enum"],
        json!(["symbol", "file", "domain", "callers", "callees", "search", "stats"])
    );
    assert_eq!(query["properties"]["limit"]["maximum"], 100);
    assert_eq!(query["properties"]["limit"]["default"], 20);
    assert_eq!(query["properties"]["limit"]["type"], "integer");
    for field in ["name", "pattern", "depth", "cursor"] {
        assert!(
            query["properties"][field]["description"].is_string(),
            "{field}"
        );
    }
    let expand = serde_json::to_value(schemars::schema_for!(ExpandParams)).unwrap();
    assert_eq!(expand["required"], json!(["text"]));
    assert_eq!(expand["properties"]["mode"]["type"], "string");
    assert_eq!(expand["properties"]["mode"]["default"], "summary");
    let constraints = serde_json::to_value(schemars::schema_for!(ConstraintsParams)).unwrap();
    assert_eq!(constraints["required"], json!(["file"]));
    assert_eq!(constraints["properties"]["file"]["type"], "string");
    let variable = serde_json::to_value(schemars::schema_for!(ExpandVariableParams)).unwrap();
    assert_eq!(variable["required"], json!(["name"]));
}

#[test]
fn responses_serialize_as_the_query_answer() {
    let conn = open(cli());
    let answer = acp_query(
        &conn,
        &serde_json::from_value(json!({"type": "callers", "name": "computeTax"})).unwrap(),
    )
    .unwrap();
    assert!(matches!(answer, QueryResponse::Relations(_)));
    assert_eq!(
        serde_json::to_string(&answer).unwrap(),
        r#"{"type":"callers","name":"src/orders/tax.ts:computeTax","depth":1,"result":[{"name":"src/orders/checkout.ts:placeOrder","depth":1,"resolved":true,"file":"src/orders/checkout.ts"}],"total":1,"truncated":false}"#
    );
}
