//! `.acp/acp.attempts.json`: reading what others wrote into it, and exporting the journal in
//! the format of the ACP attempts schema (`fixtures/schemas/attempts.schema.json`, compiled in).
//!
//! Reading is lenient where acp-cli is (absent optionals may be `null`, unknown members are
//! kept) and strict where the schema is (statuses, hashes, timestamps), so that every export
//! validates whenever what was read did. Records the journal did not produce are kept verbatim
//! (minus `null` members) in `external_*` tables and the `history` table, and re-emitted by
//! every export. The export is written to a temporary file in the same directory, synced,
//! renamed over the target, and the directory synced.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use chrono::{DateTime, Utc};
use rusqlite::{params, OptionalExtension, Transaction};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::action::{stamp, JournalError};
use super::files;
use super::md5;

/// The JSON Schema (draft-07) of the attempts file.
pub const ATTEMPTS_SCHEMA: &str = include_str!("../../fixtures/schemas/attempts.schema.json");

/// The `$schema` value of a new attempts file.
const SCHEMA_URL: &str = "https://acp-protocol.dev/schemas/v1/attempts.schema.json";
/// The `version` of a new attempts file.
const FORMAT_VERSION: &str = "1.0.0";
/// The schema's `maxItems` for `history`; older entries stay in the journal only.
const HISTORY_LIMIT: usize = 1000;
/// How many problems an import error lists.
const PROBLEMS_SHOWN: usize = 10;

/// Unknown members of a record, re-emitted as found.
type Extra = BTreeMap<String, Value>;

/// What an export wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExportReport {
    /// The attempts file.
    pub path: String,
    /// Number of entries in `attempts`.
    pub attempts: usize,
    /// Number of entries in `checkpoints`.
    pub checkpoints: usize,
    /// Number of entries in `history`.
    pub history: usize,
    /// The document's `updated_at`.
    pub updated_at: String,
}

