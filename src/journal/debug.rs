//! `acp_debug`: debug sessions for reversible troubleshooting (RFC-0013 §5.3, tool reference
//! §12). A session records a problem and a hypothesis; attempts logged in it name the files
//! they touch and get a result (succeeded/failed) or are reverted; resolving closes the session.
//! The journal only records: it never changes the files themselves.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use rusqlite::{params, OptionalExtension, Transaction};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::action::{limited, optional, required, stamp, JournalError, FILE_LIMIT};
use super::attempts::{self, HistoryEntry, Status};
use super::store::{Journal, Response, Written};
use super::{files, md5};
use crate::schemas::Schema;

/// Files larger than this are hashed but not snapshotted (acp-cli's limit).
const SNAPSHOT_LIMIT: usize = 100_000;

/// Parameters of the `acp_debug` tool.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub struct DebugRequest {
    /// Debug action to perform: start, attempt, result, revert, resolve, status or list.
    #[schemars(
        required,
        extend("enum" = ["start", "attempt", "result", "revert", "resolve", "status", "list"])
    )]
    pub action: Option<String>,
    /// Action-specific data.
    #[serde(default)]
    pub data: Option<DebugData>,
}

/// The action-specific fields of an `acp_debug` call.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub struct DebugData {
    /// The problem being debugged (required for 'start').
    pub problem: Option<String>,
    /// The working hypothesis (required for 'start').
    pub hypothesis: Option<String>,
    /// Session id, e.g. `debug-20251227-001` (required except for start, status and list).
    pub session_id: Option<String>,
    /// What the attempt changes (required for 'attempt').
    pub description: Option<String>,
    /// Files the attempt touches, relative to the project root (optional for 'attempt').
    pub files: Option<Vec<String>>,
    /// Attempt id within the session, e.g. `attempt-001` (required for result and revert).
    pub attempt_id: Option<String>,
    /// Whether the attempt worked (required for 'result').
    pub success: Option<bool>,
    /// Observations about the outcome (optional for 'result').
    pub notes: Option<String>,
    /// How the problem was solved (required for 'resolve').
    pub resolution: Option<String>,
}

/// An `acp_debug` answer: the fields of its action's answer after `"action"`.
#[derive(Serialize, JsonSchema)]
#[serde(tag = "action", rename_all = "lowercase")]
enum DebugAnswer {
    Start(Written<Started>),
    Attempt(Written<Logged>),
    Result(Written<Recorded>),
    Revert(Written<Reverted>),
    Resolve(Written<Resolved>),
    Status(StatusAnswer),
    List(Listed),
}

/// The JSON Schema of `acp_debug`'s answers.
pub(super) fn answer_schema() -> Arc<Schema> {
    crate::schemas::output::<DebugAnswer>()
}

/// Runs one `acp_debug` action. Files are read before the write transaction begins, so that a
/// slow read never holds other writers up.
pub(crate) fn run(journal: &Journal, request: DebugRequest) -> Result<Response, JournalError> {
    let action = request.action.as_deref().ok_or_else(|| {
        JournalError::InvalidParams("Missing required parameter: action".to_owned())
    })?;
    let data = request.data.unwrap_or_default();
    let answer = match action {
        "start" => DebugAnswer::Start(journal.write_and_export(|tx| start(journal, tx, &data))?),
        "attempt" => {
            let planned = PlannedAttempt::new(journal, &data)?;
            DebugAnswer::Attempt(journal.write_and_export(|tx| attempt(journal, tx, planned))?)
        }
        "result" => {
            let files = current_files(journal, &data)?;
            DebugAnswer::Result(journal.write_and_export(|tx| result(journal, tx, &data, &files))?)
        }
        "revert" => {
            let files = current_files(journal, &data)?;
            DebugAnswer::Revert(journal.write_and_export(|tx| revert(journal, tx, &data, &files))?)
        }
        "resolve" => {
            DebugAnswer::Resolve(journal.write_and_export(|tx| resolve(journal, tx, &data))?)
        }
        "status" => DebugAnswer::Status(journal.read(|tx| status(tx, &data))?),
        "list" => DebugAnswer::List(journal.read(list)?),
        other => {
            let actions = "start, attempt, result, revert, resolve, status, list";
            let message = format!("Invalid action: {other}. Use: {actions}");
            return Err(JournalError::InvalidParams(message));
        }
    };
    Response::new(&answer)
}

