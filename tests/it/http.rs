//! `acpdb serve --http`: the real binary on loopback, driven by rmcp's Streamable HTTP client
//! and by raw HTTP/1.1 requests written on a socket (for what a well-behaved client never
//! sends: wrong tokens and origins, oversized and unfinished bodies, dropped connections).

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::mcp::{first_sweep_done, wait_ready, Client};
use crate::common::{fixture, golden_calls, without_sweep_times, TempProject};

/// A running `acpdb serve --http 127.0.0.1:0`, killed when dropped.
pub(crate) struct HttpServer {
    child: Child,
    pub(crate) addr: SocketAddr,
    stderr: Arc<Mutex<String>>,
}

impl HttpServer {
    /// Starts `acpdb -C root serve --http 127.0.0.1:0 <args>` and waits for its address.
    pub(crate) fn start(root: &std::path::Path, args: &[&str]) -> HttpServer {
        let mut child = Command::new(env!("CARGO_BIN_EXE_acpdb"))
            .arg("-C")
            .arg(root)
            .args(["--log-level", "info", "serve", "--http", "127.0.0.1:0"])
            .args(args)
            .env_remove("ACPDB_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn acpdb serve --http");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let stderr = Arc::new(Mutex::new(String::new()));
        let addr = loop {
            let Some(Ok(line)) = lines.next() else {
                let _ = child.kill();
                panic!(
                    "the server ended before listening: {}",
                    stderr.lock().unwrap()
                );
            };
            stderr.lock().unwrap().push_str(&(line.clone() + "\n"));
            if let Some(rest) = line.split("over MCP at http://").nth(1) {
                break rest.split('/').next().unwrap().parse().unwrap();
            }
        };
        let tail = stderr.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                tail.lock().unwrap().push_str(&(line + "\n"));
            }
        });
        HttpServer {
            child,
            addr,
            stderr,
        }
    }

    pub(crate) fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    pub(crate) fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Sends SIGTERM and waits for the exit, at most `seconds`.
    fn terminate(&mut self, seconds: u64) -> ExitStatus {
        // SAFETY: kill(2) with the pid of our own child and a valid signal.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(seconds);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "no exit {seconds} s after SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An HTTP answer: status and everything after the status line.
#[derive(Debug)]
pub(crate) struct Answer {
    status: u16,
    text: String,
}

/// Headers of a POST to `/mcp` with a JSON body of `length` bytes.
fn post_head(addr: SocketAddr, length: usize, extra: &[(&str, &str)]) -> String {
    let mut head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nConnection: close\r\n\
         Content-Length: {length}\r\n"
    );
    for (name, value) in extra {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head + "\r\n"
}

fn read_answer(mut stream: TcpStream) -> Answer {
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let status = raw
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP answer: {raw:?}"));
    Answer { status, text: raw }
}

/// POSTs `body` to `/mcp` with `extra` headers and reads the whole answer.
fn post(addr: SocketAddr, body: &str, extra: &[(&str, &str)]) -> Answer {
    post_naming_host(addr, &addr.to_string(), body, extra)
}

/// [`post`], with `host` in the `Host` header instead of the address connected to.
fn post_naming_host(addr: SocketAddr, host: &str, body: &str, extra: &[(&str, &str)]) -> Answer {
    let mut stream = TcpStream::connect(addr).unwrap();
    let head = post_head(addr, body.len(), extra)
        .replace(&format!("Host: {addr}"), &format!("Host: {host}"));
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body.as_bytes()).unwrap();
    read_answer(stream)
}

