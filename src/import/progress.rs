//! How an import shows its progress: the phases, a bar with an ETA on a terminal, periodic
//! lines otherwise, and the wording the server's "index not ready" error shares.

use std::io::IsTerminal;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::cache::scanner::Progress;

/// How far reading a cache of `total` bytes has come, in percent.
pub fn percent_read(read: u64, total: u64) -> f64 {
    if total == 0 {
        return 0.0;
    }
    (read as f64 * 100.0 / total as f64).min(100.0)
}

/// Progress in the words of the progress lines and the "index not ready" error, the size in
/// the summary's units: `42% of 930.0 MB read, 3.1 s elapsed`.
pub fn progress_text(read: u64, total: u64, elapsed: Duration) -> String {
    format!(
        "{:.0}% of {} read, {:.1} s elapsed",
        percent_read(read, total),
        size_text(total),
        elapsed.as_secs_f64()
    )
}

/// The phases of an import, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    Reading,
    Linking,
    Indexing,
}

impl Phase {
    /// The phase's name in the progress bar and lines.
    pub(super) fn name(self) -> &'static str {
        match self {
            Phase::Reading => "reading the cache",
            Phase::Linking => "linking the call graph",
            Phase::Indexing => "building indexes and full-text search",
        }
    }

    /// Where the phase starts on the progress bar, in units of the cache's size: reading covers
    /// 0..1, and the later phases the share of the time they took after reading at 100K, 1M
    /// and 10M symbols (docs/benchmarks.md), so that the bar's ETA covers the whole import.
    pub(super) fn start(self) -> f64 {
        match self {
            Phase::Reading => 0.0,
            Phase::Linking => 1.0,
            Phase::Indexing => 1.0 + LINKING_SHARE,
        }
    }
}

/// Time of the linking and the indexing phases relative to the reading phase (at 100K, 1M and
/// 10M symbols: linking 0.19–0.30, indexing to the end 0.85–1.3).
pub(super) const LINKING_SHARE: f64 = 0.25;
pub(super) const INDEXING_SHARE: f64 = 1.0;

/// How an import shows its progress on stderr: a bar with the phase and an ETA on a terminal,
/// otherwise a line when it starts and one per interval (phase, percent of the cache read,
/// MB/s), in the units of the summary line (kB, MB, GB = 10^3, 10^6, 10^9 bytes). Stops when
/// dropped.
pub(super) enum Reporter {
    Quiet,
    Bar {
        bar: indicatif::ProgressBar,
        progress: Arc<Progress>,
        /// Size of the cache: the length of the reading phase on the bar.
        total: u64,
    },
    Lines {
        phase: Arc<Mutex<&'static str>>,
        /// Dropping it stops the printing thread.
        stop: Option<mpsc::Sender<()>>,
        thread: Option<JoinHandle<()>>,
    },
}

