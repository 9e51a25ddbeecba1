//! The sweep: every baseline row compared with the disk, a budget of files per step, and what
//! the last complete pass found. Where the server's watcher sweeps, the kernel's events on the
//! source directories ([`SourceEvents`]) tell which files may have changed since a pass began:
//! the others are answered from the pass without a look at the disk, and no new pass starts
//! while nothing happened (but at least every [`FULL_SWEEP_INTERVAL`], for the edits no event
//! reports: through a hard link elsewhere, or to a mapped file).

use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use rusqlite::{params, Connection};
use serde::Serialize;

use super::baseline::{
    baseline, change_since, meta, path_hash, recorded, rfc3339, Baseline, Change, Seen,
};
use super::events::SourceEvents;
use crate::query::QueryResult;
use crate::regular_file::Beneath;

/// Shortest time between the starts of two sweeps of every indexed file.
pub const SWEEP_INTERVAL: Duration = Duration::from_secs(2);

/// Longest time between two passes while the kernel's events report nothing.
pub const FULL_SWEEP_INTERVAL: Duration = Duration::from_secs(600);

/// Changed files a pass keeps the states of, at most: past it, answers look at the disk.
const CHANGED_KEPT: usize = 65_536;

/// One sweep of the baseline: where it stands and what it found.
#[derive(Debug, Default)]
struct Sweep {
    /// The pass under way.
    pass: Option<PassUnderWay>,
    /// The last complete pass.
    last: Option<Pass>,
    /// The kernel's events on the project's source directories, while the server's watcher
    /// sweeps.
    events: Option<Arc<SourceEvents>>,
    /// When no events could be had (no `inotify`, no directory watched): tried again
    /// [`FULL_SWEEP_INTERVAL`] later.
    no_events_at: Option<Instant>,
    /// Whether a caller is setting up the watches (one at a time).
    rewatching: bool,
}

/// A pass under way.
#[derive(Debug)]
struct PassUnderWay {
    /// Tells this pass from one begun after it: a step counts only for the pass it read for.
    id: u64,
    /// It resumes after this path.
    after: String,
    /// What it found so far.
    found: Found,
    /// The changed files it found, with their states (`None` past [`CHANGED_KEPT`]).
    changed: Option<HashMap<String, Seen>>,
    /// The [`path_hash`] of every file it compared.
    paths: HashSet<u64>,
    /// When it began (before any of its looks).
    started: Instant,
}

/// A complete pass.
#[derive(Debug)]
struct Pass {
    found: Found,
    /// Every file found changed, with its state; `None` past [`CHANGED_KEPT`].
    changed: Option<HashMap<String, Seen>>,
    /// The [`path_hash`] of every file it compared (those with a baseline row).
    paths: HashSet<u64>,
    started: Instant,
    ended: Instant,
    ended_at: SystemTime,
}

/// What (part of) a pass found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Found {
    checked: u64,
    changed: u64,
    deleted: u64,
    /// A hash of the changed files and their states: two passes that found the same
    /// changes have the same.
    fingerprint: u64,
}

/// A database: the project directory and the moment of its import.
type SweepKey = (PathBuf, String);

/// Sweeps by database.
static SWEEPS: Mutex<Option<HashMap<SweepKey, Sweep>>> = Mutex::new(None);

/// Numbers the passes.
static PASSES: AtomicU64 = AtomicU64::new(0);

/// Passes that ended finding other changes than the pass before them (a first pass, any).
static PASSES_CHANGED: AtomicU64 = AtomicU64::new(0);

/// How many times this process learnt that source files may have changed: passes that found
/// other changes, and events read on indexed files (at once). Answers kept elsewhere (the HTTP
/// answer cache) belong to one value of it.
pub fn changes_seen() -> u64 {
    PASSES_CHANGED.load(Ordering::SeqCst) + super::events::EDITS_READ.load(Ordering::SeqCst)
}

fn key_of(baseline: &Baseline) -> SweepKey {
    (baseline.root.clone(), baseline.imported_at.clone())
}

/// `f` on the sweep of `key` (begun if there is none), under the lock.
fn with_sweep<T>(key: &SweepKey, f: impl FnOnce(&mut Sweep) -> T) -> T {
    let mut sweeps = SWEEPS.lock().unwrap_or_else(|e| e.into_inner());
    f(sweeps
        .get_or_insert_with(HashMap::new)
        .entry(key.clone())
        .or_default())
}

/// `f` on the sweep of `baseline`, if there is one, under the lock.
fn read_sweep<T>(baseline: &Baseline, f: impl FnOnce(Option<&Sweep>) -> T) -> T {
    let sweeps = SWEEPS.lock().unwrap_or_else(|e| e.into_inner());
    f(sweeps.as_ref().and_then(|sweeps| {
        sweeps
            .iter()
            .find(|((root, at), _)| *root == baseline.root && *at == baseline.imported_at)
            .map(|(_, sweep)| sweep)
    }))
}

