//! What the indexed files look like on disk at import: whether the project's sources are there
//! at all ([`crate::db::SOURCE_TREE_KEY`]) and each file's size and modification time
//! (`source_baseline`, migration V20), the baseline against which answers tell the files edited
//! since ([`crate::query::staleness`]).
//!
//! Invariant: files are looked at beneath the project directory only, never through a symbolic
//! link and never read ([`regular_file::Beneath`]).

use std::path::Path;

use anyhow::Result;
use rusqlite::{params, Connection};

use crate::regular_file::{self, DiskState};

/// Files looked for on disk to tell whether the project's sources are there.
const SOURCE_TREE_PROBES: i64 = 64;

/// `present` when any of the first [`SOURCE_TREE_PROBES`] indexed files is on disk under
/// `root`, else `absent` ([`crate::db::SOURCE_TREE_KEY`]).
pub(super) fn source_tree(conn: &Connection, root: &Path) -> Result<&'static str> {
    let mut stmt = conn.prepare("SELECT path FROM files ORDER BY id LIMIT ?1")?;
    let paths = stmt.query_map([SOURCE_TREE_PROBES], |r| r.get::<_, String>(0))?;
    let project = regular_file::Beneath::new(root);
    for path in paths {
        if matches!(project.disk_state(&path?), Ok(Some(_))) {
            return Ok("present");
        }
    }
    Ok("absent")
}

/// Brings `source_baseline` to what every indexed file under `root` looks like on disk now,
/// writing only the rows that differ (a delta dirties the pages of the files edited since the
/// last import, not the whole table); `sources` is [`source_tree`]'s answer, and without
/// sources the table is emptied. Returns the number of files with a row.
pub(super) fn record(conn: &Connection, root: &Path, sources: &str) -> Result<u64> {
    if sources != "present" {
        conn.execute("DELETE FROM source_baseline", [])?;
        return Ok(0);
    }
    // Rows of files no longer indexed go first (the delta's removed and renamed files).
    conn.execute(
        "DELETE FROM source_baseline
         WHERE NOT EXISTS (SELECT 1 FROM files WHERE files.path = source_baseline.path)",
        [],
    )?;
    let mut paths = conn.prepare("SELECT DISTINCT path FROM files ORDER BY path")?;
    let mut upsert = conn.prepare(
        "INSERT INTO source_baseline(path, size, mtime_ns) VALUES (?1, ?2, ?3)
         ON CONFLICT(path) DO UPDATE SET size = excluded.size, mtime_ns = excluded.mtime_ns
         WHERE size IS NOT excluded.size OR mtime_ns IS NOT excluded.mtime_ns",
    )?;
    let mut unseen = conn.prepare("DELETE FROM source_baseline WHERE path = ?1")?;
    let mut recorded = 0;
    let project = regular_file::Beneath::new(root);
    let mut rows = paths.query([])?;
    while let Some(row) = rows.next()? {
        let path: String = row.get(0)?;
        // A file that cannot be looked at (outside the project, behind a link, in a directory
        // without search permission) gets no row, not even an earlier import's: answers then
        // fall back to the moment of the import.
        let Ok(state) = project.disk_state(&path) else {
            unseen.execute([&path])?;
            continue;
        };
        let (size, mtime_ns) = match state {
            Some(DiskState { size, mtime_ns }) => (Some(size as i64), Some(mtime_ns)),
            None => (None, None),
        };
        upsert.execute(params![path, size, mtime_ns])?;
        recorded += 1;
    }
    Ok(recorded)
}