impl Reporter {
    /// Starts reporting on an import of `cache` (`total` bytes): nothing with `quiet`, a bar on a
    /// terminal, otherwise a line every `interval` seconds.
    pub(super) fn start(
        quiet: bool,
        interval: f64,
        cache: &Path,
        total: u64,
        progress: &Arc<Progress>,
        started: Instant,
    ) -> Result<Reporter> {
        if quiet {
            return Ok(Reporter::Quiet);
        }
        if std::io::stderr().is_terminal() {
            let end = Phase::Indexing.start() + INDEXING_SHARE;
            let bar = indicatif::ProgressBar::with_draw_target(
                Some((total as f64 * end) as u64),
                indicatif::ProgressDrawTarget::stderr(),
            );
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "{msg:38} {bar:30} {percent:>3}% {elapsed_precise} ETA {eta}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            bar.set_message(Phase::Reading.name());
            bar.enable_steady_tick(Duration::from_millis(250));
            return Ok(Reporter::Bar {
                bar,
                progress: Arc::clone(progress),
                total,
            });
        }
        let interval = Duration::try_from_secs_f64(interval)
            .ok()
            .filter(|i| !i.is_zero())
            .with_context(|| {
                format!(
                    "--progress-interval must be a positive number of seconds, got {}",
                    interval
                )
            })?;
        eprintln!("import: reading {} ({})", cache.display(), size_text(total));
        let phase = Arc::new(Mutex::new(Phase::Reading.name()));
        let (stop, stopped) = mpsc::channel::<()>();
        let (shown, progress) = (Arc::clone(&phase), Arc::clone(progress));
        let thread = std::thread::Builder::new()
            .name("acpdb-progress".into())
            .spawn(move || {
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(interval) {
                    let phase = *shown.lock().unwrap_or_else(|e| e.into_inner());
                    let read = progress.bytes.load(Ordering::Relaxed);
                    let elapsed = started.elapsed();
                    let rate = read as f64 / 1e6 / elapsed.as_secs_f64().max(1e-6);
                    eprintln!(
                        "import: {phase}, {} ({rate:.1} MB/s)",
                        progress_text(read, total, elapsed)
                    );
                }
            })?;
        Ok(Reporter::Lines {
            phase,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// Shows the bytes of the cache read so far.
    pub(super) fn tick(&self) {
        if let Reporter::Bar { bar, progress, .. } = self {
            bar.set_position(progress.bytes.load(Ordering::Relaxed));
        }
    }

    /// Names the phase the import has reached.
    pub(super) fn phase(&self, phase: Phase) {
        match self {
            Reporter::Quiet => {}
            Reporter::Bar { bar, total, .. } => {
                bar.set_message(phase.name());
                bar.set_position((*total as f64 * phase.start()) as u64);
            }
            Reporter::Lines { phase: shown, .. } => {
                *shown.lock().unwrap_or_else(|e| e.into_inner()) = phase.name();
            }
        }
    }
}

impl Drop for Reporter {
    fn drop(&mut self) {
        match self {
            Reporter::Quiet => {}
            Reporter::Bar { bar, .. } => bar.finish_and_clear(),
            Reporter::Lines { stop, thread, .. } => {
                drop(stop.take());
                if let Some(thread) = thread.take() {
                    let _ = thread.join();
                }
            }
        }
    }
}

/// A size in the summary's units, decimal as the rate's MB/s (kB = 10^3 bytes, MB = 10^6,
/// GB = 10^9), with one decimal: `40.2 kB`, `887.1 MB`, `9.0 GB`.
pub(super) fn size_text(bytes: u64) -> String {
    const UNITS: [(f64, &str); 3] = [(1e9, "GB"), (1e6, "MB"), (1e3, "kB")];
    let value = bytes as f64;
    UNITS
        .iter()
        .find(|(scale, _)| value >= *scale)
        .map_or(format!("{bytes} bytes"), |(scale, unit)| {
            format!("{:.1} {unit}", value / scale)
        })
}

/// Bytes this process has written to storage so far, counted when pages are dirtied (Linux:
/// `write_bytes` less `cancelled_write_bytes` of `/proc/self/io`, so that temporary files
/// deleted before they reach the disk do not count); `None` elsewhere. Right for files written
/// whole, as a full import writes its new database; not for pages written into a file already
/// in the page cache, where the kernel counts each whole folio a page lands in (see
/// [`thread_bytes_written`]).
pub(super) fn bytes_written() -> Option<u64> {
    let io = std::fs::read_to_string("/proc/self/io").ok()?;
    Some(io_field(&io, "write_bytes:")?.saturating_sub(io_field(&io, "cancelled_write_bytes:")?))
}

/// Bytes the calling thread has passed to write calls so far (Linux: `wchar` of
/// `/proc/thread-self/io`); `None` elsewhere. What an import writes into an existing database
/// (a delta, a full import copied into a served database) is written by SQLite on the import's
/// own thread, a page at a time: this counts those writes (and the thread's few others, such as
/// a progress line), each page as often as SQLite writes it, where [`bytes_written`] would count
/// every large page-cache folio one of them lands in (2.3x the bytes the device received for a
/// delta of the prometheus cache, after a `cp` of its database).
pub(super) fn thread_bytes_written() -> Option<u64> {
    let io = std::fs::read_to_string("/proc/thread-self/io").ok()?;
    io_field(&io, "wchar:")
}

/// The number after `name` in the text of a `/proc/*/io` file.
fn io_field(io: &str, name: &str) -> Option<u64> {
    io.lines()
        .find_map(|line| line.strip_prefix(name)?.trim().parse().ok())
}

/// The bytes a counter (`bytes_written` or `thread_bytes_written`) has grown since `before`,
/// when both readings are known.
pub(super) fn written_since(before: Option<u64>, now: Option<u64>) -> Option<u64> {
    Some(now?.saturating_sub(before?))
}

#[cfg(test)]
mod tests {
    use super::size_text;

    #[test]
    fn sizes_are_shown_in_the_largest_unit_they_reach() {
        assert_eq!(size_text(0), "0 bytes");
        assert_eq!(size_text(999), "999 bytes");
        assert_eq!(size_text(40_249), "40.2 kB");
        assert_eq!(size_text(887_149_000), "887.1 MB");
        assert_eq!(size_text(9_012_000_000), "9.0 GB");
    }
}