/// Compares at most `budget` more indexed files with their baseline, starting a new pass when
/// none is under way and the last ended [`SWEEP_INTERVAL`] ago or more (and, with events, when
/// any happened since it began). A pass that ends finding other changes than the pass before
/// it (the first pass: any change) moves [`changes_seen`] and forgets the files' kept looks:
/// answers computed earlier may lack a staleness note.
pub fn sweep(conn: &Connection, budget: usize) -> QueryResult<()> {
    match baseline(conn)? {
        Some(baseline) => sweep_step(conn, &baseline, budget),
        None => Ok(()),
    }
}

/// Whether the import's first pass has not ended yet while the kernel reports edits: the
/// server's watcher steps it to its end at once, since answers rest on it.
pub fn first_pass_pending(conn: &Connection) -> QueryResult<bool> {
    let Some(baseline) = baseline(conn)? else {
        return Ok(false);
    };
    Ok(read_sweep(&baseline, |sweep| {
        sweep.is_some_and(|sweep| sweep.events.is_some() && sweep.last.is_none())
    }))
}

/// Sets up the watches of `baseline`'s source directories if the server's watcher sweeps and
/// none are (or those there should be set up anew), between two passes, one caller at a time.
/// (Whatever made new watches due, a lost event or a reshaped directory, already moved
/// [`changes_seen`].)
fn keep_watching(conn: &Connection, baseline: &Baseline, key: &SweepKey) {
    if !swept_in_background() {
        return;
    }
    // The root's `stat` out of the lock that answers take.
    if let Some(events) = with_sweep(key, |sweep| sweep.events.clone()) {
        events.check_root();
    }
    let rewatch = with_sweep(key, |sweep| {
        let due = match &sweep.events {
            Some(events) => events.should_rewatch(),
            None => sweep
                .no_events_at
                .is_none_or(|at| at.elapsed() >= FULL_SWEEP_INTERVAL),
        };
        let rewatch = due && sweep.pass.is_none() && !sweep.rewatching;
        if !rewatch {
            return None;
        }
        sweep.rewatching = true;
        // The old watches go (once no answer holds them) before the new are set up: both
        // would count against the kernel's limit.
        Some(sweep.events.take())
    });
    let Some(old) = rewatch else {
        return;
    };
    drop(old);
    let events = watch_sources(conn, baseline).map(Arc::new);
    with_sweep(key, |sweep| {
        sweep.rewatching = false;
        sweep.no_events_at = events.is_none().then(Instant::now);
        sweep.events = events;
    });
}

/// Watches the directories of `baseline`'s files ([`SourceEvents::watch`]).
fn watch_sources(conn: &Connection, baseline: &Baseline) -> Option<SourceEvents> {
    let mut dirs: HashSet<String> = HashSet::new();
    let mut indexed: HashSet<u64> = HashSet::new();
    let mut read = || -> rusqlite::Result<()> {
        let mut read = conn.prepare_cached("SELECT path FROM source_baseline")?;
        let mut rows = read.query([])?;
        while let Some(row) = rows.next()? {
            let path: String = row.get(0)?;
            indexed.insert(path_hash(&path));
            dirs.insert(path.rsplit_once('/').map_or("", |(dir, _)| dir).to_string());
        }
        Ok(())
    };
    if let Err(err) = read() {
        tracing::debug!("the source directories could not be read: {err}");
        return None;
    }
    let events = SourceEvents::watch(&baseline.root, dirs, indexed)?;
    tracing::debug!(
        "{} source directories watched for edits{}",
        events.covered(),
        if events.complete() { "" } else { " (not all)" }
    );
    Some(events)
}

