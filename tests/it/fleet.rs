//! A read-only fleet behind a real nginx, configured with the block docs/deployment.md gives:
//! two `serve --http --read-only --stateless` servers on one database file, 16 clients calling
//! through nginx while the file is atomically replaced under them. No call fails, and both
//! servers answer from the new file within seconds. Runs when nginx is installed (`.ci/run`
//! installs it); says so and passes otherwise.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::mcp::Client;
use crate::common::{fixture, TempProject};
use crate::http::HttpServer;

/// Clients calling at once.
const CLIENTS: usize = 16;
/// How long they call.
const LOAD: Duration = Duration::from_secs(8);
/// When, into the load, the database is replaced.
const SWAP_AT: Duration = Duration::from_secs(3);

fn nginx_binary() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .chain([PathBuf::from("/usr/sbin")])
        .map(|dir| dir.join("nginx"))
        .find(|candidate| candidate.is_file());
    on_path
}

/// The nginx block of docs/deployment.md, for servers at `upstreams` and nginx on `port`.
fn documented_config(upstreams: [std::net::SocketAddr; 2], port: u16) -> String {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/deployment.md"))
            .unwrap();
    let start = doc.find("```nginx\n").expect("an nginx block") + "```nginx\n".len();
    let block = &doc[start..start + doc[start..].find("```").unwrap()];
    let block = block
        .replace("127.0.0.1:8931", &upstreams[0].to_string())
        .replace("127.0.0.1:8932", &upstreams[1].to_string())
        .replace("listen 8080;", &format!("listen 127.0.0.1:{port};"));
    assert!(block.contains(&upstreams[1].to_string()) && block.contains(&port.to_string()));
    block
}

/// nginx, run in the foreground with everything under `dir`, until dropped.
struct Nginx {
    child: Child,
    dir: PathBuf,
}

