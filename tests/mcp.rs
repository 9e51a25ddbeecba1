//! The MCP server over real stdio: protocol behaviour, errors, the journal tools and the index
//! lifecycle (first import, staleness, re-import), driven by rmcp's client or by raw JSON-RPC.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::mcp::{wait_ready, Client};
use common::{fixture, TempProject};
use serde_json::{json, Value};

fn demo() -> TempProject {
    TempProject::copy_of(&fixture("demo"))
}

/// Sends raw lines to `acpdb serve` and collects the JSON answers with an id.
fn raw_session(project: &TempProject, lines: &[&str], expected_answers: usize) -> Vec<Value> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_acpdb"))
        .arg("-C")
        .arg(project.root())
        .arg("serve")
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
    let mut answers = Vec::new();
    while answers.len() < expected_answers {
        let line = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("answer in time");
        let value: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout is not JSON-RPC ({e}): {line}"));
        answers.push(value);
    }
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();
    answers
}

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

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
    assert_eq!(error["error"]["code"], -32600, "{error}");
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
