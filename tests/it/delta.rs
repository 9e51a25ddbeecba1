//! Delta imports: after any sequence of edited caches, a database brought up to date by delta
//! imports answers exactly as one rebuilt from the latest cache.

use std::fs;
use std::path::Path;

use rusqlite::Connection;
use serde_json::{json, Map, Value};

use crate::common::{acpdb, fixture, import_in_process, stderr, without_sweep_times, TempProject};

/// A small deterministic generator (xorshift64*), so that a failing script can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn pick<'a>(&mut self, map: &'a Map<String, Value>) -> Option<&'a String> {
        let n = map.len();
        (n > 0).then(|| map.keys().nth(self.below(n)).expect("in range"))
    }
}

fn write_json(path: &Path, value: &Value) {
    fs::write(path, serde_json::to_vec_pretty(value).unwrap()).unwrap();
}

fn object<'a>(doc: &'a mut Value, path: &[&str]) -> &'a mut Map<String, Value> {
    let mut at = doc;
    for key in path {
        at = at
            .as_object_mut()
            .expect("object")
            .entry(*key)
            .or_insert_with(|| json!({}));
    }
    at.as_object_mut().expect("object")
}

/// Applies `edits` random edits to a cache and its vars, covering every kind of entry.
fn edit(rng: &mut Rng, cache: &mut Value, vars: &mut Value, step: usize, edits: usize) {
    for i in 0..edits {
        let tag = format!("s{step}e{i}");
        let files: Vec<String> = object(cache, &["files"]).keys().cloned().collect();
        let some_file = files[rng.below(files.len())].clone();
        match rng.below(15) {
            // Change a symbol's signature and summary.
            0 => {
                let symbols = object(cache, &["symbols"]);
                if let Some(key) = rng.pick(symbols).cloned() {
                    let symbol = symbols[&key].as_object_mut().unwrap();
                    symbol.insert("summary".into(), json!(format!("changed in {tag}")));
                    symbol.insert("signature".into(), json!(format!("fn {tag}()")));
                }
            }
            // Remove a symbol (its name stays in the call graph, dangling), sometimes with every
            // other symbol of its file.
            1 => {
                let every = rng.below(3) == 0;
                let symbols = object(cache, &["symbols"]);
                if let Some(key) = rng.pick(symbols).cloned() {
                    let file = symbols[&key]["file"].clone();
                    symbols.remove(&key);
                    if every {
                        symbols.retain(|_, symbol| symbol["file"] != file);
                    }
                }
            }
            // Add a symbol that calls and is called by existing ones, and calls the hub (the
            // longest graph.reverse list, which grows by it).
            2 | 3 => {
                let hub = object(cache, &["graph", "reverse"])
                    .iter()
                    .max_by_key(|(key, list)| {
                        (list.as_array().map_or(0, Vec::len), std::cmp::Reverse(*key))
                    })
                    .map(|(key, _)| key.clone());
                let symbols = object(cache, &["symbols"]);
                let callee = rng.pick(symbols).cloned().unwrap_or_default();
                let caller = rng.pick(symbols).cloned().unwrap_or_default();
                let name = format!("fresh_{tag}");
                if let Some(hub) = &hub {
                    if let Some(list) = object(cache, &["graph", "reverse"])[hub].as_array_mut() {
                        list.push(json!(name.clone()));
                    }
                }
                let symbols = object(cache, &["symbols"]);
                // Sometimes in a file of its own that `files` does not list.
                let some_file = if rng.below(4) == 0 {
                    format!("src/fresh/{tag}.rs")
                } else {
                    some_file
                };
                symbols.insert(
                    name.clone(),
                    json!({
                        "name": name,
                        "qualified_name": format!("{some_file}:{name}"),
                        "type": "function",
                        "file": some_file,
                        "lines": [1 + rng.below(50), 60],
                        "exported": true,
                        "summary": format!("added in {tag}"),
                        "calls": [callee, hub.unwrap_or_default(), "nowhere_at_all"],
                        "called_by": [caller],
                    }),
                );
            }
            // Rename a symbol: same content under a new key and qualified name.
            4 => {
                let symbols = object(cache, &["symbols"]);
                if let Some(key) = rng.pick(symbols).cloned() {
                    let mut symbol = symbols.remove(&key).unwrap();
                    let new_key = format!("{key}_{tag}");
                    symbol["qualified_name"] = json!(new_key.clone());
                    symbols.insert(new_key, symbol);
                }
            }
            // Make a simple name ambiguous (a second symbol of the same name), or unique again.
            5 => {
                let symbols = object(cache, &["symbols"]);
                let twins: Vec<String> = symbols
                    .keys()
                    .filter(|k| k.starts_with("twin_of_"))
                    .cloned()
                    .collect();
                if let Some(twin) = twins.first() {
                    symbols.remove(twin);
                } else if let Some(key) = rng.pick(symbols).cloned() {
                    let name = symbols[&key]["name"].clone();
                    symbols.insert(
                        format!("twin_of_{tag}"),
                        json!({"name": name, "qualified_name": format!("elsewhere.ts:{tag}"),
                               "type": "function", "file": some_file, "lines": [2, 3]}),
                    );
                }
            }
            // Change a file: summary, domains and inline annotations.
            6 => {
                let file = object(cache, &["files"])[&some_file]
                    .as_object_mut()
                    .unwrap();
                file.insert("summary".into(), json!(format!("file changed in {tag}")));
                let source = some_file.trim_start_matches("./").to_string();
                object(cache, &["source_files"]).insert(source, json!(format!("2030-01-01T{tag}")));
                let file = object(cache, &["files"])[&some_file]
                    .as_object_mut()
                    .unwrap();
                file.insert("domains".into(), json!([format!("domain_{}", step % 3)]));
                file.insert(
                    "inline".into(),
                    json!([{"line": 3, "type": "todo", "value": tag}, {"line": 9, "type": "hack", "value": "x", "expires": "2030-01-01"}]),
                );
            }
            // Remove a file; add one.
            7 => {
                if files.len() > 5 {
                    object(cache, &["files"]).remove(&some_file);
                    object(cache, &["source_files"]).remove(some_file.trim_start_matches("./"));
                }
            }
            8 => {
                let path = format!("src/added/{tag}.ts");
                object(cache, &["source_files"]).insert(path.clone(), json!({"mtime": tag}));
                object(cache, &["files"]).insert(
                    path.clone(),
                    json!({"path": path, "lines": 40, "language": "typescript", "domains": ["added"],
                           "exports": [], "imports": [], "inline": [{"line": 1, "type": "critical", "value": "keep"}]}),
                );
            }
            // Move callers: rewrite, add or remove forward and reverse lists.
            9 | 10 => {
                let direction = if rng.below(2) == 0 {
                    "forward"
                } else {
                    "reverse"
                };
                let names: Vec<String> = object(cache, &["symbols"]).keys().cloned().collect();
                let a = names[rng.below(names.len())].clone();
                let b = names[rng.below(names.len())].clone();
                let lists = object(cache, &["graph", direction]);
                match rng.below(3) {
                    0 => {
                        lists.insert(a.clone(), json!([b, a, b, "ghost_name"]));
                    }
                    1 => {
                        if let Some(key) = rng.pick(lists).cloned() {
                            lists.remove(&key);
                        }
                    }
                    _ => {
                        lists.insert(format!("ghost_{tag}"), json!([a]));
                    }
                }
            }
            // Domains: add one, remove one, change one's files.
            11 => {
                let domains = object(cache, &["domains"]);
                match rng.below(3) {
                    0 => {
                        domains.insert(
                            format!("dom_{tag}"),
                            json!({"name": format!("dom_{tag}"), "files": [some_file], "symbols": []}),
                        );
                    }
                    1 => {
                        if let Some(key) = rng.pick(domains).cloned() {
                            domains.remove(&key);
                        }
                    }
                    _ => {
                        if let Some(key) = rng.pick(domains).cloned() {
                            domains[&key]["files"] = json!([some_file]);
                        }
                    }
                }
            }
            // Constraints: a lock level added, changed or removed.
            12 => {
                let by_file = object(cache, &["constraints", "by_file"]);
                let levels = ["frozen", "restricted", "approval-required", "normal"];
                if rng.below(3) == 0 {
                    if let Some(key) = rng.pick(by_file).cloned() {
                        by_file.remove(&key);
                    }
                } else {
                    by_file.insert(
                        some_file.clone(),
                        json!({"lock_level": levels[rng.below(levels.len())], "directive": tag}),
                    );
                }
            }
            // Rename a file as `acp index` writes a moved file: its entry under a new key, its
            // symbols' file, keys and qualified names, and every call-graph name of them.
            13 => {
                let stem = some_file.rsplit('/').next().unwrap_or("file.ts");
                let new_key = format!("./src/moved/{tag}_{stem}");
                let old_path = some_file.trim_start_matches("./").to_string();
                let new_path = new_key.trim_start_matches("./").to_string();
                let rename = |name: &str| {
                    name.strip_prefix(&format!("{old_path}:"))
                        .map(|rest| format!("{new_path}:{rest}"))
                };
                let rename_items = |list: &mut Value| {
                    for item in list.as_array_mut().into_iter().flatten() {
                        if let Some(name) = item.as_str().and_then(rename) {
                            *item = json!(name);
                        }
                    }
                };
                let files = object(cache, &["files"]);
                if let Some(mut file) = files.remove(&some_file) {
                    if file.get("path").is_some() {
                        file["path"] = json!(new_key.clone());
                    }
                    files.insert(new_key.clone(), file);
                }
                let symbols = object(cache, &["symbols"]);
                for (key, mut symbol) in std::mem::take(symbols) {
                    if symbol["file"] == json!(old_path) {
                        symbol["file"] = json!(new_path);
                    }
                    if let Some(name) = symbol["qualified_name"].as_str().and_then(rename) {
                        symbol["qualified_name"] = json!(name);
                    }
                    for list in ["calls", "called_by"] {
                        if let Some(list) = symbol.get_mut(list) {
                            rename_items(list);
                        }
                    }
                    symbols.insert(rename(&key).unwrap_or(key), symbol);
                }
                for direction in ["forward", "reverse"] {
                    let lists = object(cache, &["graph", direction]);
                    for (key, mut list) in std::mem::take(lists) {
                        rename_items(&mut list);
                        lists.insert(rename(&key).unwrap_or(key), list);
                    }
                }
            }
            // Variables: added, changed, removed.
            _ => {
                let variables = object(vars, &["variables"]);
                match rng.below(3) {
                    0 => {
                        variables.insert(
                            format!("VAR_{tag}"),
                            json!({"type": "file", "value": some_file}),
                        );
                    }
                    1 => {
                        if let Some(key) = rng.pick(variables).cloned() {
                            variables.remove(&key);
                        }
                    }
                    _ => {
                        if let Some(key) = rng.pick(variables).cloned() {
                            variables[&key]["description"] = json!(tag);
                        }
                    }
                }
            }
        }
    }
}

