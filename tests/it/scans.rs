//! No statement scans a table: SQLite's own counters (`sqlite3_stmt_status`, read by
//! `acpdb::statement_audit`) for every statement run by full and delta imports and by every
//! tool on hits, misses, typos, ambiguous names, qualified and `./` spellings, globs, deep
//! walks, impact and resources, on a generated cache where a sixth of the call-graph names
//! resolve to nothing.
//!
//! A run fails the test when it stepped through more than [`SCAN_ROWS`] rows of full-table
//! scans, or, for a lookup that finds nothing, executed more than [`MISS_VM_STEPS`]
//! instructions (an index scanned whole is not a full-table scan, but costs as much), unless
//! its statement is one of `statement_audit::DECLARED_SCANS`.

use std::path::Path;
use std::sync::Mutex;

use acpdb::bench::workload::{default_mix, MixOptions};
use acpdb::statement_audit::{self, Run};
use serde_json::{json, Value};

use crate::common::{acpdb, import_in_process, project_at, stderr};

/// Rows of full-table scans a statement run may step through: the small tables (metadata,
/// lock levels, summaries) are read whole, the tables that grow with the project never.
const SCAN_ROWS: u64 = 300;

/// Instructions a statement run may execute while looking up a name that does not exist:
/// a few index probes, never a pass over an index (the audited cache has 6,000 symbols).
const MISS_VM_STEPS: u64 = 2_000;

/// Passes over the largest table a statement declared as a scan may make.
const DECLARED_SCAN_PASSES: u64 = 4;

/// Files of the audited cache (10 symbols each).
const FILES: u32 = 600;

/// One audit at a time: the recording is process-wide.
static AUDIT: Mutex<()> = Mutex::new(());

fn generate(root: &Path, revision: u32) {
    let out = acpdb()
        .args([
            "gen-fixture",
            "--files",
            &FILES.to_string(),
            "--symbols-per-file",
            "10",
            "--revision",
            &revision.to_string(),
            "--changed-percent",
            "1",
            "--moved-percent",
            "20",
            "--out",
        ])
        .arg(root)
        .output()
        .expect("run acpdb gen-fixture");
    assert!(out.status.success(), "{}", stderr(&out));
}

/// Writes an empty source file for every file of the generated cache, so that imports record
/// the sources' baseline and answers check it, as in a real checkout.
fn write_sources(root: &Path) {
    let cache: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join(".acp/acp.cache.json")).unwrap())
            .unwrap();
    for key in cache["files"].as_object().expect("files").keys() {
        let path = root.join(key.trim_start_matches("./"));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, b"").unwrap();
    }
}

/// The statement runs of `work` on databases under `root`.
fn audit<T>(root: &Path, work: impl FnOnce() -> T) -> (T, Vec<Run>) {
    let root = root.canonicalize().expect("root");
    statement_audit::start();
    statement_audit::take();
    let value = work();
    let runs = statement_audit::take()
        .into_iter()
        .filter(|run| Path::new(&run.database).starts_with(&root))
        .collect();
    (value, runs)
}

/// The runs that read more than their bound, one line each: more than [`SCAN_ROWS`] rows of
/// full-table scans (a declared scan: more than [`DECLARED_SCAN_PASSES`] passes over `rows`
/// rows), or more than `vm_bound` instructions.
fn offenders(what: &str, runs: &[Run], vm_bound: Option<u64>, rows: u64) -> Vec<String> {
    let mut found: Vec<String> = runs
        .iter()
        .filter(|run| match run.is_declared_scan() {
            Some(_) => run.fullscan_steps > DECLARED_SCAN_PASSES * rows,
            None => {
                run.fullscan_steps > SCAN_ROWS || vm_bound.is_some_and(|bound| run.vm_steps > bound)
            }
        })
        .map(|run| {
            let sql: String = run.sql.split_whitespace().collect::<Vec<_>>().join(" ");
            format!(
                "{what}: {} full-scan steps, {} instructions: {sql}",
                run.fullscan_steps, run.vm_steps
            )
        })
        .collect();
    found.sort();
    found.dedup();
    found
}