impl Nginx {
    fn start(binary: &Path, dir: &Path, site: &str, port: u16) -> Nginx {
        for sub in ["logs", "temp"] {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
        }
        let temp = dir.join("temp");
        let temp = temp.display();
        let main = format!(
            "daemon off;\nworker_processes 1;\npid {dir}/nginx.pid;\nerror_log {dir}/logs/error.log;\n\
             events {{ worker_connections 1024; }}\n\
             http {{\n  access_log off;\n  client_body_temp_path {temp}/body;\n  proxy_temp_path {temp}/proxy;\n\
               fastcgi_temp_path {temp}/fastcgi;\n  uwsgi_temp_path {temp}/uwsgi;\n  scgi_temp_path {temp}/scgi;\n\
               include {dir}/acpdb.conf;\n}}\n",
            dir = dir.display()
        );
        std::fs::write(dir.join("acpdb.conf"), site).unwrap();
        std::fs::write(dir.join("nginx.conf"), main).unwrap();
        let child = Command::new(binary)
            .arg("-p")
            .arg(dir)
            .arg("-e")
            .arg(dir.join("logs/error.log"))
            .arg("-c")
            .arg(dir.join("nginx.conf"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start nginx");
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "nginx never listened: {}",
                std::fs::read_to_string(dir.join("logs/error.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Nginx {
            child,
            dir: dir.to_path_buf(),
        }
    }

    fn error_log(&self) -> String {
        std::fs::read_to_string(self.dir.join("logs/error.log")).unwrap_or_default()
    }
}

impl Drop for Nginx {
    /// Stops the master with SIGTERM, which stops its workers (SIGKILL would leave them
    /// running, holding the port); SIGKILL only if it has not exited within five seconds.
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            // SAFETY: a signal to the child this value owns, not yet waited for.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The index's symbol count, as `acp_query stats` gives it.
async fn symbols(client: &Client) -> Option<u64> {
    let answer = client
        .call("acp_query", json!({"type": "stats"}))
        .await
        .ok()?;
    answer.json["result"]["symbols"].as_u64()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fleet_behind_nginx_loses_no_call_while_its_database_is_replaced() {
    let Some(nginx) = nginx_binary() else {
        // `.ci/run` sets this once it has installed nginx: there, a skip would hide the test.
        assert!(
            std::env::var_os("ACPDB_REQUIRE_NGINX").is_none(),
            "ACPDB_REQUIRE_NGINX is set but no nginx is on PATH or in /usr/sbin"
        );
        eprintln!("nginx is not installed: the fleet test is skipped");
        return;
    };
    let project = TempProject::copy_of(&fixture("demo"));
    project.import();
    // The next revision's database: one symbol more, imported elsewhere.
    let next = TempProject::copy_of(&fixture("demo"));
    let mut cache: Value =
        serde_json::from_str(&std::fs::read_to_string(next.cache_path()).unwrap()).unwrap();
    cache["symbols"]["addedInTheNextCommit"] = json!({"name": "addedInTheNextCommit", "type": "function", "file": "src/index.ts", "lines": [1, 2]});
    std::fs::write(next.cache_path(), cache.to_string()).unwrap();
    next.import();
    let before = 36;
    let conn = rusqlite::Connection::open(next.db()).unwrap();
    let next_symbols: i64 = conn
        .query_row("SELECT count(*) FROM symbols", [], |r| r.get(0))
        .unwrap();
    assert_eq!(next_symbols, before as i64 + 1);
    drop(conn);

    let args = ["--read-only", "--stateless", "--watch-interval", "0.2"];
    let servers = [
        HttpServer::start(project.root(), &args),
        HttpServer::start(project.root(), &args),
    ];
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let site = documented_config([servers[0].addr, servers[1].addr], port);
    let balancer = Nginx::start(&nginx, dir.path(), &site, port);
    let url = format!("http://127.0.0.1:{port}/mcp");

    let (calls, failures) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for n in 0..CLIENTS {
        let (url, calls, failures) = (url.clone(), calls.clone(), failures.clone());
        tasks.push(tokio::spawn(async move {
            let client = Client::http(&url, None).await;
            let mut seen = Vec::new();
            let mut turn = n;
            while started.elapsed() < LOAD {
                turn += 1;
                let (tool, args) = match turn % 3 {
                    0 => ("acp_query", json!({"type": "stats"})),
                    1 => ("acp_get_symbol_context", json!({"name": "validateSession"})),
                    _ => (
                        "acp_get_file_context",
                        json!({"path": "src/auth/session.ts"}),
                    ),
                };
                match client.call(tool, args).await {
                    Ok(answer) => {
                        if tool == "acp_query" {
                            seen.push(answer.json["result"]["symbols"].as_u64());
                        }
                    }
                    Err(err) => {
                        failures.fetch_add(1, Ordering::Relaxed);
                        eprintln!("{tool}: {err:?}");
                    }
                }
                calls.fetch_add(1, Ordering::Relaxed);
            }
            client.close().await;
            seen
        }));
    }
    tokio::time::sleep(SWAP_AT).await;
    // Replaced as step 4 of docs/deployment.md says: a new file renamed over the served one.
    let landing = project.db().with_extension("db.new");
    std::fs::copy(next.db(), &landing).unwrap();
    std::fs::rename(&landing, project.db()).unwrap();
    let swapped = Instant::now();

    let mut counts = Vec::new();
    for task in tasks {
        counts.extend(task.await.unwrap());
    }
    let (calls, failures) = (
        calls.load(Ordering::Relaxed),
        failures.load(Ordering::Relaxed),
    );
    assert_eq!(
        failures,
        0,
        "{failures} of {calls} calls failed; nginx: {}",
        balancer.error_log()
    );
    assert!(calls >= 100, "{calls}");
    assert!(
        counts
            .iter()
            .all(|c| *c == Some(before) || *c == Some(before + 1)),
        "{counts:?}"
    );
    assert_eq!(
        counts.last().copied().flatten(),
        Some(before + 1),
        "the new file was never answered from through nginx"
    );
    // Each server, asked directly, answers from the new file.
    for server in &servers {
        let client = Client::http(&server.url(), None).await;
        while symbols(&client).await != Some(before + 1) {
            assert!(
                swapped.elapsed() < Duration::from_secs(10),
                "{}",
                server.stderr()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        client.close().await;
    }
}