/// An attempt status of the attempts format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Status {
    Active,
    Testing,
    Failed,
    Verified,
    Reverted,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct TrackedAttempt {
    id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    for_issue: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    description: Option<String>,
    status: Status,
    created_at: String,
    updated_at: String,
    files: Vec<AttemptFile>,
    revert_if: Vec<String>,
    #[serde(flatten)]
    extra: Extra,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct AttemptFile {
    path: String,
    original_hash: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    original_content: Option<String>,
    modified_hash: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lines_changed: Option<Vec<u64>>,
    #[serde(flatten)]
    extra: Extra,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Checkpoint {
    name: String,
    created_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    git_commit: Option<String>,
    files: BTreeMap<String, FileState>,
    #[serde(flatten)]
    extra: Extra,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct FileState {
    hash: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    content: Option<String>,
    #[serde(flatten)]
    extra: Extra,
}

/// An entry of the attempts file's `history`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct HistoryEntry {
    id: String,
    status: Status,
    started_at: String,
    ended_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    for_issue: Option<String>,
    files_modified: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    outcome: Option<String>,
    #[serde(flatten)]
    extra: Extra,
}

impl HistoryEntry {
    /// An entry for a journal transition; an empty outcome is left out.
    pub(crate) fn new(
        id: String,
        status: Status,
        started_at: String,
        ended_at: String,
        for_issue: &str,
        files_modified: u64,
        outcome: Option<String>,
    ) -> HistoryEntry {
        HistoryEntry {
            id,
            status,
            started_at,
            ended_at,
            for_issue: Some(for_issue.to_owned()),
            files_modified,
            outcome: outcome.filter(|text| !text.is_empty()),
            extra: Extra::new(),
        }
    }
}

/// The whole document, as exported.
#[derive(Serialize)]
struct Document {
    #[serde(rename = "$schema", skip_serializing_if = "Option::is_none")]
    schema: Option<String>,
    version: String,
    updated_at: String,
    attempts: BTreeMap<String, TrackedAttempt>,
    checkpoints: BTreeMap<String, Checkpoint>,
    history: Vec<HistoryEntry>,
    #[serde(flatten)]
    extra: Map<String, Value>,
}

/// The export key of a journal attempt (`debug-20260105-001:attempt-002`).
pub(crate) fn attempt_key(session_id: &str, attempt_id: &str) -> String {
    format!("{session_id}:{attempt_id}")
}

/// Whether a record someone else wrote uses `id` (or `id:…`) as attempt key, checkpoint name
/// or history id, so the journal must not hand it out.
pub(crate) fn name_taken(tx: &Transaction<'_>, id: &str) -> Result<bool, JournalError> {
    let prefix = format!("{id}:");
    Ok(tx.query_row(
        "SELECT EXISTS (SELECT 1 FROM external_attempts
                        WHERE key = ?1 OR substr(key, 1, length(?2)) = ?2)
             OR EXISTS (SELECT 1 FROM external_checkpoints WHERE key = ?1)
             OR EXISTS (SELECT 1 FROM history WHERE origin = 'file'
                        AND (entry_id = ?1 OR substr(entry_id, 1, length(?2)) = ?2))",
        [id, &prefix],
        |row| row.get(0),
    )?)
}

/// Records that the exported content changed at `time`.
pub(crate) fn touch(tx: &Transaction<'_>, time: &str) -> Result<(), JournalError> {
    let current = meta_get(tx, "updated_at")?;
    if current
        .as_deref()
        .is_none_or(|current| later(time, current))
    {
        meta_set(tx, "updated_at", time)?;
    }
    Ok(())
}

/// Appends a journal transition to the history.
pub(crate) fn append_history(
    tx: &Transaction<'_>,
    entry: &HistoryEntry,
) -> Result<(), JournalError> {
    insert_history(tx, entry, "journal")
}

fn insert_history(
    tx: &Transaction<'_>,
    entry: &HistoryEntry,
    origin: &str,
) -> Result<(), JournalError> {
    tx.execute(
        "INSERT INTO history (entry_id, origin, entry) VALUES (?1, ?2, ?3)",
        params![entry.id, origin, to_json(entry)?],
    )?;
    Ok(())
}

/// Merges the attempts file into the journal when it differs from what the journal last
/// imported or wrote. A missing file is left for the next export to create.
pub(crate) fn sync_from_file(tx: &Transaction<'_>, path: &Path) -> Result<(), JournalError> {
    let bytes = match files::read_regular(path) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Ok(()),
        Err(files::FileError::Link) => {
            return Err(JournalError::Internal(format!(
                "Cannot read {}: it is a symbolic link, which the journal neither reads nor \
                 writes through; replace it with a regular file, or remove it and the next \
                 change writes it anew",
                path.display()
            )))
        }
        // The journal's own export outgrows what is read whole once it holds enough file
        // snapshots: unchanged since the journal wrote it, it has nothing to merge.
        Err(files::FileError::TooLarge(_)) if unchanged_since_recorded(tx, path)? => return Ok(()),
        Err(err) => {
            return Err(JournalError::Internal(
                err.describe(&path.display().to_string()),
            ))
        }
    };
    let fingerprint = fingerprint(&bytes);
    if meta_get(tx, "attempts_fingerprint")?.as_deref() == Some(fingerprint.as_str()) {
        return Ok(());
    }
    let parsed = parse(&bytes).map_err(|problems| {
        JournalError::Internal(format!(
            "Cannot import {}: {problems}. The file was left unchanged; fix it or move it away, \
             then retry",
            path.display()
        ))
    })?;
    merge(tx, parsed)?;
    meta_set(tx, "attempts_fingerprint", &fingerprint)
}

/// Writes the journal's view of the attempts file to `path` and records its fingerprint.
pub(crate) fn export(
    tx: &Transaction<'_>,
    path: &Path,
    now: DateTime<Utc>,
) -> Result<ExportReport, JournalError> {
    let document = build(tx, now)?;
    let mut text = serde_json::to_string_pretty(&document)
        .map_err(|e| JournalError::Internal(format!("JSON error: {e}")))?;
    text.push('\n');
    crate::replace::write(path, text.as_bytes())
        .map_err(|e| JournalError::Internal(format!("Cannot write {}: {e}", path.display())))?;
    meta_set(tx, "attempts_fingerprint", &fingerprint(text.as_bytes()))?;
    Ok(ExportReport {
        path: path.display().to_string(),
        attempts: document.attempts.len(),
        checkpoints: document.checkpoints.len(),
        history: document.history.len(),
        updated_at: document.updated_at,
    })
}

