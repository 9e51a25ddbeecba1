//! The MCP server over real stdio: protocol behaviour, errors, the journal tools and the index
//! lifecycle (first import, staleness, re-import), driven by rmcp's client or by raw JSON-RPC.

use crate::common;

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::mcp::{wait_ready, Client};
use common::{fixture, golden_calls, mkfifo, TempProject};
use serde_json::{json, Value};

fn demo() -> TempProject {
    TempProject::copy_of(&fixture("demo"))
}

/// Sends raw lines to `acpdb serve` and collects the JSON answers with an id.
fn raw_session(project: &TempProject, lines: &[&str], expected_answers: usize) -> Vec<Value> {
    raw_session_with(project, &[], lines, expected_answers)
}

/// [`raw_session`] with more arguments for `acpdb serve`.
fn raw_session_with(
    project: &TempProject,
    serve_args: &[&str],
    lines: &[&str],
    expected_answers: usize,
) -> Vec<Value> {
    raw_answers_with(project, serve_args, lines, expected_answers)
        .into_iter()
        .map(|line| {
            serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("stdout is not JSON-RPC ({e}): {line}"))
        })
        .collect()
}

/// Sends raw lines to `acpdb serve` and returns its first answers, as written on stdout.
fn raw_answers(project: &TempProject, lines: &[&str], expected_answers: usize) -> Vec<String> {
    raw_answers_with(project, &[], lines, expected_answers)
}

/// [`raw_answers`] with more arguments for `acpdb serve`.
fn raw_answers_with(
    project: &TempProject,
    serve_args: &[&str],
    lines: &[&str],
    expected_answers: usize,
) -> Vec<String> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_acpdb"))
        .arg("-C")
        .arg(project.root())
        .arg("serve")
        .args(serve_args)
        .env("ACPDB_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for line in lines {
        writeln!(stdin, "{line}").unwrap();
    }
    stdin.flush().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let answers = (0..expected_answers)
        .map(|_| {
            rx.recv_timeout(Duration::from_secs(20))
                .expect("answer in time")
        })
        .collect();
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();
    answers
}

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

#[test]
fn notifications_or_responses_before_initialize_do_not_end_the_session() {
    let project = demo();
    let bom_init = format!("\u{feff}{INIT}");
    let answers = raw_session(
        &project,
        &[
            INITIALIZED,
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}"#,
            r#"{"jsonrpc":"2.0","id":99,"result":{}}"#,
            &bom_init,
            INITIALIZED,
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
        ],
        2,
    );
    assert!(
        answers
            .iter()
            .any(|a| a["id"] == 1 && a["result"]["serverInfo"]["name"] == "acpdb"),
        "{answers:?}"
    );
    assert!(
        answers
            .iter()
            .any(|a| a["id"] == 2 && a["result"]["tools"].is_array()),
        "{answers:?}"
    );
}

#[test]
fn malformed_lines_get_an_error_and_the_server_keeps_serving() {
    let project = demo();
    let answers = raw_session(
        &project,
        &[
            INIT,
            INITIALIZED,
            "this is not json {",
            r#"{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"debug"}}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#,
        ],
        4,
    );
    assert!(answers
        .iter()
        .any(|a| a["id"] == 1 && a["result"]["serverInfo"]["name"] == "acpdb"));
    let error = answers
        .iter()
        .find(|a| a.get("error").is_some())
        .expect("an error for the malformed line");
    assert_eq!(error["error"]["code"], -32700, "a parse error: {error}");
    assert!(error["id"].is_null(), "{error}");
    assert!(
        answers
            .iter()
            .any(|a| a["id"] == 2 && a["result"].is_object()),
        "setLevel answered: {answers:?}"
    );
    assert!(
        answers
            .iter()
            .any(|a| a["id"] == 3 && a["result"]["tools"].is_array()),
        "served after the bad line"
    );
}

#[tokio::test]
async fn initialize_reports_acpdb_and_its_capabilities() {
    let project = demo();
    let client = Client::spawn(project.root(), &[]).await;
    let info = client.service.peer_info().expect("server info");
    let server = info.server_info.clone().expect("serverInfo");
    assert_eq!(server.name, "acpdb");
    assert_eq!(server.version, env!("CARGO_PKG_VERSION"));
    assert!(info.capabilities.tools.is_some());
    assert!(info.capabilities.resources.is_some());
    assert!(info
        .instructions
        .as_deref()
        .unwrap_or_default()
        .contains("acp_get_architecture"));
    client.close().await;
}

#[tokio::test]
async fn every_tool_has_a_description_and_an_object_schema() {
    let project = demo();
    let client = Client::spawn(project.root(), &[]).await;
    let tools = client.service.list_all_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "acp_debug"));
    for tool in &tools {
        let schema = Value::Object((*tool.input_schema).clone());
        assert_eq!(schema["type"], "object", "{}: {schema}", tool.name);
        let description = tool.description.as_deref().unwrap_or_default();
        assert!(
            description.len() > 40,
            "{} has no useful description",
            tool.name
        );
        if let Some(required) = schema.get("required").and_then(Value::as_array) {
            for name in required {
                assert!(
                    schema["properties"].get(name.as_str().unwrap()).is_some(),
                    "{}: required {name} not a property",
                    tool.name
                );
            }
        }
    }
    client.close().await;
}

#[tokio::test]
async fn unknown_tool_names_the_valid_ones() {
    let project = demo();
    let client = Client::spawn(project.root(), &[]).await;
    let err = client.err("acp_nonexistent", json!({})).await;
    assert_eq!(err.code, -32602);
    assert!(
        err.message.starts_with("Unknown tool: acp_nonexistent"),
        "{}",
        err.message
    );
    assert!(err.message.contains("acp_debug"), "{}", err.message);
    // What a message quotes of the request is cut: a megabyte name is not sent back whole.
    wait_ready(&client, 60).await;
    let long = "x".repeat(1 << 20);
    let err = client
        .err("acp_query", json!({"type": "symbol", "name": long}))
        .await;
    assert_eq!(err.code, -32602);
    assert!(
        err.message.starts_with("Symbol not found: xxx"),
        "{}",
        &err.message[..80]
    );
    assert!(err.message.len() < 2200, "{} bytes", err.message.len());
    assert!(
        err.message.ends_with(" bytes left out)"),
        "{}",
        &err.message[2000..]
    );
    client.close().await;
}

#[tokio::test]
async fn missing_cache_answers_32000_with_the_command_to_run() {
    let dir = tempfile::tempdir().unwrap();
    let client = Client::spawn(dir.path(), &[]).await;
    let err = client.err("acp_get_architecture", json!({})).await;
    assert_eq!(err.code, -32000, "{err:?}");
    assert!(err.message.contains("acp index"), "{}", err.message);
    client.close().await;
}