fn export(db: &Path) -> (Value, Value) {
    let conn = Connection::open(db).unwrap();
    let mut cache = Vec::new();
    acpdb::export::export_cache(&conn, &mut cache).unwrap();
    let mut vars = Vec::new();
    acpdb::export::export_vars(&conn, &mut vars).unwrap();
    (
        serde_json::from_slice(&cache).unwrap(),
        serde_json::from_slice(&vars).unwrap(),
    )
}

/// The derived tables, by names rather than ids (ids of entries added by a delta differ).
const DERIVED: &[&str] = &[
    "SELECT n.name, s.key, n.callers, n.callees, n.reverse_len FROM graph_nodes n
     LEFT JOIN symbols s ON s.id = n.symbol_id ORDER BY n.name",
    "SELECT a.name, b.name, e.count, e.forward_count, e.reverse_count FROM call_edges e
     JOIN graph_nodes a ON a.id = e.caller_id JOIN graph_nodes b ON b.id = e.callee_id
     ORDER BY 1, 2",
    "SELECT domain, path, source FROM domain_files ORDER BY 1, 2, 3",
    "SELECT domain, symbol FROM domain_symbols ORDER BY 1, 2",
    "SELECT f.key, i.ord, i.line, i.type, i.value, i.expires FROM inline_annotations i
     JOIN files f ON f.id = i.file_id ORDER BY 1, 2",
    "SELECT * FROM index_summary",
    "SELECT * FROM file_languages ORDER BY 1",
    "SELECT * FROM file_lock_levels ORDER BY 1",
    "SELECT * FROM constraint_mutation_levels ORDER BY 1",
    "SELECT * FROM hot_nodes ORDER BY rank",
    "SELECT key, file_count, symbol_count FROM domains ORDER BY 1",
    "SELECT path, message FROM import_warnings ORDER BY 1, 2",
    "SELECT s.key FROM symbols_fts f JOIN symbols s ON s.id = f.rowid
     WHERE symbols_fts MATCH 'changed OR added OR fresh* OR validate*' ORDER BY 1",
    "SELECT s.key FROM symbols_name_trigram t JOIN symbols s ON s.id = t.rowid
     WHERE symbols_name_trigram MATCH '\"res\" AND \"esh\"' ORDER BY 1",
    "SELECT s.key FROM symbols_qname_trigram t JOIN symbols s ON s.id = t.rowid
     WHERE symbols_qname_trigram MATCH '\"res\" AND \"esh\"' ORDER BY 1",
    "SELECT path FROM symbol_files ORDER BY 1",
    "SELECT sf.path FROM symbol_files_trigram t JOIN symbol_files sf ON sf.id = t.rowid
     WHERE symbol_files_trigram MATCH '\"res\" OR \"ion\"' ORDER BY 1",
    "SELECT s.key FROM symbols_qname_trigram t JOIN symbols s ON s.id = t.rowid
     WHERE symbols_qname_trigram MATCH '\":fr\" OR \"e_s\"' ORDER BY 1",
    "SELECT f.key FROM files_fts t JOIN files f ON f.id = t.rowid
     WHERE files_fts MATCH 'changed OR added' ORDER BY 1",
    "SELECT f.key FROM files_trigram t JOIN files f ON f.id = t.rowid
     WHERE files_trigram MATCH 'dded' ORDER BY 1",
    "PRAGMA foreign_key_check",
];