#[derive(Serialize, JsonSchema)]
struct Started {
    session_id: String,
    created_at: String,
    status: &'static str,
    problem: String,
    hypothesis: String,
}

fn start(
    journal: &Journal,
    tx: &Transaction<'_>,
    data: &DebugData,
) -> Result<Started, JournalError> {
    let problem = required(&data.problem, "problem", "start")?;
    let hypothesis = required(&data.hypothesis, "hypothesis", "start")?;
    let now = journal.now();
    let created_at = stamp(now);
    let day = now.format("%Y%m%d").to_string();
    let mut seq: i64 = tx.query_row(
        "SELECT COALESCE(MAX(day_seq), 0) + 1 FROM sessions WHERE day = ?1",
        [&day],
        |row| row.get(0),
    )?;
    let session_id = loop {
        let id = format!("debug-{day}-{seq:03}");
        if !attempts::name_taken(tx, &id)? {
            break id;
        }
        seq += 1;
    };
    tx.execute(
        "INSERT INTO sessions (id, day, day_seq, status, problem, hypothesis, created_at)
         VALUES (?1, ?2, ?3, 'active', ?4, ?5, ?6)",
        params![session_id, day, seq, problem, hypothesis, created_at],
    )?;
    attempts::touch(tx, &created_at)?;
    Ok(Started {
        session_id,
        created_at,
        status: "active",
        problem: problem.to_owned(),
        hypothesis: hypothesis.to_owned(),
    })
}

#[derive(Serialize, JsonSchema)]
struct Logged {
    session_id: String,
    attempt_id: String,
    description: String,
    files: Vec<String>,
    created_at: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    unindexed_files: Vec<String>,
}

/// An attempt checked and its files read, ready to be recorded.
struct PlannedAttempt<'a> {
    session_id: &'a str,
    description: &'a str,
    files: Vec<String>,
    snapshots: Vec<Snapshot>,
}

impl<'a> PlannedAttempt<'a> {
    /// Checks the fields and the session, then resolves and reads the files.
    fn new(journal: &Journal, data: &'a DebugData) -> Result<PlannedAttempt<'a>, JournalError> {
        let session_id = required(&data.session_id, "session_id", "attempt")?;
        let description = required(&data.description, "description", "attempt")?;
        journal.read(|tx| Session::load(tx, session_id)?.ensure_active())?;
        let mut files = Vec::new();
        let mut seen = HashSet::new();
        let rules = journal.root.rules()?;
        for input in data.files.iter().flatten() {
            let path = journal
                .root
                .resolve_kept(limited(input, "files")?, &rules)?;
            if seen.insert(path.clone()) {
                files.push(path);
            }
        }
        let snapshots = files
            .iter()
            .map(|path| Snapshot::take(journal, path, SNAPSHOT_LIMIT))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(PlannedAttempt {
            session_id,
            description,
            files,
            snapshots,
        })
    }
}

fn attempt(
    journal: &Journal,
    tx: &Transaction<'_>,
    planned: PlannedAttempt<'_>,
) -> Result<Logged, JournalError> {
    let PlannedAttempt {
        session_id,
        description,
        files,
        snapshots,
    } = planned;
    // Checked again: the session may have been resolved while the files were read.
    Session::load(tx, session_id)?.ensure_active()?;
    let created_at = stamp(journal.now());
    let mut seq: i64 = tx.query_row(
        "SELECT COALESCE(MAX(seq), 0) + 1 FROM attempts WHERE session_id = ?1",
        [session_id],
        |row| row.get(0),
    )?;
    let attempt_id = loop {
        let id = format!("attempt-{seq:03}");
        if !attempts::name_taken(tx, &attempts::attempt_key(session_id, &id))? {
            break id;
        }
        seq += 1;
    };
    tx.execute(
        "INSERT INTO attempts (session_id, seq, id, description, status, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, 'pending', ?5, ?5)",
        params![session_id, seq, attempt_id, description, created_at],
    )?;
    for (ord, (path, snapshot)) in (0i64..).zip(files.iter().zip(&snapshots)) {
        tx.execute(
            "INSERT INTO attempt_files
                 (session_id, attempt_id, ord, path, original_hash, original_content, modified_hash)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?5)",
            params![
                session_id,
                attempt_id,
                ord,
                path,
                snapshot.hash,
                snapshot.content
            ],
        )?;
    }
    attempts::touch(tx, &created_at)?;
    Ok(Logged {
        session_id: session_id.to_owned(),
        attempt_id,
        description: description.to_owned(),
        unindexed_files: journal.unindexed(&files),
        files,
        created_at,
    })
}