#[tokio::test]
async fn debug_journal_over_stdio() {
    let project = demo();
    let client = Client::spawn(project.root(), &[]).await;
    wait_ready(&client, 60).await;
    let started = client
        .ok("acp_debug", json!({"action": "start", "data": {"problem": "Login fails", "hypothesis": "Expired token"}}))
        .await;
    let session = started["session_id"]
        .as_str()
        .expect("session id")
        .to_string();
    assert!(session.starts_with("debug-"), "{session}");
    let attempt = client
        .ok("acp_debug", json!({"action": "attempt", "data": {"session_id": session, "description": "Refresh the token", "files": ["src/auth/session.ts"]}}))
        .await;
    let attempt_id = attempt["attempt_id"]
        .as_str()
        .expect("attempt id")
        .to_string();
    client
        .ok("acp_debug", json!({"action": "result", "data": {"session_id": session, "attempt_id": attempt_id, "success": false, "notes": "still fails"}}))
        .await;
    let status = client
        .ok(
            "acp_debug",
            json!({"action": "status", "data": {"session_id": session}}),
        )
        .await;
    assert_eq!(
        status["session"]["attempts"].as_array().map(Vec::len),
        Some(1),
        "{status}"
    );
    let list = client.ok("acp_debug", json!({"action": "list"})).await;
    assert!(list.to_string().contains(&session), "{list}");
    // The attempts file is written after every change.
    let attempts: Value = serde_json::from_str(
        &std::fs::read_to_string(project.root().join(".acp/acp.attempts.json")).unwrap(),
    )
    .unwrap();
    assert!(
        attempts.to_string().contains("Refresh the token"),
        "{attempts}"
    );

    // Impossible moves and escapes are refused with -32602.
    let err = client.err("acp_debug", json!({"action": "result", "data": {"session_id": session, "attempt_id": "attempt-999", "success": true}})).await;
    assert_eq!(err.code, -32602, "{err:?}");
    let err = client.err("acp_debug", json!({"action": "attempt", "data": {"session_id": session, "description": "x", "files": ["../../etc/passwd"]}})).await;
    assert_eq!(err.code, -32602, "{err:?}");
    let err = client
        .err(
            "acp_debug",
            json!({"action": "start", "data": {"problem": "no hypothesis"}}),
        )
        .await;
    assert_eq!(err.code, -32602, "{err:?}");
    client.ok("acp_debug", json!({"action": "resolve", "data": {"session_id": session, "resolution": "Clock skew"}})).await;
    let err = client
        .err(
            "acp_debug",
            json!({"action": "attempt", "data": {"session_id": session, "description": "late"}}),
        )
        .await;
    assert_eq!(err.code, -32602, "{err:?}");
    client.close().await;
}

/// A server on `project`, ready, and the id of a debug session started on it.
async fn ready_with_a_session(project: &TempProject) -> (Client, String) {
    let client = Client::spawn(project.root(), &[]).await;
    wait_ready(&client, 60).await;
    let started = client
        .ok(
            "acp_debug",
            json!({"action": "start", "data": {"problem": "p", "hypothesis": "h"}}),
        )
        .await;
    let session = started["session_id"].as_str().unwrap().to_owned();
    (client, session)
}

#[tokio::test]
async fn a_fifo_in_an_attempt_is_refused_at_once_and_the_journal_keeps_serving() {
    let project = demo();
    let fifo = project.root().join("src/pipe");
    mkfifo(&fifo);
    let (client, session) = ready_with_a_session(&project).await;
    let within = Duration::from_secs(10);
    let err = tokio::time::timeout(
        within,
        client.err("acp_debug", json!({"action": "attempt", "data": {"session_id": session, "description": "d", "files": ["src/pipe"]}})),
    )
    .await
    .expect("an attempt naming a FIFO answers at once");
    assert_eq!(err.code, -32602, "{err:?}");
    assert!(err.message.contains("src/pipe is a FIFO"), "{err:?}");
    let logged = tokio::time::timeout(
        within,
        client.ok("acp_debug", json!({"action": "attempt", "data": {"session_id": session, "description": "d", "files": ["src/auth/session.ts"]}})),
    )
    .await
    .expect("the next call answers");
    assert_eq!(logged["attempt_id"], "attempt-001", "{logged}");
    client.close().await;
}

#[tokio::test]
async fn an_attempt_naming_acpdbs_own_databases_is_refused_and_the_journal_keeps_serving() {
    let project = demo();
    let (client, session) = ready_with_a_session(&project).await;
    for name in [
        ".acp/acp.db",
        ".acp/acp.journal.db",
        ".acp/acp.journal.db-shm",
    ] {
        let err = client.err("acp_debug", json!({"action": "attempt", "data": {"session_id": session, "description": "d", "files": [name]}})).await;
        assert_eq!(err.code, -32602, "{name}: {err:?}");
        assert!(
            err.message.contains("one of acpdb's own database files"),
            "{name}: {err:?}"
        );
    }
    let logged = client.ok("acp_debug", json!({"action": "attempt", "data": {"session_id": session, "description": "d", "files": ["src/auth/session.ts"]}})).await;
    assert_eq!(logged["attempt_id"], "attempt-001", "{logged}");
    // The index keeps answering from its pools.
    let stats = client.ok("acp_query", json!({"type": "stats"})).await;
    let symbols = std::fs::read_to_string(project.root().join(".acp/acp.cache.json")).unwrap();
    let symbols = serde_json::from_str::<Value>(&symbols).unwrap()["symbols"]
        .as_object()
        .map_or(0, |symbols| symbols.len());
    assert_eq!(stats["result"]["symbols"], symbols, "{stats}");
    client.close().await;
}

#[tokio::test]
async fn hack_markers_over_stdio() {
    let project = demo();
    let client = Client::spawn(project.root(), &[]).await;
    wait_ready(&client, 60).await;
    let marked = client
        .ok("acp_hack", json!({"action": "mark", "data": {"file": "src/auth/session.ts", "line": 3, "reason": "Skip MFA in staging", "expires": "2001-01-01"}}))
        .await;
    assert!(marked.to_string().contains("Skip MFA"), "{marked}");
    let unknown = client
        .ok(
            "acp_hack",
            json!({"action": "mark", "data": {"file": "not/indexed.ts", "reason": "x"}}),
        )
        .await;
    assert!(
        unknown.to_string().contains("indexed"),
        "unknown file not flagged: {unknown}"
    );
    let cleanup = client.ok("acp_hack", json!({"action": "cleanup"})).await;
    assert!(cleanup.to_string().contains("Skip MFA"), "{cleanup}");
    let err = client
        .err(
            "acp_hack",
            json!({"action": "mark", "data": {"file": "/etc/passwd", "reason": "x"}}),
        )
        .await;
    assert_eq!(err.code, -32602, "{err:?}");
    let err = client.err("acp_hack", json!({"action": "mark", "data": {"file": "src/a.ts", "reason": "x", "expires": "next week"}})).await;
    assert_eq!(err.code, -32602, "{err:?}");
    client.close().await;
}