fn rows(conn: &Connection, sql: &str) -> Vec<String> {
    let mut stmt = conn.prepare(sql).unwrap();
    let columns = stmt.column_count();
    stmt.query_map([], |row| {
        let cells: Vec<String> = (0..columns)
            .map(|i| format!("{:?}", row.get::<_, rusqlite::types::Value>(i).unwrap()))
            .collect();
        Ok(cells.join("|"))
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

/// Asserts that two databases hold the same derived rows (see [`DERIVED`]) and that their
/// full-text indexes agree with the rows they index.
fn assert_same_tables(delta: &Path, full: &Path, context: &str) {
    let a = Connection::open(delta).unwrap();
    let b = Connection::open(full).unwrap();
    for conn in [&a, &b] {
        crate::common::check_full_text_indexes(conn).unwrap_or_else(|e| panic!("{context}: {e}"));
    }
    for sql in DERIVED {
        let (mine, theirs) = (rows(&a, sql), rows(&b, sql));
        let only_delta: Vec<_> = mine.iter().filter(|r| !theirs.contains(r)).collect();
        let only_full: Vec<_> = theirs.iter().filter(|r| !mine.contains(r)).collect();
        assert!(
            mine == theirs,
            "{context}: {sql}\nonly after the delta: {only_delta:?}\nonly after the full import: {only_full:?}"
        );
    }
}

/// Tool calls over a sample of the cache's names, plus the overviews.
fn tool_calls(cache: &Value, rng: &mut Rng) -> Vec<(&'static str, Value)> {
    let symbols = cache["symbols"].as_object().unwrap();
    let files = cache["files"].as_object().unwrap();
    let mut calls = vec![
        ("acp_get_architecture", json!({})),
        ("acp_get_hotpaths", json!({})),
        ("acp_query", json!({"type": "stats"})),
        ("acp_query", json!({"type": "search", "pattern": "fresh"})),
        ("acp_query", json!({"type": "search", "pattern": "changed"})),
        ("acp_context", json!({"operation": "explore"})),
    ];
    for _ in 0..8 {
        if let Some(name) = rng.pick(symbols) {
            let simple = symbols[name]["name"].as_str().unwrap_or(name).to_string();
            calls.push(("acp_get_symbol_context", json!({ "name": name })));
            calls.push(("acp_query", json!({"type": "symbol", "name": simple})));
            calls.push((
                "acp_query",
                json!({"type": "callers", "name": name, "depth": 2}),
            ));
            calls.push((
                "acp_query",
                json!({"type": "callees", "name": name, "depth": 2}),
            ));
        }
        if let Some(path) = rng.pick(files) {
            calls.push(("acp_get_file_context", json!({ "path": path })));
            calls.push(("acp_check_constraints", json!({ "path": path })));
            calls.push(("acp_constraints", json!({ "path": path })));
        }
    }
    calls
}

/// Answers with the parts that name the import itself (its time, its cursor) and the moment
/// of the source sweep taken out.
fn answer(conn: &Connection, tool: &str, args: &Value) -> String {
    let text = match acpdb::tools::call(conn, tool, args) {
        Ok(text) => text,
        Err(err) => format!("error: {err}"),
    };
    without_sweep_times(text)
        .lines()
        .filter(|line| !line.contains("imported_at") && !line.contains("next_cursor"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Runs `steps` random edit scripts from each seed on a copy of `source` (a project whose
/// cache is imported), importing each step as a delta there and fully in a second copy: after
/// each step the delta's export equals the new cache and vars, its tables equal the full
/// import's, and so do the answers of a sample of tool calls.
fn edit_scripts_match_full_imports(source: &Path, seeds: &[u64], steps: usize) {
    for &seed in seeds {
        let delta = TempProject::copy_of(source);
        delta.import();
        let full = TempProject::copy_of(source);
        let cache_path = delta.cache_path();
        let vars_path = delta.root().join(".acp/acp.vars.json");
        let mut cache: Value = serde_json::from_slice(&fs::read(&cache_path).unwrap()).unwrap();
        let mut vars: Value = match fs::read(&vars_path) {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap(),
            Err(_) => json!({"variables": {}}),
        };
        let mut rng = Rng(seed);
        for step in 0..steps {
            let edits = 1 + rng.below(12);
            edit(&mut rng, &mut cache, &mut vars, step, edits);
            for root in [delta.root(), full.root()] {
                write_json(&root.join(".acp/acp.cache.json"), &cache);
                write_json(&root.join(".acp/acp.vars.json"), &vars);
            }
            let context = format!("{} seed {seed} step {step}", source.display());
            let applied = import_in_process(delta.root(), false);
            assert!(
                applied.delta.is_some(),
                "{context}: not a delta: {}",
                applied.line()
            );
            import_in_process(full.root(), true);

            let (delta_cache, delta_vars) = export(&delta.db());
            assert_eq!(
                delta_cache, cache,
                "{context}: export differs from the cache"
            );
            assert_eq!(delta_vars, vars, "{context}: vars export differs");
            assert_same_tables(&delta.db(), &full.db(), &context);
            let a = Connection::open(delta.db()).unwrap();
            let b = Connection::open(full.db()).unwrap();
            for (tool, args) in tool_calls(&cache, &mut rng) {
                assert_eq!(
                    answer(&a, tool, &args),
                    answer(&b, tool, &args),
                    "{context}: {tool} {args}"
                );
            }
        }
    }
}

#[test]
fn delta_imports_answer_as_a_full_import_after_random_edit_scripts() {
    let generated = TempProject {
        dir: tempfile::tempdir().unwrap(),
    };
    generated.generate(30);
    edit_scripts_match_full_imports(generated.root(), &[7, 1234, 0xdead_beef], 6);
}

/// The same scripts on caches `acp index` wrote for real code (fixtures/real): simple-name
/// keys, `./` file keys, a quarter of the call-graph names resolving to nothing, lists that name
/// a symbol twice.
#[test]
fn delta_imports_answer_as_a_full_import_after_edit_scripts_on_real_caches() {
    for name in ["anyhow", "demo-ts", "python-stdlib"] {
        edit_scripts_match_full_imports(&fixture(&format!("real/{name}")), &[7, 1234], 4);
    }
}

/// The scripts on the largest real cache that keeps the test short: 13,957 symbols of Go,
/// names called from hundreds of places.
#[test]
fn delta_imports_answer_as_a_full_import_after_edit_scripts_on_prometheus() {
    edit_scripts_match_full_imports(&fixture("real/prometheus"), &[99], 2);
}

#[test]
fn the_summary_says_what_changed_and_full_rebuilds() {
    let project = TempProject::generated(20);
    let mut cache: Value =
        serde_json::from_slice(&fs::read(project.cache_path()).unwrap()).unwrap();
    let symbols = cache["symbols"].as_object_mut().unwrap();
    let key = symbols.keys().next().unwrap().clone();
    symbols[&key]["summary"] = json!("a new summary");
    write_json(&project.cache_path(), &cache);
    let out = project.run(&["import", "--no-progress"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let line = stderr(&out);
    assert!(
        line.starts_with("delta: ~1 symbols in ")
            && line.contains("(unchanged 20 files and 199 symbols skipped;"),
        "{line}"
    );
    let out = project.run(&["import", "--no-progress", "--full"]);
    assert!(
        stderr(&out).starts_with("imported 20 files, 200 symbols"),
        "{}",
        stderr(&out)
    );

    // A database of another schema version is rebuilt, saying why.
    let current = acpdb::db::current_schema_version();
    let conn = Connection::open(project.db()).unwrap();
    conn.execute(
        "UPDATE refinery_schema_history SET version = 1 WHERE version = ?1",
        [current],
    )
    .unwrap();
    let older: i64 = conn
        .query_row(
            "SELECT max(version) FROM refinery_schema_history",
            [],
            |r| r.get(0),
        )
        .unwrap();
    drop(conn);
    let out = project.run(&["import", "--no-progress"]);
    let line = stderr(&out);
    let expected =
        format!("full import (the database has schema version {older}, this acpdb uses {current}): imported ");
    assert!(line.starts_with(&expected), "{line}");
}

#[test]
fn a_delta_gives_up_for_a_full_import_when_most_entries_changed() {
    // 120 files and 1,200 symbols: the first 1,024 file and symbol entries are a sample.
    let project = TempProject::generated(120);
    set_summaries(&project, 1200, "every summary rewritten");
    let out = project.run(&["import", "--no-progress"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let line = stderr(&out);
    assert!(
        line.starts_with("full import (904 of the first 1024 entries changed, more than the 8 % a delta is faster for): imported 120 files, 1200 symbols"),
        "{line}"
    );
    let conn = acpdb::db::open_read_only(&project.db()).unwrap();
    let rewritten: i64 = conn
        .query_row(
            "SELECT count(*) FROM symbols WHERE summary = 'every summary rewritten'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(rewritten, 1200);

    // A few changed entries among the sample's keep the delta.
    set_summaries(&project, 60, "a few summaries rewritten");
    let summary = import_in_process(project.root(), false);
    assert_eq!(summary.delta.map(|d| d.symbols_changed), Some(60));
}

/// Sets the summary of the first `n` symbols of the project's cache to `text`.
fn set_summaries(project: &TempProject, n: usize, text: &str) {
    let mut cache: Value =
        serde_json::from_slice(&fs::read(project.cache_path()).unwrap()).unwrap();
    for symbol in cache["symbols"]
        .as_object_mut()
        .unwrap()
        .values_mut()
        .take(n)
    {
        symbol["summary"] = json!(text);
    }
    write_json(&project.cache_path(), &cache);
}

/// Stored digests that cannot be read (an index dropped by hand) fail the delta, not the
/// import: the reader stops for want of them, the import reports the reading's own error, and
/// a full import runs instead.
#[test]
fn a_delta_whose_digests_cannot_be_read_falls_back_to_a_full_import() {
    let project = TempProject::generated(20);
    let conn = Connection::open(project.db()).unwrap();
    conn.execute("DROP INDEX symbols_digest", []).unwrap();
    drop(conn);
    set_summaries(&project, 1, "a new summary");
    let out = project.run(&["import", "--no-progress"]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("full import (the delta import failed: ")
            && err.contains("no such index: symbols_digest"),
        "{err}"
    );
    let conn = Connection::open(project.db()).unwrap();
    let summary: String = conn
        .query_row("SELECT summary FROM symbols ORDER BY id LIMIT 1", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(summary, "a new summary");
}

#[test]
fn a_reader_keeps_its_snapshot_until_the_delta_commits() {
    let project = TempProject::generated(20);
    // The first delta switches the database to WAL mode, for good.
    set_summaries(&project, 1, "before the delta");
    assert!(import_in_process(project.root(), false).delta.is_some());
    let reader = acpdb::db::open_read_only(&project.db()).unwrap();
    reader.execute_batch("BEGIN").unwrap();
    let count = |conn: &Connection| -> i64 {
        conn.query_row(
            "SELECT count(*) FROM symbols WHERE summary = 'during the delta'",
            [],
            |r| r.get(0),
        )
        .unwrap()
    };
    assert_eq!(count(&reader), 0);
    set_summaries(&project, 5, "during the delta");
    let summary = import_in_process(project.root(), false);
    assert_eq!(summary.delta.map(|d| d.symbols_changed), Some(5));
    // The open reader still sees the old state, whole; a new one sees the new state.
    assert_eq!(count(&reader), 0);
    // The new state is in the WAL, which its checkpoint could not copy under the reader's
    // snapshot and did not cut.
    assert!(wal_size(&project) > 0, "the WAL was cut under a reader");
    reader.execute_batch("COMMIT").unwrap();
    assert_eq!(count(&reader), 5);
    let fresh = acpdb::db::open_read_only(&project.db()).unwrap();
    assert_eq!(count(&fresh), 5);
    // With no reader left on it, the next delta's checkpoint copies both and cuts the WAL.
    set_summaries(&project, 5, "after the delta");
    assert!(import_in_process(project.root(), false).delta.is_some());
    assert_eq!(
        wal_size(&project),
        0,
        "the WAL was kept after a whole checkpoint"
    );
    assert_eq!(count(&fresh), 0);
}

/// The size of the project's WAL file (which an open connection keeps, empty or not).
fn wal_size(project: &TempProject) -> u64 {
    fs::metadata(project.db().with_extension("db-wal"))
        .unwrap()
        .len()
}

/// The bytes a summary line says were written (`…; 786.4 kB written)`).
fn written(line: &str) -> u64 {
    let text = line
        .trim_end()
        .rsplit("; ")
        .next()
        .and_then(|tail| tail.strip_suffix(" written)"))
        .unwrap_or_else(|| panic!("no bytes written in {line}"));
    let (number, unit) = text.split_once(' ').unwrap();
    let scale = match unit {
        "bytes" => 1.0,
        "kB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        other => panic!("unit {other} in {line}"),
    };
    (number.parse::<f64>().unwrap() * scale) as u64
}

#[cfg(target_os = "linux")]
#[test]
fn a_delta_writes_in_place_and_only_what_changed() {
    let project = TempProject::generated(300);
    let file = |path: &Path| {
        use std::os::unix::fs::MetadataExt;
        let meta = fs::metadata(path).unwrap();
        (meta.ino(), meta.len())
    };
    let (inode, size) = file(&project.db());
    // The first delta also switches the database to WAL mode and splits the pages of the
    // indexes a full import packed; the second writes what changed.
    for (round, text) in ["an edit", "another edit"].into_iter().enumerate() {
        set_summaries(&project, 5, text);
        let out = project.run(&["import", "--no-progress"]);
        let line = stderr(&out);
        assert!(line.starts_with("delta: ~5 symbols in "), "{line}");
        assert_eq!(
            file(&project.db()).0,
            inode,
            "the database file was replaced"
        );
        // A copy of the database would write at least its size.
        let written = written(&line);
        assert!(
            round == 0 || written < size / 2,
            "a delta of 5 symbols wrote {written} bytes of a {size}-byte database: {line}"
        );
    }
    let conn = Connection::open(project.db()).unwrap();
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    let changed: i64 = conn
        .query_row(
            "SELECT count(*) FROM symbols WHERE summary = 'another edit'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(changed, 5);
    // A full import over a database in WAL mode copies its pages in, in one transaction.
    let out = project.run(&["import", "--no-progress", "--full"]);
    assert!(
        stderr(&out).starts_with("imported 300 files"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        file(&project.db()).0,
        inode,
        "the database file was replaced"
    );
    // The copy went through the WAL, every page of the database; its checkpoint cut it.
    assert_eq!(wal_size(&project), 0, "the full import's WAL was kept");
    let integrity: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(integrity, "ok");
}

/// The bytes a delta reports are the ones SQLite wrote for it: its WAL frames (a 32-byte header,
/// then each page with a 24-byte frame header) and the checkpoint's copy of each page into the
/// database. Counted from the page cache instead, each page would weigh as much as the large
/// folio it lands in (a database just copied or read through has them). Once every page is
/// copied, the WAL is cut to nothing, although another connection keeps the database open.
#[cfg(target_os = "linux")]
#[test]
fn a_delta_reports_the_bytes_sqlite_wrote_and_empties_its_wal() {
    const PAGE: u64 = 4096;
    let project = TempProject::generated(300);
    // The first delta switches the database to WAL mode.
    set_summaries(&project, 5, "an edit");
    project.run(&["import", "--no-progress"]);
    // A database copied in: its pages in the page cache as the copy left them.
    let copy = project.db().with_extension("copy");
    fs::copy(project.db(), &copy).unwrap();
    fs::rename(&copy, project.db()).unwrap();
    // An open connection keeps the WAL file after the delta's own connection closes.
    let keeper = Connection::open(project.db()).unwrap();
    keeper
        .query_row("SELECT count(*) FROM meta", [], |r| r.get::<_, i64>(0))
        .unwrap();
    set_summaries(&project, 5, "another edit");
    let out = acpdb()
        .env("ACPDB_LOG", "warn,acpdb=debug")
        .arg("-C")
        .arg(project.root())
        .args(["import", "--no-progress"])
        .output()
        .unwrap();
    let log = stderr(&out);
    let line = log
        .lines()
        .find(|line| line.starts_with("delta: "))
        .unwrap_or_else(|| panic!("no summary line in {log}"));
    assert!(line.starts_with("delta: ~5 symbols in "), "{line}");
    // The checkpoint's own count of the WAL's pages, and of those it copied.
    let (copied, frames): (u64, u64) = log
        .lines()
        .find_map(|line| {
            let counts = line.split("checkpoint: ").nth(1)?;
            let (copied, rest) = counts.split_once(" of ")?;
            let frames = rest.strip_suffix(" WAL pages copied")?;
            Some((copied.parse().ok()?, frames.parse().ok()?))
        })
        .unwrap_or_else(|| panic!("no checkpoint logged in {log}"));
    assert!(
        frames > 0 && copied == frames,
        "{copied} of {frames} pages copied"
    );
    assert_eq!(
        wal_size(&project),
        0,
        "the WAL was kept after a whole checkpoint"
    );
    let sqlite_wrote = 32 + frames * (PAGE + 24) + frames * PAGE;
    let reported = written(line);
    // The summary rounds to 0.1 kB; the lock file's pid and the WAL index's first bytes are
    // written too.
    assert!(
        reported.abs_diff(sqlite_wrote) <= 1000,
        "reported {reported} bytes written, SQLite wrote {sqlite_wrote} ({frames} pages): {line}"
    );
    drop(keeper);
}

/// A cache as text, with duplicate keys, lists of unknown names and lists that are not lists.
fn quirky(revision: u32) -> String {
    let (lines, callee, extra_symbol) = match revision {
        0 => (1, "g", ""),
        _ => (
            5,
            "h",
            r#", "h": {"name": "g", "qualified_name": "b.ts:g", "type": "function", "file": "b.ts", "lines": [1, 2]}"#,
        ),
    };
    // Two domains share a name (their memberships merge), one key is repeated, one name is not
    // text; in revision 1 one of the pair changes and another domain goes.
    let domains = match revision {
        0 => {
            r#""d1": {"name": "core", "files": ["a.ts"], "symbols": ["f"]},
               "d2": {"name": "core", "files": ["b.ts"], "symbols": ["g"]},
               "d1": {"name": "repeated"},
               "d3": {"name": 7, "files": ["a.ts", "b.ts"]},
               "d4": {"files": ["b.ts"]}"#
        }
        _ => {
            r#""d1": {"name": "core", "files": ["a.ts"], "symbols": ["f"]},
               "d2": {"name": "core", "files": ["b.ts", "c.ts"]},
               "d1": {"name": "repeated"},
               "d3": {"name": 7, "files": ["a.ts", "b.ts"]}"#
        }
    };
    let source_files = match revision {
        0 => r#""a.ts": "2026-01-01", "a.ts": "repeated", "b.ts": {"odd": 1}, "gone.ts": "x""#,
        _ => {
            r#""a.ts": "2026-01-02", "a.ts": "repeated", "b.ts": {"odd": 1}, "new.ts": "y", "new.ts": "again""#
        }
    };
    format!(
        r#"{{"version": "0.7.0", "generated_at": "2026-01-01T00:00:00Z", "project": {{"name": "p", "root": "."}},
        "stats": {{"files": 1, "symbols": 1, "lines": 1}}, "source_files": {{{source_files}}}, "domains": {{{domains}}},
        "files": {{"a.ts": {{"path": "a.ts", "lines": {lines}, "language": "typescript", "domains": ["core"], "inline": [{{"line": 1, "type": "todo", "value": "x"}}]}},
                  "a.ts": {{"path": "a.ts", "lines": 2, "language": "typescript"}},
                  "b.ts": {{"path": "b.ts", "lines": 1, "language": "klingon"}}}},
        "symbols": {{"f": {{"name": "f", "qualified_name": "a.ts:f", "type": "function", "file": "a.ts", "lines": [1, 1], "calls": ["{callee}", "nobody"]}},
                    "f": {{"name": "f", "qualified_name": "a.ts:f2", "type": "function", "file": "a.ts", "lines": [2, 2]}},
                    "g": {{"name": "g", "qualified_name": "a.ts:g", "type": "widget", "file": "a.ts", "lines": [3, 3]}}{extra_symbol}}},
        "graph": {{"forward": {{"f": ["g", "g", "{callee}", "ghost"], "f": ["h"], "odd": 7}},
                   "reverse": {{"g": ["f", "f"], "{callee}": ["f"]}}}}}}"#
    )
}

#[test]
fn duplicates_unknown_names_and_odd_lists_apply_as_a_full_import_would() {
    for (before, after) in [(0, 1), (1, 0), (1, 1)] {
        let delta = TempProject::with_cache(&quirky(before), None);
        delta.import();
        fs::write(delta.cache_path(), quirky(after)).unwrap();
        let summary = import_in_process(delta.root(), false);
        assert!(summary.delta.is_some(), "{}", summary.line());
        let full = TempProject::with_cache(&quirky(after), None);
        full.import();
        let context = format!("revision {before} to {after}");
        assert_eq!(export(&delta.db()), export(&full.db()), "{context}");
        assert_same_tables(&delta.db(), &full.db(), &context);
    }
}

#[test]
fn a_second_import_waits_for_the_first_and_names_it() {
    use std::io::BufRead;

    let project = TempProject::generated(10);
    project.generate(3000);
    let mut first = acpdb()
        .arg("-C")
        .arg(project.root())
        .args(["import", "--full", "--progress-interval", "0.01"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The first import holds the lock from before its first progress line.
    let mut lines = std::io::BufReader::new(first.stderr.take().unwrap()).lines();
    let line = lines.next().unwrap().unwrap();
    assert!(line.starts_with("import: "), "{line}");
    let second = project.run(&["import", "--no-progress"]);
    let first_pid = first.id();
    for _ in lines {}
    assert!(first.wait().unwrap().success());
    assert!(second.status.success(), "{}", stderr(&second));
    let err = stderr(&second);
    assert!(
        err.contains(&format!("another import (pid {first_pid}) is writing")),
        "{err}"
    );
    // It ran after the first one finished: a delta on its result, with nothing to change.
    assert!(
        err.lines()
            .last()
            .unwrap()
            .starts_with("delta: no entry changed"),
        "{err}"
    );
}

#[cfg(unix)]
#[test]
fn a_database_keeps_its_permissions_through_delta_and_full_imports() {
    use std::os::unix::fs::PermissionsExt;
    let project = TempProject::generated(10);
    let mode = |path: &Path| fs::metadata(path).unwrap().permissions().mode() & 0o777;
    let mut cache: Value =
        serde_json::from_slice(&fs::read(project.cache_path()).unwrap()).unwrap();
    // Private, then read-only: the importer still writes its temporary files, and the new
    // database is given the old one's mode.
    for (round, wanted) in [0o600, 0o440].into_iter().enumerate() {
        fs::set_permissions(project.db(), fs::Permissions::from_mode(wanted)).unwrap();
        for (kind, args) in [
            ("delta: ", &["import", "--no-progress"][..]),
            ("imported ", &["import", "--no-progress", "--full"]),
        ] {
            let symbols = cache["symbols"].as_object_mut().unwrap();
            let key = symbols.keys().next().unwrap().clone();
            symbols[&key]["summary"] = json!(format!("summary {round} {kind}"));
            write_json(&project.cache_path(), &cache);
            let out = project.run(args);
            assert!(out.status.success(), "{}", stderr(&out));
            assert!(stderr(&out).starts_with(kind), "{}", stderr(&out));
            assert_eq!(mode(&project.db()), wanted, "after {args:?}");
        }
    }
}

/// A delta keeps the vars file's rows and warnings when the file is byte for byte the one
/// imported last (touched or not), and rewrites them once its content changes.
#[test]
fn a_delta_keeps_the_vars_when_their_file_is_unchanged() {
    let project = TempProject::generated(20);
    let vars_path = project.root().join(".acp/acp.vars.json");
    let vars = fs::read_to_string(&vars_path).unwrap();
    // A duplicate variable, which the import warns about.
    let duplicated = vars.replacen(
        "\"variables\":{",
        "\"variables\":{\"DUP\": {\"type\": \"file\", \"value\": \"a\"}, \"DUP\": {\"type\": \"file\", \"value\": \"b\"},",
        1,
    );
    assert!(duplicated != vars, "the vars file has a `variables` object");
    fs::write(&vars_path, &duplicated).unwrap();
    project.run(&["import", "--full", "--no-progress"]);
    let db = || Connection::open(project.db()).unwrap();
    let duplicate_warnings = |conn: &Connection| -> i64 {
        conn.query_row(
            "SELECT count(*) FROM import_warnings WHERE path LIKE 'variables%'",
            [],
            |r| r.get(0),
        )
        .unwrap()
    };
    assert_eq!(duplicate_warnings(&db()), 1);
    // A mark only a rewrite of the vars would remove.
    db().execute(
        "UPDATE vars SET description = 'mark' WHERE name = 'DUP'",
        [],
    )
    .unwrap();
    let marked = |conn: &Connection| -> bool {
        conn.query_row(
            "SELECT EXISTS (SELECT 1 FROM vars WHERE description = 'mark')",
            [],
            |r| r.get(0),
        )
        .unwrap()
    };

    set_summaries(&project, 3, "an edit");
    fs::write(&vars_path, &duplicated).unwrap();
    let line = stderr(&project.run(&["import", "--no-progress"]));
    assert!(line.starts_with("delta: ~3 symbols in "), "{line}");
    let conn = db();
    assert!(marked(&conn), "the vars were rewritten: {line}");
    assert_eq!(duplicate_warnings(&conn), 1, "the vars' warning was lost");
    drop(conn);

    set_summaries(&project, 3, "another edit");
    fs::write(
        &vars_path,
        duplicated.replacen("\"value\": \"a\"", "\"value\": \"c\"", 1),
    )
    .unwrap();
    let line = stderr(&project.run(&["import", "--no-progress"]));
    assert!(line.starts_with("delta: ~3 symbols in "), "{line}");
    let conn = db();
    assert!(!marked(&conn), "the changed vars were kept: {line}");
    assert_eq!(duplicate_warnings(&conn), 1);
    let value: String = conn
        .query_row("SELECT value FROM vars WHERE name = 'DUP'", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(value, "c");
}

/// The segments of each full-text table: every segment has at least one row in its `_idx`.
fn segments(conn: &Connection, table: &str) -> i64 {
    conn.query_row(
        &format!("SELECT count(DISTINCT segid) FROM {table}_idx"),
        [],
        |r| r.get(0),
    )
    .unwrap()
}

#[test]
fn deltas_merge_the_full_text_segments_they_add() {
    let project = TempProject::generated(300);
    for round in 0..8 {
        let cache = project.cache_path();
        let mut doc: Value = serde_json::from_slice(&fs::read(&cache).unwrap()).unwrap();
        // A new summary, name and qualified name, so that each table gets a segment.
        let symbol = object(&mut doc, &["symbols"]).values_mut().next().unwrap();
        symbol["summary"] = json!(format!("edit {round}"));
        symbol["name"] = json!(format!("renamed{round}"));
        symbol["qualified_name"] = json!(format!("pkg::renamed{round}"));
        write_json(&cache, &doc);
        let out = project.run(&["import", "--no-progress"]);
        assert!(stderr(&out).starts_with("delta: "), "{}", stderr(&out));
    }
    let conn = Connection::open(project.db()).unwrap();
    crate::common::check_full_text_indexes(&conn).unwrap();
    for table in [
        "symbols_fts",
        "symbols_name_trigram",
        "symbols_qname_trigram",
    ] {
        let n = segments(&conn, table);
        assert!(n <= 3, "{table} has {n} segments after 8 deltas");
    }
}

#[test]
fn paths_a_delta_adds_to_the_symbol_files_are_numbered_in_path_order() {
    let project = TempProject::generated(300);
    let cache = project.cache_path();
    let mut doc: Value = serde_json::from_slice(&fs::read(&cache).unwrap()).unwrap();
    let symbols = object(&mut doc, &["symbols"]);
    let mut files: Vec<Value> = symbols.values().map(|s| s["file"].clone()).collect();
    files.sort_by_key(|file| file.to_string());
    files.dedup();
    // Five files' symbols move, each to a new path; the new paths come in reverse order.
    let moved: Vec<(Value, String)> = files
        .into_iter()
        .take(5)
        .enumerate()
        .map(|(i, file)| (file, format!("moved/{}.rs", 9 - i)))
        .collect();
    for symbol in symbols.values_mut() {
        if let Some((_, to)) = moved.iter().find(|(from, _)| *from == symbol["file"]) {
            symbol["file"] = json!(to);
        }
    }
    write_json(&cache, &doc);
    let conn = Connection::open(project.db()).unwrap();
    let last_id: i64 = conn
        .query_row("SELECT max(id) FROM symbol_files", [], |r| r.get(0))
        .unwrap();
    let out = project.run(&["import", "--no-progress"]);
    assert!(stderr(&out).starts_with("delta: "), "{}", stderr(&out));
    let added: Vec<String> = conn
        .prepare("SELECT path FROM symbol_files WHERE id > ?1 ORDER BY id")
        .unwrap()
        .query_map([last_id], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let mut sorted: Vec<String> = moved.iter().map(|(_, to)| to.clone()).collect();
    sorted.sort();
    assert_eq!(added, sorted);
    for (from, _) in &moved {
        let kept: i64 = conn
            .query_row(
                "SELECT count(*) FROM symbol_files WHERE path = ?1",
                [from.as_str().unwrap()],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(kept, 0, "{from}");
    }
    crate::common::check_full_text_indexes(&conn).unwrap();
}
