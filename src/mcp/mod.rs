//! The MCP layer: `acpdb serve`. Parses tool arguments, calls a query function on a pooled
//! read-only connection, serializes the answer.
//!
//! Invariants: this is the only module that knows rmcp. Tool answers are the query layer's JSON
//! as pretty-printed text (the reference server's shape); failures are JSON-RPC errors, never
//! `isError` results. stdout carries only protocol messages; logs go to stderr.

pub mod answer_cache;
pub mod errors;
pub mod http;
mod messages;
mod prompts;
mod resources;
mod server;
pub mod state;
mod stdio;
mod warm;

pub use messages::answer_for_line;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use rmcp::ServiceExt;

use crate::project::Project;

pub use server::AcpServer;

/// Options of `acpdb serve`.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Seconds between checks of the cache file for changes (0 disables re-import on change);
    /// with --read-only, of the database file for a replacement.
    #[arg(long, value_name = "SECONDS", default_value_t = 2.0)]
    pub watch_interval: f64,
    /// Longest a read query may run before it is interrupted and answered with error -32004.
    #[arg(long, value_name = "SECONDS", default_value_t = 2.0)]
    pub query_timeout: f64,
    /// Connections in the read pool [default: two per core, at least 4].
    #[arg(long, value_name = "N")]
    pub pool_size: Option<u32>,
    /// Serve the database as it is: never import or write, reopen the file when it is
    /// replaced; acp_debug and acp_hack answer an error (the journal stays on developers'
    /// machines). For fleets of servers sharing one database file or copies of it.
    #[arg(long)]
    pub read_only: bool,
    /// Serve MCP over Streamable HTTP at http://ADDR/mcp (e.g. 127.0.0.1:8931) instead of stdio;
    /// `GET /healthz` reports the index state.
    #[arg(long, value_name = "ADDR")]
    pub http: Option<SocketAddr>,
    /// MiB of answers of the read-only tools to keep, shared by all clients, until the
    /// index or its source files on disk change; 0 turns the cache off, as does
    /// --watch-interval 0 [default: 16 with --http, else 0].
    #[arg(long, value_name = "MB")]
    pub answer_cache_mb: Option<usize>,
    /// With --http: answer each request on its own, without sessions (any request may reach
    /// any server of a fleet).
    #[arg(long, requires = "http")]
    pub stateless: bool,
    /// With --http: require `Authorization: Bearer <token>` on every request, the token being
    /// this file's content (needed to bind a non-loopback address).
    #[arg(long, value_name = "FILE", requires = "http")]
    pub token_file: Option<PathBuf>,
    /// With --http: a browser origin allowed besides the loopback ones, e.g.
    /// `https://tools.example.com:443` (repeatable); requests from other origins get 403.
    #[arg(long, value_name = "ORIGIN", requires = "http")]
    pub allow_origin: Vec<String>,
    /// With --http: a `Host` name allowed besides the loopback ones (repeatable); on a
    /// non-loopback address without it, any Host is accepted (the token guards).
    #[arg(long, value_name = "HOST", requires = "http")]
    pub allow_host: Vec<String>,
    /// With --http: largest request body in bytes; larger ones get 413.
    #[arg(long, value_name = "BYTES", default_value_t = 1 << 20, requires = "http")]
    pub max_body: usize,
    /// With --http: requests accepted at once (their calls wait for a read connection, light
    /// calls never behind heavy ones); more get 503 with Retry-After.
    #[arg(long, value_name = "N", default_value_t = 256, requires = "http")]
    pub max_concurrent: usize,
    /// With --http: longest a request may take from the end of its headers to the end of its
    /// answer (503 past it; 408 when its body is not in by then), and longest a connection may
    /// wait for a request's headers, idle ones included (it is closed).
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 30.0,
        requires = "http"
    )]
    pub request_timeout: f64,
    /// With --http: after SIGTERM, longest the calls in flight may take to finish.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 10.0,
        requires = "http"
    )]
    pub drain_timeout: f64,
}

/// Default answer cache of an HTTP server, in MiB: the many agents it serves ask many
/// of the same questions. A stdio server serves one agent, which seldom repeats a call: none.
const HTTP_ANSWER_CACHE_MB: usize = 16;

/// A number of seconds given on the command line as a duration; `flag` names it in the error.
fn seconds(value: f64, flag: &str) -> Result<Duration> {
    /// Longest duration accepted: far beyond any use, and far from where adding it to the
    /// clock would overflow.
    const MAX_SECONDS: f64 = 1e15;
    Duration::try_from_secs_f64(value)
        .ok()
        .filter(|_| value <= MAX_SECONDS)
        .ok_or_else(|| {
            anyhow::anyhow!("{flag} must be a number of seconds from 0 to 10^15, got {value}")
        })
}