/// A document read from disk, every record checked.
struct Parsed {
    schema: Option<String>,
    version: String,
    updated_at: String,
    extra: Map<String, Value>,
    attempts: Vec<(String, TrackedAttempt)>,
    checkpoints: Vec<(String, Checkpoint)>,
    history: Vec<HistoryEntry>,
}

/// Reads an attempts document; on failure, says what is wrong and where.
fn parse(bytes: &[u8]) -> Result<Parsed, String> {
    let mut value: Value =
        serde_json::from_slice(bytes).map_err(|e| format!("not valid JSON ({e})"))?;
    strip_nulls_everywhere(&mut value);
    let Value::Object(mut root) = value else {
        return Err("the document is not a JSON object".to_owned());
    };
    let mut problems = Vec::new();
    let schema = root
        .remove("$schema")
        .and_then(|v| record::<String>("$schema", v, &mut problems));
    let version = required_member::<String>(&mut root, "version", &mut problems);
    if let Some(version) = &version {
        if !version_shaped(version) {
            problems.push(format!(
                "version: {version:?} does not start with MAJOR.MINOR.PATCH"
            ));
        }
    }
    let updated_at = required_member::<String>(&mut root, "updated_at", &mut problems);
    if let Some(updated_at) = &updated_at {
        check_time("updated_at", updated_at, &mut problems);
    }
    let attempts = required_member::<Map<String, Value>>(&mut root, "attempts", &mut problems)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|(key, value)| {
            let at = format!("attempts[{key:?}]");
            let attempt = record::<TrackedAttempt>(&at, value, &mut problems)?;
            attempt.check(&at, &mut problems);
            Some((key, attempt))
        })
        .collect();
    let checkpoints =
        required_member::<Map<String, Value>>(&mut root, "checkpoints", &mut problems)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|(key, value)| {
                let at = format!("checkpoints[{key:?}]");
                let checkpoint = record::<Checkpoint>(&at, value, &mut problems)?;
                checkpoint.check(&at, &mut problems);
                Some((key, checkpoint))
            })
            .collect();
    let history = required_member::<Vec<Value>>(&mut root, "history", &mut problems)
        .unwrap_or_default()
        .into_iter()
        .enumerate()
        .filter_map(|(i, value)| {
            let at = format!("history[{i}]");
            let entry = record::<HistoryEntry>(&at, value, &mut problems)?;
            entry.check(&at, &mut problems);
            Some(entry)
        })
        .collect();
    match (version, updated_at) {
        (Some(version), Some(updated_at)) if problems.is_empty() => Ok(Parsed {
            schema,
            version,
            updated_at,
            extra: root,
            attempts,
            checkpoints,
            history,
        }),
        _ => {
            let more = problems.len().saturating_sub(PROBLEMS_SHOWN);
            problems.truncate(PROBLEMS_SHOWN);
            let mut text = problems.join("; ");
            if more > 0 {
                text.push_str(&format!("; and {more} more"));
            }
            Err(text)
        }
    }
}

fn required_member<T: DeserializeOwned>(
    root: &mut Map<String, Value>,
    key: &str,
    problems: &mut Vec<String>,
) -> Option<T> {
    match root.remove(key) {
        Some(value) => record(key, value, problems),
        None => {
            problems.push(format!("missing field `{key}`"));
            None
        }
    }
}

fn record<T: DeserializeOwned>(at: &str, value: Value, problems: &mut Vec<String>) -> Option<T> {
    serde_json::from_value(value)
        .map_err(|e| problems.push(format!("{at}: {e}")))
        .ok()
}

/// Checks of what the types alone do not enforce.
trait Check {
    fn check(&self, at: &str, problems: &mut Vec<String>);
}

impl Check for TrackedAttempt {
    fn check(&self, at: &str, problems: &mut Vec<String>) {
        check_non_empty(&format!("{at}.id"), &self.id, problems);
        check_time(&format!("{at}.created_at"), &self.created_at, problems);
        check_time(&format!("{at}.updated_at"), &self.updated_at, problems);
        for (i, file) in self.files.iter().enumerate() {
            let at = format!("{at}.files[{i}]");
            check_non_empty(&format!("{at}.path"), &file.path, problems);
            check_hex(
                &format!("{at}.original_hash"),
                &file.original_hash,
                32,
                problems,
            );
            check_hex(
                &format!("{at}.modified_hash"),
                &file.modified_hash,
                32,
                problems,
            );
            if file
                .lines_changed
                .as_ref()
                .is_some_and(|lines| lines.len() != 2)
            {
                problems.push(format!("{at}.lines_changed: expected [start, end]"));
            }
        }
    }
}

