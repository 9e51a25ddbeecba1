//! Latency statistics and the benchmark report: a text table or JSON (`--json`), plus the
//! peak resident set size read from `/proc`.
//!
//! Percentiles use the nearest-rank method over the sorted latencies of a group: pN is the
//! smallest latency such that at least N % of the calls were at least as fast.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};

use serde::Serialize;

/// One measured call, as `acpdb bench --calls-log` writes it.
#[derive(Debug, Serialize)]
struct CallLine<'a> {
    /// When the call was sent, in microseconds since the Unix epoch.
    start_us: u64,
    /// Its report group.
    group: &'a str,
    /// Its latency in microseconds.
    latency_us: u64,
    /// Whether it failed (a tool error).
    failed: bool,
}

/// What happened to one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The tool answered.
    Answer,
    /// The tool failed with this message (still timed: the server did the work of answering).
    Error(String),
    /// The server does not know the tool; its group is skipped from then on.
    Unsupported,
}

/// Latencies and errors per report group, in the order groups first appear.
#[derive(Debug, Default)]
pub struct Recorder {
    groups: Vec<Group>,
    unsupported: Vec<String>,
}

#[derive(Debug)]
struct Group {
    label: String,
    tool: String,
    latencies: Vec<Duration>,
    /// Each measured call's start, in microseconds since the Unix epoch, and whether it failed,
    /// in the order of `latencies`.
    starts: Vec<(u64, bool)>,
    errors: u64,
    first_error: Option<String>,
}

impl Recorder {
    /// A recorder that lists `groups` (label, tool) in this order even if never measured.
    pub fn new(groups: impl IntoIterator<Item = (String, String)>) -> Recorder {
        let mut recorder = Recorder::default();
        for (label, tool) in groups {
            recorder.group(&label, &tool);
        }
        recorder
    }

    fn group(&mut self, label: &str, tool: &str) -> &mut Group {
        let index = match self.groups.iter().position(|g| g.label == label) {
            Some(index) => index,
            None => {
                self.groups.push(Group {
                    label: label.to_string(),
                    tool: tool.to_string(),
                    latencies: Vec::new(),
                    starts: Vec::new(),
                    errors: 0,
                    first_error: None,
                });
                self.groups.len() - 1
            }
        };
        &mut self.groups[index]
    }

    /// Whether the server turned out not to know `tool`.
    pub fn is_unsupported(&self, tool: &str) -> bool {
        self.unsupported.iter().any(|t| t == tool)
    }

    /// Records one call; `measured` is false during warm-up, when only unknown tools are noted.
    pub fn record(
        &mut self,
        label: &str,
        tool: &str,
        latency: Duration,
        outcome: Outcome,
        measured: bool,
    ) {
        if outcome == Outcome::Unsupported {
            if !self.is_unsupported(tool) {
                self.unsupported.push(tool.to_string());
            }
            return;
        }
        if !measured {
            return;
        }
        let started = SystemTime::now()
            .checked_sub(latency)
            .and_then(|at| at.duration_since(UNIX_EPOCH).ok())
            .map_or(0, |at| at.as_micros() as u64);
        let group = self.group(label, tool);
        group.latencies.push(latency);
        group
            .starts
            .push((started, matches!(outcome, Outcome::Error(_))));
        if let Outcome::Error(message) = outcome {
            group.errors += 1;
            group.first_error.get_or_insert(message);
        }
    }

    /// Adds the calls `other` recorded (another client of the same workload).
    pub fn absorb(&mut self, other: Recorder) {
        for tool in other.unsupported {
            if !self.is_unsupported(&tool) {
                self.unsupported.push(tool);
            }
        }
        for theirs in other.groups {
            let group = self.group(&theirs.label, &theirs.tool);
            group.latencies.extend(theirs.latencies);
            group.starts.extend(theirs.starts);
            group.errors += theirs.errors;
            if group.first_error.is_none() {
                group.first_error = theirs.first_error;
            }
        }
    }

    /// Writes every measured call to `path` in the order they started, a JSON object a line
    /// (`start_us` since the Unix epoch, `group`, `latency_us`, `failed`), so that slow calls can
    /// be lined up with what the server or the machine was doing then.
    pub fn write_calls(&self, path: &Path) -> Result<()> {
        let mut calls: Vec<CallLine> =
            self.groups
                .iter()
                .flat_map(|group| {
                    group.starts.iter().zip(&group.latencies).map(
                        |(&(start_us, failed), latency)| CallLine {
                            start_us,
                            group: &group.label,
                            latency_us: latency.as_micros() as u64,
                            failed,
                        },
                    )
                })
                .collect();
        calls.sort_by_key(|call| call.start_us);
        let write = || -> std::io::Result<()> {
            let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
            for call in calls {
                serde_json::to_writer(&mut out, &call)?;
                out.write_all(b"\n")?;
            }
            out.flush()
        };
        write().with_context(|| format!("writing the calls to {}", path.display()))
    }

    /// Per-group statistics.
    pub fn finish(self) -> Vec<GroupStats> {
        let unsupported = self.unsupported;
        self.groups
            .into_iter()
            .map(|group| {
                let supported = !unsupported.contains(&group.tool);
                GroupStats::new(group, supported)
            })
            .collect()
    }
}

