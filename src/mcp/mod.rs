//! The MCP layer: `acpdb serve`. Parses tool arguments, calls a query function on a pooled
//! read-only connection, serializes the answer.
//!
//! Invariants: this is the only module that knows rmcp. Tool answers are the query layer's JSON
//! as pretty-printed text (the reference server's shape); failures are JSON-RPC errors, never
//! `isError` results. stdout carries only protocol messages; logs go to stderr.

mod journal_index;
mod resources;
mod server;
pub mod state;
mod stdio;

use std::time::Duration;

use anyhow::Result;
use rmcp::ServiceExt;

use crate::project::Project;

pub use server::AcpServer;

/// Options of `acpdb serve`.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Seconds between checks of the cache file for changes (0 disables re-import on change).
    #[arg(long, default_value_t = 2.0)]
    pub watch_interval: f64,
}

/// Runs the MCP server on stdin/stdout until the client disconnects.
pub fn run(project: &Project, args: &ServeArgs) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(serve(project.clone(), args.clone()))
}

async fn serve(project: Project, args: ServeArgs) -> Result<()> {
    let state = state::IndexState::start(project.clone());
    let server = AcpServer::new(state.clone(), &project);
    if args.watch_interval > 0.0 {
        let watched = state.clone();
        let period = Duration::from_secs_f64(args.watch_interval);
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
