//! `.acp.config.json`: excluded paths are invisible to every tool, resource and search, the
//! journal refuses them, and a changed config makes the database stale.
//! Run on the demo fixture and on a real-generator fixture, through the real binary.

use crate::common;

use std::time::Duration;

use common::mcp::{wait_ready, Client};
use common::{fixture, golden_calls, mkfifo, run_unblocked, stderr, TempProject};
use serde_json::{json, Value};

/// Patterns added to each project's config: a directory at one depth, one at any depth.
const EXCLUDE: [&str; 2] = ["src/legacy/**", "**/experimental/**"];

/// A copy of `fixture` whose config (kept when it has one) also excludes [`EXCLUDE`].
fn project_excluding(name: &str) -> TempProject {
    let project = TempProject::copy_of(&fixture(name));
    let path = project.root().join(".acp.config.json");
    let mut config: Value = std::fs::read_to_string(&path)
        .map(|t| serde_json::from_str(&t).unwrap())
        .unwrap_or_else(|_| json!({}));
    let exclude = config
        .as_object_mut()
        .unwrap()
        .entry("exclude")
        .or_insert(json!([]));
    for pattern in EXCLUDE {
        exclude.as_array_mut().unwrap().push(json!(pattern));
    }
    std::fs::write(&path, config.to_string()).unwrap();
    project
}

/// Strings no answer may contain: the excluded directories and the qualified names of the
/// symbols in them (taken from the cache itself, so the fixture really has some).
fn forbidden(project: &TempProject) -> Vec<String> {
    let cache: Value =
        serde_json::from_str(&std::fs::read_to_string(project.cache_path()).unwrap()).unwrap();
    let mut out: Vec<String> = vec!["src/legacy/".into(), "src/experimental/".into()];
    let mut symbols = 0;
    for symbol in cache["symbols"].as_object().unwrap().values() {
        let file = symbol["file"].as_str().unwrap_or_default();
        if file.contains("src/legacy/") || file.contains("src/experimental/") {
            out.push(symbol["qualified_name"].as_str().unwrap().to_string());
            symbols += 1;
        }
    }
    assert!(
        symbols >= 2,
        "the fixture has symbols in the excluded directories"
    );
    let files = cache["files"].as_object().unwrap();
    assert!(files.keys().any(|k| k.contains("src/legacy/")));
    assert!(files.keys().any(|k| k.contains("src/experimental/")));
    out
}

/// Asserts `text` names nothing forbidden, once the strings of `asked` (the arguments, which
/// answers may echo, as in `"file": "src/legacy/csv.js", "exists": false`) are taken out of it:
/// as whole JSON strings from an answer, anywhere from an error.
fn assert_clean(what: &str, text: &str, forbidden: &[String], asked: &Value) {
    check(what, text, forbidden, asked, true)
}

fn assert_clean_error(what: &str, text: &str, forbidden: &[String], asked: &Value) {
    check(what, text, forbidden, asked, false)
}

fn check(what: &str, text: &str, forbidden: &[String], asked: &Value, quoted: bool) {
    fn strings(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::String(s) => {
                out.push(s.clone());
                out.push(s.trim_start_matches("./").to_string());
            }
            Value::Array(items) => items.iter().for_each(|v| strings(v, out)),
            Value::Object(map) => map.values().for_each(|v| strings(v, out)),
            _ => {}
        }
    }
    let mut echoed = Vec::new();
    strings(asked, &mut echoed);
    echoed.sort_by_key(|s| std::cmp::Reverse(s.len()));
    let mut rest = text.to_string();
    for s in echoed.iter().filter(|s| s.len() > 2) {
        rest = if quoted {
            rest.replace(&format!("\"{s}\""), "\"\"")
        } else {
            rest.replace(s.as_str(), "")
        };
    }
    for s in forbidden {
        assert!(
            !rest.contains(s.as_str()),
            "{what} mentions the excluded {s:?}: {text}"
        );
    }
}