#[derive(Serialize, JsonSchema)]
struct Recorded {
    session_id: String,
    attempt_id: String,
    status: &'static str,
    success: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    notes: Option<String>,
    recorded_at: String,
    /// Why each of the attempt's files that could not be read now could not be: they keep the
    /// hash they had, so whether they changed is not known.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    unread_files: Vec<String>,
}

fn result(
    journal: &Journal,
    tx: &Transaction<'_>,
    data: &DebugData,
    files: &CurrentFiles,
) -> Result<Recorded, JournalError> {
    let session_id = required(&data.session_id, "session_id", "result")?;
    let attempt_id = required(&data.attempt_id, "attempt_id", "result")?;
    let success = data.success.ok_or_else(|| {
        JournalError::InvalidParams("'success' required for result action".to_owned())
    })?;
    let notes = optional(&data.notes, "notes")?.map(str::to_owned);
    let session = Session::load(tx, session_id)?;
    session.ensure_active()?;
    let attempt = Attempt::load(tx, &session, attempt_id)?;
    match attempt.status.as_str() {
        "pending" => {}
        "reverted" => return Err(already_reverted(attempt_id)),
        status => {
            return Err(JournalError::InvalidParams(format!(
                "Attempt already has a result: {attempt_id} (status: {status}); log a new \
                 attempt, or revert this one"
            )))
        }
    }
    let recorded_at = attempt.end_stamp(journal);
    let status = if success { "succeeded" } else { "failed" };
    tx.execute(
        "UPDATE attempts SET status = ?3, success = ?4, notes = ?5, result_at = ?6, updated_at = ?6
         WHERE session_id = ?1 AND id = ?2",
        params![session_id, attempt_id, status, success, notes, recorded_at],
    )?;
    let files_modified = rehash_files(tx, session_id, attempt_id, &files.hashes)?;
    let (history_status, outcome) = if success {
        (
            Status::Verified,
            Some(
                notes
                    .clone()
                    .unwrap_or_else(|| "Verified and kept".to_owned()),
            ),
        )
    } else {
        (Status::Failed, notes.clone())
    };
    attempts::append_history(
        tx,
        &HistoryEntry::new(
            attempts::attempt_key(session_id, attempt_id),
            history_status,
            attempt.created_at,
            recorded_at.clone(),
            session_id,
            files_modified,
            outcome,
        ),
    )?;
    attempts::touch(tx, &recorded_at)?;
    Ok(Recorded {
        session_id: session_id.to_owned(),
        attempt_id: attempt_id.to_owned(),
        status,
        success,
        notes,
        recorded_at,
        unread_files: files.unread.clone(),
    })
}

#[derive(Serialize, JsonSchema)]
struct Reverted {
    session_id: String,
    attempt_id: String,
    status: &'static str,
    files: Vec<String>,
    reverted_at: String,
    /// Why each of the attempt's files that could not be read now could not be: they keep the
    /// hash they had, so whether they changed is not known.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    unread_files: Vec<String>,
}