impl Check for Checkpoint {
    fn check(&self, at: &str, problems: &mut Vec<String>) {
        check_non_empty(&format!("{at}.name"), &self.name, problems);
        check_time(&format!("{at}.created_at"), &self.created_at, problems);
        if let Some(commit) = &self.git_commit {
            check_hex(&format!("{at}.git_commit"), commit, 40, problems);
        }
        for (path, state) in &self.files {
            check_hex(
                &format!("{at}.files[{path:?}].hash"),
                &state.hash,
                32,
                problems,
            );
        }
    }
}

impl Check for HistoryEntry {
    fn check(&self, at: &str, problems: &mut Vec<String>) {
        check_non_empty(&format!("{at}.id"), &self.id, problems);
        check_time(&format!("{at}.started_at"), &self.started_at, problems);
        check_time(&format!("{at}.ended_at"), &self.ended_at, problems);
    }
}

fn check_non_empty(at: &str, text: &str, problems: &mut Vec<String>) {
    if text.is_empty() {
        problems.push(format!("{at}: must not be empty"));
    }
}

fn check_time(at: &str, text: &str, problems: &mut Vec<String>) {
    if DateTime::parse_from_rfc3339(text).is_err() {
        problems.push(format!("{at}: {text:?} is not an RFC 3339 date-time"));
    }
}

fn check_hex(at: &str, text: &str, len: usize, problems: &mut Vec<String>) {
    let ok = text.len() == len && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if !ok {
        problems.push(format!("{at}: {text:?} is not {len} lower-case hex digits"));
    }
}

fn version_shaped(version: &str) -> bool {
    let mut parts = version.splitn(3, '.');
    let numeric = |part: &str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
    let (Some(major), Some(minor), Some(rest)) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    let patch_digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    numeric(major) && numeric(minor) && patch_digits > 0
}

/// Removes `null` members and elements, which the format never allows.
fn strip_nulls_everywhere(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(strip_nulls_everywhere);
        }
        Value::Array(items) => {
            items.retain(|v| !v.is_null());
            items.iter_mut().for_each(strip_nulls_everywhere);
        }
        _ => {}
    }
}

/// Takes a changed attempts file into the journal: the file is the truth for records others
/// wrote, and its new history entries for journal attempts are applied as transitions.
fn merge(tx: &Transaction<'_>, parsed: Parsed) -> Result<(), JournalError> {
    meta_set(tx, "version", &parsed.version)?;
    meta_set(tx, "schema", &to_json(&parsed.schema)?)?;
    meta_set(tx, "root_extra", &to_json(&parsed.extra)?)?;
    touch(tx, &parsed.updated_at)?;

    let ours: HashSet<String> = strings(tx, "SELECT session_id || ':' || id FROM attempts")?;
    let sessions: HashSet<String> = strings(tx, "SELECT id FROM sessions")?;
    tx.execute("DELETE FROM external_attempts", [])?;
    for (key, attempt) in parsed
        .attempts
        .iter()
        .filter(|(key, _)| !ours.contains(key))
    {
        tx.execute(
            "INSERT INTO external_attempts (key, entry) VALUES (?1, ?2)",
            params![key, to_json(attempt)?],
        )?;
    }
    tx.execute("DELETE FROM external_checkpoints", [])?;
    for (key, checkpoint) in parsed
        .checkpoints
        .iter()
        .filter(|(key, _)| !sessions.contains(key))
    {
        tx.execute(
            "INSERT INTO external_checkpoints (key, entry) VALUES (?1, ?2)",
            params![key, to_json(checkpoint)?],
        )?;
    }

    let mut known: HashMap<String, usize> = HashMap::new();
    for entry in strings::<Vec<String>>(tx, "SELECT entry FROM history")? {
        *known.entry(entry).or_default() += 1;
    }
    for entry in &parsed.history {
        let text = to_json(entry)?;
        match known.get_mut(&text) {
            Some(count) if *count > 0 => *count -= 1,
            _ => {
                if ours.contains(&entry.id) {
                    apply_transition(tx, entry)?;
                }
                insert_history(tx, entry, "file")?;
            }
        }
    }
    Ok(())
}