/// The calls of the golden file, then calls that name the excluded and the kept things.
fn calls() -> Vec<(String, Value)> {
    let mut calls = golden_calls();
    let named = [
        ("acp_query", json!({"type": "stats"})),
        ("acp_query", json!({"type": "symbol", "name": "toCsv"})),
        (
            "acp_query",
            json!({"type": "symbol", "name": "recommendPlan"}),
        ),
        (
            "acp_query",
            json!({"type": "symbol", "name": "src/legacy/csv.js:toCsv"}),
        ),
        (
            "acp_query",
            json!({"type": "file", "name": "src/legacy/csv.js"}),
        ),
        (
            "acp_query",
            json!({"type": "file", "name": "src/auth/session.ts"}),
        ),
        ("acp_query", json!({"type": "domain", "name": "reporting"})),
        ("acp_query", json!({"type": "domain", "name": "growth"})),
        (
            "acp_query",
            json!({"type": "callers", "name": "reduce", "depth": 3}),
        ),
        (
            "acp_query",
            json!({"type": "callers", "name": "join", "depth": 3}),
        ),
        (
            "acp_query",
            json!({"type": "callees", "name": "main", "depth": 5}),
        ),
        (
            "acp_query",
            json!({"type": "callees", "name": "recommendPlan"}),
        ),
        (
            "acp_query",
            json!({"type": "search", "pattern": "recommend*"}),
        ),
        ("acp_query", json!({"type": "search", "pattern": "csv"})),
        ("acp_query", json!({"type": "search", "pattern": "toCsv"})),
        ("acp_query", json!({"type": "search", "pattern": "legacy"})),
        (
            "acp_query",
            json!({"type": "search", "pattern": "experimental"}),
        ),
        (
            "acp_query",
            json!({"type": "search", "pattern": "*", "limit": 500}),
        ),
        (
            "acp_expand",
            json!({"text": "$SYM_EXPORTLEGACYIDS $SYM_VALIDATESESSION", "mode": "full"}),
        ),
        (
            "acp_expand",
            json!({"text": "$SYM_EXPORTLEGACYIDS and $SYM_BUILDINVOICE", "mode": "annotated"}),
        ),
        (
            "acp_expand_variable",
            json!({"name": "SYM_EXPORTLEGACYIDS"}),
        ),
        (
            "acp_expand_variable",
            json!({"name": "SYM_VALIDATESESSION"}),
        ),
        ("acp_constraints", json!({"file": "src/legacy/csv.js"})),
        ("acp_constraints", json!({"file": "src/auth/session.ts"})),
        ("acp_constraints", json!({})),
        (
            "acp_impact",
            json!({"files": ["src/legacy/csv.js", "src/billing/report.ts"]}),
        ),
        (
            "acp_impact",
            json!({"symbols": ["renderReport", "toCsv", "buildInvoice"], "depth": 5}),
        ),
        ("acp_trace", json!({"from": "main", "to": "digest"})),
        (
            "acp_unused",
            json!({"include_exported": true, "limit": 100}),
        ),
        (
            "acp_get_file_context",
            json!({"path": "src/experimental/recommend.ts"}),
        ),
        (
            "acp_get_file_context",
            json!({"path": "src/billing/report.ts"}),
        ),
        ("acp_get_symbol_context", json!({"name": "recommendPlan"})),
        ("acp_get_symbol_context", json!({"name": "renderReport"})),
        ("acp_get_domain_files", json!({"name": "reporting"})),
        ("acp_get_domain_files", json!({"name": "growth"})),
        (
            "acp_check_constraints",
            json!({"path": "src/legacy/csv.js"}),
        ),
        ("acp_get_hotpaths", json!({"limit": 100})),
        (
            "acp_context",
            json!({"operation": "explore", "target": "src/legacy"}),
        ),
        (
            "acp_context",
            json!({"operation": "modify", "target": "src/legacy/csv.js"}),
        ),
        (
            "acp_context",
            json!({"operation": "explore", "target": "reporting"}),
        ),
        ("acp_generate_primer", json!({"token_budget": 100000})),
        ("acp_hack", json!({"action": "list"})),
        ("acp_debug", json!({"action": "list"})),
    ];
    calls.extend(named.into_iter().map(|(t, a)| (t.to_string(), a)));
    calls
}