/// Posts `body` until it is refused with 503 or `give_up` says so; the last answer.
fn post_until_refused(
    addr: SocketAddr,
    body: &str,
    extra: &[(&str, &str)],
    give_up: impl Fn() -> bool,
) -> Answer {
    loop {
        let answer = post(addr, body, extra);
        if answer.status == 503 || give_up() {
            return answer;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub(crate) fn get(addr: SocketAddr, path: &str) -> Answer {
    get_naming_host(addr, &addr.to_string(), path)
}

/// [`get`], with `host` in the `Host` header instead of the address connected to.
fn get_naming_host(addr: SocketAddr, host: &str, path: &str) -> Answer {
    let mut stream = TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    read_answer(stream)
}

/// The JSON body of an answer.
pub(crate) fn json_body(answer: &Answer) -> Value {
    let start = answer.text.find('{').expect("a JSON body");
    let end = answer.text.rfind('}').unwrap();
    serde_json::from_str(&answer.text[start..=end]).unwrap()
}

fn tool_call(id: u32, tool: &str, arguments: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": tool, "arguments": arguments}})
    .to_string()
}

fn demo() -> TempProject {
    let project = TempProject::copy_of(&fixture("demo"));
    project.import();
    project
}

/// The index's symbol count, from `acp_get_architecture`.
async fn total_symbols(client: &Client) -> u64 {
    client.ok("acp_get_architecture", json!({})).await["total_symbols"]
        .as_u64()
        .unwrap()
}

/// Adds a function `name` to the demo cache's `src/auth/session.ts`, as a re-run of
/// `acp index` would.
fn add_symbol(project: &TempProject, name: &str) {
    let mut cache: Value =
        serde_json::from_str(&std::fs::read_to_string(project.cache_path()).unwrap()).unwrap();
    cache["symbols"][name] = json!({"name": name, "qualified_name": format!("src/auth/session.ts:{name}"), "type": "function", "file": "src/auth/session.ts", "lines": [90, 95], "exported": true});
    std::fs::write(project.cache_path(), serde_json::to_string(&cache).unwrap()).unwrap();
}

/// Calls covering every index tool, with answers and with errors.
fn calls() -> Vec<(String, Value)> {
    let mut calls: Vec<(String, Value)> = golden_calls()
        .into_iter()
        .filter(|(tool, _)| acpdb::tools::INDEX_TOOLS.contains(&tool.as_str()))
        .collect();
    calls.extend([
        (
            "acp_impact".into(),
            json!({"files": ["src/auth/session.ts"], "depth": 3}),
        ),
        (
            "acp_trace".into(),
            json!({"from": "main", "to": "digest", "limit": 1}),
        ),
        ("acp_unused".into(), json!({"include_exported": true})),
        (
            "acp_expand".into(),
            json!({"text": "See $SYM_VALIDATESESSION and $NOPE"}),
        ),
        (
            "acp_constraints".into(),
            json!({"file": "src/auth/session.ts"}),
        ),
        (
            "acp_query".into(),
            json!({"type": "callers", "name": "digest", "depth": "2"}),
        ),
        ("acp_query".into(), json!({"type": "nope"})),
        ("acp_nope".into(), json!({})),
    ]);
    calls
}

/// Every answer (text or error code and message) of `calls` and of the resources.
async fn transcript(client: &Client, calls: &[(String, Value)]) -> Vec<String> {
    let mut out = Vec::new();
    for (tool, arguments) in calls {
        out.push(match client.call(tool, arguments.clone()).await {
            Ok(answer) => without_sweep_times(format!("{tool} {arguments} => {:?}", answer.texts)),
            Err(err) => format!("{tool} {arguments} => error {} {}", err.code, err.message),
        });
    }
    let resources = client.service.list_all_resources().await.unwrap();
    let templates = client.service.list_all_resource_templates().await.unwrap();
    out.push(format!("templates {templates:?}"));
    let mut uris: Vec<String> = resources.iter().map(|r| r.uri.to_string()).collect();
    uris.extend([
        "acp://file/src%2Fauth%2Fsession.ts".into(),
        "acp://symbol/src/auth/session.ts:validateSession".into(),
        "acp://file/no/such/file.ts".into(),
    ]);
    for uri in uris {
        out.push(match client.read(&uri).await {
            Ok(text) => without_sweep_times(format!("{uri} => {text}")),
            Err(err) => format!("{uri} => error {} {}", err.code, err.message),
        });
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn every_tool_and_resource_answers_over_http_as_over_stdio() {
    let project = demo();
    let calls = calls();
    let tools: HashSet<&str> = calls.iter().map(|(t, _)| t.as_str()).collect();
    for tool in acpdb::tools::INDEX_TOOLS {
        assert!(tools.contains(tool), "{tool} is never called");
    }
    let stdio = Client::spawn(project.root(), &[]).await;
    wait_ready(&stdio, 60).await;
    // Overviews say how far the first sweep of the sources got: compare them after it.
    let stats = || async { stdio.ok("acp_query", json!({"type": "stats"})).await };
    first_sweep_done(|| async { stats().await["source"]["files"].clone() }, false).await;
    let expected = transcript(&stdio, &calls).await;
    assert!(expected.iter().any(|t| t.contains("error -32602")));
    assert!(expected.iter().any(|t| t.contains("error -32002")));
    stdio.close().await;
    for mode in [&[][..], &["--stateless"][..]] {
        let server = HttpServer::start(project.root(), mode);
        let client = Client::http(&server.url(), None).await;
        let health =
            || async { json_body(&get(server.addr, "/healthz"))["source"]["files"].clone() };
        first_sweep_done(health, false).await;
        // The second time, the answers come from the server's answer cache: the same again.
        for round in 0..2 {
            let over_http = transcript(&client, &calls).await;
            assert_eq!(over_http.len(), expected.len());
            for (http, stdio) in over_http.iter().zip(&expected) {
                assert_eq!(http, stdio, "{mode:?}, round {round}");
            }
        }
        let cache = &json_body(&get(server.addr, "/healthz"))["answer_cache"];
        assert!(cache["hits"].as_u64() >= Some(10), "{cache}");
        // The journal tools write over HTTP as over stdio.
        let marked = client
            .ok("acp_hack", json!({"action": "mark", "data": {"file": "src/auth/session.ts", "line": 3, "reason": "over http"}}))
            .await;
        assert!(marked.to_string().contains("over http"), "{marked}");
        client.close().await;
    }
}

/// Answers come from the cache only while the index that gave them is served: a re-imported
/// cache is answered from at once; the journal is never cached, nor anything with the cache
/// turned off.
#[tokio::test(flavor = "multi_thread")]
async fn cached_answers_follow_the_index() {
    let project = demo();
    let server = HttpServer::start(project.root(), &["--watch-interval", "0.1"]);
    let client = Client::http(&server.url(), None).await;
    wait_ready(&client, 60).await;
    let cache = || json_body(&get(server.addr, "/healthz"))["answer_cache"].clone();
    let before = total_symbols(&client).await;
    let hits = cache()["hits"].as_u64().unwrap();
    assert_eq!(total_symbols(&client).await, before);
    assert_eq!(cache()["hits"].as_u64(), Some(hits + 1));
    // The journal is never cached.
    for _ in 0..2 {
        client.ok("acp_hack", json!({"action": "list"})).await;
    }
    assert_eq!(cache()["hits"].as_u64(), Some(hits + 1));
    // "Not found" is an answer of the index too: the second one comes from the cache, as
    // given the first time, until the index changes (below, the name then exists).
    let unknown = json!({"name": "brandNewHelper"});
    let first = client.err("acp_get_symbol_context", unknown.clone()).await;
    assert_eq!(first.code, -32602, "{first:?}");
    let again = client.err("acp_get_symbol_context", unknown.clone()).await;
    assert_eq!((again.message, again.data), (first.message, first.data));
    assert_eq!(cache()["hits"].as_u64(), Some(hits + 2));

    add_symbol(&project, "brandNewHelper");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let answer = client
            .call("acp_get_architecture", json!({}))
            .await
            .unwrap();
        let total = answer.json["total_symbols"].as_u64().unwrap();
        // The delta is written in place: its rows are read as soon as it commits, with the
        // staleness note until the server has seen the import end; then without one.
        if total == before + 1 && !answer.index_is_stale() {
            break;
        }
        assert!(total == before || total == before + 1, "{total}");
        assert!(
            Instant::now() < deadline,
            "the new index was never answered from"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The first answers of the new index may have begun before its staleness note was
    // removed, and those are not kept; from then on, its answers are kept and served again.
    assert_eq!(total_symbols(&client).await, before + 1);
    client.ok("acp_get_symbol_context", unknown).await;
    let hits = cache()["hits"].as_u64().unwrap();
    assert_eq!(total_symbols(&client).await, before + 1);
    let stats = cache();
    assert!(stats["entries"].as_u64() >= Some(1), "{stats}");
    assert_eq!(stats["hits"].as_u64(), Some(hits + 1), "{stats}");

    let off = HttpServer::start(project.root(), &["--answer-cache-mb", "0"]);
    let client = Client::http(&off.url(), None).await;
    for _ in 0..3 {
        client.ok("acp_get_architecture", json!({})).await;
    }
    let stats = json_body(&get(off.addr, "/healthz"))["answer_cache"].clone();
    assert_eq!(
        (
            stats["budget_bytes"].as_u64(),
            stats["hits"].as_u64(),
            stats["entries"].as_u64()
        ),
        (Some(0), Some(0), Some(0)),
        "{stats}"
    );
}

/// A cache file rewritten with the same content (a new mtime, nothing to import) keeps the
/// answers already computed.
#[tokio::test(flavor = "multi_thread")]
async fn a_touched_cache_keeps_the_answers() {
    let project = demo();
    let server = HttpServer::start(project.root(), &["--watch-interval", "0.1"]);
    let client = Client::http(&server.url(), None).await;
    wait_ready(&client, 60).await;
    let hits = || json_body(&get(server.addr, "/healthz"))["answer_cache"]["hits"].as_u64();
    let before = total_symbols(&client).await;
    let content = std::fs::read(project.cache_path()).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    std::fs::write(project.cache_path(), &content).unwrap();
    // Many watch intervals: the server has seen the new mtime and found the content unchanged.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let seen = hits().unwrap();
    assert_eq!(total_symbols(&client).await, before);
    assert_eq!(hits(), Some(seen + 1), "the answer was computed again");
}

/// A database file that another process's import renamed over the served one is answered from
/// (and its answers cached) once the server sees the change, not the file it opened first.
#[tokio::test(flavor = "multi_thread")]
async fn a_database_imported_by_another_process_is_answered_from() {
    let project = demo();
    let server = HttpServer::start(project.root(), &["--watch-interval", "1"]);
    let client = Client::http(&server.url(), None).await;
    wait_ready(&client, 60).await;
    let before = total_symbols(&client).await;
    assert_eq!(total_symbols(&client).await, before);
    add_symbol(&project, "importedElsewhere");
    project.import();
    let deadline = Instant::now() + Duration::from_secs(30);
    while total_symbols(&client).await != before + 1 {
        assert!(
            Instant::now() < deadline,
            "the database imported by another process was never answered from"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn sessions_are_named_by_mcp_session_id_and_unknown_ones_are_404() {
    let project = demo();
    let server = HttpServer::start(project.root(), &[]);
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}})
    .to_string();
    let answer = post(server.addr, &init, &[]);
    assert_eq!(answer.status, 200, "{answer:?}");
    let session = answer
        .text
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("mcp-session-id: ")
                .map(str::to_string)
        })
        .expect("a session id");
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    let with_session = [
        ("Mcp-Session-Id", session.as_str()),
        ("MCP-Protocol-Version", "2025-06-18"),
    ];
    assert_eq!(post(server.addr, initialized, &with_session).status, 202);
    let call = tool_call(2, "acp_query", json!({"type": "stats"}));
    let answer = post(server.addr, &call, &with_session);
    assert_eq!(answer.status, 200, "{answer:?}");
    assert!(
        answer.text.contains("\"id\":2") && answer.text.contains("files"),
        "{answer:?}"
    );
    let unknown = [
        ("Mcp-Session-Id", "no-such-session"),
        ("MCP-Protocol-Version", "2025-06-18"),
    ];
    assert_eq!(post(server.addr, &call, &unknown).status, 404);
    // Without a session, only initialize is accepted.
    assert_eq!(post(server.addr, &call, &[]).status, 400);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_token_is_required_off_loopback_and_checked_on_every_request() {
    let project = demo();
    let refused = Command::new(env!("CARGO_BIN_EXE_acpdb"))
        .arg("-C")
        .arg(project.root())
        .args(["serve", "--http", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let message = String::from_utf8_lossy(&refused.stderr);
    assert!(message.contains("--token-file"), "{message}");

    let token = "s3cret-token-8c1f";
    let token_file = project.root().join("token");
    std::fs::write(&token_file, format!("{token}\n")).unwrap();
    let server = HttpServer::start(
        project.root(),
        &["--token-file", token_file.to_str().unwrap()],
    );
    let call = tool_call(1, "acp_query", json!({"type": "stats"}));
    let stateless_call = [("MCP-Protocol-Version", "2025-06-18")];
    for auth in [
        None,
        Some("Bearer wrong"),
        Some("Bearer s3cret-token-8c1"),
        Some(token),
    ] {
        let mut headers = stateless_call.to_vec();
        if let Some(auth) = auth {
            headers.push(("Authorization", auth));
        }
        let answer = post(server.addr, &call, &headers);
        assert_eq!(answer.status, 401, "{auth:?}: {answer:?}");
        assert!(answer
            .text
            .to_ascii_lowercase()
            .contains("www-authenticate: bearer"));
    }
    let client = Client::http(&server.url(), Some(token)).await;
    let stats = client.ok("acp_query", json!({"type": "stats"})).await;
    assert!(stats["result"]["files"].as_u64().unwrap() > 0, "{stats}");
    client.close().await;
    // The health check needs no token (load balancers probe it).
    assert_eq!(get(server.addr, "/healthz").status, 200);
    assert!(!server.stderr().contains(token), "the token was logged");
}

#[tokio::test(flavor = "multi_thread")]
async fn wrong_origins_oversized_bodies_and_overload_are_refused() {
    let project = demo();
    let server = HttpServer::start(
        project.root(),
        &[
            "--stateless",
            "--max-body",
            "4096",
            "--max-concurrent",
            "1",
            "--request-timeout",
            "1",
            "--allow-origin",
            "https://tools.example.com:443",
        ],
    );
    let call = tool_call(1, "acp_query", json!({"type": "stats"}));
    let version = ("MCP-Protocol-Version", "2025-06-18");
    for (origin, status) in [
        ("http://evil.example", 403),
        ("http://localhost.evil.example:8080", 403),
        ("https://tools.example.com", 200),
        (&format!("http://127.0.0.1:{}", server.addr.port())[..], 200),
        ("http://localhost:3000", 200),
        ("https://localhost:8443", 200),
        ("https://127.0.0.1:8443", 200),
        ("https://[::1]:8443", 200),
        ("https://localhost.evil.example:8443", 403),
    ] {
        let answer = post(server.addr, &call, &[version, ("Origin", origin)]);
        assert_eq!(answer.status, status, "{origin}: {answer:?}");
    }
    // A Host the server does not answer to (DNS rebinding) is refused too.
    let answer = post_naming_host(server.addr, "evil.example", &call, &[version]);
    assert_eq!(answer.status, 403, "{answer:?}");
    // So is it for the health report, which names the project's path and commits.
    let port = server.addr.port();
    for (host, status) in [
        (format!("evil.example:{port}"), 403),
        (format!("localhost.evil.example:{port}"), 403),
        (format!("localhost:{port}"), 200),
        (format!("127.0.0.1:{port}"), 200),
        ("[::1]".to_string(), 200),
    ] {
        let answer = get_naming_host(server.addr, &host, "/healthz");
        assert_eq!(answer.status, status, "{host}: {answer:?}");
    }

    let padding = " ".repeat(5000);
    let oversized = format!("{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"{padding}}}");
    let answer = post(server.addr, &oversized, &[version]);
    assert_eq!(answer.status, 413, "{answer:?}");
    assert!(answer.text.contains("4096"), "{answer:?}");

    // An unfinished body takes no slot: the next request is answered, and the unfinished one
    // ends at the time limit with 408.
    let unfinished_upload = || {
        let mut stream = TcpStream::connect(server.addr).unwrap();
        stream
            .write_all(post_head(server.addr, call.len(), &[version]).as_bytes())
            .unwrap();
        stream.write_all(&call.as_bytes()[..10]).unwrap();
        stream
    };
    let unfinished = unfinished_upload();
    std::thread::sleep(Duration::from_millis(200));
    let answer = post(server.addr, &call, &[version]);
    assert_eq!(
        answer.status, 200,
        "a slow body held the only slot: {answer:?}"
    );
    let started = Instant::now();
    let timed_out = read_answer(unfinished);
    assert_eq!(timed_out.status, 408, "{timed_out:?}");
    assert!(
        timed_out.text.contains("--request-timeout"),
        "{timed_out:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));

    // At most four bodies per slot are received at once: a fifth request is refused until one
    // of them ends. The four end at the time limit (1 s), so the probe stops before it; on a
    // machine so busy that the server had not yet counted them, it tries again. On such a
    // machine the server may also take up the probe's body before the last upload's: then
    // that upload is the fifth, and it is the one refused.
    let refused = (0..10)
        .find_map(|_| {
            let started = Instant::now();
            let uploads: Vec<TcpStream> = (0..4).map(|_| unfinished_upload()).collect();
            let answer = post_until_refused(server.addr, &call, &[version], || {
                started.elapsed() > Duration::from_millis(800)
            });
            let mut refused_upload = None;
            for upload in uploads {
                let upload = read_answer(upload);
                match upload.status {
                    408 => {}
                    503 => refused_upload = Some(upload),
                    _ => panic!("an unfinished upload got {upload:?}"),
                }
            }
            (answer.status == 503).then_some(answer).or(refused_upload)
        })
        .expect("a fifth body was never refused while four were arriving");
    assert!(refused.text.contains("bodies"), "{refused:?}");

    // A call waiting on the journal, which another process holds locked, takes the only slot:
    // the next request is refused at once, and the waiting one ends at the time limit.
    let start = tool_call(
        2,
        "acp_debug",
        json!({"action": "start", "data": {"problem": "p", "hypothesis": "h"}}),
    );
    assert_eq!(post(server.addr, &start, &[version]).status, 200);
    let journal = rusqlite::Connection::open(project.root().join(".acp/acp.journal.db")).unwrap();
    journal.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let addr = server.addr;
    // Until the waiting call has its slot, a request is answered; then it is refused. (A probe
    // that holds the slot when the call arrives gets the call refused instead: then again.)
    let (busy, waiting) = (0..10)
        .find_map(|_| {
            let start = start.clone();
            let waiting = std::thread::spawn(move || post(addr, &start, &[version]));
            let busy = post_until_refused(addr, &call, &[version], || waiting.is_finished());
            if busy.status != 503 && waiting.is_finished() {
                let refused = waiting.join().unwrap();
                assert!(!refused.text.contains("--request-timeout"), "{refused:?}");
                return None;
            }
            Some((busy, waiting))
        })
        .expect("the waiting call never kept the slot");
    assert_eq!(busy.status, 503, "{busy:?}");
    assert!(
        busy.text.to_ascii_lowercase().contains("retry-after: 1"),
        "{busy:?}"
    );
    let timed_out = waiting.join().unwrap();
    assert_eq!(timed_out.status, 503, "{timed_out:?}");
    // The write waits on: the answer must not pass it for undone.
    assert!(
        timed_out.text.contains("--request-timeout")
            && timed_out.text.contains("may still be carried out"),
        "{timed_out:?}"
    );
    journal.execute_batch("ROLLBACK").unwrap();
    let answer = post(server.addr, &call, &[version]);
    assert_eq!(
        answer.status, 200,
        "the slot was not given back: {answer:?}"
    );

    let health = get(server.addr, "/healthz");
    assert_eq!(health.status, 200);
    assert_eq!(json_body(&health)["index"], "ready", "{health:?}");
}

#[test]
fn malformed_messages_get_a_json_rpc_error_and_silent_connections_are_closed() {
    let project = demo();
    let server = HttpServer::start(project.root(), &["--stateless", "--request-timeout", "1"]);
    let version = ("MCP-Protocol-Version", "2025-06-18");
    for (body, id, code) in [
        ("not json {", Value::Null, -32700),
        ("", Value::Null, -32700),
        (
            r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#,
            Value::Null,
            -32600,
        ),
        (
            r#"{"jsonrpc":"1.0","id":"a","method":"ping"}"#,
            json!("a"),
            -32600,
        ),
        (
            r#"{"jsonrpc":"1.0","method":"notifications/initialized"}"#,
            Value::Null,
            -32600,
        ),
        (
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":"x"}"#,
            json!(7),
            -32602,
        ),
    ] {
        let answer = post(server.addr, body, &[version]);
        assert_eq!(answer.status, 400, "{body}: {answer:?}");
        let error = json_body(&answer);
        assert_eq!(
            (&error["id"], &error["error"]["code"]),
            (&id, &json!(code)),
            "{body}: {error}"
        );
    }
    // A byte order mark before a valid message is skipped, as over stdio.
    let ping = "\u{feff}{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}";
    let answer = post(server.addr, ping, &[version]);
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(json_body(&answer)["id"], 3, "{answer:?}");
    // A connection whose headers never end, and one that sends nothing, are closed at the
    // time limit.
    let started = Instant::now();
    let partial = TcpStream::connect(server.addr).unwrap();
    (&partial)
        .write_all(format!("POST /mcp HTTP/1.1\r\nHost: {}\r\n", server.addr).as_bytes())
        .unwrap();
    let silent = TcpStream::connect(server.addr).unwrap();
    for mut stream in [partial, silent] {
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut rest = Vec::new();
        stream
            .read_to_end(&mut rest)
            .expect("the connection was not closed");
    }
    let elapsed = started.elapsed();
    assert!(
        (Duration::from_millis(900)..Duration::from_secs(5)).contains(&elapsed),
        "{elapsed:?}"
    );
    // The server goes on answering.
    let call = tool_call(1, "acp_query", json!({"type": "stats"}));
    assert_eq!(post(server.addr, &call, &[version]).status, 200);
}

/// A connection to `addr` whose receive buffer is as small as the system allows, so that an
/// answer it does not read fills it at once.
#[cfg(target_os = "linux")]
fn connect_reading_little(addr: SocketAddr) -> TcpStream {
    use std::os::fd::FromRawFd;
    let SocketAddr::V4(v4) = addr else {
        panic!("the test server listens on IPv4")
    };
    // SAFETY: a new socket is configured and connected through valid pointers to local values
    // of the sizes given; its descriptor is then owned by the returned stream alone.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        let size: libc::c_int = 4096;
        let set = libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&size as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
        assert_eq!(set, 0, "setsockopt: {}", std::io::Error::last_os_error());
        let peer = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: v4.port().to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from_ne_bytes(v4.ip().octets()),
            },
            sin_zero: [0; 8],
        };
        let connected = libc::connect(
            fd,
            (&peer as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        );
        assert_eq!(connected, 0, "connect: {}", std::io::Error::last_os_error());
        TcpStream::from_raw_fd(fd)
    }
}

#[cfg(target_os = "linux")]
#[test]
fn a_connection_whose_client_reads_no_answer_is_closed_at_the_time_limit() {
    let project = demo();
    let server = HttpServer::start(
        project.root(),
        &[
            "--stateless",
            "--request-timeout",
            "1",
            "--max-body",
            "8000000",
        ],
    );
    let version = ("MCP-Protocol-Version", "2025-06-18");
    // An answer of 13 MB (the text comes back twice, as given and expanded, in the text and the
    // structured content), more than the sockets can hold (4 MiB at most for the server's).
    let text = "plain words ".repeat(270_000);
    let expand = tool_call(1, "acp_expand", json!({ "text": text }));
    let mut stalled = connect_reading_little(server.addr);
    stalled
        .write_all(post_head(server.addr, expand.len(), &[version]).as_bytes())
        .unwrap();
    stalled.write_all(expand.as_bytes()).unwrap();
    // The server's writes wait for the client to read; a second past the limit, it gives up
    // and closes the connection, with most of the answer never sent.
    std::thread::sleep(Duration::from_millis(3000));
    stalled
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut received = 0;
    let mut buffer = vec![0u8; 1 << 16];
    loop {
        match stalled.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => received += n,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("the connection was not closed: {e} after {received} bytes"),
        }
    }
    assert!(
        received < 12_000_000,
        "the whole answer waited for the client: {received} bytes"
    );
    let call = tool_call(2, "acp_query", json!({"type": "stats"}));
    assert_eq!(post(server.addr, &call, &[version]).status, 200);
}

#[test]
fn no_client_sets_the_log_level_of_a_shared_server() {
    let project = demo();
    let server = HttpServer::start(project.root(), &["--stateless"]);
    let version = ("MCP-Protocol-Version", "2025-06-18");
    let quiet =
        r#"{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"emergency"}}"#;
    let answer = post(server.addr, quiet, &[version]);
    assert_eq!(answer.status, 200, "{answer:?}");
    assert!(json_body(&answer).get("result").is_some(), "{answer:?}");
    // What the operator's log shows at its level still shows: a refused Host is a warning.
    let call = tool_call(2, "acp_query", json!({"type": "stats"}));
    let answer = post_naming_host(server.addr, "evil.example", &call, &[version]);
    assert_eq!(answer.status, 403, "{answer:?}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !server.stderr().contains("WARN") {
        assert!(
            Instant::now() < deadline,
            "a client silenced the server's log: {}",
            server.stderr()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        !server.stderr().contains("log level set to"),
        "{}",
        server.stderr()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn clients_that_disconnect_mid_call_do_not_disturb_the_others() {
    let project = TempProject::generated(1500);
    let server = HttpServer::start(project.root(), &["--stateless"]);
    let client = Client::http(&server.url(), None).await;
    let expected = client
        .ok(
            "acp_query",
            json!({"type": "search", "pattern": "validate*", "limit": 50}),
        )
        .await;
    let addr = server.addr;
    let version = ("MCP-Protocol-Version", "2025-06-18");
    let droppers = std::thread::spawn(move || {
        for i in 0..40 {
            let call = tool_call(
                i,
                "acp_query",
                json!({"type": "search", "pattern": "validate*", "limit": 100}),
            );
            let mut stream = TcpStream::connect(addr).unwrap();
            stream
                .write_all(post_head(addr, call.len(), &[version]).as_bytes())
                .unwrap();
            // Half of them leave mid-body, the others right after sending the call.
            let sent = if i % 2 == 0 {
                call.len() / 2
            } else {
                call.len()
            };
            stream.write_all(&call.as_bytes()[..sent]).unwrap();
            drop(stream);
        }
    });
    for _ in 0..40 {
        let answer = client
            .ok(
                "acp_query",
                json!({"type": "search", "pattern": "validate*", "limit": 50}),
            )
            .await;
        assert_eq!(answer, expected);
    }
    droppers.join().unwrap();
    let answer = client
        .ok(
            "acp_query",
            json!({"type": "search", "pattern": "validate*", "limit": 50}),
        )
        .await;
    assert_eq!(answer, expected);
    client.close().await;
    assert_eq!(get(server.addr, "/healthz").status, 200);
}

#[test]
fn sigterm_stops_accepting_finishes_calls_in_flight_and_exits_0() {
    let project = demo();
    let mut server = HttpServer::start(project.root(), &["--stateless"]);
    let call = tool_call(9, "acp_query", json!({"type": "stats"}));
    let version = ("MCP-Protocol-Version", "2025-06-18");
    // A call in flight: its body is half sent when the signal arrives.
    let mut in_flight = TcpStream::connect(server.addr).unwrap();
    in_flight
        .write_all(post_head(server.addr, call.len(), &[version]).as_bytes())
        .unwrap();
    in_flight.write_all(&call.as_bytes()[..20]).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    // SAFETY: kill(2) with the pid of our own child and a valid signal.
    unsafe { libc::kill(server.child.id() as i32, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(5);
    while !server.stderr().contains("SIGTERM") {
        assert!(Instant::now() < deadline, "{}", server.stderr());
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        TcpStream::connect(server.addr).is_err(),
        "new connections are still accepted after SIGTERM"
    );
    std::thread::sleep(Duration::from_millis(300));
    in_flight.write_all(&call.as_bytes()[20..]).unwrap();
    let answer = read_answer(in_flight);
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(json_body(&answer)["id"], 9, "{answer:?}");
    let status = server.terminate(10);
    assert_eq!(status.code(), Some(0), "{}", server.stderr());
}

#[tokio::test(flavor = "multi_thread")]
async fn read_only_servers_share_one_database_and_refuse_the_journal() {
    let project = demo();
    std::fs::remove_file(project.cache_path()).unwrap();
    let args = ["--read-only", "--stateless", "--watch-interval", "0.1"];
    let first = HttpServer::start(project.root(), &args);
    let second = HttpServer::start(project.root(), &args);
    let calls = calls();
    let a = Client::http(&first.url(), None).await;
    let b = Client::http(&second.url(), None).await;
    let (one, two) = tokio::join!(transcript(&a, &calls), transcript(&b, &calls));
    assert_eq!(one, two);
    assert!(one.iter().filter(|t| !t.contains("=> error")).count() > 100);

    let err = a.err("acp_debug", json!({"action": "list"})).await;
    assert_eq!(err.code, -32005, "{err:?}");
    assert!(err.message.contains(".acp/acp.journal.db"), "{err:?}");
    let err = b.err("acp_hack", json!({"action": "list"})).await;
    assert_eq!(err.code, -32005, "{err:?}");
    assert!(!project.root().join(".acp/acp.journal.db").exists());

    let health = json_body(&get(first.addr, "/healthz"));
    assert_eq!(health["index"], "ready", "{health}");
    assert_eq!(health["read_only"], true, "{health}");

    // A new database renamed over the served one answers from then on, without a restart.
    let files = |stats: Value| stats["result"]["files"].as_u64().unwrap();
    let before = files(a.ok("acp_query", json!({"type": "stats"})).await);
    let other = TempProject::generated(30);
    let staged = project.root().join(".acp/acp.db.new");
    std::fs::copy(other.db(), &staged).unwrap();
    std::fs::rename(&staged, project.db()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (x, y) = tokio::join!(
            a.ok("acp_query", json!({"type": "stats"})),
            b.ok("acp_query", json!({"type": "stats"}))
        );
        if files(x.clone()) == 30 && files(y.clone()) == 30 {
            break;
        }
        assert!(Instant::now() < deadline, "still {x} {y}, was {before}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_ne!(before, 30);
    a.close().await;
    b.close().await;
}

#[test]
fn a_request_whose_body_is_still_arriving_holds_up_no_other() {
    let project = demo();
    let server = HttpServer::start(project.root(), &["--stateless", "--pool-size", "1"]);
    let version = ("MCP-Protocol-Version", "2025-06-18");
    let first = tool_call(1, "acp_query", json!({"type": "stats"}));
    // The first request sends part of its body and stalls.
    let mut holder = TcpStream::connect(server.addr).unwrap();
    holder
        .write_all(post_head(server.addr, first.len(), &[version]).as_bytes())
        .unwrap();
    holder.write_all(&first.as_bytes()[..10]).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    // Another client, with the pool's only connection, is answered meanwhile.
    let addr = server.addr;
    let other = std::thread::spawn(move || {
        post(
            addr,
            &tool_call(2, "acp_get_hotpaths", json!({})),
            &[version],
        )
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    while !other.is_finished() {
        assert!(
            Instant::now() < deadline,
            "a stalled upload held up another request"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let answer = other.join().unwrap();
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(json_body(&answer)["id"], 2, "{answer:?}");
    // The stalled request is answered once its body is complete.
    holder.write_all(&first.as_bytes()[10..]).unwrap();
    let answer = read_answer(holder);
    assert_eq!(json_body(&answer)["id"], 1, "{answer:?}");
}

#[test]
fn healthz_reports_importing_ready_stale_and_no_cache() {
    let project = TempProject::with_cache("{}", None);
    project.generate(3000);
    let server = HttpServer::start(project.root(), &["--watch-interval", "0.1"]);
    let first = get(server.addr, "/healthz");
    assert_eq!(first.status, 503, "{first:?}");
    let health = json_body(&first);
    assert_eq!(health["index"], "importing", "{health}");
    assert!(
        health["progress"]["bytes_total"].as_u64() > Some(1_000_000),
        "{health}"
    );
    let wait_for = |index: &str| {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let health = json_body(&get(server.addr, "/healthz"));
            if health["index"] == index {
                return health;
            }
            assert!(Instant::now() < deadline, "never {index}: {health}");
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    let ready = wait_for("ready");
    assert_eq!(ready["status"], "ok");
    // A changed cache is re-imported while the previous import answers: stale meanwhile.
    project.generate(3100);
    let stale = wait_for("stale");
    assert_eq!(stale["status"], "ok", "{stale}");
    assert!(
        stale["message"].as_str().unwrap().contains("stale"),
        "{stale}"
    );
    wait_for("ready");

    let empty = tempfile::tempdir().unwrap();
    let server = HttpServer::start(empty.path(), &[]);
    let answer = get(server.addr, "/healthz");
    assert_eq!(answer.status, 503, "{answer:?}");
    assert_eq!(json_body(&answer)["index"], "no_cache", "{answer:?}");
}

/// Heavy queries run on threads of their own, one per connection of the heavy pool, at a lower
/// CPU priority than the threads that answer point lookups; they answer like any other.
#[cfg(target_os = "linux")]
#[test]
fn heavy_queries_run_on_threads_of_lower_priority() {
    let project = demo();
    let server = HttpServer::start(project.root(), &["--stateless", "--pool-size", "4"]);
    let (_, heavy_connections) = acpdb::mcp::state::split_pool(4);
    let heavy_connections = heavy_connections as usize;
    assert!(heavy_connections >= 2, "the test needs two heavy threads");
    let version = ("MCP-Protocol-Version", "2025-06-18");
    let answer = post(
        server.addr,
        &tool_call(
            1,
            "acp_query",
            json!({"type": "search", "pattern": "session"}),
        ),
        &[version],
    );
    assert_eq!(json_body(&answer)["id"], 1, "{answer:?}");
    assert!(
        json_body(&answer)["result"]["structuredContent"]["result"]["total"].as_u64() > Some(0),
        "{answer:?}"
    );
    // (name, niceness) of every thread of the server: field 19 of /proc/PID/task/TID/stat,
    // counted after the parenthesised name. A thread just started may not have named itself
    // yet on a busy machine, and one may end while they are read: read until both heavy ones
    // are there.
    let tasks = std::path::PathBuf::from(format!("/proc/{}/task", server.child.id()));
    let read_threads = || -> Vec<(String, i64)> {
        std::fs::read_dir(&tasks)
            .unwrap()
            .filter_map(|task| {
                let task = task.ok()?.path();
                let name = std::fs::read_to_string(task.join("comm")).ok()?;
                let stat = std::fs::read_to_string(task.join("stat")).ok()?;
                let after_name = &stat[stat.rfind(')')? + 2..];
                let nice = after_name.split(' ').nth(16)?.parse().ok()?;
                Some((name.trim().to_string(), nice))
            })
            .collect()
    };
    let is_heavy = |(name, _): &&(String, i64)| name.starts_with("acpdb-heavy");
    let deadline = Instant::now() + Duration::from_secs(10);
    let threads = loop {
        let threads = read_threads();
        if threads.iter().filter(is_heavy).count() >= heavy_connections || Instant::now() > deadline
        {
            break threads;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let heavy: Vec<_> = threads.iter().filter(is_heavy).collect();
    assert_eq!(heavy.len(), heavy_connections, "{threads:?}");
    assert!(heavy.iter().all(|(_, nice)| *nice == 10), "{threads:?}");
    assert!(
        threads
            .iter()
            .filter(|(name, _)| name.starts_with("tokio-runtime"))
            .all(|(_, nice)| *nice == 0),
        "{threads:?}"
    );
}

/// A file edited on disk after the import reaches the answers the cache kept (the watcher's
/// sweep starts a new answer generation), and `/healthz` counts it.
#[tokio::test(flavor = "multi_thread")]
async fn kept_answers_learn_of_files_edited_on_disk() {
    let project = demo();
    let server = HttpServer::start(project.root(), &["--watch-interval", "0.1"]);
    let client = Client::http(&server.url(), None).await;
    wait_ready(&client, 60).await;
    let file = json!({"path": "src/auth/session.ts"});
    let texts = || async {
        client
            .call("acp_get_file_context", file.clone())
            .await
            .unwrap()
            .texts
    };
    for _ in 0..2 {
        assert_eq!(texts().await.len(), 1);
    }
    let changed =
        || json_body(&get(server.addr, "/healthz"))["source"]["files"]["changed"].as_u64();
    project.edit_source("src/auth/session.ts");
    let waited = std::time::Instant::now();
    while changed() != Some(1) {
        assert!(
            waited.elapsed() < Duration::from_secs(20),
            "the sweep never counted the edit"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let answer = texts().await;
    assert_eq!(answer.len(), 2, "{answer:?}");
    assert!(
        answer[1].contains("src/auth/session.ts (modified "),
        "{}",
        answer[1]
    );
    client.close().await;
}

/// A deprecated tool is said to be deprecated once in the operator's log, not at every call.
#[tokio::test(flavor = "multi_thread")]
async fn a_deprecation_is_logged_once() {
    let project = demo();
    let server = HttpServer::start(project.root(), &[]);
    for _ in 0..2 {
        let client = Client::http(&server.url(), None).await;
        for _ in 0..3 {
            let _ = client
                .call(
                    "acp_expand_variable",
                    json!({"name": "SYM_VALIDATESESSION"}),
                )
                .await;
        }
        client.close().await;
    }
    // The log is read on a thread of its own: wait for the first line, then a little more.
    let said = || {
        server
            .stderr
            .lock()
            .unwrap()
            .matches("is deprecated")
            .count()
    };
    let waited = Instant::now();
    while said() == 0 && waited.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(said(), 1, "{}", server.stderr.lock().unwrap());
}
