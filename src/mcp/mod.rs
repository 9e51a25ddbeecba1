//! The MCP layer: `acpdb serve`. Parses tool arguments, calls a query function on a pooled
//! read-only connection, serializes the answer.
//!
//! Invariants: this is the only module that knows rmcp. Tool answers are the query layer's JSON
//! as pretty-printed text (the reference server's shape); failures are JSON-RPC errors, never
//! `isError` results. stdout carries only protocol messages; logs go to stderr.

pub mod errors;
mod prompts;
mod resources;
mod server;
pub mod state;
mod stdio;

pub use stdio::answer_for_line;

use std::time::Duration;

use anyhow::Result;
use rmcp::ServiceExt;

use crate::project::Project;

pub use server::AcpServer;

/// Options of `acpdb serve`.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Seconds between checks of the cache file for changes (0 disables re-import on change).
    #[arg(long, value_name = "SECONDS", default_value_t = 2.0)]
    pub watch_interval: f64,
    /// Longest a read query may run before it is interrupted and answered with error -32004.
    #[arg(long, value_name = "SECONDS", default_value_t = 2.0)]
    pub query_timeout: f64,
}

/// A number of seconds given on the command line as a duration; `flag` names it in the error.
fn seconds(value: f64, flag: &str) -> Result<Duration> {
    Duration::try_from_secs_f64(value).map_err(|_| {
        anyhow::anyhow!("{flag} must be a number of seconds from 0 to 10^15, got {value}")
    })
}

/// Runs the MCP server on stdin/stdout until the client disconnects.
pub fn run(project: &Project, args: &ServeArgs) -> Result<()> {
    let watch_interval = seconds(args.watch_interval, "--watch-interval")?;
    let query_timeout = seconds(args.query_timeout, "--query-timeout")?;
    if query_timeout.is_zero() {
        anyhow::bail!("--query-timeout must be more than 0 seconds");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(serve(project.clone(), watch_interval, query_timeout))
}

async fn serve(project: Project, watch_interval: Duration, query_timeout: Duration) -> Result<()> {
    let state = state::IndexState::start(project.clone());
    let server = AcpServer::new(state.clone(), query_timeout);
    if !watch_interval.is_zero() {
        let watched = state.clone();
        let period = watch_interval;
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(period);
            ticker.tick().await;
            loop {
                ticker.tick().await;
                let state = watched.clone();
                let _ = tokio::task::spawn_blocking(move || state.poll_changes()).await;
            }
        });
    }
    let service = server.serve(stdio::StdioTransport::new()).await?;
    tracing::info!("serving {} over MCP on stdio", project.root.display());
    service.waiting().await?;
    Ok(())
}
