//! `--http`: many MCP clients at once over Streamable HTTP, each with its own connection and
//! session, replaying the workload one call at a time from its own starting point, so the
//! server sees `--clients` calls in flight.
//!
//! The server is one given by URL (`--server-pid` names its process for the peak RSS) or
//! `acpdb serve --http 127.0.0.1:0` on the project, started here and stopped with SIGTERM at
//! the end. Clients are rmcp's; they run on a two-worker runtime in this process, so on a small
//! machine the clients' own work competes with the server's (say so when reporting figures).

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};
use rmcp::service::RunningService;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{RoleClient, ServiceExt};

use super::replay::{Replayed, Stop};
use super::report::{peak_rss_kb, Outcome, Recorder};
use super::stdio::{answered, call_params, outcome};
use super::workload::Workload;

/// Consecutive failed connections after which a client gives up.
const MAX_CONSECUTIVE_FAILURES: u32 = 100;

/// How long a server started here may take to listen (it listens before any import).
const LISTEN_TIMEOUT: Duration = Duration::from_secs(30);

/// A server started by the benchmark: `acpdb serve --http` on a free loopback port.
pub struct SpawnedServer {
    child: Child,
    /// The `/mcp` URL it serves.
    pub url: String,
    /// The command that started it.
    pub command: Vec<String>,
}

