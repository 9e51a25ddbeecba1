//! The `acpdb` command line: parse arguments, dispatch, report errors.

use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};

use acpdb::project::{Project, ProjectArgs};
use acpdb::{console, export, gen, import};

/// Import an ACP code index into SQLite and serve it to AI agents over MCP.
#[derive(Debug, Parser)]
#[command(name = "acpdb", version, about, long_about = None)]
struct Cli {
    #[command(flatten)]
    project: ProjectArgs,
    /// Log level for messages on stderr (error, warn, info, debug, trace).
    #[arg(long, default_value = "info", global = true)]
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
    /// Write a deterministic synthetic cache for tests and benchmarks.
    GenFixture(gen::GenArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(&cli.log_level);
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    match &cli.command {
        Command::GenFixture(args) => gen::run(args),
        command => {
            let project = Project::from_args(&cli.project)?;
            match command {
                Command::Import(args) => import::run(&project, args).map(|_| ()),
                Command::ExportCache(args) => export::run(&project, args),
                Command::Sql(args) => console::run(&project, args),
                Command::GenFixture(_) => unreachable!("handled above"),
            }
        }
    }
}

fn init_logging(level: &str) {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_env("ACPDB_LOG").unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(format!("{level},refinery=warn,refinery_core=warn"))
    });
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .compact()
        .init();
}
