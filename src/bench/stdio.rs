//! `--stdio` mode: spawns a server command and drives it as an MCP client over its
//! stdin/stdout, so every latency includes JSON-RPC framing, serialization and the pipe.
//!
//! The client is rmcp's. Calls are issued one at a time from the benchmark thread; a one-worker
//! tokio runtime runs the client's message loop and drains the server's stderr, whose last few
//! KiB are kept to explain a server that dies.

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use rmcp::model::{CallToolRequestParams, ErrorData};
use rmcp::service::{RunningService, ServiceError};
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::Value;
use tokio::io::AsyncReadExt;

use super::replay::Target;
use super::report::{peak_rss_kb, Outcome};
use super::workload::Call;
use crate::mcp::errors::INDEX_BUILDING;

/// Bytes of the server's stderr kept for error messages.
const STDERR_TAIL: usize = 4096;

/// How long start-up may take before the benchmark gives up.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(600);

/// A running MCP server driven over stdio.
pub struct StdioServer {
    runtime: tokio::runtime::Runtime,
    service: Option<RunningService<RoleClient, ()>>,
    pid: Option<u32>,
    stderr: Arc<Mutex<Vec<u8>>>,
    spawned: Instant,
    initialized: Duration,
    info: Option<String>,
}

impl StdioServer {
    /// Spawns `command` (program and arguments) and completes the MCP `initialize` handshake.
    pub fn spawn(command: &[String]) -> Result<StdioServer> {
        let (program, args) = command
            .split_first()
            .context("the server command is empty")?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()?;
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let spawned = Instant::now();
        let mut cmd = tokio::process::Command::new(program);
        cmd.args(args);
        let (transport, pid, pipe) = {
            let _guard = runtime.enter();
            let (transport, pipe) = TokioChildProcess::builder(cmd)
                .stderr(Stdio::piped())
                .spawn()
                .with_context(|| format!("cannot start `{}`", command.join(" ")))?;
            let pid = transport.id();
            (transport, pid, pipe)
        };
        if let Some(mut pipe) = pipe {
            let tail = stderr.clone();
            runtime.spawn(async move {
                let mut buf = [0u8; 4096];
                while let Ok(n) = pipe.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    let mut tail = tail.lock().unwrap();
                    tail.extend_from_slice(&buf[..n]);
                    let excess = tail.len().saturating_sub(STDERR_TAIL);
                    tail.drain(..excess);
                }
            });
        }
        let service = runtime
            .block_on(async { tokio::time::timeout(STARTUP_TIMEOUT, ().serve(transport)).await });
        let initialized = spawned.elapsed();
        let mut server = StdioServer {
            runtime,
            service: None,
            pid,
            stderr,
            spawned,
            initialized,
            info: None,
        };
        let service = match service {
            Ok(Ok(service)) => service,
            Ok(Err(err)) => bail!(
                "`{}` did not initialize: {err}{}",
                command.join(" "),
                server.stderr_note()
            ),
            Err(_) => bail!(
                "`{}` did not initialize within {} s{}",
                command.join(" "),
                STARTUP_TIMEOUT.as_secs(),
                server.stderr_note()
            ),
        };
        server.info = service.peer_info().and_then(|info| {
            let implementation = info.server_info.as_ref()?;
            Some(format!(
                "{} {}",
                implementation.name, implementation.version
            ))
        });
        server.service = Some(service);
        Ok(server)
    }

    /// Time from spawning to the `initialize` answer.
    pub fn initialized(&self) -> Duration {
        self.initialized
    }

    /// `name version` from the server's `initialize` answer.
    pub fn info(&self) -> Option<String> {
        self.info.clone()
    }

    /// Calls `call` until it gets an answer other than "index building", and returns the time
    /// from spawning to that answer.
    pub fn first_answer(&self, call: &Call) -> Result<Duration> {
        loop {
            match self.request(&call.tool, &call.arguments)? {
                Err(ErrorData { code, .. })
                    if code.0 == INDEX_BUILDING && self.spawned.elapsed() < STARTUP_TIMEOUT =>
                {
                    std::thread::sleep(Duration::from_millis(10));
                }
                _ => return Ok(self.spawned.elapsed()),
            }
        }
    }

    /// Peak resident set size of the server process, in KiB.
    pub fn peak_rss_kb(&self) -> Option<u64> {
        peak_rss_kb(&self.pid?.to_string())
    }

    /// Closes the connection; the server exits when its stdin closes (or is killed).
    pub fn shutdown(mut self) {
        if let Some(service) = self.service.take() {
            let _ = self.runtime.block_on(async {
                tokio::time::timeout(Duration::from_secs(10), service.cancel()).await
            });
        }
    }

    fn request(&self, tool: &str, arguments: &Value) -> Result<Result<(), ErrorData>> {
        let service = self.service.as_ref().context("not connected")?;
        let result = self
            .runtime
            .block_on(service.call_tool(call_params(tool, arguments)));
        let failure = match &result {
            Err(err) if !matches!(err, ServiceError::McpError(_)) => err.to_string(),
            _ => String::new(),
        };
        answered(tool, result).ok_or_else(|| {
            anyhow!(
                "{tool}: the connection to the server failed: {failure}{}",
                self.stderr_note()
            )
        })
    }

    fn stderr_note(&self) -> String {
        let tail = self.stderr.lock().unwrap();
        if tail.is_empty() {
            String::new()
        } else {
            format!(
                "\nserver stderr (last lines):\n{}",
                String::from_utf8_lossy(&tail).trim_end()
            )
        }
    }
}

impl Target for StdioServer {
    fn call(&mut self, tool: &str, arguments: &Value) -> Result<Outcome> {
        Ok(outcome(self.request(tool, arguments)?))
    }
}

/// The outcome of a call a server answered: an answer, an unknown tool, or an error.
pub(super) fn outcome(answer: Result<(), ErrorData>) -> Outcome {
    match answer {
        Ok(()) => Outcome::Answer,
        Err(ErrorData { code, message, .. })
            if code.0 == -32602 && message.starts_with("Unknown tool") =>
        {
            Outcome::Unsupported
        }
        Err(ErrorData { code, message, .. }) => Outcome::Error(format!("{}: {message}", code.0)),
    }
}

/// The parameters of a `tools/call` of `tool` with `arguments`.
pub(super) fn call_params(tool: &str, arguments: &Value) -> CallToolRequestParams {
    let mut params = CallToolRequestParams::new(tool.to_string());
    if let Value::Object(map) = arguments {
        params = params.with_arguments(map.clone());
    }
    params
}

/// What a call's result says: `Ok` for an answer (an `isError` result counts as an error),
/// `Err` of the JSON-RPC error, or `None` when the connection failed.
pub(super) fn answered(
    tool: &str,
    result: Result<rmcp::model::CallToolResult, ServiceError>,
) -> Option<Result<(), ErrorData>> {
    match result {
        Ok(result) if result.is_error == Some(true) => Some(Err(ErrorData::internal_error(
            format!("{tool} answered with isError: {:?}", result.content),
            None,
        ))),
        Ok(result) => {
            std::hint::black_box(result);
            Some(Ok(()))
        }
        Err(ServiceError::McpError(error)) => Some(Err(error)),
        Err(_) => None,
    }
}
