//! The journal database and what every action runs through: the connection (WAL, migrated,
//! set up again when several processes race to create it), one `BEGIN IMMEDIATE` transaction
//! per write, the export of the attempts file after a debug write, and the answer's JSON.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use chrono::{DateTime, SubsecRound, Utc};
use rusqlite::{Connection, OpenFlags, Transaction, TransactionBehavior};
use serde::Serialize;

use super::action::JournalError;
use super::attempts::{self, ExportReport};
use super::index::ProjectIndex;
use super::paths;

mod embedded {
    refinery::embed_migrations!("migrations/journal");
}

/// How long a writer waits for another one to finish before giving up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// The source of the current time (injectable so tests can choose dates).
pub type Clock = Arc<dyn Fn() -> DateTime<Utc> + Send + Sync>;

/// A tool answer: JSON text with its keys in the order the tool reference gives, and the same
/// answer as a JSON value.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    text: String,
    value: serde_json::Value,
}

impl Response {
    pub(super) fn new<T: Serialize>(body: &T) -> Result<Response, JournalError> {
        let json_error = |e: serde_json::Error| JournalError::Internal(format!("JSON error: {e}"));
        let text = serde_json::to_string_pretty(body).map_err(json_error)?;
        let value = serde_json::to_value(body).map_err(json_error)?;
        Ok(Response { text, value })
    }

    /// The pretty-printed JSON text (what the MCP tool returns as text content).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The answer as a JSON value (keys sorted; use [`Response::text`] to keep their order).
    pub fn to_value(&self) -> serde_json::Value {
        self.value.clone()
    }

    /// The text and the value, taken apart.
    pub fn into_parts(self) -> (String, serde_json::Value) {
        (self.text, self.value)
    }
}

/// A mutating action's answer plus the warning of an export that failed after the commit.
#[derive(Serialize, schemars::JsonSchema)]
pub(super) struct Written<T> {
    #[serde(flatten)]
    body: T,
    #[serde(skip_serializing_if = "Option::is_none")]
    export_warning: Option<String>,
}

/// The debug/hack journal of one project.
pub struct Journal {
    pub(super) conn: Mutex<Connection>,
    pub(super) root: paths::Root,
    pub(super) attempts_path: PathBuf,
    pub(super) index: Option<Arc<dyn ProjectIndex>>,
    pub(super) clock: Clock,
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal")
            .field("root", &self.root.path())
            .field("attempts_path", &self.attempts_path)
            .finish_non_exhaustive()
    }
}