#[tokio::test]
async fn stdio_answers_equal_the_shared_dispatcher_for_every_golden_call() {
    let project = demo();
    // Without a watcher, the server's overview answers step the sweep of the source files as
    // this connection's do.
    let client = Client::spawn(project.root(), &["--watch-interval", "0"]).await;
    wait_ready(&client, 60).await;
    let conn = acpdb::db::open_read_only(&project.db()).unwrap();
    let mut checked = 0;
    let mut seen = HashSet::new();
    let extra = [
        (
            "acp_expand",
            json!({"text": "See $SYM_VALIDATESESSION and $NOPE"}),
        ),
        ("acp_expand", json!({"text": "$DOM_AUTH", "mode": "full"})),
        ("acp_expand", json!({"mode": "inline"})),
        ("acp_constraints", json!({"file": "src/auth/session.ts"})),
        ("acp_constraints", json!({"path": "./src/billing/tax.ts"})),
        ("acp_constraints", json!({"file": "src/nope.ts"})),
        (
            "acp_query",
            json!({"type": "callers", "name": "digest", "depth": "2"}),
        ),
        (
            "acp_query",
            json!({"type": "search", "pattern": "session", "limit": 2}),
        ),
        (
            "acp_impact",
            json!({"files": ["src/auth/session.ts"], "depth": 3}),
        ),
        ("acp_impact", json!({"symbols": ["digest"], "limit": 0})),
        ("acp_impact", json!({"symbols": ["nope"]})),
        ("acp_trace", json!({"from": "main", "to": "digest"})),
        ("acp_trace", json!({"from": "digest", "to": "main"})),
        ("acp_trace", json!({"from": "format", "to": "main"})),
        ("acp_unused", json!({"include_exported": true, "limit": 2})),
        ("acp_unused", json!({"domain": "nope"})),
    ]
    .into_iter()
    .map(|(tool, arguments)| (tool.to_string(), arguments));
    for (tool, arguments) in golden_calls().into_iter().chain(extra) {
        if !acpdb::tools::INDEX_TOOLS.contains(&tool.as_str()) {
            continue;
        }
        seen.insert(tool.clone());
        let local = acpdb::tools::call(&conn, &tool, &arguments);
        match (client.call(&tool, arguments.clone()).await, local) {
            // The server and this connection sweep the source files at their own moments.
            (Ok(answer), Ok(text)) => assert_eq!(
                common::without_sweep_times(answer.texts[0].clone()),
                common::without_sweep_times(text),
                "{tool} {arguments}"
            ),
            (Err(err), Err(local)) => {
                assert_eq!(err.code, -32602, "{tool} {arguments}: {err:?}");
                assert_eq!(err.message, local.to_string(), "{tool} {arguments}");
            }
            (stdio, local) => {
                panic!("{tool} {arguments}: stdio {stdio:?} but in-process {local:?}")
            }
        }
        checked += 1;
    }
    assert!(checked > 100, "only {checked} golden calls checked");
    for tool in acpdb::tools::INDEX_TOOLS {
        assert!(seen.contains(*tool), "{tool} was never compared");
    }
    client.close().await;
}

#[tokio::test]
async fn rfc_0013_tools_over_stdio() {
    let project = demo();
    let client = Client::spawn(project.root(), &[]).await;
    wait_ready(&client, 60).await;
    let symbol = client
        .ok(
            "acp_query",
            json!({"type": "symbol", "name": "validateSession"}),
        )
        .await;
    assert_eq!(
        symbol["result"]["qualified_name"], "src/auth/session.ts:validateSession",
        "{symbol}"
    );
    let search = client
        .ok("acp_query", json!({"type": "search", "pattern": "valid*"}))
        .await;
    assert!(search["result"]["total"].as_u64().unwrap() >= 1, "{search}");
    let hostile = client
        .ok(
            "acp_query",
            json!({"type": "search", "pattern": "\"NEAR( a:b -c*"}),
        )
        .await;
    assert!(hostile["result"].is_object(), "{hostile}");
    let callers = client
        .ok(
            "acp_query",
            json!({"type": "callers", "name": "validateSession", "depth": 3}),
        )
        .await;
    assert!(callers["result"].is_array(), "{callers}");
    let stats = client.ok("acp_query", json!({"type": "stats"})).await;
    assert!(stats.to_string().contains("symbols"), "{stats}");
    let constraints = client
        .ok("acp_constraints", json!({"file": "./src/auth/session.ts"}))
        .await;
    assert!(constraints["can_modify"].is_object(), "{constraints}");
    let vars: Value = serde_json::from_str(
        &std::fs::read_to_string(project.root().join(".acp/acp.vars.json")).unwrap(),
    )
    .unwrap();
    let var = vars["variables"]
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    let expanded = client
        .ok(
            "acp_expand",
            json!({"text": format!("See ${var} and $NOPE_MISSING"), "mode": "annotated"}),
        )
        .await;
    assert!(
        expanded["variables_resolved"].to_string().contains(&var),
        "{expanded}"
    );
    assert!(
        expanded["variables_unresolved"]
            .to_string()
            .contains("NOPE_MISSING"),
        "{expanded}"
    );
    let entry = client.ok("acp_expand_variable", json!({"name": var})).await;
    assert!(entry["type"].is_string(), "{entry}");

    // Errors are JSON-RPC -32602 with messages an agent can act on.
    let err = client
        .err(
            "acp_query",
            json!({"type": "symbol", "name": "noSuchSymbolAnywhere"}),
        )
        .await;
    assert_eq!(err.code, -32602);
    assert!(
        err.message
            .starts_with("Symbol not found: noSuchSymbolAnywhere"),
        "{}",
        err.message
    );
    let err = client
        .err(
            "acp_query",
            json!({"type": "symbol", "name": "validateSessio"}),
        )
        .await;
    assert!(
        err.message.contains("validateSession"),
        "no suggestion: {}",
        err.message
    );
    let err = client
        .err(
            "acp_query",
            json!({"type": "search", "pattern": "x", "limit": 500}),
        )
        .await;
    assert_eq!(err.code, -32602);
    let err = client.err("acp_query", json!({"type": "teleport"})).await;
    assert_eq!(err.code, -32602);
    let err = client.err("acp_query", json!({})).await;
    assert_eq!(err.code, -32602);
    let err = client.err("acp_get_file_context", json!({})).await;
    assert_eq!(err.code, -32602);
    assert!(err.message.contains("path"), "{}", err.message);
    let err = client
        .err(
            "acp_query",
            json!({"type": "search", "pattern": "session", "cursor": "not-a-cursor"}),
        )
        .await;
    assert_eq!(err.code, -32602);
    client.close().await;
}

#[tokio::test]
async fn resources_over_stdio() {
    let project = demo();
    let client = Client::spawn(project.root(), &[]).await;
    wait_ready(&client, 60).await;
    let resources = client.service.list_all_resources().await.unwrap();
    let uris: Vec<&str> = resources.iter().map(|r| r.uri.as_str()).collect();
    for uri in ["acp://cache", "acp://vars", "acp://constraints"] {
        assert!(uris.contains(&uri), "{uris:?}");
        let text = client.read(uri).await.unwrap();
        assert!(
            serde_json::from_str::<Value>(&text).is_ok(),
            "{uri} is not JSON"
        );
    }
    let templates = client.service.list_all_resource_templates().await.unwrap();
    assert_eq!(templates.len(), 3);
    let file = client
        .read("acp://file/src%2Fauth%2Fsession.ts")
        .await
        .unwrap();
    assert!(file.contains("session.ts"), "{file}");
    let symbol = client
        .read("acp://symbol/src/auth/session.ts:validateSession")
        .await
        .unwrap();
    assert!(symbol.contains("validateSession"), "{symbol}");
    let err = client.read("acp://file/no/such/file.ts").await.unwrap_err();
    assert_eq!(err.code, -32002, "{err:?}");
    let err = client.read("acp://nothing").await.unwrap_err();
    assert_eq!(err.code, -32002, "{err:?}");
    // A NUL is refused as tool arguments refuse it: no file or symbol holds one.
    for uri in ["acp://file/src/a\u{0}.ts", "acp://symbol/\u{0}"] {
        let err = client.read(uri).await.unwrap_err();
        assert_eq!(err.code, -32602, "{uri:?}: {err:?}");
        assert!(err.message.contains("NUL"), "{err:?}");
    }
    client.close().await;
}