async fn every_answer_is_clean(project: &TempProject) {
    let forbidden = forbidden(project);
    project.import();
    let client = Client::spawn(project.root(), &[]).await;
    wait_ready(&client, 60).await;

    let tools = client.service.list_all_tools().await.unwrap();
    let calls = calls();
    for tool in &tools {
        assert!(
            calls.iter().any(|(name, _)| name == tool.name.as_ref()),
            "no call of {}",
            tool.name
        );
    }
    for (tool, args) in &calls {
        let asked = args.to_string();
        match client.call(tool, args.clone()).await {
            Ok(answer) => {
                for text in &answer.texts {
                    assert_clean(&format!("{tool} {asked}"), text, &forbidden, args);
                }
            }
            Err(err) => {
                let data = err.data.as_ref().map(Value::to_string).unwrap_or_default();
                let what = format!("{tool} {asked} (error)");
                assert_clean_error(&what, &err.message, &forbidden, args);
                assert_clean(&what, &data, &forbidden, args);
            }
        }
    }

    // Kept things still answer.
    let file = client
        .ok(
            "acp_get_file_context",
            json!({"path": "src/auth/session.ts"}),
        )
        .await;
    assert!(file.to_string().contains("session.ts"), "{file}");
    let search = client
        .ok("acp_query", json!({"type": "search", "pattern": "session"}))
        .await;
    assert!(search["result"]["total"].as_u64().unwrap() >= 1, "{search}");
    let excluded = client
        .call(
            "acp_query",
            json!({"type": "file", "name": "src/legacy/csv.js"}),
        )
        .await;
    assert!(
        excluded.is_err() || !excluded.unwrap().json["result"].is_object(),
        "an excluded file is found"
    );

    // Every resource and every template.
    for resource in client.service.list_all_resources().await.unwrap() {
        let text = client.read(&resource.uri).await.unwrap();
        assert_clean(&resource.uri, &text, &forbidden, &Value::Null);
    }
    let templates = client.service.list_all_resource_templates().await.unwrap();
    let mut read_templates = 0;
    for template in &templates {
        let pattern = template.uri_template.as_str();
        let values: &[&str] = if pattern.contains("{path}") {
            &[
                "src%2Fauth%2Fsession.ts",
                "src%2Flegacy%2Fcsv.js",
                "src/experimental/recommend.ts",
            ]
        } else if pattern.contains("{qualified_name}") {
            &[
                "src/auth/session.ts:validateSession",
                "src/legacy/csv.js:toCsv",
                "src/experimental/recommend.ts:recommendPlan",
            ]
        } else {
            &["reporting", "growth", "billing", "auth"]
        };
        let (start, end) = (pattern.find('{').unwrap(), pattern.find('}').unwrap());
        let mut kept = 0;
        for value in values {
            let uri = format!("{}{value}{}", &pattern[..start], &pattern[end + 1..]);
            match client.read(&uri).await {
                Ok(text) => {
                    assert_clean(&uri, &text, &forbidden, &Value::Null);
                    kept += 1;
                }
                Err(err) => {
                    assert_eq!(err.code, -32002, "{uri}: {err:?}");
                    assert!(
                        value.contains("legacy") || value.contains("experimental"),
                        "{uri}: {err:?}"
                    );
                }
            }
        }
        assert!(kept >= 1, "{pattern}: nothing kept answers");
        read_templates += 1;
    }
    assert_eq!(read_templates, 3);

    // The journal refuses excluded paths, naming the pattern.
    let session = client
        .ok(
            "acp_debug",
            json!({"action": "start", "data": {"problem": "p", "hypothesis": "h"}}),
        )
        .await;
    let session_id = session["session_id"]
        .as_str()
        .or_else(|| session["session"]["id"].as_str())
        .unwrap_or_else(|| panic!("{session}"))
        .to_string();
    let err = client
        .err(
            "acp_debug",
            json!({"action": "attempt", "data": {"session_id": session_id, "description": "d",
                   "files": ["src/auth/session.ts", "./src/legacy/csv.js"]}}),
        )
        .await;
    assert_eq!(err.code, -32602, "{err:?}");
    assert_eq!(
        err.message,
        "path 'src/legacy/csv.js' is excluded by .acp.config.json (exclude pattern 'src/legacy/**')"
    );
    client
        .ok(
            "acp_debug",
            json!({"action": "attempt", "data": {"session_id": session_id, "description": "d",
                   "files": ["src/auth/session.ts"]}}),
        )
        .await;
    let err = client
        .err(
            "acp_hack",
            json!({"action": "mark", "data": {"file": "src/experimental/recommend.ts", "reason": "r"}}),
        )
        .await;
    assert_eq!(err.code, -32602, "{err:?}");
    assert_eq!(
        err.message,
        "path 'src/experimental/recommend.ts' is excluded by .acp.config.json (exclude pattern '**/experimental/**')"
    );
    client
        .ok(
            "acp_hack",
            json!({"action": "mark", "data": {"file": "src/billing/tax.ts", "reason": "r"}}),
        )
        .await;
    client.close().await;

    // The exported cache is the filtered one.
    let exported = project.export().to_string();
    assert_clean("the exported cache", &exported, &forbidden, &Value::Null);
}

#[tokio::test]
async fn excluded_paths_are_invisible_in_the_demo_fixture() {
    every_answer_is_clean(&project_excluding("demo")).await;
}

#[tokio::test]
async fn excluded_paths_are_invisible_in_a_real_generator_fixture() {
    every_answer_is_clean(&project_excluding("real/demo-ts")).await;
}