impl Journal {
    /// Opens (creating and migrating if needed) the journal database at `journal_db` for the
    /// project at `project_root`, exporting to `attempts_path`. An attempts file the journal has
    /// not seen yet is imported; one that does not follow the format is refused with a message
    /// naming what is wrong, and left untouched. Temporary export files that killed writers left
    /// next to it are removed.
    pub fn open(
        journal_db: &Path,
        project_root: &Path,
        attempts_path: &Path,
    ) -> Result<Journal, JournalError> {
        let root = paths::Root::new(project_root)?;
        if let Some(dir) = journal_db.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::create_dir_all(dir).map_err(|e| {
                JournalError::Internal(format!("Cannot create {}: {e}", dir.display()))
            })?;
        }
        crate::sqlite_locks::register(journal_db);
        let conn = open_connection(journal_db)?;
        let attempts_path = std::path::absolute(attempts_path).map_err(|e| {
            JournalError::Internal(format!("Cannot resolve {}: {e}", attempts_path.display()))
        })?;
        crate::replace::sweep(&attempts_path);
        let journal = Journal {
            conn: Mutex::new(conn),
            root,
            attempts_path,
            index: None,
            clock: Arc::new(Utc::now),
        };
        journal.write(true, |_| Ok(()))?;
        Ok(journal)
    }

    /// Uses `index` to flag files the index does not know and to list the index's hacks.
    pub fn with_index(mut self, index: Arc<dyn ProjectIndex>) -> Journal {
        self.index = Some(index);
        self
    }

    /// Uses `clock` instead of the system time.
    pub fn with_clock(mut self, clock: Clock) -> Journal {
        self.clock = clock;
        self
    }

    /// Rewrites the attempts file from the journal (after merging what others wrote into it).
    pub fn export(&self) -> Result<ExportReport, JournalError> {
        let now = self.now();
        self.write(true, |tx| attempts::export(tx, &self.attempts_path, now))
    }

    /// The current time, whole seconds.
    pub(super) fn now(&self) -> DateTime<Utc> {
        (self.clock)().trunc_subsecs(0)
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `f` in one `BEGIN IMMEDIATE` transaction, first merging an attempts file that
    /// changed since the journal last wrote it when `sync` is set.
    pub(super) fn write<T>(
        &self,
        sync: bool,
        f: impl FnOnce(&Transaction<'_>) -> Result<T, JournalError>,
    ) -> Result<T, JournalError> {
        let mut conn = self.lock();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        if sync {
            attempts::sync_from_file(&tx, &self.attempts_path)?;
        }
        let out = f(&tx)?;
        tx.commit()?;
        Ok(out)
    }

    /// Runs `f` in a read transaction (one consistent snapshot).
    pub(super) fn read<T>(
        &self,
        f: impl FnOnce(&Transaction<'_>) -> Result<T, JournalError>,
    ) -> Result<T, JournalError> {
        let mut conn = self.lock();
        let tx = conn.transaction()?;
        let out = f(&tx)?;
        tx.commit()?;
        Ok(out)
    }

    /// Commits a debug write, then exports; an export failure becomes `export_warning`.
    pub(super) fn write_and_export<T: Serialize>(
        &self,
        f: impl FnOnce(&Transaction<'_>) -> Result<T, JournalError>,
    ) -> Result<Written<T>, JournalError> {
        let body = self.write(true, f)?;
        let export_warning = match self.export() {
            Ok(_) => None,
            Err(err) => {
                tracing::warn!("journal committed but the attempts file was not rewritten: {err}");
                Some(err.message().to_owned())
            }
        };
        Ok(Written {
            body,
            export_warning,
        })
    }

    /// Canonical root-relative paths not known to the index (empty without an index).
    pub(super) fn unindexed(&self, files: &[String]) -> Vec<String> {
        match &self.index {
            Some(index) => files
                .iter()
                .filter(|f| !index.is_indexed(f))
                .cloned()
                .collect(),
            None => Vec::new(),
        }
    }
}

/// Opens the journal database in WAL mode and applies its migrations.
///
/// Several processes may create the same journal at the same moment. Switching a new file to
/// WAL and racing on the migration history can then fail with "database is locked" without
/// SQLite's busy handler being consulted, so the whole setup is retried (with a fresh
/// connection) until [`BUSY_TIMEOUT`] has passed.
fn open_connection(journal_db: &Path) -> Result<Connection, JournalError> {
    let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
    let mut pause = Duration::from_millis(5);
    loop {
        match try_open_connection(journal_db) {
            Ok(conn) => return Ok(conn),
            Err(Setup::Busy(err)) if std::time::Instant::now() < deadline => {
                tracing::debug!("journal setup raced with another writer, retrying: {err}");
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(200));
            }
            Err(Setup::Busy(err) | Setup::Failed(err)) => return Err(err),
        }
    }
}

/// Why one attempt at setting up the journal connection failed.
enum Setup {
    /// Another connection held a lock: worth another try.
    Busy(JournalError),
    /// Anything else.
    Failed(JournalError),
}

impl From<rusqlite::Error> for Setup {
    fn from(err: rusqlite::Error) -> Self {
        let busy = matches!(
            err.sqlite_error_code(),
            Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
        );
        if busy {
            Setup::Busy(err.into())
        } else {
            Setup::Failed(err.into())
        }
    }
}

fn try_open_connection(journal_db: &Path) -> Result<Connection, Setup> {
    // Never through a link: one planted here would have the journal written outside the
    // project. The look gives the message; the flag closes the window after it.
    if fs::symlink_metadata(journal_db).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(Setup::Failed(JournalError::Internal(format!(
            "Cannot open the journal {}: it is a symbolic link, which acpdb does not write \
             through; remove it (the journal is created anew)",
            journal_db.display()
        ))));
    }
    // SQLite's no-follow flag refuses a link anywhere in the path, not only at its end: the
    // directory is given to it resolved, so that a project reached through a link (`/tmp` on
    // macOS, a linked home or work directory) keeps its journal.
    let resolved = journal_db
        .parent()
        .and_then(|dir| fs::canonicalize(dir).ok())
        .zip(journal_db.file_name())
        .map_or_else(|| journal_db.to_path_buf(), |(dir, name)| dir.join(name));
    let mut conn = Connection::open_with_flags(
        &resolved,
        OpenFlags::default() | OpenFlags::SQLITE_OPEN_NOFOLLOW,
    )?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(Setup::Busy(JournalError::Internal(format!(
            "Database error: {} stays in {mode} mode while another process holds it",
            journal_db.display()
        ))));
    }
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.pragma_update(None, "foreign_keys", true)?;
    // Each migration is applied together with its history record in one transaction, so a
    // crash cannot leave a migration applied but unrecorded. When two processes race, the
    // loser fails (locked, or its tables already exist because the winner committed); it tries
    // again and then finds the work recorded as done.
    embedded::migrations::runner()
        .set_grouped(true)
        .run(&mut conn)
        .map_err(|err| {
            let error = JournalError::Internal(format!(
                "Database error: applying journal migrations: {err}"
            ));
            let text = err.to_string();
            let raced = ["locked", "busy", "already exists", "UNIQUE"];
            if raced.iter().any(|word| text.contains(word)) {
                Setup::Busy(error)
            } else {
                Setup::Failed(error)
            }
        })?;
    Ok(conn)
}