#[tokio::test]
async fn first_start_answers_at_once_and_builds_in_the_background() {
    let project = TempProject::with_cache("{}", None);
    project.generate(3000);
    let started = std::time::Instant::now();
    let client = Client::spawn(project.root(), &[]).await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "initialize waited for the import"
    );
    let err = client.err("acp_get_architecture", json!({})).await;
    assert_eq!(err.code, -32003, "{err:?}");
    assert!(
        err.message.starts_with("Index not ready"),
        "{}",
        err.message
    );
    assert!(
        err.data
            .as_ref()
            .is_some_and(|d| d["bytes_total"].as_u64() > Some(1_000_000)),
        "{err:?}"
    );
    wait_ready(&client, 120).await;
    let architecture = client.ok("acp_get_architecture", json!({})).await;
    assert_eq!(architecture["total_symbols"], 30_000);
    client.close().await;
}

/// Waits (at most 60 s) until answers carry a note that re-importing failed, naming `reason`,
/// while they still count `symbols` (the previous import's).
async fn wait_for_failed_reimport(client: &Client, symbols: &Value, reason: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let answer = client
            .call("acp_get_architecture", json!({}))
            .await
            .unwrap();
        assert_eq!(&answer.json["total_symbols"], symbols);
        if answer
            .texts
            .iter()
            .any(|t| t.contains("re-importing it failed") && t.contains(reason))
        {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "a failed re-import ({reason}) was never reported: {:?}",
            answer.texts
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits (at most 60 s) until answers carry no note beside their content, as once a re-import
/// after `what` has succeeded.
async fn wait_until_no_note(client: &Client, what: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while client
        .call("acp_get_architecture", json!({}))
        .await
        .unwrap()
        .index_is_stale()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the stale note stayed after {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_changed_cache_is_reimported_while_serving() {
    let project = demo();
    let client = Client::spawn(project.root(), &["--watch-interval", "0.2"]).await;
    wait_ready(&client, 60).await;
    let before = client.ok("acp_get_architecture", json!({})).await["total_symbols"]
        .as_u64()
        .unwrap();

    // A re-run of `acp index` adds a symbol.
    let mut cache: Value =
        serde_json::from_str(&std::fs::read_to_string(project.cache_path()).unwrap()).unwrap();
    cache["symbols"]["brandNewHelper"] = json!({"name": "brandNewHelper", "qualified_name": "src/auth/session.ts:brandNewHelper", "type": "function", "file": "src/auth/session.ts", "lines": [90, 95], "exported": true});
    std::fs::write(project.cache_path(), serde_json::to_string(&cache).unwrap()).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let now = client.ok("acp_get_architecture", json!({})).await["total_symbols"]
            .as_u64()
            .unwrap();
        if now == before + 1 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the new cache was never served"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    client
        .ok(
            "acp_query",
            json!({"type": "symbol", "name": "brandNewHelper"}),
        )
        .await;

    // A broken cache: the previous import keeps answering, with a note naming the failure.
    std::fs::write(project.cache_path(), "{\"files\": {").unwrap();
    wait_for_failed_reimport(&client, &json!(before + 1), "").await;
    std::fs::write(project.cache_path(), serde_json::to_string(&cache).unwrap()).unwrap();
    wait_until_no_note(&client, "the cache was fixed").await;

    // Touched but unchanged: no import, so cursors stay valid.
    let page = client
        .ok(
            "acp_query",
            json!({"type": "search", "pattern": "session", "limit": 1}),
        )
        .await;
    let cursor = page["result"]["next_cursor"].as_str().unwrap().to_string();
    let imported_at = |text: String| -> Value {
        serde_json::from_str::<Value>(&text).unwrap()["imported_at"].clone()
    };
    let first = imported_at(client.read("acp://cache").await.unwrap());
    let file = std::fs::File::options()
        .append(true)
        .open(project.cache_path())
        .unwrap();
    file.set_modified(std::time::SystemTime::now() + Duration::from_secs(5))
        .unwrap();
    drop(file);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        imported_at(client.read("acp://cache").await.unwrap()),
        first
    );
    client
        .ok(
            "acp_query",
            json!({"type": "search", "pattern": "session", "limit": 1, "cursor": cursor}),
        )
        .await;
    client.close().await;
}

#[tokio::test]
async fn a_cache_replaced_by_a_fifo_is_refused_at_once_and_the_previous_import_keeps_answering() {
    let project = demo();
    let client = Client::spawn(project.root(), &["--watch-interval", "0.1"]).await;
    wait_ready(&client, 60).await;
    let before = client.ok("acp_get_architecture", json!({})).await["total_symbols"].clone();
    let cache = std::fs::read(project.cache_path()).unwrap();
    // Nobody ever writes to the FIFO: opening it for reading the usual way never returns.
    std::fs::remove_file(project.cache_path()).unwrap();
    mkfifo(&project.cache_path());
    wait_for_failed_reimport(&client, &before, "is a FIFO, not a regular file").await;
    std::fs::remove_file(project.cache_path()).unwrap();
    std::fs::write(project.cache_path(), cache).unwrap();
    wait_until_no_note(&client, "the cache came back").await;
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_replaced_under_a_running_server_never_mixes_into_its_pool() {
    let (project, hub) = generated_with_hub();
    // The watcher would re-import; this is about the pool alone.
    // A time limit no heavy walk reaches on a loaded machine: this is about the pool.
    let client = Client::spawn(
        project.root(),
        &[
            "--pool-size",
            "4",
            "--watch-interval",
            "0",
            "--query-timeout",
            "120",
        ],
    )
    .await;
    wait_ready(&client, 60).await;
    let before = client.ok("acp_get_architecture", json!({})).await;
    // Another file renamed over the database: connections opened by path from now on would
    // read it instead.
    let replacement = project.root().join(".acp/other.db");
    std::fs::write(&replacement, b"").unwrap();
    std::fs::rename(&replacement, project.db()).unwrap();
    let client = std::sync::Arc::new(client);
    let mut calls = tokio::task::JoinSet::new();
    for call in 0..16 {
        let client = client.clone();
        // Heavy walks and cheap lookups at once, so that every connection is in use.
        let (tool, args) = match call % 2 {
            0 => (
                "acp_query",
                json!({"type": "callers", "name": hub, "depth": 5, "limit": 1}),
            ),
            _ => ("acp_query", json!({"type": "symbol", "name": hub})),
        };
        calls.spawn(async move {
            client
                .call(tool, args)
                .await
                .map(|_| ())
                .map_err(|err| err.message)
        });
    }
    while let Some(answer) = calls.join_next().await {
        assert_eq!(answer.unwrap(), Ok(()));
    }
    assert_eq!(client.ok("acp_get_architecture", json!({})).await, before);
    std::sync::Arc::into_inner(client).unwrap().close().await;
}

#[tokio::test]
async fn a_change_during_a_running_import_is_imported_after_it() {
    let (project, _) = generated_with_hub();
    let client = Client::spawn(project.root(), &["--watch-interval", "0.1"]).await;
    wait_ready(&client, 120).await;
    let original = std::fs::read_to_string(project.cache_path()).unwrap();
    let mut cache: Value = serde_json::from_str(&original).unwrap();
    let count = |cache: &Value| cache["symbols"].as_object().unwrap().len() as u64;
    let base = count(&cache);
    // Two rewrites in quick succession: the second lands while the first is being imported.
    for extra in 0..2 {
        cache["symbols"][format!("addedLater{extra}")] = json!({"name": format!("addedLater{extra}"), "type": "function", "file": "src/x.ts", "lines": [1, 2]});
        let text = serde_json::to_string(&cache).unwrap();
        let temp = project.cache_path().with_extension("tmp");
        std::fs::write(&temp, text).unwrap();
        std::fs::rename(&temp, project.cache_path()).unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        let answer = client
            .call("acp_get_architecture", json!({}))
            .await
            .unwrap();
        if answer.json["total_symbols"] == base + 2 && !answer.index_is_stale() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the last change was never imported: {:?}",
            answer.texts
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    client.close().await;
}

#[tokio::test]
async fn two_servers_on_one_project_never_lose_or_duplicate_journal_entries() {
    let project = demo();
    let first = Client::spawn(project.root(), &[]).await;
    let second = Client::spawn(project.root(), &[]).await;
    wait_ready(&first, 60).await;
    wait_ready(&second, 60).await;
    const PER_SERVER: usize = 15;
    let (a, b) = tokio::join!(
        record(&first, "first", PER_SERVER),
        record(&second, "second", PER_SERVER)
    );
    let mut ids: Vec<String> = a
        .iter()
        .chain(b.iter())
        .map(|v| v["session_id"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 2 * PER_SERVER, "an id was handed out twice");
    let list = first.ok("acp_debug", json!({"action": "list"})).await;
    for id in &ids {
        assert!(
            list.to_string().contains(id.as_str()),
            "{id} missing from {list}"
        );
    }
    first.close().await;
    second.close().await;
    let out = common::acpdb()
        .arg("-C")
        .arg(project.root())
        .args(["debug", "list"])
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        ids.iter().filter(|id| listed.contains(id.as_str())).count(),
        2 * PER_SERVER
    );
}

/// Starts `count` debug sessions through `client`, one after another.
async fn record(client: &Client, label: &str, count: usize) -> Vec<Value> {
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        let args = json!({"action": "start", "data": {"problem": format!("{label} problem {i}"), "hypothesis": "race"}});
        out.push(client.ok("acp_debug", args).await);
    }
    out
}

#[tokio::test]
async fn a_database_of_an_older_schema_is_rebuilt_before_it_answers() {
    let project = demo();
    let out = project.import();
    assert!(out.status.success(), "{}", common::stderr(&out));
    // What an acpdb from before the summary tables left behind.
    {
        let conn = rusqlite::Connection::open(project.db()).unwrap();
        conn.execute_batch(
            "DROP VIEW project; DROP TABLE index_summary;
             DELETE FROM refinery_schema_history WHERE version >= 3;",
        )
        .unwrap();
    }
    let client = Client::spawn(project.root(), &[]).await;
    wait_ready(&client, 60).await;
    let architecture = client.ok("acp_get_architecture", json!({})).await;
    let conn = rusqlite::Connection::open(project.db()).unwrap();
    let symbols: i64 = conn
        .query_row("SELECT count(*) FROM symbols", [], |r| r.get(0))
        .unwrap();
    assert_eq!(architecture["total_symbols"], symbols);
    let version: i64 = conn
        .query_row(
            "SELECT max(version) FROM refinery_schema_history",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(version, acpdb::db::current_schema_version());
    client.close().await;
}

#[tokio::test]
async fn context_targets_resolve_like_every_other_name() {
    let project = demo();
    let client = Client::spawn(project.root(), &[]).await;
    wait_ready(&client, 60).await;
    for spelling in [
        "src/auth/session.ts",
        "./src/auth/session.ts",
        ".\\src\\auth\\session.ts",
    ] {
        let modify = client
            .ok(
                "acp_context",
                json!({"operation": "modify", "target": spelling}),
            )
            .await;
        assert_eq!(
            modify["file"], "./src/auth/session.ts",
            "{spelling}: {modify}"
        );
        assert_eq!(
            modify["constraints"]["level"], "restricted",
            "{spelling}: {modify}"
        );
        assert!(modify["domain"].is_string(), "{spelling}: {modify}");
    }
    for (target, file) in [
        ("src/auth/session.ts", "./src/auth/session.ts"),
        ("src/auth/session.ts:validateSession", "src/auth/session.ts"),
        ("validateSession", "src/auth/session.ts"),
    ] {
        let debug = client
            .ok(
                "acp_context",
                json!({"operation": "debug", "target": target}),
            )
            .await;
        assert!(debug.get("error").is_none(), "{target}: {debug}");
        assert_eq!(debug["target"], target);
        assert!(
            debug["file"]
                .as_str()
                .unwrap_or_default()
                .ends_with(file.trim_start_matches("./")),
            "{target}: {debug}"
        );
        assert!(
            !debug["symbols"].as_array().unwrap().is_empty(),
            "{target}: {debug}"
        );
    }
    for operation in ["modify", "debug"] {
        let err = client
            .err(
                "acp_context",
                json!({"operation": operation, "target": "src/auth/sesion.ts"}),
            )
            .await;
        assert_eq!(err.code, -32602, "{operation}: {err:?}");
        assert!(
            err.message.contains("not found: src/auth/sesion.ts"),
            "{err:?}"
        );
        let suggestions = err.data.as_ref().expect("suggestions")["suggestions"].clone();
        assert!(
            suggestions.to_string().contains("src/auth/session.ts"),
            "{operation}: {suggestions}"
        );
    }
    client.close().await;
}

/// The README's example session, pasted at once into the README's first command, is answered
/// in full: the command imports before serving, so no call meets an index still being built.
#[test]
fn readme_example_session_works_pasted_at_once() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let session = readme
        .split("## An example session")
        .nth(1)
        .and_then(|rest| rest.split("```sh\n").nth(1))
        .and_then(|block| block.split("```").next())
        .expect("README has an example session block");
    let mut lines = session.lines();
    let command = lines
        .next()
        .and_then(|l| l.strip_prefix("$ "))
        .expect("the block starts with the command");
    let requests: Vec<&str> = lines.filter(|l| l.starts_with('{')).collect();
    assert!(requests.len() >= 4, "{session}");

    let scratch = tempfile::tempdir().unwrap();
    let demo = TempProject::copy_of(&fixture("demo"));
    std::fs::create_dir_all(scratch.path().join("fixtures")).unwrap();
    std::fs::rename(demo.root(), scratch.path().join("fixtures/demo")).unwrap();
    let steps: Vec<Vec<&str>> = command
        .split("&&")
        .map(|step| {
            let step = step.trim();
            let args = step
                .strip_prefix("cargo run --release --locked --")
                .unwrap_or_else(|| {
                    panic!("step {step:?} is not `cargo run --release --locked -- …`")
                });
            args.split_whitespace().collect()
        })
        .collect();
    let (serve, setup) = steps.split_last().unwrap();
    for step in setup {
        let status = Command::new(env!("CARGO_BIN_EXE_acpdb"))
            .args(step)
            .current_dir(scratch.path())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "{step:?}");
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_acpdb"))
        .args(serve)
        .current_dir(scratch.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all((requests.join("\n") + "\n").as_bytes())
        .unwrap();
    stdin.flush().unwrap();
    let ids: Vec<Value> = requests
        .iter()
        .map(|r| serde_json::from_str::<Value>(r).unwrap()["id"].clone())
        .filter(|id| !id.is_null())
        .collect();
    let mut answers = std::collections::HashMap::new();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    while answers.len() < ids.len() {
        let mut line = String::new();
        assert!(
            reader.read_line(&mut line).unwrap() > 0,
            "server closed early"
        );
        let answer: Value = serde_json::from_str(&line).unwrap();
        answers.insert(answer["id"].to_string(), answer);
    }
    drop(stdin);
    let _ = child.wait();
    for id in &ids {
        let answer = &answers[&id.to_string()];
        assert_ne!(answer["error"]["code"], -32003, "{answer}");
    }
    assert!(answers["2"]["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("\"search\""));
    assert!(answers["3"]["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("tests-required"));
    assert_eq!(answers["4"]["error"]["code"], -32602, "{}", answers["4"]);
}

#[tokio::test]
async fn numbers_and_objects_sent_as_strings_are_accepted_and_type_errors_name_the_field() {
    let project = demo();
    let client = Client::spawn(project.root(), &[]).await;
    wait_ready(&client, 60).await;
    let page = client
        .ok(
            "acp_query",
            json!({"type": "search", "pattern": "session", "limit": "1"}),
        )
        .await;
    assert_eq!(
        page["result"]["matches"].as_array().unwrap().len(),
        1,
        "{page}"
    );
    let deep = client
        .ok(
            "acp_query",
            json!({"type": "callers", "name": "digest", "depth": " 2 "}),
        )
        .await;
    assert_eq!(deep["depth"], 2, "{deep}");
    let started = client
        .ok(
            "acp_debug",
            json!({"action": "start", "data": "{\"problem\": \"Login fails\", \"hypothesis\": \"Clock skew\"}"}),
        )
        .await;
    assert!(started.to_string().contains("debug-"), "{started}");
    let err = client
        .err(
            "acp_query",
            json!({"type": "search", "pattern": "x", "limit": "abc"}),
        )
        .await;
    assert_eq!(err.code, -32602);
    assert_eq!(
        err.message,
        r#"limit: expected an integer from 0 to 100, got "abc""#
    );
    let err = client
        .err(
            "acp_hack",
            json!({"action": "mark", "data": {"file": "src/index.ts", "line": "first"}}),
        )
        .await;
    assert_eq!(err.code, -32602);
    assert!(
        err.message.starts_with("data.line: expected an integer"),
        "{}",
        err.message
    );
    let err = client
        .err("acp_debug", json!({"action": "start", "data": "not json"}))
        .await;
    assert!(
        err.message.starts_with("data: expected an object"),
        "{}",
        err.message
    );
    client.close().await;
}

#[tokio::test]
async fn tools_carry_annotations() {
    let project = demo();
    let client = Client::spawn(project.root(), &[]).await;
    let tools = client.service.list_all_tools().await.unwrap();
    assert_eq!(tools.len(), 17);
    for tool in &tools {
        let hints = tool
            .annotations
            .as_ref()
            .unwrap_or_else(|| panic!("{} has no annotations", tool.name));
        let journal = ["acp_debug", "acp_hack"].contains(&tool.name.as_ref());
        assert_eq!(hints.read_only_hint, Some(!journal), "{}", tool.name);
        assert_eq!(hints.destructive_hint, Some(false), "{}", tool.name);
        assert_eq!(hints.idempotent_hint, Some(!journal), "{}", tool.name);
        assert_eq!(hints.open_world_hint, Some(false), "{}", tool.name);
    }
    client.close().await;
}

/// Runs `acpdb serve` with `args`, sends `lines`, waits for `answers` answers and returns stderr.
fn serve_stderr(project: &TempProject, args: &[&str], lines: &[&str], answers: usize) -> String {
    let mut child = Command::new(env!("CARGO_BIN_EXE_acpdb"))
        .arg("-C")
        .arg(project.root())
        .args(args)
        .arg("serve")
        .env_remove("ACPDB_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for line in lines {
        writeln!(stdin, "{line}").unwrap();
    }
    stdin.flush().unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut seen = 0;
    while seen < answers {
        let mut line = String::new();
        assert!(
            reader.read_line(&mut line).unwrap() > 0,
            "server closed early"
        );
        if serde_json::from_str::<Value>(&line).unwrap()["id"].is_number() {
            seen += 1;
        }
    }
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn user_errors_are_not_logged_as_server_warnings_and_the_level_applies_everywhere() {
    let project = demo();
    assert!(project.import().status.success());
    let bad_call = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"acp_query","arguments":{"type":"symbol","name":"noSuchSymbol"}}}"#;
    let unknown_tool = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"acp_nope","arguments":{}}}"#;
    for level in ["off", "error", "warn", "info"] {
        let stderr = serve_stderr(
            &project,
            &["--log-level", level],
            &[INIT, INITIALIZED, bad_call, unknown_tool],
            3,
        );
        assert!(!stderr.contains("WARN"), "--log-level {level}:\n{stderr}");
        assert!(
            !stderr.contains("ErrorData"),
            "--log-level {level}:\n{stderr}"
        );
        if level == "off" || level == "error" {
            assert!(stderr.trim().is_empty(), "--log-level {level}:\n{stderr}");
        }
    }
    let stderr = serve_stderr(
        &project,
        &["--log-level", "debug"],
        &[INIT, INITIALIZED, bad_call],
        2,
    );
    assert!(
        stderr.contains("error answered") && stderr.contains("noSuchSymbol"),
        "{stderr}"
    );
}

/// Reads every page of a resource through `next_uri` and returns the pages.
async fn resource_pages(client: &Client, uri: &str) -> Vec<Value> {
    let mut pages = Vec::new();
    let mut next = Some(uri.to_string());
    while let Some(uri) = next {
        let page: Value = serde_json::from_str(&client.read(&uri).await.unwrap()).unwrap();
        next = page["next_uri"].as_str().map(String::from);
        if next.is_some() {
            assert_eq!(page["truncated"], true, "{uri}");
        }
        pages.push(page);
        assert!(pages.len() < 1000, "endless pages");
    }
    pages
}

#[tokio::test]
async fn large_resources_come_in_bounded_pages_that_cover_everything_once() {
    let project = TempProject::generated(300);
    let conn = rusqlite::Connection::open(project.db()).unwrap();
    let count =
        |sql: &str| -> usize { conn.query_row(sql, [], |r| r.get::<_, i64>(0)).unwrap() as usize };
    let client = Client::spawn(project.root(), &[]).await;
    wait_ready(&client, 60).await;

    let vars = resource_pages(&client, "acp://vars").await;
    let total_vars = count("SELECT count(*) FROM vars");
    assert!(
        total_vars > 100 && vars.len() > 1,
        "{total_vars} vars in {} pages",
        vars.len()
    );
    let mut names = HashSet::new();
    for page in &vars {
        let variables = page["variables"].as_object().unwrap();
        assert!(variables.len() <= 100);
        for name in variables.keys() {
            assert!(names.insert(name.clone()), "{name} twice");
        }
    }
    assert_eq!(names.len(), total_vars);
    assert_eq!(vars[0]["total"], total_vars);

    let constraints = resource_pages(&client, "acp://constraints").await;
    let total_files = count("SELECT count(DISTINCT path) FROM constraints");
    let mut files = HashSet::new();
    for page in &constraints {
        let by_file = page["by_file"].as_object().unwrap();
        assert!(by_file.len() <= 100);
        let listed: usize = page["by_lock_level"]
            .as_object()
            .unwrap()
            .values()
            .map(|paths| paths.as_array().unwrap().len())
            .sum();
        assert_eq!(listed, by_file.len());
        for path in by_file.keys() {
            assert!(files.insert(path.clone()), "{path} twice");
        }
    }
    assert_eq!(files.len(), total_files);

    let domain: String = conn
        .query_row(
            "SELECT key FROM domains ORDER BY json_array_length(files_json) DESC LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let domain_files: usize = conn
        .query_row(
            "SELECT json_array_length(files_json) FROM domains WHERE key = ?1",
            [&domain],
            |r| r.get::<_, i64>(0),
        )
        .unwrap() as usize;
    let pages = resource_pages(&client, &format!("acp://domain/{domain}")).await;
    let listed: usize = pages
        .iter()
        .map(|p| p["files"].as_array().unwrap().len())
        .sum();
    assert_eq!(listed, domain_files);
    assert_eq!(pages.len(), domain_files.div_ceil(100).max(1));

    let forged = client.read("acp://vars?cursor=00ff").await.unwrap_err();
    assert_eq!(forged.code, -32602, "{forged:?}");
    let next = vars[0]["next_cursor"].as_str().unwrap();
    let foreign = client
        .read(&format!("acp://constraints?cursor={next}"))
        .await
        .unwrap_err();
    assert_eq!(foreign.code, -32602, "{foreign:?}");
    assert_eq!(
        client.read("acp://vars?page=2").await.unwrap_err().code,
        -32002
    );
    client.close().await;
}

#[test]
fn every_request_gets_exactly_one_answer_with_its_id() {
    let project = demo();
    assert!(project.import().status.success());
    let huge = format!(
        r#"{{"jsonrpc":"2.0","id":20,"method":"ping","params":{{"pad":"{}"}}}}"#,
        "x".repeat(17 * 1024 * 1024)
    );
    let deep = format!(
        r#"{{"jsonrpc":"2.0","id":21,"method":"tools/call","params":{{"name":"acp_query","arguments":{{"x":{}{}}}}}}}"#,
        "[".repeat(200),
        "]".repeat(200)
    );
    let lines: Vec<String> = vec![
        INIT.into(),
        INITIALIZED.into(),
        huge,
        deep,
        r#"{"jsonrpc":"2.0","id":22,"method":"ping","params":{"s":"\ud800"}}"#.into(),
        r#"{"jsonrpc":"1.0","id":23,"method":"ping"}"#.into(),
        r#"{"jsonrpc":"2.0","id":24,"method":"tools/list","params":[1,2]}"#.into(),
        r#"{"jsonrpc":"2.0","id":25,"method":"tools/call","params":{"name":"acp_query","arguments":["type","stats"]}}"#.into(),
        r#"{"jsonrpc":"2.0","id":26,"method":"tools/call","params":{"name":"acp_query","arguments":"stats"}}"#.into(),
        r#"{"jsonrpc":"2.0","id":27,"method":"tools/call","params":{"name":"acp_query","arguments":{"type":"search","pattern":"cache\u0000"}}}"#.into(),
        r#"[{"jsonrpc":"2.0","id":28,"method":"ping"}]"#.into(),
        r#"{"jsonrpc":"2.0","id":29,"method":"tools/call","params":{"arguments":{}}}"#.into(),
        r#"{"jsonrpc":"2.0","id":30,"method":"ping"}"#.into(),
    ];
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    let answers = raw_session(&project, &refs, 12);
    let by_id = |id: Value| -> Vec<&Value> { answers.iter().filter(|a| a["id"] == id).collect() };
    for (id, code) in [
        // A line over 16 MiB, answered with the id its first bytes hold.
        (20, -32700),
        (21, -32700),
        (22, -32700),
        (23, -32600),
        (24, -32602),
        (25, -32602),
        (26, -32602),
        (27, -32602),
        (29, -32602),
    ] {
        let found = by_id(json!(id));
        assert_eq!(found.len(), 1, "id {id}: {answers:#?}");
        assert_eq!(found[0]["error"]["code"], code, "id {id}: {}", found[0]);
    }
    assert!(by_id(json!(30))[0]["result"].is_object());
    let anonymous: Vec<i64> = by_id(Value::Null)
        .iter()
        .map(|a| a["error"]["code"].as_i64().unwrap())
        .collect();
    // The batch: an error without a readable id.
    assert_eq!(anonymous, [-32600], "{answers:#?}");
    assert!(
        by_id(json!(25))[0]["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("arguments: expected an object"),
        "{answers:#?}"
    );
    assert!(
        by_id(json!(27))[0]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("NUL"),
        "{answers:#?}"
    );
}

/// A generated project of 15,000 symbols and its most-called symbol.
fn generated_with_hub() -> (TempProject, String) {
    let project = TempProject::generated(1500);
    let conn = rusqlite::Connection::open(project.db()).unwrap();
    let hub: String = conn
        .query_row(
            "SELECT name FROM graph_nodes ORDER BY reverse_len DESC LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    (project, hub)
}

fn tool_call(id: u32, tool: &str, arguments: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": arguments}})
        .to_string()
}

#[test]
fn heavy_calls_do_not_hold_up_cheap_ones_and_run_under_a_time_limit() {
    let (project, hub) = generated_with_hub();
    let heavy = |id| {
        tool_call(
            id,
            "acp_query",
            json!({"type": "callers", "name": hub, "depth": 5, "limit": 1}),
        )
    };
    let lines = [
        INIT.to_string(),
        INITIALIZED.to_string(),
        heavy(2),
        heavy(3),
        r#"{"jsonrpc":"2.0","id":4,"method":"ping"}"#.to_string(),
        tool_call(5, "acp_query", json!({"type": "stats"})),
    ];
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    // A time limit no heavy call reaches on a loaded machine: this part is about the order.
    let answers = raw_session_with(&project, &["--query-timeout", "120"], &refs, 5);
    let order: Vec<i64> = answers.iter().filter_map(|a| a["id"].as_i64()).collect();
    let position = |id| order.iter().position(|&x| x == id).unwrap();
    assert!(
        position(4) < position(2).max(position(3)) && position(5) < position(2).max(position(3)),
        "cheap calls waited for both heavy ones: {order:?}"
    );
    for id in [2, 3, 5] {
        let answer = answers.iter().find(|a| a["id"] == id).unwrap();
        assert!(answer["result"].is_object(), "{answer}");
    }

    let mut child = Command::new(env!("CARGO_BIN_EXE_acpdb"))
        .arg("-C")
        .arg(project.root())
        .args(["serve", "--query-timeout", "0.001"])
        .env("ACPDB_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for line in [
        INIT.to_string(),
        INITIALIZED.to_string(),
        heavy(2),
        tool_call(3, "acp_get_hotpaths", json!({})),
    ] {
        writeln!(stdin, "{line}").unwrap();
    }
    stdin.flush().unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut answers = Vec::new();
    while answers.len() < 3 {
        let mut line = String::new();
        assert!(reader.read_line(&mut line).unwrap() > 0);
        answers.push(serde_json::from_str::<Value>(&line).unwrap());
    }
    drop(stdin);
    let _ = child.wait();
    let limited = answers.iter().find(|a| a["id"] == 2).unwrap();
    assert_eq!(limited["error"]["code"], -32004, "{limited}");
    assert!(
        limited["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--query-timeout"),
        "{limited}"
    );
    assert!(answers.iter().find(|a| a["id"] == 3).unwrap()["result"].is_object());
}

#[test]
fn serve_refuses_durations_it_cannot_represent() {
    let project = demo();
    for (flag, value) in [
        ("--watch-interval", "inf"),
        ("--watch-interval", "1e20"),
        ("--query-timeout", "-1"),
        ("--query-timeout", "0"),
    ] {
        let out = project.run(&["serve", &format!("{flag}={value}")]);
        assert_eq!(out.status.code(), Some(1), "{flag} {value}");
        assert!(
            common::stderr(&out).contains(flag),
            "{}",
            common::stderr(&out)
        );
    }
}

#[test]
fn forged_cursors_are_refused_at_once() {
    let (project, hub) = generated_with_hub();
    let first = tool_call(
        2,
        "acp_query",
        json!({"type": "callers", "name": hub, "limit": 5}),
    );
    let answers = raw_session(&project, &[INIT, INITIALIZED, &first], 2);
    let page: Value = serde_json::from_str(
        answers.iter().find(|a| a["id"] == 2).unwrap()["result"]["content"][0]["text"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    let token = page["next_cursor"].as_str().unwrap();
    // The payload is readable hex JSON: raise the depth and keep the tag.
    let (payload, tag) = token.split_at(token.len() - 32);
    let bytes: Vec<u8> = (0..payload.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&payload[i..i + 2], 16).unwrap())
        .collect();
    let text = String::from_utf8(bytes).unwrap();
    let mut forgeries = Vec::new();
    for (from, to) in [
        ("\"d\":1", "\"d\":1000"),
        ("\"o\":5", "\"o\":9223372036854775808"),
    ] {
        let edited = text.replace(from, to);
        assert_ne!(edited, text, "{text}");
        let hex: String = edited.bytes().map(|b| format!("{b:02x}")).collect();
        forgeries.push(format!("{hex}{tag}"));
    }
    let calls: Vec<String> = forgeries
        .iter()
        .enumerate()
        .map(|(i, cursor)| {
            tool_call(
                10 + i as u32,
                "acp_query",
                json!({"type": "callers", "name": hub, "cursor": cursor}),
            )
        })
        .collect();
    let mut lines = vec![INIT, INITIALIZED];
    lines.extend(calls.iter().map(String::as_str));
    lines.push(r#"{"jsonrpc":"2.0","id":20,"method":"ping"}"#);
    let answers = raw_session(&project, &lines, 4);
    for id in [10, 11] {
        let answer = answers.iter().find(|a| a["id"] == id).unwrap();
        assert_eq!(answer["error"]["code"], -32602, "{answer}");
        assert!(
            answer["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with("Invalid cursor"),
            "{answer}"
        );
    }
}

#[tokio::test]
async fn temporary_files_of_killed_writers_are_swept_when_the_server_starts() {
    let project = demo();
    project.import();
    let acp = project.root().join(".acp");
    // Every kind an import makes (the new database with its SQLite files, the full-text
    // builder's database) and the journal's export.
    let left = [
        acp.join(".acp.db.99999999.tmp"),
        acp.join(".acp.db.99999999.tmp-wal"),
        acp.join(".acp.db.99999999.tmp-shm"),
        acp.join(".acp.db-fts.99999999.tmp"),
        acp.join(".acp.attempts.json.99999999.tmp"),
    ];
    for path in &left {
        std::fs::write(path, "half-written").unwrap();
    }
    let kept = acp.join(".acp.db.backup.tmp");
    std::fs::write(&kept, "not a temporary file of ours").unwrap();
    let client = Client::spawn(project.root(), &[]).await;
    wait_ready(&client, 60).await;
    client.ok("acp_debug", json!({"action": "list"})).await;
    for path in &left {
        assert!(!path.exists(), "{} was left", path.display());
    }
    assert!(kept.exists());
    client.close().await;
}

#[tokio::test]
async fn the_cli_lists_the_same_hacks_as_the_tool() {
    let project = demo();
    project.import();
    let client = Client::spawn(project.root(), &[]).await;
    wait_ready(&client, 60).await;
    client
        .ok(
            "acp_hack",
            json!({"action": "mark", "data": {"file": "src/index.ts", "line": 3, "reason": "demo"}}),
        )
        .await;
    let tool = client.ok("acp_hack", json!({"action": "list"})).await;
    let out = project.run(&["hack", "list"]);
    assert!(out.status.success(), "{}", common::stderr(&out));
    let cli: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(cli, tool);
    let sources: HashSet<&str> = tool["hacks"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|h| h["source"].as_str())
        .collect();
    assert!(sources.contains("cache") && sources.len() > 1, "{tool}");
    client.close().await;
}

#[test]
fn an_id_no_parser_reads_back_is_echoed_as_written() {
    let project = demo();
    let answers = raw_answers(
        &project,
        &[
            r#"{"jsonrpc":"2.0","id":1e400,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#,
        ],
        2,
    );
    // Error answers are written as they are ready, in any order.
    let answer = |id: &str| {
        answers
            .iter()
            .find(|a| a.contains(&format!(r#""id":{id},"#)))
            .unwrap_or_else(|| panic!("no answer with id {id}: {answers:?}"))
    };
    assert!(answer("1e400").contains("-32700"), "{answers:?}");
    assert!(answer("1.5").contains("-32600"), "{answers:?}");
}
