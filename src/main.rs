//! The `acpdb` command line: parse arguments, dispatch, report errors.

use std::io;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};

use acpdb::project::{Project, ProjectArgs};
use acpdb::{bench, client_config, console, export, gen, import, journal, mcp, tools};

/// Import an ACP code index into SQLite and serve it to AI agents over MCP.
#[derive(Debug, Parser)]
#[command(name = "acpdb", version, about, long_about = None)]
struct Cli {
    #[command(flatten)]
    project: ProjectArgs,
    /// Log level for messages on stderr (off, error, warn, info, debug, trace); applies to every
    /// message, the libraries' included.
    #[arg(
        long,
        default_value = "info",
        global = true,
        value_parser = ["off", "error", "warn", "info", "debug", "trace"]
    )]
    log_level: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Import the project's ACP cache into the SQLite database.
    Import(import::ImportArgs),
    /// Write the cache back out of the database (JSON-equal to the imported one).
    ExportCache(export::ExportArgs),
    /// Run a read-only SQL query against the database.
    Sql(console::SqlArgs),
    /// Query the index like the acp_query tool (symbol, file, domain, callers, callees, search, stats).
    Query(tools::QueryArgs),
    /// What a change touches (files, symbols or a diff): callers, lock levels, domains, tests.
    Impact(tools::ImpactArgs),
    /// Serve the index to AI agents over MCP on stdin/stdout.
    Serve(mcp::ServeArgs),
    /// Show debug sessions recorded with acp_debug.
    Debug(journal::DebugArgs),
    /// Show hack markers recorded with acp_hack.
    Hack(journal::HackArgs),
    /// Rewrite .acp/acp.attempts.json from the journal.
    ExportAttempts(journal::ExportAttemptsArgs),
    /// Write a deterministic synthetic cache for tests and benchmarks.
    GenFixture(gen::GenArgs),
    /// Replay a workload of tool calls and report latency percentiles, start-up and memory.
    Bench(bench::BenchArgs),
    /// Print (or --write) an MCP client's configuration for acpdb on this project: claude-code,
    /// claude-desktop, cursor, vscode or codex.
    McpConfig(client_config::McpConfigArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    acpdb::logging::init(&cli.log_level);
    match run(cli) {
        Ok(code) => code,
        Err(err) if is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// Whether `err` comes from writing to a pipe whose reader has gone (`acpdb … | head`): the
/// reader has all it wanted, so the command ends quietly and successfully, like `ls | head`.
fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        let kind = match cause.downcast_ref::<io::Error>() {
            Some(io_error) => Some(io_error.kind()),
            None => cause
                .downcast_ref::<serde_json::Error>()
                .and_then(serde_json::Error::io_error_kind),
        };
        kind == Some(io::ErrorKind::BrokenPipe)
    })
}

/// Runs a command; its exit status is 0 unless the command says otherwise (`impact --fail-on`).
fn run(cli: Cli) -> Result<ExitCode> {
    match &cli.command {
        Command::GenFixture(args) => gen::run(args).map(|()| ExitCode::SUCCESS),
        Command::Impact(args) => {
            let project = Project::from_args(&cli.project)?;
            let locked = tools::run_impact(&project, args)?;
            Ok(if locked {
                ExitCode::from(tools::IMPACT_LOCKED_STATUS)
            } else {
                ExitCode::SUCCESS
            })
        }
        command => {
            let project = Project::from_args(&cli.project)?;
            let done = match command {
                Command::Import(args) => import::run(&project, args).map(|_| ()),
                Command::ExportCache(args) => export::run(&project, args),
                Command::Sql(args) => console::run(&project, args),
                Command::Query(args) => tools::run_query(&project, args),
                Command::Serve(args) => mcp::run(&project, args),
                Command::Debug(args) => journal::run_debug(&project, args),
                Command::Hack(args) => journal::run_hack(&project, args),
                Command::ExportAttempts(args) => journal::run_export_attempts(&project, args),
                Command::Bench(args) => bench::run(&project, args),
                Command::McpConfig(args) => client_config::run(&project, args),
                Command::GenFixture(_) | Command::Impact(_) => unreachable!("handled above"),
            };
            done.map(|()| ExitCode::SUCCESS)
        }
    }
}
