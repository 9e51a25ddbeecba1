//! What an answer compares the disk with: the project directory and the moment of the import,
//! each indexed file's size and modification time the import saw (`source_baseline`), and how a
//! file changed since.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, OptionalExtension};

use crate::query::QueryResult;
use crate::regular_file::DiskState;

/// What the answers compare with: the project directory and the moment of the import.
#[derive(Debug, Clone)]
pub(super) struct Baseline {
    pub(super) root: PathBuf,
    pub(super) imported_at: String,
    pub(super) imported: SystemTime,
}

pub(super) fn meta(conn: &Connection, key: &str) -> QueryResult<Option<String>> {
    Ok(conn
        .prepare_cached("SELECT value FROM meta WHERE key = ?1")?
        .query_row([key], |r| r.get(0))
        .optional()?)
}

/// The baselines of the databases read, by database file and moment of import: every answer
/// that names a file needs one, and an import writes its facts once.
static BASELINES: Mutex<Option<HashMap<ImportKey, Option<Baseline>>>> = Mutex::new(None);

/// A database file and the moment of its import.
type ImportKey = (String, String);

/// Databases whose baselines are kept at most.
const BASELINES_KEPT: usize = 16;

pub(super) fn baseline(conn: &Connection) -> QueryResult<Option<Baseline>> {
    let Some(imported_at) = meta(conn, "imported_at")? else {
        return Ok(None);
    };
    let key = (conn.path().unwrap_or_default().to_string(), imported_at);
    if let Some(known) = BASELINES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .and_then(|kept| kept.get(&key))
    {
        return Ok(known.clone());
    }
    let baseline = read_baseline(conn, &key.1)?;
    let mut kept = BASELINES.lock().unwrap_or_else(|e| e.into_inner());
    let kept = kept.get_or_insert_with(HashMap::new);
    if kept.len() >= BASELINES_KEPT {
        kept.clear();
    }
    kept.insert(key, baseline.clone());
    Ok(baseline)
}

/// [`baseline`] as the database of the import at `imported_at` records it.
fn read_baseline(conn: &Connection, imported_at: &str) -> QueryResult<Option<Baseline>> {
    let Some(root) = meta(conn, crate::db::PROJECT_DIR_KEY)? else {
        return Ok(None);
    };
    if meta(conn, crate::db::SOURCE_TREE_KEY)?.as_deref() == Some("absent") {
        return Ok(None);
    }
    let Ok(imported) = chrono::DateTime::parse_from_rfc3339(imported_at) else {
        return Ok(None);
    };
    Ok(Some(Baseline {
        root: PathBuf::from(root),
        imported_at: imported_at.to_string(),
        imported: imported.with_timezone(&chrono::Utc).into(),
    }))
}

/// What one `lstat` found: the file's state, or `None` when it is gone.
pub(super) type Seen = Option<DiskState>;

/// How a file changed: `modified` (with its time) or `deleted`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Change {
    Modified(i64),
    Deleted,
}

/// The change from `then` (the baseline) to `now`, if any.
pub(super) fn change_since(then: Seen, now: Seen) -> Option<Change> {
    match (then, now) {
        (Some(_), None) => Some(Change::Deleted),
        (then, Some(now)) if then != Some(now) => Some(Change::Modified(now.mtime_ns)),
        _ => None,
    }
}

/// A baseline row as a [`Seen`].
pub(super) fn recorded(row: &rusqlite::Row, first: usize) -> rusqlite::Result<Seen> {
    let size: Option<i64> = row.get(first)?;
    let mtime_ns: Option<i64> = row.get(first + 1)?;
    Ok(size.zip(mtime_ns).map(|(size, mtime_ns)| DiskState {
        size: u64::try_from(size).unwrap_or(0),
        mtime_ns,
    }))
}

pub(super) fn rfc3339_ns(mtime_ns: i64) -> String {
    let since_epoch = Duration::from_nanos(mtime_ns.unsigned_abs());
    rfc3339(if mtime_ns >= 0 {
        UNIX_EPOCH + since_epoch
    } else {
        UNIX_EPOCH - since_epoch
    })
}

pub(super) fn rfc3339(time: SystemTime) -> String {
    chrono::DateTime::<chrono::Utc>::from(time).to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// A path's 64-bit hash, keyed anew in each process (so no file name can be chosen to collide
/// with another), by which a sweep's pass and the kernel's events remember indexed files.
pub(super) fn path_hash(path: &str) -> u64 {
    use std::hash::BuildHasher;
    static KEYS: std::sync::OnceLock<std::collections::hash_map::RandomState> =
        std::sync::OnceLock::new();
    KEYS.get_or_init(std::collections::hash_map::RandomState::new)
        .hash_one(path)
}