/// Statistics of one group (times in milliseconds).
#[derive(Debug, Clone, Serialize)]
pub struct GroupStats {
    /// Group label (tool, `acp_query:<type>`, or the workload's own label).
    pub label: String,
    /// Tool called.
    pub tool: String,
    /// `ok`, or `unsupported` when the server does not know the tool.
    pub status: &'static str,
    /// Measured calls.
    pub count: usize,
    /// Measured calls that ended in a tool error.
    pub errors: u64,
    /// First error message, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_error: Option<String>,
    /// Mean latency.
    pub mean_ms: Option<f64>,
    /// Median latency.
    pub p50_ms: Option<f64>,
    /// 90th percentile.
    pub p90_ms: Option<f64>,
    /// 95th percentile.
    pub p95_ms: Option<f64>,
    /// 99th percentile.
    pub p99_ms: Option<f64>,
    /// Slowest call.
    pub max_ms: Option<f64>,
}

fn ms(duration: Duration) -> f64 {
    (duration.as_secs_f64() * 1e6).round() / 1e3
}

/// Nearest-rank percentile of sorted latencies (`None` when empty).
pub fn percentile(sorted: &[Duration], p: f64) -> Option<Duration> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

impl GroupStats {
    fn new(mut group: Group, supported: bool) -> GroupStats {
        group.latencies.sort_unstable();
        let sorted = &group.latencies;
        let at = |p: f64| percentile(sorted, p).map(ms);
        let mean =
            (!sorted.is_empty()).then(|| ms(sorted.iter().sum::<Duration>() / sorted.len() as u32));
        GroupStats {
            label: group.label,
            tool: group.tool,
            status: if supported { "ok" } else { "unsupported" },
            count: sorted.len(),
            errors: group.errors,
            first_error: group.first_error,
            mean_ms: mean,
            p50_ms: at(50.0),
            p90_ms: at(90.0),
            p95_ms: at(95.0),
            p99_ms: at(99.0),
            max_ms: sorted.last().copied().map(ms),
        }
    }
}

/// Start-up of a server driven over stdio, from spawning the process.
#[derive(Debug, Clone, Serialize)]
pub struct Startup {
    /// Until the `initialize` answer.
    pub initialize_ms: f64,
    /// Until the first workload call was answered (retrying while the index is still building).
    pub first_tool_ms: f64,
}

impl Startup {
    /// Start-up figures from the two durations.
    pub fn new(initialize: Duration, first_tool: Duration) -> Startup {
        Startup {
            initialize_ms: ms(initialize),
            first_tool_ms: ms(first_tool),
        }
    }
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// `in-process`, `stdio` or `http`.
    pub mode: &'static str,
    /// Concurrent clients (http mode).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clients: Option<usize>,
    /// The server command (stdio mode).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<Vec<String>>,
    /// Name and version the server gave in its `initialize` answer (stdio mode).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_info: Option<String>,
    /// The project directory.
    pub project: String,
    /// The workload's description or file.
    pub workload: String,
    /// Calls in one pass of the workload.
    pub workload_calls: usize,
    /// Unmeasured passes run first.
    pub warmup_passes: u32,
    /// Measured passes started (the last may be partial with `--duration`).
    pub passes: u32,
    /// Measured calls.
    pub calls: usize,
    /// Wall-clock time of the measured passes, in seconds.
    pub elapsed_s: f64,
    /// Measured calls per second of wall-clock time, all clients together.
    pub calls_per_s: f64,
    /// Server start-up (stdio mode).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub startup: Option<Startup>,
    /// Peak resident set size (VmHWM) of the server process, or of this process in-process,
    /// in KiB.
    pub peak_rss_kb: Option<u64>,
    /// The server's answer cache at the end (http mode): its `GET /healthz` counters, warm-up
    /// included.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answer_cache: Option<serde_json::Value>,
    /// Per-group statistics, in workload order.
    pub tools: Vec<GroupStats>,
}

impl Report {
    /// The server's name for a legend: its command's program, with what it said in
    /// `initialize` (once, when that starts with the program's name), else the mode.
    pub fn server_name(&self) -> String {
        let program = self
            .server
            .as_ref()
            .and_then(|command| command.first())
            .map(|program| {
                std::path::Path::new(program)
                    .file_name()
                    .map_or_else(|| program.clone(), |n| n.to_string_lossy().into_owned())
            });
        match (program, &self.server_info) {
            (Some(program), Some(info)) if info.starts_with(&program) => info.clone(),
            (Some(program), Some(info)) => format!("{program} ({info})"),
            (Some(program), None) => program,
            (None, _) => format!("acpdb ({})", self.mode),
        }
    }

