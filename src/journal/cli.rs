//! Command-line mirrors of the journal tools: `acpdb debug list|status [ID]`,
//! `acpdb hack list [--expired] [--file F]` and `acpdb export-attempts`. They print the same
//! JSON the MCP tools answer.

use std::io::{self, Write as _};

use anyhow::Result;

use super::debug::{DebugData, DebugRequest};
use super::hack::{HackData, HackRequest};
use super::store::Journal;
use std::sync::Arc;

use super::index::{DatabaseIndex, IndexConnection};
use crate::project::Project;

/// Options of `acpdb debug`.
#[derive(Debug, Clone, clap::Args)]
pub struct DebugArgs {
    /// What to show.
    #[command(subcommand)]
    pub command: DebugCommand,
}

/// `acpdb debug` subcommands.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum DebugCommand {
    /// List the active debug sessions, oldest first.
    List,
    /// Show one session with its attempts (default: the most recent active session).
    Status {
        /// Session id, e.g. debug-20251227-001.
        id: Option<String>,
    },
}

/// Options of `acpdb hack`.
#[derive(Debug, Clone, clap::Args)]
pub struct HackArgs {
    /// What to show.
    #[command(subcommand)]
    pub command: HackCommand,
}

/// `acpdb hack` subcommands.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum HackCommand {
    /// List hack markers, sorted by file and line.
    List {
        /// Only expired hacks.
        #[arg(long)]
        expired: bool,
        /// Only hacks in this file (relative to the project root).
        #[arg(long, value_name = "FILE")]
        file: Option<String>,
    },
}

/// Options of `acpdb export-attempts`.
#[derive(Debug, Clone, clap::Args)]
pub struct ExportAttemptsArgs {}

/// Runs `acpdb debug …`.
pub fn run_debug(project: &Project, args: &DebugArgs) -> Result<()> {
    let request = match &args.command {
        DebugCommand::List => DebugRequest {
            action: Some("list".to_owned()),
            data: None,
        },
        DebugCommand::Status { id } => DebugRequest {
            action: Some("status".to_owned()),
            data: Some(DebugData {
                session_id: id.clone(),
                ..DebugData::default()
            }),
        },
    };
    let response = open(project)?.debug(request)?;
    writeln!(io::stdout().lock(), "{}", response.text())?;
    Ok(())
}

/// Runs `acpdb hack …`.
pub fn run_hack(project: &Project, args: &HackArgs) -> Result<()> {
    let request = match &args.command {
        HackCommand::List { expired, file } => HackRequest {
            action: Some("list".to_owned()),
            data: Some(HackData {
                file: file.clone(),
                expired_only: Some(*expired),
                ..HackData::default()
            }),
        },
    };
    let response = open(project)?.hack(request)?;
    writeln!(io::stdout().lock(), "{}", response.text())?;
    Ok(())
}

/// Runs `acpdb export-attempts`: rewrites `.acp/acp.attempts.json` and prints what it holds.
pub fn run_export_attempts(project: &Project, _args: &ExportAttemptsArgs) -> Result<()> {
    let report = open(project)?.export()?;
    writeln!(
        io::stdout().lock(),
        "{}",
        serde_json::to_string_pretty(&report)?
    )?;
    Ok(())
}

/// The project's journal, with the index it sees when a database was imported.
fn open(project: &Project) -> Result<Journal> {
    let db = project.db.clone();
    let index = DatabaseIndex::new(move || {
        let conn = crate::db::open_read_only(&db).ok()?;
        Some(Box::new(Box::new(conn)) as IndexConnection)
    });
    Ok(
        Journal::open(&project.journal_db, &project.root, &project.attempts)?
            .with_index(Arc::new(index)),
    )
}
