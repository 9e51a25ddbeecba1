//! `acpdb bench`: replays a workload of tool calls and reports per-group latency percentiles,
//! start-up time and peak memory.
//!
//! Three modes: in-process ([`inprocess`], the query functions through [`crate::tools::call`]),
//! `--stdio` ([`stdio`], a server process driven as an MCP client, by default
//! `acpdb serve` on the same project, or any command given after `--`) and `--http` ([`http`],
//! `--clients` MCP clients at once over Streamable HTTP). The workload is a JSON
//! file ([`workload`]) or a default mix sampled from the index database. Calls run one at a
//! time (per client), in workload order: `--warmup` unmeasured passes, then `--iterations` passes or as many
//! as fit in `--duration` seconds. See `docs/benchmarks.md` for the formats and for results.

pub mod http;
pub mod inprocess;
pub mod plot;
pub mod replay;
pub mod report;
pub mod stdio;
pub mod workload;

use std::io::{self, Write as _};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Result};

use crate::db;
use crate::project::Project;
use replay::{replay, Stop};
use report::{Recorder, Report, Startup};
use workload::{MixOptions, Workload};

/// Measured passes when neither `--iterations` nor `--duration` is given.
pub const DEFAULT_ITERATIONS: u32 = 10;

/// Options of `acpdb bench`.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// Workload file (JSON, see docs/benchmarks.md); default: a mix sampled from the database.
    #[arg(long, value_name = "FILE")]
    pub workload: Option<PathBuf>,
    /// Measured passes over the workload [default: 10].
    #[arg(long, value_name = "N", conflicts_with = "duration")]
    pub iterations: Option<u32>,
    /// Repeat the workload for this many seconds instead of a number of passes.
    #[arg(long, value_name = "S")]
    pub duration: Option<f64>,
    /// Unmeasured passes before measuring.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub warmup: u32,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Drive a server over MCP stdio (`acpdb serve` on this project unless a command follows
    /// `--`) instead of calling the query functions in this process.
    #[arg(long)]
    pub stdio: bool,
    /// Drive a server over MCP Streamable HTTP at URL (e.g. `http://127.0.0.1:8931/mcp`), or,
    /// without URL, `acpdb serve --http 127.0.0.1:0` on this project, started and stopped here.
    #[arg(long, value_name = "URL", num_args = 0..=1, default_missing_value = "", conflicts_with_all = ["stdio", "server"])]
    pub http: Option<String>,
    /// With --http: MCP clients at once, each with its own session, one call at a time.
    #[arg(long, value_name = "N", default_value_t = 1, requires = "http")]
    pub clients: usize,
    /// With --http: send this file's content as the bearer token.
    #[arg(long, value_name = "FILE", requires = "http")]
    pub token_file: Option<PathBuf>,
    /// With --http URL: the server's process id, to report its peak RSS.
    #[arg(long, value_name = "PID", requires = "http")]
    pub server_pid: Option<u32>,
    /// With --http and no URL: start the server with `--stateless`.
    #[arg(long, requires = "http")]
    pub stateless: bool,
    /// Calls per group in the default mix.
    #[arg(long, value_name = "N", default_value_t = 8)]
    pub samples: usize,
    /// Answer cache of the server started here, in MiB (`serve --answer-cache-mb`; 0
    /// measures every call's query) [default: the server's]
    #[arg(long, value_name = "MB")]
    pub answer_cache_mb: Option<usize>,
    /// Seed for sampling the default mix.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Write the workload used (the default mix or the file read) to FILE.
    #[arg(long, value_name = "FILE")]
    pub save_workload: Option<PathBuf>,
    /// Write each measured call to FILE, a JSON object a line in the order they started:
    /// `start_us` (since the Unix epoch), `group`, `latency_us`, `failed`.
    #[arg(long, value_name = "FILE", conflicts_with = "compare")]
    pub calls_log: Option<PathBuf>,
    /// Draw the per-group p50/p90/p99 latencies as an SVG chart to FILE (log scale; the title
    /// names the machine, the date, the data size and the acpdb commit).
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// Measure two servers in one run over stdio, the same workload on each: `acpdb serve` on
    /// this project, then the command after `--` (e.g. `-- acp-mcp -C DIR`).
    #[arg(long, requires = "server", conflicts_with = "http")]
    pub compare: bool,
    /// Server command for --stdio (implies --stdio), e.g. `-- acp-mcp -C DIR`.
    #[arg(last = true, value_name = "SERVER")]
    pub server: Vec<String>,
}

