//! Importer tests: lossless round trips, real-world quirks, bad input and atomicity, all through
//! the real `acpdb` binary.

use crate::common;

use std::fs;

use acpdb::cache::reader::LIST_PART;
use common::{acpdb, data, mkfifo, run_unblocked, stderr, TempProject};
use rusqlite::Connection;
use serde_json::{json, Value};

fn read(name: &str) -> String {
    fs::read_to_string(data(name)).unwrap()
}

fn assert_round_trip(cache: &str, vars: Option<&str>) -> TempProject {
    let project = TempProject::with_cache(cache, vars);
    project.import();
    let exported = project.export();
    let original: Value = serde_json::from_str(cache).unwrap();
    assert_eq!(exported, original, "cache does not round-trip");
    common::check_full_text_indexes(&db(&project)).unwrap();
    if let Some(vars) = vars {
        let out_path = project.root().join("vars-out.json");
        let out = project.run(&[
            "export-cache",
            "--out",
            "/dev/null",
            "--vars-out",
            out_path.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        let exported: Value = serde_json::from_str(&fs::read_to_string(out_path).unwrap()).unwrap();
        assert_eq!(
            exported,
            serde_json::from_str::<Value>(vars).unwrap(),
            "vars do not round-trip"
        );
    }
    project
}

fn db(project: &TempProject) -> Connection {
    Connection::open(project.db()).unwrap()
}

fn count(conn: &Connection, sql: &str) -> i64 {
    conn.query_row(sql, [], |r| r.get(0)).unwrap()
}

#[test]
fn valid_samples_round_trip() {
    assert_round_trip(
        &read("samples/cache-full.json"),
        Some(&read("samples/vars-full.json")),
    );
    assert_round_trip(
        &read("samples/cache-minimal.json"),
        Some(&read("samples/vars-minimal.json")),
    );
    assert_round_trip(&read("samples/cache-spec-shaped.json"), None);
}

#[test]
fn cli_shaped_cache_is_normalised() {
    let project = assert_round_trip(&read("samples/cache-cli-shaped.json"), None);
    let conn = db(&project);
    // File keys carry ./ but canonical paths do not; symbols join on them.
    let path: String = conn
        .query_row(
            "SELECT path FROM files WHERE key = './src/orders/tax.ts'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(path, "src/orders/tax.ts");
    assert_eq!(
        count(
            &conn,
            "SELECT count(*) FROM symbols s JOIN files f ON f.path = s.file_path"
        ),
        4
    );
    // Nested constraint shape: levels normalised, by_lock_level kept verbatim.
    let level: String = conn
        .query_row(
            "SELECT lock_level FROM constraints WHERE path = 'src/orders/tax.ts'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(level, "frozen");
    // reverse held computeTax twice: one edge with count 2, plus forward-only and dangling edges.
    let (count2, rev): (i64, i64) = conn
        .query_row("SELECT count, reverse_count FROM call_graph JOIN call_edges USING (count) WHERE caller = 'placeOrder' AND callee = 'computeTax' LIMIT 1", [], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap();
    assert_eq!((count2, rev), (2, 2));
    assert_eq!(
        count(
            &conn,
            "SELECT count(*) FROM call_graph WHERE caller = 'placeOrder' AND callee = 'save'"
        ),
        1
    );
    let dangling: Option<i64> = conn
        .query_row(
            "SELECT symbol_id FROM graph_nodes WHERE name = 'save'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(dangling, None);
    let resolved: Option<i64> = conn
        .query_row(
            "SELECT symbol_id FROM graph_nodes WHERE name = 'computeTax'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(resolved.is_some());
    let reverse_len: i64 = conn
        .query_row(
            "SELECT reverse_len FROM graph_nodes WHERE name = 'computeTax'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(reverse_len, 2);
    // Inline annotations and domain membership are derived.
    assert_eq!(count(&conn, "SELECT count(*) FROM inline_annotations"), 2);
    assert_eq!(
        count(
            &conn,
            "SELECT count(*) FROM domain_files WHERE domain = 'orders' AND source = 'domain'"
        ),
        2
    );
    assert_eq!(
        count(
            &conn,
            "SELECT count(*) FROM cache_hacks WHERE path = 'src/legacy/export.ts'"
        ),
        1
    );
}

/// A cache with the quirks real generators produce.
fn quirky_cache() -> Value {
    let callers: Vec<String> = (0..12_000)
        .map(|i| format!("caller{}", i % 11_000))
        .collect();
    let destructuring = "{\n  alpha,\n  beta: { gamma, delta = 4 },\n  ...rest\n}".repeat(8);
    json!({
        "symbols": {
            "": {"name": "", "qualified_name": "src/a b/x=y.ts:", "type": "const", "file": "src/a b/x=y.ts", "lines": [1, 1], "exported": true},
            destructuring.clone(): {"name": destructuring, "qualified_name": "src/a b/x=y.ts:pattern", "type": "const", "file": "src/a b/x=y.ts", "lines": [2, 9], "exported": false, "x_custom": {"nested": [1, 2.5, null]}},
            "hub": {"name": "hub", "qualified_name": "C:\\proj\\src\\hub.ts:hub", "type": "function", "file": "C:\\proj\\src\\hub.ts", "lines": [1, 3], "exported": true, "async": false, "calls": ["hub"]},
            "orphan": {"name": "orphan", "qualified_name": "src/missing.ts:orphan", "type": "gizmo", "file": "src/missing.ts", "lines": "ten", "exported": "yes", "signature": null}
        },
        "version": "0.5.1",
        "generated_at": "2025-12-01T00:00:00Z",
        "project": {"name": "quirks", "root": "C:\\proj", "x_owner": "platform"},
        "stats": {"files": 2, "symbols": 4, "lines": 10, "annotation_coverage": 25.0},
        "source_files": {"src/a b/x=y.ts": "2025-12-01T00:00:00Z", "weird": 17},
        "files": {
            "./src/a b/x=y.ts": {"path": "./src/a b/x=y.ts", "lines": 9, "language": "typescript", "exports": [], "imports": [], "domains": ["?!", "core"]},
            "C:\\proj\\src\\hub.ts": {"path": "C:\\proj\\src\\hub.ts", "lines": 3, "language": "cobol", "exports": ["hub"], "imports": [], "importedBy": ["x"], "stability": null}
        },
        "graph": {"reverse": {"hub": callers, "ghost": ["hub", "hub"]}, "forward": {"hub": ["ghost"], "caller1": ["hub"]}, "x_meta": true},
        "domains": {"?!": {"name": "?!", "files": ["./src/a b/x=y.ts"], "symbols": []}, "core": {"name": "core", "files": ["C:\\proj\\src\\hub.ts"], "symbols": ["hub"], "owner": "x"}},
        "constraints": {"by_file": {"C:\\proj\\src\\hub.ts": {"lock_level": "tests-required", "quality": ["tests-required"], "x": 1}}, "by_lock_level": {"testsrequired": ["C:\\proj\\src\\hub.ts"]}, "hacks": [], "debug_sessions": [{"id": "d1"}], "x_more": null},
        "provenance": null,
        "x_top_level": [1, {"a": "b"}]
    })
}

#[test]
fn real_world_quirks_import_and_round_trip() {
    let cache = quirky_cache();
    let project = assert_round_trip(&cache.to_string(), None);
    let conn = db(&project);
    assert_eq!(count(&conn, "SELECT count(*) FROM symbols"), 4);
    // Absolute Windows keys become root-relative canonical paths.
    assert_eq!(
        count(
            &conn,
            "SELECT count(*) FROM files WHERE path = 'src/hub.ts'"
        ),
        1
    );
    assert_eq!(
        count(
            &conn,
            "SELECT count(*) FROM symbols WHERE file_path = 'src/hub.ts'"
        ),
        1
    );
    assert_eq!(count(&conn, "SELECT count(*) FROM constraints WHERE path = 'src/hub.ts' AND lock_level = 'tests-required'"), 1);
    assert_eq!(
        count(
            &conn,
            "SELECT count(*) FROM lock_level_lists WHERE lock_level = 'tests-required'"
        ),
        1
    );
    // 12,000 reverse entries with duplicates: 11,000 distinct callers, duplicates counted.
    assert_eq!(
        count(
            &conn,
            "SELECT reverse_len FROM graph_nodes WHERE name = 'hub'"
        ),
        12_000
    );
    assert_eq!(
        count(
            &conn,
            "SELECT count(*) FROM call_graph WHERE callee = 'hub'"
        ),
        11_001
    );
    assert_eq!(
        count(
            &conn,
            "SELECT count FROM call_graph WHERE caller = 'caller1' AND callee = 'hub'"
        ),
        2
    );
    assert_eq!(
        count(
            &conn,
            "SELECT count FROM call_graph WHERE caller = 'hub' AND callee = 'ghost'"
        ),
        2
    );
    // Unknown enum values and wrong types are warnings, kept verbatim.
    assert!(
        count(
            &conn,
            "SELECT count(*) FROM import_warnings WHERE message LIKE '%cobol%'"
        ) == 1
    );
    assert!(
        count(
            &conn,
            "SELECT count(*) FROM import_warnings WHERE message LIKE '%gizmo%'"
        ) == 1
    );
    let extra: String = conn
        .query_row("SELECT extra FROM symbols WHERE key = 'orphan'", [], |r| {
            r.get(0)
        })
        .unwrap();
    let extra: Value = serde_json::from_str(&extra).unwrap();
    assert_eq!(
        extra,
        json!({"lines": "ten", "exported": "yes", "signature": null})
    );
    // Domain names made of punctuation and file keys with spaces survive.
    assert_eq!(
        count(
            &conn,
            "SELECT count(*) FROM domain_files WHERE domain = '?!' AND path = 'src/a b/x=y.ts'"
        ),
        2
    );
}

#[test]
fn key_order_does_not_matter() {
    let cache: Value = serde_json::from_str(&read("samples/cache-cli-shaped.json")).unwrap();
    let Value::Object(map) = cache else {
        unreachable!()
    };
    let reversed: serde_json::Map<String, Value> = map.into_iter().rev().collect();
    let text = serde_json::to_string(&Value::Object(reversed)).unwrap();
    let project = assert_round_trip(&text, None);
    assert_eq!(
        count(
            &db(&project),
            "SELECT count(*) FROM symbols s JOIN files f ON f.path = s.file_path"
        ),
        4
    );
}

#[test]
fn invalid_samples_are_rejected_or_warned_never_crash() {
    for name in [
        "cache-invalid-bad-behavior.json",
        "cache-invalid-bad-language.json",
        "cache-invalid-missing-version.json",
    ] {
        let project = TempProject::with_cache(&read(&format!("samples/{name}")), None);
        let out = project.run(&["import"]);
        assert!(out.status.code().is_some(), "{name}: killed by a signal");
        if out.status.success() {
            assert!(
                count(&db(&project), "SELECT count(*) FROM import_warnings") > 0,
                "{name}: imported without a warning"
            );
            assert_eq!(
                project.export(),
                serde_json::from_str::<Value>(&read(&format!("samples/{name}"))).unwrap()
            );
        } else {
            assert!(
                stderr(&out).contains("acp.cache.json"),
                "{name}: {}",
                stderr(&out)
            );
        }
    }
    let project = TempProject::with_cache(
        &read("samples/cache-minimal.json"),
        Some(&read("samples/vars-invalid-bad-type.json")),
    );
    let out = project.run(&["import"]);
    assert!(out.status.code().is_some());
    if out.status.success() {
        assert!(
            count(
                &db(&project),
                "SELECT count(*) FROM import_warnings WHERE path = 'variables'"
            ) == 1
        );
    }
}

/// Imports `good`, then tries `bad`; checks the error and that the first database is untouched.
fn assert_bad_input(bad: &[u8], extra_args: &[&str], expected: &[&str]) {
    let project = TempProject::with_cache(&read("samples/cache-cli-shaped.json"), None);
    project.import();
    let before = project.export();
    fs::write(project.cache_path(), bad).unwrap();
    let mut args = vec!["import"];
    args.extend_from_slice(extra_args);
    let out = project.run(&args);
    let err = stderr(&out);
    assert!(!out.status.success(), "import of bad input succeeded");
    assert!(
        err.contains("acp.cache.json"),
        "error does not name the file: {err}"
    );
    for needle in expected {
        assert!(err.contains(needle), "error lacks {needle:?}: {err}");
    }
    assert_eq!(project.export(), before, "previous database changed");
    let leftovers: Vec<_> = fs::read_dir(project.root().join(".acp"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains("importing"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left behind");
}

#[test]
fn a_cache_that_is_no_regular_file_is_refused_at_once_and_named() {
    let project = TempProject::with_cache(&read("samples/cache-cli-shaped.json"), None);
    project.import();
    let before = project.export();
    // Nobody ever writes to these FIFOs: opening one the usual way would never return.
    let pipe = project.root().join("pipe.json");
    mkfifo(&pipe);
    let (status, err) = run_unblocked(
        project.root(),
        &["import", "--cache", pipe.to_str().unwrap()],
        "a FIFO named by --cache",
    );
    assert!(!status.success());
    assert!(
        err.contains("pipe.json: is a FIFO, not a regular file"),
        "{err}"
    );
    // In the cache's own place it is found, and refused by name.
    fs::remove_file(project.cache_path()).unwrap();
    mkfifo(&project.cache_path());
    let (status, err) = run_unblocked(project.root(), &["import"], "a FIFO cache");
    assert!(!status.success());
    assert!(
        err.contains("acp.cache.json: is a FIFO, not a regular file"),
        "{err}"
    );
    fs::remove_file(project.cache_path()).unwrap();
    fs::create_dir(project.cache_path()).unwrap();
    let (status, err) = run_unblocked(project.root(), &["import"], "a directory cache");
    assert!(!status.success());
    assert!(
        err.contains("acp.cache.json: is a directory, not a regular file"),
        "{err}"
    );
    assert_eq!(project.export(), before, "previous database changed");
}

#[cfg(unix)]
#[test]
fn a_lock_file_planted_as_a_link_is_refused_and_its_target_kept() {
    let project = TempProject::with_cache(&read("samples/cache-cli-shaped.json"), None);
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("victim.txt");
    fs::write(&victim, "important").unwrap();
    let lock = project.root().join(".acp/acp.db.import-lock");
    let _ = fs::remove_file(&lock);
    std::os::unix::fs::symlink(&victim, &lock).unwrap();
    let out = project.run(&["import"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("is a symbolic link, not a regular file"),
        "{err}"
    );
    assert_eq!(fs::read_to_string(&victim).unwrap(), "important");
}

/// A new database that cannot be put in place (here the database's path is a directory) fails
/// the import with the reason, and its temporary file goes with it: at 1M symbols it is as large
/// as the database.
#[test]
fn a_database_that_cannot_be_put_in_place_leaves_no_temporary_file() {
    let project = TempProject::with_cache(&read("samples/cache-cli-shaped.json"), None);
    fs::create_dir_all(project.db().join("kept")).unwrap();
    let out = project.run(&["import"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("cannot move the new database into place") && err.contains("directory"),
        "{err}"
    );
    let mut left: Vec<String> = fs::read_dir(project.root().join(".acp"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.contains(".tmp"))
        .collect();
    left.sort();
    assert_eq!(left, Vec::<String>::new());
    assert!(project.db().join("kept").is_dir());
}

#[test]
fn not_json_is_an_error() {
    assert_bad_input(b"this is not json", &[], &["line 1"]);
}

#[test]
fn truncated_json_is_an_error_with_path() {
    let text = read("samples/cache-cli-shaped.json");
    let cut = text.find("\"CheckoutError\"").unwrap() + 60;
    assert_bad_input(
        &text.as_bytes()[..cut],
        &[],
        &["truncated", "symbols.CheckoutError", "line"],
    );
}

#[test]
fn wrong_entry_type_is_an_error_with_path() {
    let mut cache: Value = serde_json::from_str(&read("samples/cache-cli-shaped.json")).unwrap();
    cache["symbols"]["toCsv"] = json!(42);
    assert_bad_input(
        cache.to_string().as_bytes(),
        &[],
        &["symbols.toCsv", "expected an object", "line 1 column"],
    );
}

#[test]
fn huge_string_is_refused() {
    let mut cache: Value = serde_json::from_str(&read("samples/cache-cli-shaped.json")).unwrap();
    cache["symbols"]["toCsv"]["summary"] = json!("x".repeat(3 << 20));
    assert_bad_input(
        cache.to_string().as_bytes(),
        &["--max-entry-mb", "1"],
        &["larger than the 1 MiB limit"],
    );
}

#[test]
fn deep_nesting_is_refused() {
    let mut cache: Value = serde_json::from_str(&read("samples/cache-cli-shaped.json")).unwrap();
    cache["symbols"]["toCsv"]["x_deep"] = json!("PLACEHOLDER");
    let text = cache.to_string().replace(
        "\"PLACEHOLDER\"",
        &format!("{}{}", "[".repeat(5000), "]".repeat(5000)),
    );
    assert_bad_input(text.as_bytes(), &[], &["recursion limit", "symbols.toCsv"]);
}

#[test]
fn missing_cache_says_how_to_make_one() {
    let dir = tempfile::tempdir().unwrap();
    let out = acpdb()
        .arg("-C")
        .arg(dir.path())
        .arg("import")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(stderr(&out).contains("acp index"), "{}", stderr(&out));
}

#[test]
fn non_cache_json_is_refused() {
    assert_bad_input(
        b"{\"hello\": [1, 2, 3]}",
        &[],
        &["not an ACP cache", "`files`"],
    );
    assert_bad_input(b"[1, 2, 3]", &[], &["expected an ACP cache"]);
}

#[test]
fn database_opens_in_the_sqlite3_shell() {
    let project = TempProject::with_cache(&read("samples/cache-cli-shaped.json"), None);
    project.import();
    let conn = db(&project);
    let check: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok");
    assert_eq!(
        count(
            &conn,
            "SELECT count(*) FROM symbols_fts WHERE symbols_fts MATCH 'computeTax'"
        ),
        1
    );
    if let Ok(out) = std::process::Command::new("sqlite3")
        .arg(project.db())
        .arg("SELECT count(*) FROM symbols_name_trigram WHERE name LIKE '%ompute%'")
        .output()
    {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "1");
    }
}

#[test]
fn killed_import_leaves_previous_database() {
    // A delta (a revision with 2 % of the files edited) is killed while it reads, while it
    // links and while it finishes, then full imports are. A killed delta leaves the previous
    // state (its transaction never committed), a killed full import the database it replaces.
    let project = TempProject::generated(3000);
    let before = project.export();
    project.revise(3000, 2.0);
    let after: Value =
        serde_json::from_str(&fs::read_to_string(project.cache_path()).unwrap()).unwrap();
    for (args, old) in [(&["import"][..], &before), (&["import", "--full"], &after)] {
        if !kill_in_every_phase(&project, old, &after, args) {
            // An import finished before a phase was seen; its database was checked.
            return;
        }
        if args == ["import"] {
            // The full imports below start from the new state.
            project.run(&["import", "--no-progress"]);
        }
    }
    // The next import cleans up what the killed ones left and succeeds.
    let out = project.import();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.lines().last().unwrap().starts_with("delta: "), "{err}");
    assert_eq!(project.export(), after);
    let leftovers: Vec<_> = fs::read_dir(project.root().join(".acp"))
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".tmp") || name.contains("importing"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

/// Runs `acpdb <args>` once per phase and kills it as soon as it reports that phase, checking
/// each time that the database is whole and exports as `old`. False when an import finished
/// before its phase was seen (its database must then export as `new`).
fn kill_in_every_phase(project: &TempProject, old: &Value, new: &Value, args: &[&str]) -> bool {
    use std::io::BufRead;

    let phases = [
        "reading the cache",
        "linking the call graph",
        "building indexes and full-text search",
    ];
    let mut killed_in = Vec::new();
    for phase in phases {
        let mut child = acpdb()
            .arg("-C")
            .arg(project.root())
            .args(args)
            .args(["--progress-interval", "0.005"])
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
        let mut finished = true;
        for line in lines.map_while(Result::ok) {
            if line.starts_with(&format!("import: {phase}, ")) {
                child.kill().unwrap();
                killed_in.push(phase);
                finished = false;
                break;
            }
        }
        child.wait().unwrap();
        let conn = db(project);
        let integrity: String = conn
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(integrity, "ok", "{args:?} killed in {phase}");
        let exported = project.export();
        if finished {
            assert_eq!(&exported, new, "{args:?} finished before {phase}");
            return false;
        }
        if &exported != old {
            // Killed after its commit: the new state, whole.
            assert_eq!(&exported, new, "{args:?} killed in {phase}");
        }
    }
    assert_eq!(killed_in, phases, "{args:?} was not killed in every phase");
    true
}

#[test]
fn fixtures_round_trip() {
    for name in [
        "demo",
        "spec-shaped",
        "real/anyhow",
        "real/demo-ts",
        "real/python-stdlib",
    ] {
        let source = common::fixture(name);
        let project = TempProject::copy_of(&source);
        let out = project.import();
        assert!(!stderr(&out).contains("importing again"), "{name}");
        let original: Value =
            serde_json::from_str(&fs::read_to_string(project.cache_path()).unwrap()).unwrap();
        assert_eq!(
            project.export(),
            original,
            "{name}: cache does not round-trip"
        );
        let vars_path = project.root().join(".acp/acp.vars.json");
        let out_path = project.root().join("vars-out.json");
        let out = project.run(&[
            "export-cache",
            "--out",
            "/dev/null",
            "--vars-out",
            out_path.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        let vars: Value = serde_json::from_str(&fs::read_to_string(vars_path).unwrap()).unwrap();
        let exported: Value = serde_json::from_str(&fs::read_to_string(out_path).unwrap()).unwrap();
        assert_eq!(exported, vars, "{name}: vars do not round-trip");
        common::check_full_text_indexes(&db(&project)).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

#[test]
fn graph_lists_round_trip_with_duplicates_disorder_and_unknown_names() {
    // Lists longer than a part, read in parts: one of names (with repeats, and names that are
    // nowhere else), one whose last item is not a name (read again whole once parts are sent).
    let long = |n: usize| -> Vec<Value> {
        (0..n)
            .map(|i| match i % 5 {
                0 => json!("g"),
                1 => json!("f"),
                2 => json!("zeta"),
                _ => json!(format!("unknown {}", i % 1000)),
            })
            .collect()
    };
    let mut hub = long(2 * LIST_PART + 3);
    hub.insert(5, json!("g"));
    let mut not_names = long(LIST_PART + 10);
    not_names.push(json!(false));
    let cache = json!({
        "version": "0.7.0", "generated_at": "2026-01-01T00:00:00Z",
        "project": {"name": "p", "root": "."},
        "stats": {"files": 1, "symbols": 2, "lines": 1}, "source_files": {},
        "files": {"a.ts": {"path": "a.ts", "lines": 1, "language": "typescript", "exports": [], "imports": []}},
        "symbols": {
            "f": {"name": "f", "qualified_name": "a.ts:f", "type": "function", "file": "a.ts", "lines": [1, 1], "exported": true},
            "g": {"name": "g", "qualified_name": "a.ts:g", "type": "function", "file": "a.ts", "lines": [2, 2], "exported": true}
        },
        "graph": {
            "x_before": 1,
            "forward": {
                "zeta": ["g", "f", "g", "g", "absent", "f", "zeta"],
                "f": ["g", "g", "g"],
                "nobody": [],
                "mixed": ["f", 7, null, "g", {"name": "f"}],
                "odd": "not a list",
                "absent": ["absent", "absent"],
                "hub": hub,
                "almost": not_names,
            },
            "reverse": {
                "g": ["zeta", "f", "f", "zeta", "zeta", "f"],
                "empty": [],
                "f": ["mixed", "zeta", "zeta"],
                "absent": ["zeta", "absent", "absent"],
                "zeta": ["zeta"],
                "hub": long(LIST_PART + 1)
            }
        }
    });
    let project = assert_round_trip(&cache.to_string(), None);
    let conn = db(&project);
    assert_eq!(
        count(
            &conn,
            "SELECT count(*) FROM graph_lists WHERE typeof(items) = 'text'"
        ),
        3,
        "only the lists that are not lists of names are stored as JSON text"
    );
    assert_eq!(
        count(
            &conn,
            "SELECT reverse_len FROM graph_nodes WHERE name = 'g'"
        ),
        6
    );
    assert_eq!(
        count(
            &conn,
            "SELECT reverse_len FROM graph_nodes WHERE name = 'hub'"
        ),
        LIST_PART as i64 + 1
    );
    assert_eq!(
        count(
            &conn,
            "SELECT count(*) FROM call_graph WHERE caller = 'zeta' AND callee = 'g'"
        ),
        1
    );
    // Each list's edges are counted once, the list read whole or in parts.
    let edge = |caller: &str, callee: &str| {
        count(
            &conn,
            &format!("SELECT coalesce(sum(count), 0) FROM call_edges e JOIN graph_nodes a ON a.id = e.caller_id JOIN graph_nodes b ON b.id = e.callee_id WHERE a.name = '{caller}' AND b.name = '{callee}'"),
        )
    };
    let g_in_hub = hub.iter().filter(|n| *n == "g").count() as i64;
    assert_eq!(edge("hub", "g"), g_in_hub);
    let g_in_almost = not_names.iter().filter(|n| *n == "g").count() as i64;
    assert_eq!(edge("almost", "g"), g_in_almost);
    let zeta_in_hub_reverse = long(LIST_PART + 1).iter().filter(|n| *n == "zeta").count();
    assert_eq!(edge("zeta", "hub"), zeta_in_hub_reverse as i64);
    assert_eq!(
        count(&conn, "SELECT count FROM call_edges e JOIN graph_nodes a ON a.id = e.caller_id JOIN graph_nodes b ON b.id = e.callee_id WHERE a.name = 'zeta' AND b.name = 'g'"),
        3
    );
    let no_violations: i64 = conn
        .prepare("PRAGMA foreign_key_check")
        .unwrap()
        .query_map([], |_| Ok(()))
        .unwrap()
        .count() as i64;
    assert_eq!(no_violations, 0, "a foreign key points nowhere");
}

#[test]
fn file_overview_shows_the_strictest_lock_level() {
    let cache = json!({
        "version": "0.7.0", "generated_at": "2026-01-01T00:00:00Z",
        "project": {"name": "p", "root": "."},
        "stats": {"files": 2, "symbols": 0, "lines": 2}, "source_files": {},
        "files": {
            "a.ts": {"path": "a.ts", "lines": 1, "language": "typescript", "exports": [], "imports": []},
            "b.ts": {"path": "b.ts", "lines": 1, "language": "typescript", "exports": [], "imports": []}
        },
        "symbols": {},
        "constraints": {"by_file": {
            "a.ts": {"lock_level": "experimental"},
            "./a.ts": {"lock_level": "frozen"},
            "a.ts/": {"lock_level": "review-required"},
            "b.ts": {"lock_level": "made-up"}
        }}
    });
    let project = assert_round_trip(&cache.to_string(), None);
    let conn = db(&project);
    let level = |path: &str| -> String {
        conn.query_row(
            "SELECT lock_level FROM file_overview WHERE path = ?1",
            [path],
            |r| r.get(0),
        )
        .unwrap()
    };
    assert_eq!(level("a.ts"), "frozen");
    assert_eq!(level("b.ts"), "normal");
    assert_eq!(
        count(
            &conn,
            "SELECT files FROM file_lock_levels WHERE lock_level = 'frozen'"
        ),
        1
    );
}

#[test]
fn duplicate_keys_keep_the_first_entry_with_a_warning() {
    let cache = r#"{"version": "0.7.0", "generated_at": "2026-01-01T00:00:00Z", "project": {"name": "p", "root": "."},
        "stats": {"files": 1, "symbols": 1, "lines": 1}, "source_files": {},
        "files": {"a.ts": {"path": "a.ts", "lines": 1, "language": "typescript", "exports": [], "imports": []},
                  "a.ts": {"path": "a.ts", "lines": 2, "language": "typescript", "exports": [], "imports": []}},
        "symbols": {"f": {"name": "f", "qualified_name": "a.ts:f", "type": "function", "file": "a.ts", "lines": [1, 1], "exported": true},
                    "f": {"name": "f", "qualified_name": "a.ts:f2", "type": "function", "file": "a.ts", "lines": [2, 2], "exported": true},
                    "g": {"name": "g", "qualified_name": "a.ts:g", "type": "function", "file": "a.ts", "lines": [3, 3], "exported": true}},
        "graph": {"forward": {"f": ["g"], "f": ["h"]}, "reverse": {"g": ["f"]}}}"#;
    // The repeated list is also one read in parts.
    let hub: Vec<String> = (0..=LIST_PART).map(|i| format!("h{i}")).collect();
    let cache = cache.replace(r#"["h"]"#, &serde_json::to_string(&hub).unwrap());
    let project = TempProject::with_cache(&cache, None);
    // Found once the unique key indexes are built, then imported again with every key checked.
    let out = project.import();
    assert!(
        stderr(&out).contains("repeats a key of files, symbols or source_files; importing again"),
        "{}",
        stderr(&out)
    );
    let conn = db(&project);
    assert_eq!(
        count(&conn, "SELECT lines FROM files WHERE key = 'a.ts'"),
        1
    );
    assert_eq!(count(&conn, "SELECT count(*) FROM symbols"), 2);
    assert_eq!(
        count(&conn, "SELECT line_start FROM symbols WHERE key = 'f'"),
        1
    );
    assert_eq!(
        count(
            &conn,
            "SELECT count(*) FROM import_warnings WHERE message LIKE 'duplicate key%'"
        ),
        3
    );
    assert_eq!(
        count(
            &conn,
            "SELECT count(*) FROM call_graph WHERE caller = 'f' AND callee = 'h'"
        ),
        0
    );
    assert_eq!(
        count(
            &conn,
            "SELECT count(*) FROM graph_nodes WHERE name LIKE 'h%'"
        ),
        0,
        "the names of a list that is not imported are not call-graph nodes"
    );
}

#[test]
fn a_missing_cache_file_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nowhere/acp.cache.json");
    let out = acpdb()
        .arg("-C")
        .arg(dir.path())
        .arg("--cache")
        .arg(&missing)
        .arg("import")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("nowhere/acp.cache.json"),
        "{}",
        stderr(&out)
    );
    assert!(!dir.path().join(".acp/acp.db").exists());
}

/// The schema spells the lock levels' order for SQL (`lock_levels`); it must be the order the
/// code ranks them in (`cache::LOCK_LEVELS`).
#[test]
fn the_schema_ranks_lock_levels_as_the_code_does() {
    let mut conn = rusqlite::Connection::open_in_memory().unwrap();
    acpdb::db::migrate(&mut conn, None).unwrap();
    let levels = common::strings(&conn, "SELECT lock_level FROM lock_levels ORDER BY rank");
    assert_eq!(levels, acpdb::cache::LOCK_LEVELS);
}

#[test]
fn the_import_floor_rebuilds_every_table_index_and_full_text_index_of_an_import() {
    let project = TempProject::generated(30);
    let scratch = project.root().join("floor.db");

    let steps = acpdb::import::floor::measure(&project.cache_path(), &project.db(), &scratch)
        .expect("floor");

    let (source, copy) = (db(&project), Connection::open(&scratch).unwrap());
    let schema = "SELECT type || ' ' || name FROM sqlite_schema \
                  WHERE name NOT LIKE 'sqlite%' ORDER BY name";
    assert_eq!(
        common::strings(&copy, schema),
        common::strings(&source, schema),
        "the copy has the import's tables, views, indexes and full-text tables"
    );
    let full_text = common::strings(
        &source,
        "SELECT name FROM sqlite_schema WHERE sql LIKE 'CREATE VIRTUAL TABLE%'",
    );
    for table in common::strings(
        &source,
        "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite%'",
    ) {
        // The full-text tables' own rows depend on how their segments were merged.
        if !full_text
            .iter()
            .any(|name| table.starts_with(name.as_str()))
        {
            let rows = format!("SELECT count(*) FROM \"{table}\"");
            assert_eq!(
                count(&copy, &rows),
                count(&source, &rows),
                "rows of {table}"
            );
        }
    }
    common::check_full_text_indexes(&copy).unwrap();
    let matches = "SELECT count(*) FROM symbols_fts WHERE symbols_fts MATCH 'compute*'";
    assert!(count(&source, matches) > 0);
    assert_eq!(count(&copy, matches), count(&source, matches));
    let indexes = count(
        &source,
        "SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND sql IS NOT NULL",
    );
    assert_eq!(steps.len() as i64, 2 + full_text.len() as i64 + indexes);
    assert!(steps.iter().all(|step| step.cpu.is_some()));
}