/// Applies what someone else did to a journal attempt (`acp attempt verify/fail/revert`).
fn apply_transition(tx: &Transaction<'_>, entry: &HistoryEntry) -> Result<(), JournalError> {
    let Some((session_id, attempt_id)) = entry.id.split_once(':') else {
        return Ok(());
    };
    let (ended_at, outcome) = (&entry.ended_at, entry.outcome.as_deref());
    match entry.status {
        Status::Verified => tx.execute(
            "UPDATE attempts SET status = 'succeeded', success = 1,
                 result_at = COALESCE(result_at, ?3), updated_at = ?3,
                 notes = COALESCE(notes, NULLIF(?4, 'Verified and kept'))
             WHERE session_id = ?1 AND id = ?2 AND status IN ('pending', 'failed')",
            params![session_id, attempt_id, ended_at, outcome],
        )?,
        Status::Failed => tx.execute(
            "UPDATE attempts SET status = 'failed', success = 0, result_at = ?3, updated_at = ?3,
                 notes = COALESCE(notes, ?4)
             WHERE session_id = ?1 AND id = ?2 AND status = 'pending'",
            params![session_id, attempt_id, ended_at, outcome],
        )?,
        Status::Reverted => tx.execute(
            "UPDATE attempts SET status = 'reverted', reverted_at = ?3, updated_at = ?3
             WHERE session_id = ?1 AND id = ?2 AND status <> 'reverted'",
            params![session_id, attempt_id, ended_at],
        )?,
        Status::Active | Status::Testing => 0,
    };
    Ok(())
}