impl SpawnedServer {
    /// Starts `command` (an `acpdb … serve --http 127.0.0.1:0 …`) and waits until it listens.
    pub fn start(command: Vec<String>) -> Result<SpawnedServer> {
        let (program, args) = command.split_first().context("empty server command")?;
        let mut child = Command::new(program)
            .args(args)
            // Its log line with the address is read: the command's --log-level must apply.
            .env_remove("ACPDB_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot start `{}`", command.join(" ")))?;
        let stderr = child.stderr.take().context("no stderr")?;
        let (found, listening) = std::sync::mpsc::channel();
        // The server's log lines: the address first, then drained so the pipe never fills.
        std::thread::spawn(move || {
            let mut found = Some(found);
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(rest) = line.split("over MCP at ").nth(1) {
                    if let Some(found) = found.take() {
                        let url = rest.split_whitespace().next().unwrap_or_default();
                        let _ = found.send(url.to_string());
                    }
                } else if line.contains("ERROR") {
                    eprintln!("server: {line}");
                }
            }
        });
        let url = match listening.recv_timeout(LISTEN_TIMEOUT) {
            Ok(url) => url,
            Err(_) => {
                let _ = child.kill();
                bail!("`{}` did not start listening", command.join(" "));
            }
        };
        Ok(SpawnedServer {
            child,
            url,
            command,
        })
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Stops it with SIGTERM (as a service manager would) and waits for it.
    pub fn stop(mut self) {
        #[cfg(unix)]
        // SAFETY: kill(2) on our own child's pid with a valid signal.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        #[cfg(not(unix))]
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Where the clients connect and how many there are.
#[derive(Debug, Clone)]
pub struct Load {
    /// The server's `/mcp` URL.
    pub url: String,
    /// Bearer token to send, if the server wants one.
    pub token: Option<String>,
    /// Clients at once.
    pub clients: usize,
}

/// Connects every client, lets each run `warmup` unmeasured passes, then measures all of them
/// together until `stop` (`Stop::Passes(n)`: n passes per client).
pub fn replay(
    load: &Load,
    workload: &Workload,
    warmup: u32,
    stop: Stop,
    recorder: &mut Recorder,
) -> Result<Replayed> {
    if load.clients == 0 {
        bail!("--clients must be at least 1");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let workload = Arc::new(workload.clone());
    let groups: Arc<Vec<String>> = Arc::new(workload.calls.iter().map(|c| c.group()).collect());
    let (recorders, elapsed) = runtime.block_on(async {
        let barrier = Arc::new(tokio::sync::Barrier::new(load.clients + 1));
        let mut tasks = Vec::new();
        for client in 0..load.clients {
            let service = connect(load).await?;
            let offset = client * workload.calls.len() / load.clients;
            let (workload, groups, barrier) = (workload.clone(), groups.clone(), barrier.clone());
            tasks.push(tokio::spawn(async move {
                let mut recorder = Recorder::default();
                let client = Client {
                    service: &service,
                    workload: &workload,
                    groups: &groups,
                    offset,
                };
                let warm = client
                    .run(&mut recorder, false, Until::Passes(warmup))
                    .await;
                barrier.wait().await;
                let until = match stop {
                    Stop::Passes(n) => Until::Passes(n),
                    Stop::Time(limit) => Until::Deadline(Instant::now() + limit),
                };
                let measured = client.run(&mut recorder, true, until).await;
                let _ = service.cancel().await;
                warm?;
                Ok::<(Recorder, usize), anyhow::Error>((recorder, measured?))
            }));
        }
        barrier.wait().await;
        let started = Instant::now();
        let mut recorders = Vec::new();
        for task in tasks {
            recorders.push(task.await??);
        }
        Ok::<_, anyhow::Error>((recorders, started.elapsed()))
    })?;
    let mut calls = 0;
    for (other, measured) in recorders {
        recorder.absorb(other);
        calls += measured;
    }
    Ok(Replayed {
        passes: (calls / workload.calls.len().max(1)) as u32,
        calls,
        elapsed,
    })
}

/// When a client stops.
#[derive(Debug, Clone, Copy)]
enum Until {
    Passes(u32),
    Deadline(Instant),
}

async fn connect(load: &Load) -> Result<RunningService<RoleClient, ()>> {
    let mut config = StreamableHttpClientTransportConfig::with_uri(load.url.as_str());
    if let Some(token) = &load.token {
        config = config.auth_header(token.as_str());
    }
    let transport = StreamableHttpClientTransport::from_config(config);
    ().serve(transport)
        .await
        .with_context(|| format!("cannot initialize an MCP session at {}", load.url))
}

/// One client's connection and where in the workload it starts.
struct Client<'a> {
    service: &'a RunningService<RoleClient, ()>,
    workload: &'a Workload,
    groups: &'a [String],
    offset: usize,
}

impl Client<'_> {
    /// Replays the workload from call `offset` on, wrapping around, until `until`; returns
    /// the calls made.
    async fn run(&self, recorder: &mut Recorder, measured: bool, until: Until) -> Result<usize> {
        let total = self.workload.calls.len();
        let mut calls = 0;
        let mut failures = 0;
        for n in 0.. {
            match until {
                Until::Passes(passes) if n >= passes as usize * total => break,
                Until::Deadline(deadline) if Instant::now() >= deadline => break,
                _ => {}
            }
            let index = (self.offset + n) % total;
            let call = &self.workload.calls[index];
            if recorder.is_unsupported(&call.tool) {
                continue;
            }
            let started = Instant::now();
            let result = self
                .service
                .call_tool(call_params(&call.tool, &call.arguments))
                .await;
            let latency = started.elapsed();
            let outcome = match answered(&call.tool, result) {
                Some(answer) => {
                    failures = 0;
                    call.judge(outcome(answer))
                }
                None => {
                    failures += 1;
                    if failures >= MAX_CONSECUTIVE_FAILURES {
                        bail!(
                            "{MAX_CONSECUTIVE_FAILURES} calls in a row could not reach the server"
                        );
                    }
                    Outcome::Error("the connection to the server failed".into())
                }
            };
            if outcome != Outcome::Unsupported {
                calls += 1;
            }
            recorder.record(&self.groups[index], &call.tool, latency, outcome, measured);
        }
        Ok(calls)
    }
}

/// The peak RSS of process `pid`, in KiB.
pub fn server_peak_rss_kb(pid: u32) -> Option<u64> {
    peak_rss_kb(&pid.to_string())
}

/// The `answer_cache` counters of the server's `GET /healthz` (an acpdb server; `None` for
/// another server or when it does not answer).
pub fn answer_cache_stats(load: &Load) -> Option<serde_json::Value> {
    let url = reqwest::Url::parse(&load.url).ok()?.join("/healthz").ok()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok()?;
    runtime.block_on(async {
        let mut request = reqwest::Client::new()
            .get(url)
            .timeout(Duration::from_secs(5));
        if let Some(token) = &load.token {
            request = request.bearer_auth(token);
        }
        let health: serde_json::Value = request.send().await.ok()?.json().await.ok()?;
        health.get("answer_cache").cloned()
    })
}