fn revert(
    journal: &Journal,
    tx: &Transaction<'_>,
    data: &DebugData,
    files: &CurrentFiles,
) -> Result<Reverted, JournalError> {
    let session_id = required(&data.session_id, "session_id", "revert")?;
    let attempt_id = required(&data.attempt_id, "attempt_id", "revert")?;
    let session = Session::load(tx, session_id)?;
    session.ensure_active()?;
    let attempt = Attempt::load(tx, &session, attempt_id)?;
    if attempt.status == "reverted" {
        return Err(already_reverted(attempt_id));
    }
    let reverted_at = attempt.end_stamp(journal);
    tx.execute(
        "UPDATE attempts SET status = 'reverted', reverted_at = ?3, updated_at = ?3
         WHERE session_id = ?1 AND id = ?2",
        params![session_id, attempt_id, reverted_at],
    )?;
    let files_modified = rehash_files(tx, session_id, attempt_id, &files.hashes)?;
    attempts::append_history(
        tx,
        &HistoryEntry::new(
            attempts::attempt_key(session_id, attempt_id),
            Status::Reverted,
            attempt.created_at,
            reverted_at.clone(),
            session_id,
            files_modified,
            Some("Reverted".to_owned()),
        ),
    )?;
    attempts::touch(tx, &reverted_at)?;
    Ok(Reverted {
        session_id: session_id.to_owned(),
        attempt_id: attempt_id.to_owned(),
        status: "reverted",
        files: attempt.files,
        reverted_at,
        unread_files: files.unread.clone(),
    })
}

#[derive(Serialize, JsonSchema)]
struct Resolved {
    session_id: String,
    status: &'static str,
    resolution: String,
    resolved_at: String,
    attempt_count: i64,
}

fn resolve(
    journal: &Journal,
    tx: &Transaction<'_>,
    data: &DebugData,
) -> Result<Resolved, JournalError> {
    let session_id = required(&data.session_id, "session_id", "resolve")?;
    let resolution = required(&data.resolution, "resolution", "resolve")?;
    let session = Session::load(tx, session_id)?;
    session.ensure_active()?;
    let resolved_at = stamp(journal.now().max(parse_stamp(&session.created_at)));
    tx.execute(
        "UPDATE sessions SET status = 'resolved', resolution = ?2, resolved_at = ?3 WHERE id = ?1",
        params![session_id, resolution, resolved_at],
    )?;
    let (attempt_count, distinct_files): (i64, i64) = tx.query_row(
        "SELECT (SELECT COUNT(*) FROM attempts WHERE session_id = ?1),
                (SELECT COUNT(DISTINCT path) FROM attempt_files WHERE session_id = ?1)",
        [session_id],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )?;
    attempts::append_history(
        tx,
        &HistoryEntry::new(
            session_id.to_owned(),
            Status::Verified,
            session.created_at,
            resolved_at.clone(),
            session_id,
            distinct_files.unsigned_abs(),
            Some(format!("Resolved: {resolution}")),
        ),
    )?;
    attempts::touch(tx, &resolved_at)?;
    Ok(Resolved {
        session_id: session_id.to_owned(),
        status: "resolved",
        resolution: resolution.to_owned(),
        resolved_at,
        attempt_count,
    })
}

#[derive(Serialize, JsonSchema)]
struct StatusAnswer {
    session: SessionView,
}

#[derive(Serialize, JsonSchema)]
struct SessionView {
    id: String,
    status: String,
    problem: String,
    hypothesis: String,
    created_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    resolution: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    resolved_at: Option<String>,
    attempts: Vec<AttemptView>,
}

#[derive(Serialize, JsonSchema)]
struct AttemptView {
    id: String,
    description: String,
    files: Vec<String>,
    status: String,
    created_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    success: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    notes: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    result_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reverted_at: Option<String>,
}