/// Runs the MCP server on stdin/stdout until the client disconnects, or over HTTP (`--http`)
/// until SIGTERM.
pub fn run(project: &Project, args: &ServeArgs) -> Result<()> {
    let watch_interval = seconds(args.watch_interval, "--watch-interval")?;
    let query_timeout = seconds(args.query_timeout, "--query-timeout")?;
    if query_timeout.is_zero() {
        anyhow::bail!("--query-timeout must be more than 0 seconds");
    }
    let options = state::Options {
        pool_size: match args.pool_size {
            Some(0) => anyhow::bail!("--pool-size must be at least 1"),
            Some(n) => n,
            None => state::default_pool_size(),
        },
        read_only: args.read_only,
    };
    let http = match args.http {
        Some(addr) => {
            let request_timeout = seconds(args.request_timeout, "--request-timeout")?;
            if request_timeout.is_zero() {
                anyhow::bail!("--request-timeout must be more than 0 seconds");
            }
            let options = http::HttpOptions {
                addr,
                stateless: args.stateless,
                token: args
                    .token_file
                    .as_deref()
                    .map(http::read_token)
                    .transpose()?,
                allowed_origins: args.allow_origin.clone(),
                allowed_hosts: args.allow_host.clone(),
                max_body_bytes: args.max_body,
                max_concurrent: args.max_concurrent,
                request_timeout,
                drain_timeout: seconds(args.drain_timeout, "--drain-timeout")?,
            };
            options.check()?;
            Some(options)
        }
        None => None,
    };
    let mut answer_cache_mb = args.answer_cache_mb.unwrap_or(match http {
        Some(_) => HTTP_ANSWER_CACHE_MB,
        None => 0,
    });
    // A kept answer learns of source files edited since only from the watcher's sweep.
    if watch_interval.is_zero() && answer_cache_mb > 0 {
        tracing::info!("--watch-interval 0: no answers are kept (their staleness notes would age)");
        answer_cache_mb = 0;
    }
    let answer_cache_bytes = answer_cache_mb
        .checked_mul(1 << 20)
        .context("--answer-cache-mb is too large")?;
    if http.is_some() {
        limit_malloc_arenas();
    }
    // Over HTTP, calls from many clients run at once: one worker per core.
    let workers = match http {
        Some(_) => std::thread::available_parallelism().map_or(2, |n| n.get().max(2)),
        None => 2,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()?;
    crate::query::staleness::keep_checks_for(watch_interval);
    runtime.block_on(async {
        let state = state::IndexState::start(project.clone(), options);
        let server = AcpServer::new(state.clone(), query_timeout, answer_cache_bytes);
        if !watch_interval.is_zero() {
            crate::query::staleness::sweep_in_background();
            watch(state.clone(), watch_interval);
        }
        match http {
            Some(options) => http::serve(state, server.shared_by_many_clients(), options).await,
            None => serve_stdio(&project.root, server).await,
        }
    })
}

/// glibc's malloc arenas an HTTP server may use. Each thread that allocates (runtime workers,
/// the threads `block_in_place` hands work to) would otherwise get its own arena, up to eight
/// per core, each keeping the memory its thread freed: at 1M symbols with 16 clients, peak RSS
/// went from 183 to 126 MB with two (calls/s from 1,375 to 1,238 in one 8 s run on a machine
/// shared with other work; see docs/benchmarks.md).
const MALLOC_ARENAS: i32 = 2;

/// Caps glibc's malloc arenas at [`MALLOC_ARENAS`]; must run before other threads start.
fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes an allocator setting; called before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, MALLOC_ARENAS);
    }
}

/// Checks every `period` for a changed cache (re-imported) or, read-only, a replaced database,
/// and steps the sweep of the source files on disk, on a task of its own so that an import's
/// first pass, run whole, never holds up the checks.
fn watch(state: Arc<state::IndexState>, period: Duration) {
    let sweeping = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sweep = move |state: Arc<state::IndexState>| {
        if sweeping.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        /// Says that no sweep runs when dropped, also by a panic.
        struct Swept(Arc<std::sync::atomic::AtomicBool>);
        impl Drop for Swept {
            fn drop(&mut self) {
                self.0.store(false, std::sync::atomic::Ordering::SeqCst);
            }
        }
        let swept = Swept(sweeping.clone());
        tokio::task::spawn_blocking(move || {
            state.sweep_sources();
            drop(swept);
        });
    };
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(period);
        ticker.tick().await;
        // The sweep of the source files starts with the server (once its index is open).
        sweep(state.clone());
        loop {
            ticker.tick().await;
            let polled = state.clone();
            let _ = tokio::task::spawn_blocking(move || {
                if polled.read_only() {
                    polled.poll_database();
                } else {
                    polled.poll_changes();
                }
            })
            .await;
            sweep(state.clone());
        }
    });
}

async fn serve_stdio(root: &std::path::Path, server: AcpServer) -> Result<()> {
    let service = server.serve(stdio::StdioTransport::new()).await?;
    tracing::info!("serving {} over MCP on stdio", root.display());
    service.waiting().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_are_refused_past_the_bound_or_below_zero() {
        assert_eq!(seconds(1.5, "--x").unwrap(), Duration::from_millis(1500));
        assert!(seconds(1e15, "--x").is_ok());
        for bad in [1e19, -1.0, f64::NAN, f64::INFINITY] {
            let err = seconds(bad, "--request-timeout").unwrap_err().to_string();
            assert!(err.contains("--request-timeout"), "{bad}: {err}");
        }
    }
}
