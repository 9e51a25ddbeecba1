//! Each source file's last look at the disk, kept for the server's watch interval
//! ([`keep_checks_for`]) and, where the kernel reports edits, only while newer than the file's
//! last event.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::baseline::Seen;
use crate::regular_file::Beneath;

/// How long the result of one file's `lstat` is reused, in milliseconds: the server's watch
/// interval ([`keep_checks_for`]), one second elsewhere.
static STAT_TTL_MS: AtomicU64 = AtomicU64::new(1000);

/// Keeps each file's `lstat` result for `interval` (the server's watch interval: 0 looks at
/// the file for every answer).
pub fn keep_checks_for(interval: Duration) {
    let ms = u64::try_from(interval.as_millis()).unwrap_or(u64::MAX);
    STAT_TTL_MS.store(ms, Ordering::Relaxed);
}

fn stat_ttl() -> Duration {
    Duration::from_millis(STAT_TTL_MS.load(Ordering::Relaxed))
}

/// Files whose `lstat` results are kept at most.
const STAT_CACHE: usize = 4096;

/// Each file's last look, when, by path.
static STATS: Mutex<Option<HashMap<PathBuf, (Instant, Seen)>>> = Mutex::new(None);

/// The state on disk of `relative` beneath `root` (`Some(None)`: gone), from the cache while
/// fresh (and looked at after `not_before`), else through `project` (opened here when it is
/// `None`); `None` when it cannot be looked at (permissions, a symbolic link on the way), which
/// counts as unchanged.
pub(super) fn observed(
    project: &mut Option<Beneath>,
    root: &Path,
    relative: &str,
    not_before: Option<Instant>,
) -> Option<Seen> {
    let path = root.join(relative);
    let path = path.as_path();
    let now = Instant::now();
    let ttl = stat_ttl();
    {
        let cache = STATS.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((at, seen)) = cache.as_ref().and_then(|c| c.get(path)) {
            if now.duration_since(*at) < ttl && not_before.is_none_or(|event| *at > event) {
                return Some(*seen);
            }
        }
    }
    let project = project.get_or_insert_with(|| Beneath::new(root));
    let seen = project.disk_state(relative).ok()?;
    let mut cache = STATS.lock().unwrap_or_else(|e| e.into_inner());
    let cache = cache.get_or_insert_with(HashMap::new);
    if cache.len() >= STAT_CACHE {
        cache.retain(|_, (at, _)| now.duration_since(*at) < ttl);
        if cache.len() >= STAT_CACHE {
            cache.clear();
        }
    }
    cache.insert(path.to_path_buf(), (now, seen));
    Some(seen)
}

/// Forgets every file's kept `lstat`, so the next answers look at the disk: when the answers
/// kept elsewhere start anew (a new import, a sweep that found other changes), none of those
/// computed next may rest on a look from before.
pub fn forget_checks() {
    if let Some(kept) = STATS.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
        kept.clear();
    }
}