/// What a run measures.
enum Target {
    /// The query functions in this process.
    InProcess,
    /// A server process over stdio, started with this command.
    Stdio(Vec<String>),
    /// A server over HTTP at this URL (empty: one started here).
    Http(String),
}

/// Runs `acpdb bench` and prints the report on stdout.
pub fn run(project: &Project, args: &BenchArgs) -> Result<()> {
    let stop = match (args.iterations, args.duration) {
        (Some(0), _) => bail!("--iterations must be at least 1"),
        (_, Some(s)) => match Duration::try_from_secs_f64(s) {
            Ok(duration) if !duration.is_zero() => Stop::Time(duration),
            _ => bail!("--duration must be a number of seconds above 0 and below 10^15, got {s}"),
        },
        (Some(n), None) => Stop::Passes(n),
        (None, None) => Stop::Passes(DEFAULT_ITERATIONS),
    };
    let workload = match &args.workload {
        Some(path) => Workload::load(path)?,
        None => {
            let conn = db::open_read_only(&project.db)?;
            let options = MixOptions {
                samples: args.samples,
                seed: args.seed,
            };
            workload::default_mix(&conn, options)?
        }
    };
    if let Some(path) = &args.save_workload {
        workload.save(path)?;
    }
    let description = match &args.workload {
        Some(path) => path.display().to_string(),
        None => workload.description.clone().unwrap_or_default(),
    };
    let targets = if args.compare {
        vec![
            Target::Stdio(default_server(project, "warn", args.answer_cache_mb)?),
            Target::Stdio(args.server.clone()),
        ]
    } else if let Some(url) = &args.http {
        vec![Target::Http(url.clone())]
    } else if args.stdio || !args.server.is_empty() {
        let command = if args.server.is_empty() {
            default_server(project, "warn", args.answer_cache_mb)?
        } else {
            args.server.clone()
        };
        vec![Target::Stdio(command)]
    } else {
        vec![Target::InProcess]
    };
    let mut reports = Vec::new();
    for target in targets {
        reports.push(measure(
            project,
            args,
            &workload,
            &description,
            stop,
            target,
        )?);
    }
    let mut out = io::stdout().lock();
    match (&reports[..], args.json) {
        ([report], true) => writeln!(out, "{}", serde_json::to_string_pretty(report)?)?,
        (reports, true) => writeln!(out, "{}", serde_json::to_string_pretty(reports)?)?,
        (reports, false) => {
            let tables: Vec<String> = reports.iter().map(Report::table).collect();
            write!(out, "{}", tables.join("\n"))?;
        }
    }
    out.flush()?;
    if let Some(path) = &args.plot {
        let series: Vec<plot::Series> = reports
            .iter()
            .map(|report| plot::Series {
                name: report.server_name(),
                groups: &report.tools,
            })
            .collect();
        plot::draw(path, &chart_title(project, &reports[0]), &series)?;
        tracing::info!("wrote the chart to {}", path.display());
    }
    Ok(())
}

