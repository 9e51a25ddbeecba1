//! SQLite's own counters for every statement the process runs, so a test can prove that no
//! lookup scans a table instead of reading an index.
//!
//! [`start`] registers an auto-extension: every connection opened afterwards (read pools,
//! the importer's temporary databases, the console's) reports each finished statement run
//! with `sqlite3_stmt_status` counters read and reset at the end of the run: the rows stepped
//! through in full-table scans (`SQLITE_STMTSTATUS_FULLSCAN_STEP`) and the virtual-machine
//! steps (`SQLITE_STMTSTATUS_VM_STEP`). [`take`] hands the runs recorded so far to the caller.
//! Nothing is recorded until [`start`] is called, and the server never calls it.
//!
//! [`DECLARED_SCANS`] is the one list of statements that read a whole table on purpose, each
//! with its reason; [`Run::is_declared_scan`] checks a run against it.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, Once};

use rusqlite::ffi;

/// One finished run of a prepared statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    /// The statement's SQL as prepared.
    pub sql: String,
    /// The file of the connection's main database (empty for an in-memory one).
    pub database: String,
    /// Rows stepped through by full-table scans during the run.
    pub fullscan_steps: u64,
    /// Virtual-machine instructions executed during the run.
    pub vm_steps: u64,
}

/// Statements that read a whole table on purpose, as a piece of their SQL and the reason.
/// Every other statement must read a bounded number of rows through indexes.
pub const DECLARED_SCANS: &[(&str, &str)] = &[
    (
        "INSERT INTO index_summary",
        "the summary tables are filled from every row after each import, so that overview tools never count",
    ),
    (
        "INSERT INTO hot_nodes",
        "the summary tables are filled from every row after each import, so that overview tools never count",
    ),
    (
        "INSERT INTO file_lock_levels",
        "the summary tables are filled from every row after each import, so that overview tools never count",
    ),
    (
        "INSERT INTO file_languages",
        "the summary tables are filled from every row after each import, so that overview tools never count",
    ),
    (
        "FROM graph_nodes AS n ORDER BY n.name",
        "a full import resolves every call-graph node in one pass in name order, each by index lookups",
    ),
    (
        "SET callers = acpdb_node_value(",
        "a full import writes every call-graph node's counts and symbol in one pass in rowid order",
    ),
    (
        "FROM files ORDER BY id",
        "a full import feeds every file to the files' full-text indexes once the load is done",
    ),
    (
        "INSERT INTO symbol_files_trigram(rowid, path) SELECT",
        "a full import builds the trigram index of the symbols' file paths from all of them",
    ),
    (
        "SELECT digest, id, ",
        "a delta reads every stored fingerprint to tell unchanged entries from changed ones",
    ),
    (
        "SELECT id, key, path, mtime, value_json FROM source_files",
        "a delta reads the stored source files once, to compare the new cache's with them in memory and remove those it no longer has",
    ),
    (
        "SELECT id, name FROM graph_nodes",
        "a delta reads every call-graph node once to find names by fingerprint, not by one index lookup each",
    ),
    (
        "SELECT DISTINCT path FROM files ORDER BY path",
        "every import with the project's sources on disk compares each indexed file with its source_baseline row once",
    ),
    (
        "DELETE FROM source_baseline",
        "every import drops the baseline rows of files no longer indexed (all of them when the sources are not on disk)",
    ),
    (
        "FROM symbols s INDEXED BY symbols_size",
        "acp_unused reads symbols largest first through symbols_size, at most unused::MAX_READ of them",
    ),
    (
        "FROM files f CROSS JOIN symbols s ON s.file_path = f.path",
        "acp_unused samples at most unused::COVERAGE_SAMPLE symbols of a language, from its files in table order",
    ),
];

impl Run {
    /// The reason this run's statement reads a whole table on purpose, when it is declared in
    /// [`DECLARED_SCANS`].
    pub fn is_declared_scan(&self) -> Option<&'static str> {
        DECLARED_SCANS
            .iter()
            .find(|(piece, _)| self.sql.contains(piece))
            .map(|&(_, reason)| reason)
    }
}

static RECORDING: AtomicBool = AtomicBool::new(false);
static RUNS: Mutex<Vec<Run>> = Mutex::new(Vec::new());
static REGISTER: Once = Once::new();

/// Starts recording the statement runs of every connection opened from now on.
pub fn start() {
    REGISTER.call_once(|| {
        // SAFETY: `attach` has the signature SQLite calls auto-extensions with, opens no
        // database and does not touch the list of auto-extensions.
        let rc = unsafe { ffi::sqlite3_auto_extension(Some(attach)) };
        assert_eq!(rc, ffi::SQLITE_OK, "sqlite3_auto_extension failed");
    });
    RECORDING.store(true, Ordering::SeqCst);
}

/// The runs recorded since the last call, in the order they finished.
pub fn take() -> Vec<Run> {
    std::mem::take(&mut *RUNS.lock().unwrap_or_else(|e| e.into_inner()))
}

/// The auto-extension: asks SQLite to report every statement of `db` when it finishes.
unsafe extern "C" fn attach(
    db: *mut ffi::sqlite3,
    _error: *mut *mut c_char,
    _api: *const ffi::sqlite3_api_routines,
) -> c_int {
    // SAFETY: `db` is the connection SQLite is opening; `profile` only reads its statements.
    unsafe {
        ffi::sqlite3_trace_v2(
            db,
            ffi::SQLITE_TRACE_PROFILE as c_uint,
            Some(profile),
            std::ptr::null_mut(),
        )
    }
}

/// The trace callback: on a finished statement, reads and resets its counters.
unsafe extern "C" fn profile(
    event: c_uint,
    _context: *mut c_void,
    statement: *mut c_void,
    _nanoseconds: *mut c_void,
) -> c_int {
    if event != ffi::SQLITE_TRACE_PROFILE as c_uint || !RECORDING.load(Ordering::Relaxed) {
        return 0;
    }
    let statement = statement.cast::<ffi::sqlite3_stmt>();
    // SAFETY: SQLite passes the statement that finished, valid for the callback's duration;
    // the strings it returns live as long as the statement and its connection.
    let run = unsafe {
        let counter = |op| u64::try_from(ffi::sqlite3_stmt_status(statement, op, 1)).unwrap_or(0);
        let text = |p: *const c_char| {
            if p.is_null() {
                String::new()
            } else {
                CStr::from_ptr(p).to_string_lossy().into_owned()
            }
        };
        let db = ffi::sqlite3_db_handle(statement);
        Run {
            sql: text(ffi::sqlite3_sql(statement)),
            database: text(ffi::sqlite3_db_filename(db, c"main".as_ptr())),
            fullscan_steps: counter(ffi::SQLITE_STMTSTATUS_FULLSCAN_STEP),
            vm_steps: counter(ffi::SQLITE_STMTSTATUS_VM_STEP),
        }
    };
    RUNS.lock().unwrap_or_else(|e| e.into_inner()).push(run);
    0
}
