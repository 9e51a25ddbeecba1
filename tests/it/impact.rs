//! `acp_impact` and `acpdb impact`: changed symbols, callers with their paths, lock levels and
//! the exit status for hooks, on the demo project and on the real generator's cache of the same
//! sources. Expected values come from the imported tables, never from the answer itself.

use std::collections::BTreeSet;
use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use rusqlite::Connection;
use serde_json::{json, Value};

use crate::common::mcp::{wait_ready, Client};
use crate::common::{acpdb, fixture, stderr, TempProject};

fn strings(conn: &Connection, sql: &str, param: &str) -> BTreeSet<String> {
    let mut stmt = conn.prepare(sql).unwrap();
    stmt.query_map([param], |r| r.get::<_, String>(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn impact_json(project: &TempProject, args: &[&str]) -> Value {
    let mut all = vec!["impact", "--json"];
    all.extend_from_slice(args);
    let out = project.run(&all);
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn names(list: &Value) -> BTreeSet<String> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_string())
        .collect()
}

/// Impacted symbols at `distance`, over every group.
fn impacted_at(answer: &Value, distance: u64) -> BTreeSet<String> {
    answer["impacted"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["symbols"].as_array().unwrap().clone())
        .filter(|s| s["distance"] == distance)
        .map(|s| s["name"].as_str().unwrap().to_string())
        .collect()
}

/// Direct callers of the symbols named, from the call graph as imported.
fn direct_callers(conn: &Connection, changed: &BTreeSet<String>) -> BTreeSet<String> {
    let mut callers = BTreeSet::new();
    for name in changed {
        callers.extend(strings(
            conn,
            "SELECT coalesce(caller_qualified_name, caller) FROM call_graph
             WHERE coalesce(callee_qualified_name, callee) = ?1",
            name,
        ));
    }
    &callers - changed
}

#[test]
fn a_file_changes_its_symbols_and_impacts_their_callers() {
    for source in [fixture("demo"), fixture("real/demo-ts")] {
        let project = TempProject::copy_of(&source);
        project.import();
        let conn = Connection::open(project.db()).unwrap();
        let path = "src/auth/session.ts";
        let answer = impact_json(&project, &["--files", &format!("./{path}"), "--depth", "1"]);
        let changed = names(&answer["changed"]);
        let expected = strings(
            &conn,
            "SELECT coalesce(qualified_name, key) FROM symbols WHERE file_path = ?1",
            path,
        );
        assert_eq!(changed, expected, "{}", source.display());
        assert_eq!(
            impacted_at(&answer, 1),
            direct_callers(&conn, &changed),
            "{}",
            source.display()
        );
        let lock: String = conn
            .query_row(
                "SELECT lock_level FROM file_overview WHERE path = ?1",
                [path],
                |r| r.get(0),
            )
            .unwrap();
        let touched = &answer["files"][0];
        assert_eq!(touched["file"], path);
        assert_eq!(touched["role"], "touched");
        assert_eq!(touched["lock_level"], lock.as_str());
        assert_eq!(answer["strictest_touched_lock"], lock.as_str());
        // Every impacted file is listed with its own lock level.
        for file in answer["files"].as_array().unwrap().iter().skip(1) {
            assert_eq!(file["role"], "impacted");
            let level: String = conn
                .query_row(
                    "SELECT lock_level FROM file_overview WHERE path = ?1",
                    [file["file"].as_str().unwrap()],
                    |r| r.get(0),
                )
                .unwrap();
            assert_eq!(file["lock_level"], level.as_str());
        }
    }
}

#[test]
fn a_symbol_walks_callers_to_the_depth_with_shortest_paths() {
    let project = TempProject::copy_of(&fixture("demo"));
    project.import();
    let conn = Connection::open(project.db()).unwrap();
    let answer = impact_json(&project, &["--symbols", "validateSession", "--depth", "3"]);
    let changed = names(&answer["changed"]);
    assert_eq!(changed.len(), 1);
    let first = direct_callers(&conn, &changed);
    assert!(!first.is_empty());
    assert_eq!(impacted_at(&answer, 1), first);
    let second = &direct_callers(&conn, &first) - &first;
    assert_eq!(impacted_at(&answer, 2), &second - &changed);
    // Each path runs from the impacted symbol to the changed one, one call per step.
    for group in answer["impacted"].as_array().unwrap() {
        for symbol in group["symbols"].as_array().unwrap() {
            let path: Vec<&str> = symbol["path"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p.as_str().unwrap())
                .collect();
            assert_eq!(path.len() as u64, symbol["distance"].as_u64().unwrap() + 1);
            assert_eq!(path[0], symbol["name"].as_str().unwrap());
            assert!(changed.contains(*path.last().unwrap()), "{path:?}");
        }
    }
    // limit 0: the totals only.
    let totals = impact_json(
        &project,
        &[
            "--symbols",
            "validateSession",
            "--depth",
            "3",
            "--limit",
            "0",
        ],
    );
    assert_eq!(totals["impacted"], json!([]));
    assert_eq!(totals["totals"], answer["totals"]);
    assert!(totals["totals"]["impacted_symbols"].as_u64().unwrap() > 0);
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn a_git_diff_selects_the_symbols_its_hunks_touch_and_fails_on_locked_files() {
    let project = TempProject::copy_of(&fixture("real/demo-ts"));
    project.import();
    let root = project.root();
    // The sources the cache was made from, in a repository.
    let src = root.join("src");
    fs::create_dir_all(&src).unwrap();
    crate::common::copy_tree(&fixture("demo").join("src"), &src);
    git(root, &["init", "-q"]);
    git(root, &["add", "src"]);
    git(root, &["commit", "-q", "-m", "base"]);
    // A real edit inside verifyToken (lines 22-28 of src/auth/token.ts), and a new file.
    let token = src.join("auth/token.ts");
    let text = fs::read_to_string(&token).unwrap();
    let edited: Vec<String> = text
        .lines()
        .enumerate()
        .map(|(i, line)| {
            if i + 1 == 24 {
                format!("{line} // checked")
            } else {
                line.to_string()
            }
        })
        .collect();
    fs::write(&token, edited.join("\n") + "\n").unwrap();
    fs::write(src.join("auth/new.ts"), "export const fresh = 1;\n").unwrap();
    git(root, &["add", "-N", "src/auth/new.ts"]);
    let diff = git(root, &["diff"]);

    let run = |extra: &[&str]| {
        let mut child = acpdb()
            .arg("-C")
            .arg(root)
            .args(["impact", "--diff", "-"])
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        if let Err(err) = child.stdin.take().unwrap().write_all(diff.as_bytes()) {
            // A command that refuses its arguments exits before it reads its input.
            assert_eq!(err.kind(), std::io::ErrorKind::BrokenPipe, "{err}");
        }
        child.wait_with_output().unwrap()
    };
    let out = run(&["--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    let conn = Connection::open(project.db()).unwrap();
    let expected = strings(
        &conn,
        "SELECT coalesce(qualified_name, key) FROM symbols
         WHERE file_path = ?1 AND line_start <= 24 AND line_end >= 24",
        "src/auth/token.ts",
    );
    assert!(!expected.is_empty());
    assert_eq!(names(&answer["changed"]), expected);
    let files: Vec<(String, String, bool)> = answer["files"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["role"] == "touched")
        .map(|f| {
            (
                f["file"].as_str().unwrap().to_string(),
                f["lock_level"].as_str().unwrap().to_string(),
                f["indexed"].as_bool().unwrap(),
            )
        })
        .collect();
    let token_lock: String = conn
        .query_row(
            "SELECT lock_level FROM file_overview WHERE path = 'src/auth/token.ts'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(
        files,
        vec![
            ("src/auth/new.ts".to_string(), "normal".to_string(), false),
            ("src/auth/token.ts".to_string(), token_lock.clone(), true),
        ]
    );

    // Exit status for hooks: 3 when a touched file is locked at the level given or stricter.
    assert_eq!(token_lock, "frozen");
    assert_eq!(run(&["--fail-on", "frozen"]).status.code(), Some(3));
    assert_eq!(
        run(&["--fail-on", "approval-required"]).status.code(),
        Some(3)
    );
    let table = run(&[]);
    assert_eq!(table.status.code(), Some(0));
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(
        text.contains("touched    frozen") && text.contains("NO"),
        "{text}"
    );
    let bad = run(&["--fail-on", "locked"]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        stderr(&bad).contains("unknown lock level `locked`"),
        "{}",
        stderr(&bad)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acp_impact_answers_over_mcp_and_refuses_bad_arguments() {
    let project = TempProject::copy_of(&fixture("demo"));
    project.import();
    let client = Client::spawn(project.root(), &[]).await;
    wait_ready(&client, 30).await;
    let cli = impact_json(&project, &["--files", "src/billing/invoice.ts"]);
    let mcp = client
        .ok("acp_impact", json!({"files": ["src/billing/invoice.ts"]}))
        .await;
    assert_eq!(mcp, cli);
    // Paged: one impacted symbol per page, the cursor brings the next.
    let first = client
        .ok(
            "acp_impact",
            json!({"symbols": ["validateSession"], "depth": 3, "limit": 1}),
        )
        .await;
    assert_eq!(first["truncated"], true);
    let second = client
        .ok(
            "acp_impact",
            json!({"symbols": ["validateSession"], "depth": 3, "limit": 1, "cursor": first["next_cursor"]}),
        )
        .await;
    assert_ne!(first["impacted"], second["impacted"]);
    // A cursor pages the list of its own depth only.
    let other_depth = json!({"symbols": ["validateSession"], "depth": 2, "limit": 1, "cursor": first["next_cursor"]});
    for (args, expected) in [
        (other_depth, "it was issued for depth 3"),
        (json!({}), "Give at least one of files, symbols or diff"),
        (json!({"files": ["src/nowhere.ts"]}), "src/nowhere.ts"),
        (json!({"symbols": ["validateSession"], "depth": 9}), "depth"),
        (json!({"diff": "not a diff"}), "no file section"),
    ] {
        let err = client.err("acp_impact", args.clone()).await;
        assert_eq!(err.code, -32602, "{args}");
        assert!(err.message.contains(expected), "{args}: {}", err.message);
    }
    client.close().await;
}

#[test]
fn limit_zero_answers_the_totals_of_a_list_only() {
    let project = TempProject::copy_of(&fixture("demo"));
    project.import();
    let conn = acpdb::db::open_read_only(&project.db()).unwrap();
    let call = |args: Value| -> Value {
        serde_json::from_str(&acpdb::tools::call(&conn, "acp_query", &args).unwrap()).unwrap()
    };
    for (args, list) in [
        (
            json!({"type": "search", "pattern": "session"}),
            "/result/matches",
        ),
        (
            json!({"type": "callers", "name": "validateSession", "depth": 2}),
            "/result",
        ),
        (
            json!({"type": "callees", "name": "main", "depth": 3}),
            "/result",
        ),
    ] {
        let mut counted = args.clone();
        counted["limit"] = json!(0);
        let full = call(args.clone());
        let totals = call(counted);
        assert!(
            !full.pointer(list).unwrap().as_array().unwrap().is_empty(),
            "{args}"
        );
        assert_eq!(totals.pointer(list).unwrap(), &json!([]), "{args}");
        let total = |v: &Value| {
            v.pointer("/result/total")
                .or_else(|| v.get("total"))
                .cloned()
                .unwrap()
        };
        assert_eq!(total(&totals), total(&full), "{args}");
        assert_eq!(
            totals
                .pointer("/result/truncated")
                .or_else(|| totals.get("truncated")),
            Some(&json!(false))
        );
    }
    // Other types still need at least one.
    let err = acpdb::tools::call(
        &conn,
        "acp_query",
        &json!({"type": "symbol", "name": "main", "limit": 0}),
    )
    .unwrap_err();
    assert!(err.to_string().contains("0 gives the totals only"), "{err}");
}

#[test]
fn a_malformed_or_oversized_diff_is_refused_naming_the_line_or_the_limit() {
    let project = TempProject::copy_of(&fixture("real/demo-ts"));
    project.import();
    let diff = project.root().join("bad.diff");
    for hunk in ["@@ -a,b +c,d @@", "@@ -24,-1 +24,2 @@"] {
        fs::write(
            &diff,
            format!("--- a/src/auth/token.ts\n+++ b/src/auth/token.ts\n{hunk}\n-x\n+y\n"),
        )
        .unwrap();
        let out = project.run(&["impact", "--diff", diff.to_str().unwrap()]);
        assert!(!out.status.success(), "{hunk} was accepted");
        let err = stderr(&out);
        assert!(
            err.contains("diff line 3: a malformed hunk header") && err.contains(hunk),
            "{hunk}: {err}"
        );
    }
    // One byte over the limit the tool's `diff` has.
    let limit = acpdb::query::impact::MAX_DIFF_BYTES;
    let mut big = String::from("--- a/src/auth/token.ts\n+++ b/src/auth/token.ts\n");
    big.push_str(&" ".repeat(limit + 1 - big.len()));
    fs::write(&diff, big).unwrap();
    let out = project.run(&["impact", "--diff", diff.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("is larger than 16 MiB"), "{err}");
}