    /// The report as a text table.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let server = match (&self.server, &self.server_info) {
            (Some(command), Some(info)) => format!(" `{}` ({info})", command.join(" ")),
            (Some(command), None) => format!(" `{}`", command.join(" ")),
            _ => String::new(),
        };
        let _ = writeln!(out, "mode: {}{server}", self.mode);
        let _ = writeln!(out, "project: {}", self.project);
        let _ = writeln!(
            out,
            "workload: {} ({} calls per pass); {} warm-up + {} measured passes, {} calls in {:.2} s ({:.0} calls/s)",
            self.workload,
            self.workload_calls,
            self.warmup_passes,
            self.passes,
            self.calls,
            self.elapsed_s,
            self.calls_per_s
        );
        if let Some(clients) = self.clients {
            let errors: u64 = self.tools.iter().map(|t| t.errors).sum();
            let _ = writeln!(out, "clients: {clients} at once; {errors} errors");
        }
        if let Some(startup) = &self.startup {
            let _ = writeln!(
                out,
                "start-up: initialize {:.3} ms, first tool answer {:.3} ms",
                startup.initialize_ms, startup.first_tool_ms
            );
        }
        let whose = if self.mode == "in-process" {
            "this process"
        } else {
            "server"
        };
        match self.peak_rss_kb {
            Some(kb) => {
                let _ = writeln!(out, "peak RSS ({whose}): {:.1} MB", kb as f64 / 1024.0);
            }
            None => {
                let _ = writeln!(out, "peak RSS ({whose}): unknown");
            }
        }
        if let Some(cache) = &self.answer_cache {
            let count = |key: &str| cache.get(key).and_then(serde_json::Value::as_u64);
            if let (Some(hits), Some(misses)) = (count("hits"), count("misses")) {
                let _ = writeln!(
                    out,
                    "answer cache (server): {hits} of {} cacheable calls answered from it ({:.1} %, warm-up included), {:.1} MiB held",
                    hits + misses,
                    100.0 * hits as f64 / (hits + misses).max(1) as f64,
                    count("bytes").unwrap_or(0) as f64 / 1_048_576.0
                );
            }
        }
        let width = self
            .tools
            .iter()
            .map(|t| t.label.len())
            .max()
            .unwrap_or(4)
            .max(4);
        let _ = writeln!(
            out,
            "\n{:<width$}  {:>6}  {:>6}  {:>10}  {:>10}  {:>10}  {:>10}",
            "tool", "count", "errors", "p50 ms", "p95 ms", "p99 ms", "max ms"
        );
        let cell = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| format!("{v:.3}"));
        for tool in &self.tools {
            if tool.status == "unsupported" {
                let _ = writeln!(out, "{:<width$}  unsupported", tool.label);
                continue;
            }
            let _ = writeln!(
                out,
                "{:<width$}  {:>6}  {:>6}  {:>10}  {:>10}  {:>10}  {:>10}",
                tool.label,
                tool.count,
                tool.errors,
                cell(tool.p50_ms),
                cell(tool.p95_ms),
                cell(tool.p99_ms),
                cell(tool.max_ms)
            );
        }
        out
    }
}

/// Peak resident set size (`VmHWM`) of a process, in KiB, from `/proc/<pid>/status`.
pub fn peak_rss_kb(pid: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let sorted: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile(&sorted, 50.0), Some(Duration::from_millis(50)));
        assert_eq!(percentile(&sorted, 99.0), Some(Duration::from_millis(99)));
        assert_eq!(percentile(&sorted, 100.0), Some(Duration::from_millis(100)));
        let few = [Duration::from_millis(3), Duration::from_millis(7)];
        assert_eq!(percentile(&few, 50.0), Some(Duration::from_millis(3)));
        assert_eq!(percentile(&few, 95.0), Some(Duration::from_millis(7)));
        assert_eq!(percentile(&[], 50.0), None);
    }

    #[test]
    fn unsupported_tools_mark_all_their_groups() {
        let mut recorder = Recorder::new([
            ("acp_query:stats".to_string(), "acp_query".to_string()),
            ("acp_query:symbol".to_string(), "acp_query".to_string()),
            (
                "acp_get_hotpaths".to_string(),
                "acp_get_hotpaths".to_string(),
            ),
        ]);
        let ms = Duration::from_millis(1);
        recorder.record(
            "acp_query:stats",
            "acp_query",
            ms,
            Outcome::Unsupported,
            false,
        );
        recorder.record(
            "acp_get_hotpaths",
            "acp_get_hotpaths",
            ms,
            Outcome::Answer,
            false,
        );
        recorder.record(
            "acp_get_hotpaths",
            "acp_get_hotpaths",
            ms,
            Outcome::Answer,
            true,
        );
        let error = Outcome::Error("boom".into());
        recorder.record("acp_get_hotpaths", "acp_get_hotpaths", ms, error, true);
        let stats = recorder.finish();
        let status: Vec<_> = stats
            .iter()
            .map(|s| (s.status, s.count, s.errors))
            .collect();
        assert_eq!(
            status,
            [("unsupported", 0, 0), ("unsupported", 0, 0), ("ok", 2, 1)]
        );
        assert_eq!(stats[2].first_error.as_deref(), Some("boom"));
        assert_eq!(stats[2].p99_ms, Some(1.0));
    }

    #[test]
    fn peak_rss_of_this_process() {
        assert!(peak_rss_kb("self").is_some_and(|kb| kb > 0));
    }
}