/// The document the journal currently holds.
fn build(tx: &Transaction<'_>, now: DateTime<Utc>) -> Result<Document, JournalError> {
    let schema = match meta_get(tx, "schema")? {
        Some(text) => from_json(&text)?,
        None => Some(SCHEMA_URL.to_owned()),
    };
    let version = meta_get(tx, "version")?.unwrap_or_else(|| FORMAT_VERSION.to_owned());
    let updated_at = meta_get(tx, "updated_at")?.unwrap_or_else(|| stamp(now));
    let extra = match meta_get(tx, "root_extra")? {
        Some(text) => from_json(&text)?,
        None => Map::new(),
    };

    let mut attempts = BTreeMap::new();
    for (key, entry) in pairs(tx, "SELECT key, entry FROM external_attempts")? {
        attempts.insert(key, from_json::<TrackedAttempt>(&entry)?);
    }
    let mut files_stmt = tx.prepare(
        "SELECT path, original_hash, original_content, modified_hash FROM attempt_files
         WHERE session_id = ?1 AND attempt_id = ?2 ORDER BY ord",
    )?;
    let mut stmt = tx.prepare(
        "SELECT session_id, id, description, status, created_at, updated_at FROM attempts
         WHERE status IN ('pending', 'failed') ORDER BY session_id, seq",
    )?;
    let rows = stmt
        .query_map([], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, String>(2)?,
                row.get::<_, String>(3)?,
                row.get::<_, String>(4)?,
                row.get::<_, String>(5)?,
            ))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    for (session_id, attempt_id, description, status, created_at, updated_at) in rows {
        let files = files_stmt
            .query_map([&session_id, &attempt_id], |row| {
                Ok(AttemptFile {
                    path: row.get(0)?,
                    original_hash: row.get(1)?,
                    original_content: row.get(2)?,
                    modified_hash: row.get(3)?,
                    lines_changed: None,
                    extra: Extra::new(),
                })
            })?
            .collect::<Result<Vec<_>, _>>()?;
        let key = attempt_key(&session_id, &attempt_id);
        let attempt = TrackedAttempt {
            id: key.clone(),
            for_issue: Some(session_id),
            description: Some(description).filter(|text| !text.is_empty()),
            status: if status == "failed" {
                Status::Failed
            } else {
                Status::Active
            },
            created_at,
            updated_at,
            files,
            revert_if: Vec::new(),
            extra: Extra::new(),
        };
        attempts.insert(key, attempt);
    }

    let mut checkpoints = BTreeMap::new();
    for (key, entry) in pairs(tx, "SELECT key, entry FROM external_checkpoints")? {
        checkpoints.insert(key, from_json::<Checkpoint>(&entry)?);
    }
    let mut stmt = tx.prepare("SELECT id, created_at, problem, hypothesis FROM sessions")?;
    let sessions = stmt
        .query_map([], |row| {
            let (problem, hypothesis): (String, String) = (row.get(2)?, row.get(3)?);
            let mut description = format!("Problem: {problem}");
            if !hypothesis.is_empty() {
                description.push_str(&format!("\nHypothesis: {hypothesis}"));
            }
            Ok(Checkpoint {
                name: row.get(0)?,
                created_at: row.get(1)?,
                description: Some(description),
                git_commit: None,
                files: BTreeMap::new(),
                extra: Extra::new(),
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    for checkpoint in sessions {
        checkpoints.insert(checkpoint.name.clone(), checkpoint);
    }

    let mut history = strings::<Vec<String>>(
        tx,
        &format!("SELECT entry FROM history ORDER BY seq DESC LIMIT {HISTORY_LIMIT}"),
    )?
    .iter()
    .map(|entry| from_json::<HistoryEntry>(entry))
    .collect::<Result<Vec<_>, _>>()?;
    history.reverse();

    Ok(Document {
        schema,
        version,
        updated_at,
        attempts,
        checkpoints,
        history,
        extra,
    })
}

fn fingerprint(bytes: &[u8]) -> String {
    fingerprint_of(bytes.len() as u64, &md5::hex_digest(bytes))
}

/// The fingerprint of content of `length` bytes and MD5 `md5`.
fn fingerprint_of(length: u64, md5: &str) -> String {
    format!("{length}:{md5}")
}

/// Whether the attempts file at `path` is the one the journal last wrote or imported, by its
/// length and MD5 read in pieces (whatever its size).
fn unchanged_since_recorded(tx: &Transaction<'_>, path: &Path) -> Result<bool, JournalError> {
    let now = files::length_and_md5(path)
        .map_err(|err| JournalError::Internal(err.describe(&path.display().to_string())))?;
    let now = now.map(|(length, md5)| fingerprint_of(length, &md5));
    Ok(now.is_some() && now == meta_get(tx, "attempts_fingerprint")?)
}

/// Whether RFC 3339 time `a` is later than `b` (an unreadable `b` counts as earlier).
fn later(a: &str, b: &str) -> bool {
    match (
        DateTime::parse_from_rfc3339(a),
        DateTime::parse_from_rfc3339(b),
    ) {
        (Ok(a), Ok(b)) => a > b,
        (_, Err(_)) => true,
        (Err(_), Ok(_)) => false,
    }
}

fn meta_get(tx: &Transaction<'_>, key: &str) -> Result<Option<String>, JournalError> {
    Ok(tx
        .query_row("SELECT value FROM meta WHERE key = ?1", [key], |row| {
            row.get(0)
        })
        .optional()?)
}

fn meta_set(tx: &Transaction<'_>, key: &str, value: &str) -> Result<(), JournalError> {
    tx.execute(
        "INSERT INTO meta (key, value) VALUES (?1, ?2)
         ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        [key, value],
    )?;
    Ok(())
}

fn strings<C: FromIterator<String>>(tx: &Transaction<'_>, sql: &str) -> Result<C, JournalError> {
    let mut stmt = tx.prepare(sql)?;
    let rows = stmt.query_map([], |row| row.get::<_, String>(0))?;
    Ok(rows.collect::<Result<C, _>>()?)
}

fn pairs(tx: &Transaction<'_>, sql: &str) -> Result<Vec<(String, String)>, JournalError> {
    let mut stmt = tx.prepare(sql)?;
    let rows = stmt.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

fn to_json<T: Serialize>(value: &T) -> Result<String, JournalError> {
    serde_json::to_string(value).map_err(|e| JournalError::Internal(format!("JSON error: {e}")))
}

fn from_json<T: DeserializeOwned>(text: &str) -> Result<T, JournalError> {
    serde_json::from_str(text)
        .map_err(|e| JournalError::Internal(format!("Journal record is not readable: {e}")))
}