/// [`sweep`] of the files of `baseline`.
pub(super) fn sweep_step(conn: &Connection, baseline: &Baseline, budget: usize) -> QueryResult<()> {
    if budget == 0 {
        return Ok(());
    }
    let key = key_of(baseline);
    let ended: Vec<Sweep> = {
        // A new import ends the sweeps of the project's earlier ones (and their watches,
        // dropped below, out of the lock).
        let mut sweeps = SWEEPS.lock().unwrap_or_else(|e| e.into_inner());
        let sweeps = sweeps.get_or_insert_with(HashMap::new);
        let earlier: Vec<SweepKey> = sweeps
            .keys()
            .filter(|(root, at)| *root == key.0 && *at != key.1)
            .cloned()
            .collect();
        earlier.iter().filter_map(|k| sweeps.remove(k)).collect()
    };
    drop(ended);
    keep_watching(conn, baseline, &key);
    let step = with_sweep(&key, |sweep| match (&sweep.pass, &sweep.last) {
        (Some(pass), _) => Some((pass.id, pass.after.clone())),
        // The pass that follows new watches must begin after them, or nothing rests on it.
        (None, _) if sweep.rewatching => None,
        (None, Some(last)) if last.ended.elapsed() < SWEEP_INTERVAL => None,
        (None, Some(last))
            if last.ended.elapsed() < FULL_SWEEP_INTERVAL
                && sweep.events.as_ref().is_some_and(|events| {
                    events.complete() && events.quiet_since(last.started)
                }) =>
        {
            None
        }
        (None, _) => {
            let id = PASSES.fetch_add(1, Ordering::Relaxed);
            sweep.pass = Some(PassUnderWay {
                id,
                after: String::new(),
                found: Found::default(),
                changed: Some(HashMap::new()),
                paths: HashSet::new(),
                started: Instant::now(),
            });
            Some((id, String::new()))
        }
    });
    let Some((id, after)) = step else {
        return Ok(());
    };
    let mut read = conn.prepare_cached(
        "SELECT path, size, mtime_ns FROM source_baseline WHERE path > ?1 ORDER BY path LIMIT ?2",
    )?;
    let rows: Vec<(String, Seen)> = read
        .query_map(params![after, budget as i64], |r| {
            Ok((r.get(0)?, recorded(r, 1)?))
        })?
        .collect::<rusqlite::Result<_>>()?;
    let mut found = Found::default();
    let mut changed: Vec<(String, Seen)> = Vec::new();
    let hashes: Vec<u64> = rows.iter().map(|(path, _)| path_hash(path)).collect();
    let project = Beneath::new(&baseline.root);
    for (path, then) in &rows {
        found.checked += 1;
        let Ok(now) = project.disk_state(path) else {
            continue;
        };
        let Some(change) = change_since(*then, now) else {
            continue;
        };
        match change {
            Change::Deleted => found.deleted += 1,
            Change::Modified(_) => found.changed += 1,
        }
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        (
            path,
            change == Change::Deleted,
            now.map(|s| (s.size, s.mtime_ns)),
        )
            .hash(&mut hasher);
        found.fingerprint ^= hasher.finish();
        changed.push((path.clone(), now));
    }
    // A full step: the pass resumes after its last file.
    let resume = (rows.len() == budget)
        .then(|| rows.last().map(|(path, _)| path.clone()))
        .flatten();
    with_sweep(&key, |sweep| {
        record_step(sweep, (id, &after), resume, found, changed, hashes)
    });
    Ok(())
}

/// Adds a step's findings to the pass it read for (`id`, resuming after `after`), unless
/// another caller stepped it meanwhile or another pass began (its step counts); the pass then
/// resumes after `resume`, or ends.
fn record_step(
    sweep: &mut Sweep,
    (id, after): (u64, &str),
    resume: Option<String>,
    found: Found,
    changed: Vec<(String, Seen)>,
    hashes: Vec<u64>,
) {
    let Some(pass) = sweep
        .pass
        .as_mut()
        .filter(|pass| pass.id == id && pass.after == after)
    else {
        return;
    };
    pass.found.checked += found.checked;
    pass.found.changed += found.changed;
    pass.found.deleted += found.deleted;
    pass.found.fingerprint ^= found.fingerprint;
    pass.paths.extend(hashes);
    if let Some(kept) = &mut pass.changed {
        if kept.len() + changed.len() > CHANGED_KEPT {
            pass.changed = None;
        } else {
            kept.extend(changed);
        }
    }
    if let Some(resume) = resume {
        pass.after = resume;
        return;
    }
    let Some(pass) = sweep.pass.take() else {
        return;
    };
    if let Some(events) = &sweep.events {
        events.forget_before(pass.started);
    }
    let before = sweep.last.as_ref().map(|last| last.found.fingerprint);
    if before != Some(pass.found.fingerprint) {
        super::looks::forget_checks();
        PASSES_CHANGED.fetch_add(1, Ordering::SeqCst);
    }
    sweep.last = Some(Pass {
        found: pass.found,
        changed: pass.changed,
        paths: pass.paths,
        started: pass.started,
        ended: Instant::now(),
        ended_at: SystemTime::now(),
    });
}

/// What is known of a file without a look at the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Known {
    /// A file with a baseline row as the last pass found it: changed to this state, or
    /// unchanged (`None`).
    Swept(Option<Seen>),
    /// A look is needed; one from before this moment (the file's last event) is out of date.
    Look { not_before: Option<Instant> },
}

