//! Page caches emptied off the calls' path while this server writes a delta into the database
//! it serves.
//!
//! SQLite empties a connection's whole page cache at the first read after any other connection
//! changed the database; a delta changes it twice (its commit, then the cut of its WAL). A read
//! connection keeps up to 16 MB of pages, and freeing them takes 0.6–0.8 ms at 1M symbols
//! (`pcache1Truncate`), paid by whichever call comes first on that connection: ten times a
//! point lookup. While a re-import of this server runs, a [`CacheWarmer`] watches the
//! database's data version and, as soon as it moves, takes each pool's most recently used
//! connection (the one the next call gets) and reads one row on it, so that the emptying is
//! done before a call needs it.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use rusqlite::Connection;

use crate::db::ReadPool;

/// How often the warmer reads the database's data version: a change is handled within this.
const WATCH_EVERY: Duration = Duration::from_millis(2);

/// Pages kept by the warmer's own connection, which reads the data version only.
const WATCH_CACHE_PAGES: i64 = 16;

/// Watches the database for changes while it lives (see the module's documentation); stops
/// and joins its thread when dropped, after a last look.
pub(super) struct CacheWarmer {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl CacheWarmer {
    /// Starts watching the database at `path` for the connections of `pools`; `None` (logged)
    /// when it cannot be opened or the thread cannot start, which only leaves the emptying
    /// to the calls.
    pub(super) fn start(path: &Path, pools: [ReadPool; 2]) -> Option<CacheWarmer> {
        let watch = match open_watch(path) {
            Ok(watch) => watch,
            Err(err) => {
                tracing::debug!("page caches left to the calls: {err:#}");
                return None;
            }
        };
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::Builder::new()
            .name("acpdb-warm".into())
            .spawn(move || watch_changes(&watch, &pools, &stopping));
        match thread {
            Ok(thread) => Some(CacheWarmer {
                stop,
                thread: Some(thread),
            }),
            Err(err) => {
                tracing::debug!("page caches left to the calls: {err}");
                None
            }
        }
    }
}

impl Drop for CacheWarmer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A read-only connection with a page cache of a few pages.
fn open_watch(path: &Path) -> anyhow::Result<Connection> {
    let watch = crate::db::open_read_only(path)?;
    watch.pragma_update(None, "cache_size", WATCH_CACHE_PAGES)?;
    Ok(watch)
}

/// The data version `watch` sees (it moves when another connection changed the database).
fn data_version(watch: &Connection) -> rusqlite::Result<i64> {
    watch.query_row("PRAGMA data_version", [], |r| r.get(0))
}

/// Until `stop`, and once more after it: each time the data version moves, empties the page
/// cache of each pool's next connection.
fn watch_changes(watch: &Connection, pools: &[ReadPool], stop: &AtomicBool) {
    let Ok(mut seen) = data_version(watch) else {
        return;
    };
    loop {
        let last_look = stop.load(Ordering::SeqCst);
        if !last_look {
            std::thread::sleep(WATCH_EVERY);
        }
        match data_version(watch) {
            Ok(now) if now != seen => {
                seen = now;
                empty_next_caches(pools);
            }
            Ok(_) => {}
            Err(err) => {
                tracing::debug!("page caches left to the calls: {err}");
                return;
            }
        }
        if last_look {
            return;
        }
    }
}

/// Reads one row on the connection each pool hands out next, when it is free: its first read
/// since the change empties its page cache. A connection busy with a call is left to empty its
/// cache at its next call.
fn empty_next_caches(pools: &[ReadPool]) {
    for connections in pools {
        if let Some(conn) = connections.try_get() {
            if let Err(err) = crate::db::import_identity(&conn) {
                tracing::debug!("reading after a change: {err}");
            }
        }
    }
}