/// Runs the workload against `target` and reports it.
fn measure(
    project: &Project,
    args: &BenchArgs,
    workload: &Workload,
    description: &str,
    stop: Stop,
    target: Target,
) -> Result<Report> {
    let mut recorder = Recorder::new(workload.calls.iter().map(|c| (c.group(), c.tool.clone())));
    let mut report = Report {
        mode: match target {
            Target::Http(_) => "http",
            Target::Stdio(_) => "stdio",
            Target::InProcess => "in-process",
        },
        clients: args.http.as_ref().map(|_| args.clients),
        server: None,
        server_info: None,
        project: project.root.display().to_string(),
        workload: description.to_string(),
        workload_calls: workload.calls.len(),
        warmup_passes: args.warmup,
        passes: 0,
        calls: 0,
        elapsed_s: 0.0,
        calls_per_s: 0.0,
        startup: None,
        peak_rss_kb: None,
        answer_cache: None,
        tools: Vec::new(),
    };
    let replayed = match target {
        Target::Http(url) => {
            let token = args
                .token_file
                .as_deref()
                .map(crate::mcp::http::read_token)
                .transpose()?;
            let spawned = if url.is_empty() {
                let mut command = default_server(project, "info", args.answer_cache_mb)?;
                command.extend(["--http".into(), "127.0.0.1:0".into()]);
                if args.stateless {
                    command.push("--stateless".into());
                }
                if let Some(file) = &args.token_file {
                    command.extend(["--token-file".into(), file.display().to_string()]);
                }
                Some(http::SpawnedServer::start(command)?)
            } else {
                None
            };
            let load = http::Load {
                url: spawned
                    .as_ref()
                    .map_or_else(|| url.clone(), |s| s.url.clone()),
                token,
                clients: args.clients,
            };
            report.server = Some(match &spawned {
                Some(server) => server.command.clone(),
                None => vec![url.clone()],
            });
            let replayed = http::replay(&load, workload, args.warmup, stop, &mut recorder);
            let pid = spawned
                .as_ref()
                .map(http::SpawnedServer::pid)
                .or(args.server_pid);
            report.peak_rss_kb = pid.and_then(http::server_peak_rss_kb);
            report.answer_cache = http::answer_cache_stats(&load);
            if let Some(server) = spawned {
                server.stop();
            }
            replayed?
        }
        Target::Stdio(command) => {
            let mut server = stdio::StdioServer::spawn(&command)?;
            let first = server.first_answer(&workload.calls[0])?;
            report.startup = Some(Startup::new(server.initialized(), first));
            report.server_info = server.info();
            report.server = Some(command);
            let replayed = replay(&mut server, workload, args.warmup, stop, &mut recorder);
            report.peak_rss_kb = server.peak_rss_kb();
            server.shutdown();
            replayed?
        }
        Target::InProcess => {
            let mut target = inprocess::InProcess::open(&project.db)?;
            // Per-call log lines of the query layer (e.g. deprecation notes) would flood stderr.
            let silent = tracing::subscriber::NoSubscriber::default();
            let replayed = tracing::subscriber::with_default(silent, || {
                replay(&mut target, workload, args.warmup, stop, &mut recorder)
            })?;
            report.peak_rss_kb = report::peak_rss_kb("self");
            replayed
        }
    };
    report.passes = replayed.passes;
    report.calls = replayed.calls;
    report.elapsed_s = replayed.elapsed.as_secs_f64();
    report.calls_per_s = replayed.calls as f64 / report.elapsed_s.max(f64::MIN_POSITIVE);
    if let Some(path) = &args.calls_log {
        recorder.write_calls(path)?;
    }
    report.tools = recorder.finish();
    for tool in &report.tools {
        if let Some(error) = &tool.first_error {
            tracing::warn!(
                "{}: {} of {} calls failed, first: {error}",
                tool.label,
                tool.errors,
                tool.count
            );
        }
    }
    Ok(report)
}

/// The chart's title: the run, the data size, the machine, the date and the acpdb build.
fn chart_title(project: &Project, report: &Report) -> String {
    let symbols = db::open_read_only(&project.db)
        .ok()
        .and_then(|conn| {
            conn.query_row("SELECT symbols FROM index_summary", [], |r| {
                r.get::<_, i64>(0)
            })
            .ok()
        })
        .map_or_else(
            || "? symbols".to_string(),
            |n| format!("{} symbols", thousands(n)),
        );
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines().find_map(|l| {
                l.strip_prefix("model name")?
                    .split_once(':')
                    .map(|(_, m)| m.trim().to_string())
            })
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string());
    format!(
        "acpdb bench ({}, {} passes of {} calls): {symbols}; {cores} cores, {cpu}; {}; acpdb {} ({})",
        report.mode,
        report.passes,
        report.workload_calls,
        chrono::Utc::now().format("%Y-%m-%d %H:%M UTC"),
        env!("CARGO_PKG_VERSION"),
        env!("ACPDB_COMMIT"),
    )
}

/// `n` with thousands separated by commas.
fn thousands(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 {
        format!("-{out}")
    } else {
        out
    }
}

/// `acpdb --log-level <level> -C <root> --db <db> [--cache <cache>] serve` with this executable.
fn default_server(
    project: &Project,
    log_level: &str,
    answer_cache_mb: Option<usize>,
) -> Result<Vec<String>> {
    let exe = std::env::current_exe()?;
    let mut command = vec![
        exe.display().to_string(),
        "--log-level".into(),
        log_level.into(),
        "-C".into(),
        project.root.display().to_string(),
        "--db".into(),
        project.db.display().to_string(),
    ];
    if let Some(cache) = &project.cache {
        command.extend(["--cache".into(), cache.display().to_string()]);
    }
    command.push("serve".into());
    if let Some(mb) = answer_cache_mb {
        command.extend(["--answer-cache-mb".into(), mb.to_string()]);
    }
    Ok(command)
}