/// What the last pass and the events since say of each of `paths` (relative to the project).
pub(super) fn known(baseline: &Baseline, paths: &[&str]) -> Vec<Known> {
    read_sweep(baseline, |sweep| {
        let watched = sweep.and_then(|sweep| sweep.events.as_ref().zip(sweep.last.as_ref()));
        let Some((events, last)) = watched else {
            return vec![Known::Look { not_before: None }; paths.len()];
        };
        let edited = events.edited_since(paths, last.started);
        paths
            .iter()
            .zip(edited)
            .map(|(path, edited)| match (edited, &last.changed) {
                (None, Some(changed)) if last.paths.contains(&path_hash(path)) => {
                    Known::Swept(changed.get(*path).copied())
                }
                (edited, _) => Known::Look {
                    not_before: edited.and_then(|e| e.last_event),
                },
            })
            .collect()
    })
}

/// Whether a pass over the files of `baseline` has ended.
pub(super) fn swept_once(baseline: &Baseline) -> bool {
    read_sweep(baseline, |sweep| {
        sweep.is_some_and(|sweep| sweep.last.is_some())
    })
}

/// What the sweep of the files of `baseline` has found so far, after a step of at most
/// `budget` files; `None` when the import recorded no baseline.
pub(super) fn source_changes(
    conn: &Connection,
    baseline: &Baseline,
    budget: usize,
) -> QueryResult<Option<SourceChanges>> {
    let Some(indexed) =
        meta(conn, crate::db::SOURCE_BASELINE_FILES_KEY)?.and_then(|n| n.parse::<u64>().ok())
    else {
        return Ok(None);
    };
    sweep_step(conn, baseline, budget)?;
    let (found, swept_at, watched) = read_sweep(baseline, |sweep| {
        let (found, swept_at) = match sweep {
            Some(Sweep {
                last: Some(last), ..
            }) => (last.found, Some(rfc3339(last.ended_at))),
            Some(sweep) => (
                sweep.pass.as_ref().map(|p| p.found).unwrap_or_default(),
                None,
            ),
            None => (Found::default(), None),
        };
        let watched =
            sweep.is_some_and(|sweep| sweep.events.as_ref().is_some_and(|e| e.complete()));
        (found, swept_at, watched)
    });
    Ok(Some(SourceChanges {
        changed: found.changed,
        deleted: found.deleted,
        checked: found.checked,
        indexed,
        swept_at,
        watched,
    }))
}

/// What the sweep of the indexed files found ([`sweep`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct SourceChanges {
    /// Files whose size or modification time differ from the baseline, or that are new on
    /// disk.
    pub changed: u64,
    /// Files gone from disk since the import.
    pub deleted: u64,
    /// Files compared: all of `indexed` once a sweep is complete.
    pub checked: u64,
    /// Files with a baseline.
    pub indexed: u64,
    /// When the last complete sweep ended (RFC 3339); absent while the first is under way.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub swept_at: Option<String>,
    /// Whether the kernel reports edits of every indexed file as they happen (Linux
    /// `inotify` on every directory of the indexed files, while the server watches): answers
    /// then see an edit at once without looking at the disk, and a sweep starts again only
    /// after one. Otherwise each file's look is kept for the watch interval (for the files of
    /// directories not watched, when some are).
    pub watched: bool,
}

impl SourceChanges {
    /// In words: how many indexed files changed, as of when.
    pub(super) fn describe(&self) -> String {
        let deleted = match self.deleted {
            0 => String::new(),
            n => format!(", {n} deleted"),
        };
        let changed = self.changed + self.deleted;
        match &self.swept_at {
            Some(_) if changed == 0 => format!(
                "No indexed file changed on disk since the import ({} checked).",
                self.indexed
            ),
            Some(_) => format!(
                "{changed} of {} indexed files changed on disk since the import{deleted}; line numbers in answers naming them may be off: re-run `acp index`.",
                self.indexed
            ),
            None => format!(
                "{changed} changed on disk since the import{deleted}, among the {} of {} indexed files checked so far.",
                self.checked, self.indexed
            ),
        }
    }
}

/// Whether a watcher sweeps in the background ([`sweep_in_background`]).
static SWEPT_IN_BACKGROUND: AtomicBool = AtomicBool::new(false);

/// Whether a watcher sweeps in the background.
pub(super) fn swept_in_background() -> bool {
    SWEPT_IN_BACKGROUND.load(Ordering::Relaxed)
}

/// Says that a watcher steps the sweep in the background (the server's, when it watches):
/// overview answers then take no step themselves and say what its steps found, unless the
/// project is small enough for one answer's step to sweep it whole before the watcher has.
pub fn sweep_in_background() {
    SWEPT_IN_BACKGROUND.store(true, Ordering::Relaxed);
}