/// The calls of names that exist in no form: misses, typos, unknown files and variables.
fn missing_calls(conn: &rusqlite::Connection) -> Vec<(&'static str, Value)> {
    let (name, qualified, path): (String, String, String) = conn
        .query_row(
            "SELECT name, coalesce(qualified_name, key), file_path FROM symbols
             WHERE length(name) >= 8 ORDER BY id LIMIT 1 OFFSET 100",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .expect("a symbol");
    let mut typo: Vec<char> = name.chars().collect();
    typo.swap(2, 3);
    let typo: String = typo.into_iter().collect();
    let mut calls = Vec::new();
    for unknown in [
        "zzqx".to_string(),
        "__acp_bench_missing_symbol_0".to_string(),
        typo.clone(),
        format!("{name}Extra"),
        format!("./{path}:{typo}"),
        format!("{path}:{typo}"),
        format!("no/such/dir/file.ts:{name}"),
        qualified.to_uppercase(),
    ] {
        calls.push(("acp_get_symbol_context", json!({ "name": unknown })));
        calls.push(("acp_query", json!({ "type": "symbol", "name": unknown })));
        calls.push((
            "acp_query",
            json!({ "type": "callers", "name": unknown, "depth": 3 }),
        ));
        calls.push((
            "acp_context",
            json!({ "operation": "debug", "target": unknown }),
        ));
        calls.push((
            "acp_context",
            json!({ "operation": "modify", "target": unknown }),
        ));
    }
    for file in [
        "no/such/dir/missing_1.rs".to_string(),
        format!("./{path}x"),
        format!("{}/", path.trim_end_matches(|c| c != '/')),
    ] {
        calls.push(("acp_get_file_context", json!({ "path": file })));
        calls.push(("acp_query", json!({ "type": "file", "name": file })));
        calls.push(("acp_check_constraints", json!({ "path": file })));
        calls.push(("acp_constraints", json!({ "file": file })));
    }
    calls.push(("acp_get_domain_files", json!({ "name": "no-such-domain" })));
    calls.push((
        "acp_expand_variable",
        json!({ "name": "SYM_NO_SUCH_THING" }),
    ));
    calls.push(("acp_expand", json!({ "text": "see $SYM_NO_SUCH_THING" })));
    calls
}

/// The calls of names that exist: ambiguous simple names, other spellings, globs.
fn present_calls(conn: &rusqlite::Connection) -> Vec<(&'static str, Value)> {
    let (qualified, path, name): (String, String, String) = conn
        .query_row(
            "SELECT coalesce(qualified_name, key), file_path, name FROM symbols
             ORDER BY id LIMIT 1 OFFSET 200",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .expect("a symbol");
    let ambiguous: String = conn
        .query_row(
            "SELECT name FROM symbols GROUP BY name HAVING count(*) > 1 LIMIT 1",
            [],
            |r| r.get(0),
        )
        .expect("an ambiguous name");
    let mut calls = Vec::new();
    for known in [
        qualified.clone(),
        format!("./{qualified}"),
        ambiguous.clone(),
        name.clone(),
    ] {
        calls.push(("acp_get_symbol_context", json!({ "name": known })));
        calls.push(("acp_query", json!({ "type": "symbol", "name": known })));
        calls.push((
            "acp_query",
            json!({ "type": "callees", "name": known, "depth": 5 }),
        ));
        calls.push((
            "acp_context",
            json!({ "operation": "debug", "target": known }),
        ));
    }
    calls.push((
        "acp_get_file_context",
        json!({ "path": format!("./{path}") }),
    ));
    calls.push((
        "acp_query",
        json!({ "type": "search", "pattern": format!("{}*", &name[..3]) }),
    ));
    calls.push((
        "acp_query",
        json!({ "type": "search", "pattern": ambiguous }),
    ));
    calls
}

/// A typo of a simple name that many symbols share (`handle`, in 1,000 files) is suggested
/// through a read of a few of them, not of all.
#[test]
fn a_typo_of_a_name_many_symbols_share_reads_a_few_of_them() {
    let _one = AUDIT.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    generate(root, 0);
    let path = root.join(".acp/acp.cache.json");
    let mut cache: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let symbols = cache["symbols"].as_object_mut().expect("symbols");
    for i in 0..1000 {
        let file = format!("src/handlers/h{i:04}.ts");
        let key = format!("{file}:handle");
        symbols.insert(
            key.clone(),
            json!({"name": "handle", "qualified_name": key, "type": "function", "file": file, "lines": [1, 9]}),
        );
    }
    std::fs::write(&path, cache.to_string()).unwrap();
    import_in_process(root, true);
    let db = project_at(root).db;
    let rows = largest_table(&db);
    let (suggestions, runs) = audit(root, || {
        let conn = acpdb::db::open_read_only(&db).unwrap();
        acpdb::tools::call(&conn, "acp_get_symbol_context", &json!({"name": "handel"}))
            .expect_err("a typo")
            .to_string()
    });
    assert_eq!(suggestions.matches(":handle").count(), 5, "{suggestions}");
    let found = offenders("a typo of `handle`", &runs, Some(MISS_VM_STEPS), rows);
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// A miss whose every trigram many names hold, but never together, reads no name: the lists of
/// its trigrams are intersected first.
#[test]
fn a_miss_of_common_trigrams_never_together_reads_no_name() {
    let _one = AUDIT.lock().unwrap_or_else(|e| e.into_inner());
    // `efg` and `fgh` each in 100 names, `efgh` in five; the unknown name's middle third is
    // `efgh`, and its other pieces hold trigrams no name holds (`hww`, `www`).
    let names = (0..100)
        .flat_map(|i| [format!("efgTask{i}"), format!("Yfgh{i}")])
        .chain((0..5).map(|i| format!("xefghx{i}")));
    let dir = one_file_project(names, json!({"forward": {}, "reverse": {}}));
    let root = dir.path();
    let db = project_at(root).db;
    let ((miss, within), runs) = audit(root, || {
        let conn = acpdb::db::open_read_only(&db).unwrap();
        let miss = acpdb::tools::call(
            &conn,
            "acp_get_symbol_context",
            &json!({"name": "QQQQefghWWWW"}),
        )
        .expect_err("no such symbol")
        .to_string();
        let within = acpdb::query::similar::containing(
            &conn,
            acpdb::query::similar::SYMBOL_NAME_TRIGRAMS,
            "efgh",
            acpdb::query::similar::PIECE_CAP,
            &mut acpdb::query::similar::TrigramCounts::default(),
        )
        .unwrap();
        (miss, within)
    });
    assert!(miss.contains("not found"), "{miss}");
    let mut within = within;
    within.sort();
    let expected: Vec<String> = (0..5).map(|i| format!("xefghx{i}")).collect();
    assert_eq!(within, expected);
    // The names read: those of the five rows holding both trigrams, for `containing`; none
    // for the miss.
    let names_read: Vec<&Run> = runs
        .iter()
        .filter(|run| run.sql.contains("JOIN symbols"))
        .collect();
    let instructions: u64 = names_read.iter().map(|run| run.vm_steps).sum();
    assert!(
        instructions < 300,
        "{instructions} instructions reading names: {:?}",
        names_read
            .iter()
            .map(|r| (&r.sql, r.vm_steps))
            .collect::<Vec<_>>()
    );
}

/// A trace to a symbol with thousands of callers reaches it from the other side: each level
/// extends the side whose next one reads fewer edges (the start's two callees, not the end's
/// 3,000 callers), so no statement reads the callers.
#[test]
fn a_trace_to_a_hub_reaches_it_from_the_side_with_fewer_edges() {
    let _one = AUDIT.lock().unwrap_or_else(|e| e.into_inner());
    let callers: Vec<String> = (0..3000).map(|i| format!("caller{i}")).collect();
    let graph = json!({
        "forward": {
            "src/a.ts:from": ["src/a.ts:left", "src/a.ts:right"],
            "src/a.ts:left": ["src/a.ts:middle"],
            "src/a.ts:right": ["src/a.ts:middle"],
            "src/a.ts:middle": ["src/a.ts:hub"]
        },
        "reverse": {"src/a.ts:hub": callers}
    });
    let names = ["from", "left", "right", "middle", "hub"].map(String::from);
    let dir = one_file_project(names, graph);
    let root = dir.path();
    let db = project_at(root).db;
    let (answer, runs) = audit(root, || {
        let conn = acpdb::db::open_read_only(&db).unwrap();
        acpdb::tools::call(&conn, "acp_trace", &json!({"from": "from", "to": "hub"})).unwrap()
    });
    let answer: Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(
        (&answer["length"], &answer["total"]),
        (&json!(3), &json!(2)),
        "{answer}"
    );
    let found = offenders("a trace to a hub", &runs, Some(MISS_VM_STEPS), 3000);
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn a_suffix_glob_reads_the_names_ending_with_it_not_all_holding_it() {
    let _one = AUDIT.lock().unwrap_or_else(|e| e.into_inner());
    let ending = ["init", "reinit", "preInit"].map(String::from);
    let holding = (0..3000).map(|i| format!("init{i}Step"));
    let dir = one_file_project(ending.into_iter().chain(holding), json!({}));
    let root = dir.path();
    let db = project_at(root).db;
    let (answer, runs) = audit(root, || {
        let conn = acpdb::db::open_read_only(&db).unwrap();
        let arguments = json!({"type": "search", "pattern": "*init"});
        acpdb::tools::call(&conn, "acp_query", &arguments).unwrap()
    });
    let answer: Value = serde_json::from_str(&answer).unwrap();
    let mut found: Vec<&str> = answer["result"]["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    found.sort();
    assert_eq!(found, ["init", "preInit", "reinit"], "{answer}");
    let found = offenders("a suffix glob", &runs, Some(MISS_VM_STEPS), 3003);
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// A project whose cache has one file, `src/a.ts`, holding a function for each of `names`
/// (keys and qualified names `src/a.ts:name`), and `graph`; imported.
fn one_file_project(names: impl IntoIterator<Item = String>, graph: Value) -> tempfile::TempDir {
    let symbols: serde_json::Map<String, Value> = names
        .into_iter()
        .map(|name| {
            let key = format!("src/a.ts:{name}");
            let symbol = json!({"name": name, "qualified_name": key, "type": "function",
                                "file": "src/a.ts", "lines": [1, 2]});
            (key, symbol)
        })
        .collect();
    let cache = json!({
        "version": "0.7.0",
        "generated_at": "2026-01-12T08:41:27Z",
        "project": {"name": "one-file", "root": "."},
        "stats": {"files": 1, "symbols": symbols.len(), "lines": 10},
        "files": {"src/a.ts": {"path": "src/a.ts", "lines": 10, "language": "typescript",
                               "exports": [], "imports": []}},
        "symbols": symbols,
        "graph": graph,
    });
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".acp")).unwrap();
    std::fs::write(dir.path().join(".acp/acp.cache.json"), cache.to_string()).unwrap();
    import_in_process(dir.path(), true);
    dir
}

/// Runs each call; an error answer is an answer too (misses are errors).
fn run_calls(conn: &rusqlite::Connection, calls: &[(impl AsRef<str>, Value)]) {
    for (tool, args) in calls {
        let _ = acpdb::tools::call(conn, tool.as_ref(), args);
    }
}

#[test]
fn no_import_step_and_no_lookup_scans_a_table() {
    let _one = AUDIT.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    generate(root, 0);
    write_sources(root);
    let mut found = Vec::new();
    let mut phases = 0;
    let mut check = |what: &str, runs: Vec<Run>, vm_bound: Option<u64>, rows: u64| {
        assert!(!runs.is_empty(), "{what}: no statement was recorded");
        phases += 1;
        found.extend(offenders(what, &runs, vm_bound, rows));
    };

    let (_, runs) = audit(root, || import_in_process(root, true));
    let db = project_at(root).db;
    let rows = largest_table(&db);
    check("full import", runs, None, rows);

    // The calls are chosen before the audit, which sees only the tools' own statements.
    let conn = acpdb::db::open_read_only(&db).unwrap();
    let misses = missing_calls(&conn);
    let mix = default_mix(&conn, MixOptions::default()).unwrap();
    let present: Vec<(String, Value)> = present_calls(&conn)
        .into_iter()
        .map(|(tool, args)| (tool.to_string(), args))
        .chain(mix.calls.into_iter().map(|c| (c.tool, c.arguments)))
        .collect();
    let mut resources: Vec<String> = acpdb::query::resources::list_resources(&conn)
        .into_iter()
        .map(|r| r.uri)
        .collect();
    drop(conn);
    resources.extend(
        [
            "acp://symbol/no/such.ts:nothing",
            "acp://file/no/such.ts",
            "acp://domain/none",
        ]
        .map(String::from),
    );

    let (_, runs) = audit(root, || {
        let conn = acpdb::db::open_read_only(&db).unwrap();
        run_calls(&conn, &misses);
    });
    check(
        "names that exist in no form",
        runs,
        Some(MISS_VM_STEPS),
        rows,
    );

    let (_, runs) = audit(root, || {
        let conn = acpdb::db::open_read_only(&db).unwrap();
        run_calls(&conn, &present);
        for uri in &resources {
            let _ = acpdb::query::resources::read_resource(&conn, uri);
        }
    });
    check("every tool on names that exist", runs, None, rows);

    for revision in [1, 2] {
        generate(root, revision);
        let (summary, runs) = audit(root, || import_in_process(root, false));
        assert!(
            summary.delta.is_some(),
            "revision {revision} was imported as a delta: {}",
            summary.line()
        );
        check(&format!("delta to revision {revision}"), runs, None, rows);
    }
    assert_eq!(phases, 5);
    assert!(
        found.is_empty(),
        "{} statements read more rows than they may:\n{}",
        found.len(),
        found.join("\n")
    );
}

/// Rows of the largest table of the index at `db`.
fn largest_table(db: &Path) -> u64 {
    let conn = rusqlite::Connection::open(db).unwrap();
    ["symbols", "graph_nodes", "call_edges", "files"]
        .iter()
        .map(|table| {
            conn.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| {
                r.get::<_, i64>(0)
            })
            .unwrap()
        })
        .map(|rows| u64::try_from(rows).unwrap())
        .max()
        .unwrap()
}