fn status(tx: &Transaction<'_>, data: &DebugData) -> Result<StatusAnswer, JournalError> {
    let session = match optional(&data.session_id, "session_id")? {
        Some(id) => Session::load(tx, id)?,
        None => {
            let id: Option<String> = tx
                .query_row(
                    "SELECT id FROM sessions WHERE status = 'active' ORDER BY rowid DESC LIMIT 1",
                    [],
                    |row| row.get(0),
                )
                .optional()?;
            let id = id.ok_or_else(|| {
                JournalError::InvalidParams(
                    "No active debug session; start one with action 'start', or pass \
                     'session_id' to see a resolved one"
                        .to_owned(),
                )
            })?;
            Session::load(tx, &id)?
        }
    };
    let mut stmt = tx.prepare(
        "SELECT id, description, status, created_at, success, notes, result_at, reverted_at
         FROM attempts WHERE session_id = ?1 ORDER BY seq",
    )?;
    let mut attempts = stmt
        .query_map([&session.id], |row| {
            Ok(AttemptView {
                id: row.get(0)?,
                description: row.get(1)?,
                files: Vec::new(),
                status: row.get(2)?,
                created_at: row.get(3)?,
                success: row.get(4)?,
                notes: row.get(5)?,
                result_at: row.get(6)?,
                reverted_at: row.get(7)?,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    for attempt in &mut attempts {
        attempt.files = attempt_files(tx, &session.id, &attempt.id)?;
    }
    Ok(StatusAnswer {
        session: SessionView {
            id: session.id,
            status: session.status,
            problem: session.problem,
            hypothesis: session.hypothesis,
            created_at: session.created_at,
            resolution: session.resolution,
            resolved_at: session.resolved_at,
            attempts,
        },
    })
}

#[derive(Serialize, JsonSchema)]
struct Listed {
    sessions: Vec<SessionSummary>,
    total: usize,
}

#[derive(Serialize, JsonSchema)]
struct SessionSummary {
    id: String,
    status: String,
    problem: String,
    hypothesis: String,
    created_at: String,
    attempt_count: i64,
}

fn list(tx: &Transaction<'_>) -> Result<Listed, JournalError> {
    let mut stmt = tx.prepare(
        "SELECT s.id, s.status, s.problem, s.hypothesis, s.created_at,
                (SELECT COUNT(*) FROM attempts a WHERE a.session_id = s.id)
         FROM sessions s WHERE s.status = 'active' ORDER BY s.rowid",
    )?;
    let sessions = stmt
        .query_map([], |row| {
            Ok(SessionSummary {
                id: row.get(0)?,
                status: row.get(1)?,
                problem: row.get(2)?,
                hypothesis: row.get(3)?,
                created_at: row.get(4)?,
                attempt_count: row.get(5)?,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Listed {
        total: sessions.len(),
        sessions,
    })
}

/// A session row.
struct Session {
    id: String,
    status: String,
    problem: String,
    hypothesis: String,
    created_at: String,
    resolution: Option<String>,
    resolved_at: Option<String>,
}

impl Session {
    fn load(tx: &Transaction<'_>, id: &str) -> Result<Session, JournalError> {
        tx.query_row(
            "SELECT id, status, problem, hypothesis, created_at, resolution, resolved_at
             FROM sessions WHERE id = ?1",
            [id],
            |row| {
                Ok(Session {
                    id: row.get(0)?,
                    status: row.get(1)?,
                    problem: row.get(2)?,
                    hypothesis: row.get(3)?,
                    created_at: row.get(4)?,
                    resolution: row.get(5)?,
                    resolved_at: row.get(6)?,
                })
            },
        )
        .optional()?
        .ok_or_else(|| {
            JournalError::InvalidParams(format!(
                "Session not found: {id}; use action 'list' to see the active sessions"
            ))
        })
    }

    fn ensure_active(&self) -> Result<(), JournalError> {
        if self.status == "active" {
            return Ok(());
        }
        Err(JournalError::InvalidParams(format!(
            "Session is not active: {} (status: {}); a resolved session only answers 'status', \
             start a new session with action 'start'",
            self.id, self.status
        )))
    }
}

/// An attempt row with its files.
struct Attempt {
    status: String,
    created_at: String,
    files: Vec<String>,
}

impl Attempt {
    fn load(tx: &Transaction<'_>, session: &Session, id: &str) -> Result<Attempt, JournalError> {
        let found = tx
            .query_row(
                "SELECT status, created_at FROM attempts WHERE session_id = ?1 AND id = ?2",
                [&session.id, id],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .optional()?;
        let Some((status, created_at)) = found else {
            let known: Vec<String> = tx
                .prepare("SELECT id FROM attempts WHERE session_id = ?1 ORDER BY seq")?
                .query_map([&session.id], |row| row.get(0))?
                .collect::<Result<_, _>>()?;
            let hint = if known.is_empty() {
                "this session has no attempts yet; log one with action 'attempt'".to_owned()
            } else {
                format!("this session has: {}", known.join(", "))
            };
            return Err(JournalError::InvalidParams(format!(
                "Attempt not found: {id} in session {}; {hint}",
                session.id
            )));
        };
        Ok(Attempt {
            status,
            created_at,
            files: attempt_files(tx, &session.id, id)?,
        })
    }

    /// The time of a result or revert: now, but never before the attempt was logged.
    fn end_stamp(&self, journal: &Journal) -> String {
        stamp(journal.now().max(parse_stamp(&self.created_at)))
    }
}

fn already_reverted(attempt_id: &str) -> JournalError {
    JournalError::InvalidParams(format!(
        "Attempt already reverted: {attempt_id}; log a new attempt instead"
    ))
}

fn parse_stamp(text: &str) -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::parse_from_rfc3339(text)
        .map(|t| t.to_utc())
        .unwrap_or(chrono::DateTime::UNIX_EPOCH)
}

fn attempt_files(
    tx: &Transaction<'_>,
    session_id: &str,
    attempt_id: &str,
) -> Result<Vec<String>, JournalError> {
    let mut stmt = tx.prepare_cached(
        "SELECT path FROM attempt_files WHERE session_id = ?1 AND attempt_id = ?2 ORDER BY ord",
    )?;
    let files = stmt
        .query_map([session_id, attempt_id], |row| row.get(0))?
        .collect::<Result<Vec<String>, _>>()?;
    Ok(files)
}

/// An attempt's files as they are now, read before the write transaction.
#[derive(Default)]
struct CurrentFiles {
    /// The content hash of each file read.
    hashes: HashMap<String, String>,
    /// Why each file that cannot be read cannot be (gone outside the root, no longer a regular
    /// file, too large; the message names the file): they keep the hash they had, and the
    /// answer says so.
    unread: Vec<String>,
}

fn current_files(journal: &Journal, data: &DebugData) -> Result<CurrentFiles, JournalError> {
    let ids = (
        optional(&data.session_id, "session_id")?,
        optional(&data.attempt_id, "attempt_id")?,
    );
    let (Some(session_id), Some(attempt_id)) = ids else {
        return Ok(CurrentFiles::default());
    };
    let mut current = CurrentFiles::default();
    for path in journal.read(|tx| attempt_files(tx, session_id, attempt_id))? {
        match Snapshot::take(journal, &path, 0) {
            Ok(snapshot) => {
                current.hashes.insert(path, snapshot.hash);
            }
            Err(err) => current.unread.push(err.message().to_owned()),
        }
    }
    Ok(current)
}

/// Records the `hashes` read for an attempt's files; returns how many files it has.
fn rehash_files(
    tx: &Transaction<'_>,
    session_id: &str,
    attempt_id: &str,
    hashes: &HashMap<String, String>,
) -> Result<u64, JournalError> {
    let files = attempt_files(tx, session_id, attempt_id)?;
    for path in &files {
        let Some(hash) = hashes.get(path) else {
            continue;
        };
        tx.execute(
            "UPDATE attempt_files SET modified_hash = ?4
             WHERE session_id = ?1 AND attempt_id = ?2 AND path = ?3",
            params![session_id, attempt_id, path, hash],
        )?;
    }
    Ok(files.len() as u64)
}

/// A file's MD5 and, when small UTF-8 text, its content. A missing file hashes as empty.
struct Snapshot {
    hash: String,
    content: Option<String>,
}

impl Snapshot {
    /// Reads the file at the canonical relative `path`, confined again to the root, keeping
    /// its content when it has at most `keep` bytes.
    fn take(journal: &Journal, path: &str, keep: usize) -> Result<Snapshot, JournalError> {
        let Some(file) = journal.root.open(path)? else {
            return Ok(Snapshot {
                hash: md5::hex_digest(b""),
                content: None,
            });
        };
        let digest = files::digest(file, keep, FILE_LIMIT).map_err(|err| err.into_error(path))?;
        Ok(Snapshot {
            hash: digest.hash,
            content: digest.text,
        })
    }
}