#[test]
fn the_real_fixtures_configs_exclude_nothing_of_their_caches() {
    for name in ["real/anyhow", "real/demo-ts", "real/python-stdlib"] {
        let project = TempProject::copy_of(&fixture(name));
        assert!(project.root().join(".acp.config.json").is_file());
        project.import();
        let out = project.run(&[
            "sql",
            "--json",
            "SELECT value FROM meta WHERE key = 'config_dropped'",
        ]);
        assert!(stderr(&out).is_empty(), "{}", stderr(&out));
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("\"0\""),
            "{name}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}

#[test]
fn a_changed_config_makes_the_database_stale_and_applies_after_the_import() {
    let project = TempProject::copy_of(&fixture("demo"));
    let query = ["query", "file", "src/legacy/csv.js"];
    project.import();
    let out = project.run(&query);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stderr(&out), "");

    // Added: stale, and a delta is refused.
    let config = project.root().join(".acp.config.json");
    std::fs::write(&config, r#"{"exclude": ["src/legacy/**"]}"#).unwrap();
    let err = stderr(&project.run(&query));
    assert!(
        err.contains("WARN") && err.contains(".acp.config.json was added since the last import"),
        "{err}"
    );
    let import = stderr(&project.import());
    assert!(
        import.contains("full import (.acp.config.json changed since the last import)"),
        "{import}"
    );
    let out = project.run(&query);
    assert!(!out.status.success(), "the excluded file still answers");
    assert!(!stderr(&out).contains("WARN"), "{}", stderr(&out));

    // Another import of the same cache and config: nothing changed, but the config drops
    // entries, so a delta is refused (full and delta imports agree).
    let import = stderr(&project.import());
    assert!(
        import.contains("full import (.acp.config.json excludes part of the cache)"),
        "{import}"
    );

    // Changed.
    std::fs::write(&config, r#"{"exclude": ["src/billing/**"]}"#).unwrap();
    assert!(stderr(&project.run(&query)).contains(".acp.config.json changed since the last import"));
    project.import();
    let out = project.run(&query);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!project
        .run(&["query", "file", "src/billing/tax.ts"])
        .status
        .success());

    // --ignore-config imports everything and is not stale because of the config.
    let out = project.run(&["import", "--ignore-config"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = project.run(&["query", "file", "src/billing/tax.ts"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stderr(&out), "");
    std::fs::write(&config, r#"{"exclude": ["src/auth/**"]}"#).unwrap();
    assert_eq!(stderr(&project.run(&query)), "");

    // Removed: stale again (the database was imported with a config).
    project.import();
    std::fs::remove_file(&config).unwrap();
    let err = stderr(&project.run(&query));
    assert!(
        err.contains(".acp.config.json was removed since the last import"),
        "{err}"
    );
    project.import();
    assert!(project
        .run(&["query", "file", "src/auth/session.ts"])
        .status
        .success());

    // A broken config is an error naming the file, not ignored.
    std::fs::write(&config, "{ not json").unwrap();
    let out = project.run(&["import"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(".acp.config.json is not valid JSON"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_config_that_excludes_nothing_of_the_cache_keeps_delta_imports() {
    let project = TempProject::copy_of(&fixture("real/demo-ts"));
    project.import();
    let mut cache: Value =
        serde_json::from_str(&std::fs::read_to_string(project.cache_path()).unwrap()).unwrap();
    cache["symbols"]["brandNewHelper"] = json!({"name": "brandNewHelper", "qualified_name": "src/auth/session.ts:brandNewHelper", "type": "function", "file": "src/auth/session.ts", "lines": [90, 95], "exported": true});
    std::fs::write(project.cache_path(), serde_json::to_string(&cache).unwrap()).unwrap();
    let import = stderr(&project.import());
    assert!(import.contains("\ndelta:"), "{import}");

    // A new entry in an excluded directory: the delta gives way to a full import.
    cache["files"]["./vendor/lib.ts"] = json!({"path": "./vendor/lib.ts", "lines": 3, "language": "typescript", "exports": [], "imports": []});
    std::fs::write(project.cache_path(), serde_json::to_string(&cache).unwrap()).unwrap();
    let import = stderr(&project.import());
    assert!(
        import.contains("full import (the cache has entries that .acp.config.json excludes)"),
        "{import}"
    );
    assert!(!project
        .run(&["query", "file", "vendor/lib.ts"])
        .status
        .success());
}

#[tokio::test]
async fn the_server_reimports_when_the_config_changes() {
    let project = TempProject::copy_of(&fixture("demo"));
    let client = Client::spawn(project.root(), &["--watch-interval", "0.2"]).await;
    wait_ready(&client, 60).await;
    let args = json!({"type": "file", "name": "src/legacy/csv.js"});
    assert!(client.call("acp_query", args.clone()).await.is_ok());
    std::fs::write(
        project.root().join(".acp.config.json"),
        r#"{"exclude": ["src/legacy/**"]}"#,
    )
    .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let found = match client.call("acp_query", args.clone()).await {
            Ok(answer) => answer.texts.iter().any(|t| t.contains("src/legacy/csv.js")),
            Err(_) => false,
        };
        if !found {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the new config was never applied"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    client.close().await;
}

#[test]
fn a_config_that_is_a_fifo_or_too_large_is_refused_without_waiting() {
    let project = TempProject::copy_of(&fixture("demo"));
    project.import();
    let config = project.root().join(".acp.config.json");
    mkfifo(&config);
    // Nobody ever writes to the FIFO: reading it would block forever.
    for args in [&["import"][..], &["query", "stats"][..]] {
        let (status, err) = run_unblocked(project.root(), args, "a FIFO config");
        if args[0] == "import" {
            assert!(!status.success());
            assert!(
                err.contains(".acp.config.json is a FIFO, not a regular file"),
                "{args:?}: {status} {err}"
            );
        } else {
            // A query answers from the last import; it cannot tell whether that is current.
            assert!(status.success(), "{args:?}: {status} {err}");
        }
    }
    std::fs::remove_file(&config).unwrap();
    let big = format!(
        "{{\"exclude\": [\"x\"], \"pad\": \"{}\"}}",
        "a".repeat(5 << 20)
    );
    std::fs::write(&config, big).unwrap();
    let out = project.run(&["import"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("is larger than 4 MiB"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn include_rules_drop_names_of_files_not_names_that_are_no_paths() {
    let project = TempProject::copy_of(&fixture("demo"));
    let mut cache: Value =
        serde_json::from_str(&std::fs::read_to_string(project.cache_path()).unwrap()).unwrap();
    // A call to a package's function and a call into a file that `include` leaves out.
    cache["symbols"]["computeTax"]["calls"] = json!([
        "applyBrackets",
        "lodash:debounce",
        "src/legacy/csv.js:toCsv"
    ]);
    std::fs::write(project.cache_path(), cache.to_string()).unwrap();
    std::fs::write(
        project.root().join(".acp.config.json"),
        r#"{"include": ["**/*.ts"]}"#,
    )
    .unwrap();
    let out = project.import();
    assert!(out.status.success(), "{}", stderr(&out));
    // The summary says that the config left something out.
    assert!(
        stderr(&out).contains("list items left out by .acp.config.json"),
        "{}",
        stderr(&out)
    );
    let out = project.run(&[
        "sql",
        "--json",
        "SELECT calls_json FROM symbols WHERE key = 'computeTax'",
    ]);
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    let calls: Value =
        serde_json::from_str(answer["rows"][0][0].as_str().expect("a calls list")).unwrap();
    assert_eq!(calls, json!(["applyBrackets", "lodash:debounce"]));
}

#[test]
fn a_config_with_too_many_or_too_long_patterns_is_refused_naming_the_limit() {
    let project = TempProject::copy_of(&fixture("demo"));
    let config = project.root().join(".acp.config.json");
    let globs =
        |n: usize| -> Vec<String> { (0..n).map(|i| format!("src/gen{i:06}/**/*.ts")).collect() };
    // As many as accepted: imported, with the rules applied.
    let mut most = globs(acpdb::config::MAX_PATTERNS - 1);
    most.push("src/billing/**".into());
    std::fs::write(&config, json!({ "exclude": most }).to_string()).unwrap();
    let out = project.run(&["import"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("left out by .acp.config.json"),
        "{}",
        stderr(&out)
    );
    // One more, across both lists, or one pattern too long: refused, naming the limit.
    let too_long = format!("src/{}/**", "a".repeat(acpdb::config::MAX_PATTERN_BYTES));
    for (contents, limit) in [
        (
            json!({ "include": ["src/**"], "exclude": globs(acpdb::config::MAX_PATTERNS) }),
            format!("at most {} are accepted", acpdb::config::MAX_PATTERNS),
        ),
        (
            json!({ "exclude": [too_long] }),
            format!("at most {} are accepted", acpdb::config::MAX_PATTERN_BYTES),
        ),
    ] {
        std::fs::write(&config, contents.to_string()).unwrap();
        let out = project.run(&["import"]);
        assert!(!out.status.success());
        let err = stderr(&out);
        assert!(
            err.contains(".acp.config.json") && err.contains(&limit),
            "{err}"
        );
    }
}
