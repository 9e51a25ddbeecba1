//! `acp_hack`: markers for temporary or experimental code (RFC-0013 §5.4, tool reference §13).
//! Markers set through the tool live in the journal (`source: "mcp"`); the hacks the indexer
//! found in `@acp:hack` annotations come from the [`ProjectIndex`](super::ProjectIndex) and are
//! listed read-only (`source: "cache"`). Hacks are never written to the attempts file.

use chrono::NaiveDate;
use rusqlite::{params, Transaction};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::action::{optional, required, stamp, JournalError};
use super::index::CacheHack;
use super::paths;
use super::store::{Journal, Response};
use crate::config::PathRules;
use crate::schemas::Schema;
use std::sync::Arc;

/// Parameters of the `acp_hack` tool.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub struct HackRequest {
    /// Hack tracking action: mark, list, revert or cleanup.
    #[schemars(required, extend("enum" = ["mark", "list", "revert", "cleanup"]))]
    pub action: Option<String>,
    /// Action-specific data.
    #[serde(default)]
    pub data: Option<HackData>,
}

/// The action-specific fields of an `acp_hack` call.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub struct HackData {
    /// File relative to the project root (required for 'mark', optional filter for 'list').
    pub file: Option<String>,
    /// Line of the hack, from 1 (optional for 'mark').
    #[schemars(range(min = 1))]
    pub line: Option<i64>,
    /// Why the hack exists (required for 'mark').
    pub reason: Option<String>,
    /// Tracking ticket, e.g. `PROJ-1234` (optional for 'mark').
    pub ticket: Option<String>,
    /// Date after which the hack should be gone, `YYYY-MM-DD` (optional for 'mark').
    #[schemars(extend("format" = "date"))]
    pub expires: Option<String>,
    /// Only list expired hacks (optional for 'list').
    pub expired_only: Option<bool>,
    /// Hack id, e.g. `hack-001` (required for 'revert').
    pub id: Option<String>,
}

/// An `acp_hack` answer: the fields of its action's answer after `"action"`.
#[derive(Serialize, JsonSchema)]
#[serde(tag = "action", rename_all = "lowercase")]
enum HackAnswer {
    Mark(Marked),
    List(Listed),
    Revert(Removed),
    Cleanup(Cleanup),
}

/// The JSON Schema of `acp_hack`'s answers.
pub(super) fn answer_schema() -> Arc<Schema> {
    crate::schemas::output::<HackAnswer>()
}

/// Runs one `acp_hack` action.
pub(crate) fn run(journal: &Journal, request: HackRequest) -> Result<Response, JournalError> {
    let action = request.action.as_deref().ok_or_else(|| {
        JournalError::InvalidParams("Missing required parameter: action".to_owned())
    })?;
    let data = request.data.unwrap_or_default();
    let answer = match action {
        "mark" => {
            let rules = journal.root.rules()?;
            HackAnswer::Mark(journal.write(false, |tx| mark(journal, tx, &data, &rules))?)
        }
        "list" => HackAnswer::List(list(journal, &data)?),
        "revert" => HackAnswer::Revert(revert(journal, &data)?),
        "cleanup" => HackAnswer::Cleanup(cleanup(journal)?),
        other => {
            return Err(JournalError::InvalidParams(format!(
                "Invalid action: {other}. Use: mark, list, revert, cleanup"
            )))
        }
    };
    Response::new(&answer)
}

/// A hack as every action shows it.
#[derive(Debug, Serialize, JsonSchema)]
struct Hack {
    id: String,
    file: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    line: Option<i64>,
    reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    ticket: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    expires: Option<String>,
    expired: bool,
    created_at: String,
    source: &'static str,
}

#[derive(Serialize, JsonSchema)]
struct Marked {
    hack: Hack,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    unindexed_files: Vec<String>,
}

fn mark(
    journal: &Journal,
    tx: &Transaction<'_>,
    data: &HackData,
    rules: &PathRules,
) -> Result<Marked, JournalError> {
    let file = required(&data.file, "file", "mark")?;
    let reason = required(&data.reason, "reason", "mark")?;
    if let Some(line) = data.line.filter(|line| *line < 1) {
        return Err(JournalError::InvalidParams(format!(
            "Invalid line: {line}; lines are numbered from 1"
        )));
    }
    let expires = optional(&data.expires, "expires")?
        .map(parse_date)
        .transpose()?;
    let file = journal.root.resolve_kept(file, rules)?;
    let ticket = optional(&data.ticket, "ticket")?.map(str::to_owned);
    let now = journal.now();
    let created_at = stamp(now);
    let mut seq: i64 = tx.query_row("SELECT COALESCE(MAX(seq), 0) + 1 FROM hacks", [], |row| {
        row.get(0)
    })?;
    // The index's hacks may have ids of the same form (`hack-001`): an id names one hack.
    let indexed: Vec<String> = cache_hacks(journal)?.into_iter().map(|h| h.id).collect();
    while indexed.contains(&format!("hack-{seq:03}")) {
        seq += 1;
    }
    let id = format!("hack-{seq:03}");
    let expires_text = expires.map(|date| date.format("%Y-%m-%d").to_string());
    tx.execute(
        "INSERT INTO hacks (seq, id, file, line, reason, ticket, expires, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![
            seq,
            id,
            file,
            data.line,
            reason,
            ticket,
            expires_text,
            created_at
        ],
    )?;
    Ok(Marked {
        unindexed_files: journal.unindexed(std::slice::from_ref(&file)),
        hack: Hack {
            id,
            file,
            line: data.line,
            reason: reason.to_owned(),
            ticket,
            expired: expires.is_some_and(|date| date < now.date_naive()),
            expires: expires_text,
            created_at,
            source: "mcp",
        },
    })
}

#[derive(Serialize, JsonSchema)]
struct Listed {
    hacks: Vec<Hack>,
    total: usize,
    expired_count: usize,
}

fn list(journal: &Journal, data: &HackData) -> Result<Listed, JournalError> {
    let file = optional(&data.file, "file")?
        .map(|f| journal.root.resolve(f))
        .transpose()?;
    let expired_only = data.expired_only.unwrap_or(false);
    let hacks: Vec<Hack> = all_hacks(journal)?
        .into_iter()
        .filter(|hack| file.as_ref().is_none_or(|file| &hack.file == file))
        .filter(|hack| !expired_only || hack.expired)
        .collect();
    Ok(Listed {
        total: hacks.len(),
        expired_count: hacks.iter().filter(|hack| hack.expired).count(),
        hacks,
    })
}

#[derive(Serialize, JsonSchema)]
struct Removed {
    id: String,
    removed: bool,
}

fn revert(journal: &Journal, data: &HackData) -> Result<Removed, JournalError> {
    let id = required(&data.id, "id", "revert")?;
    let now = stamp(journal.now());
    let removed = journal.write(false, |tx| {
        Ok(tx.execute(
            "UPDATE hacks SET reverted_at = ?2 WHERE id = ?1 AND reverted_at IS NULL",
            params![id, now],
        )? == 1)
    })?;
    if removed {
        return Ok(Removed {
            id: id.to_owned(),
            removed: true,
        });
    }
    if cache_hacks(journal)?.iter().any(|hack| hack.id == id) {
        return Err(JournalError::InvalidParams(format!(
            "Hack {id} comes from a source annotation; remove the @acp:hack comment and re-run \
             acp index"
        )));
    }
    Err(JournalError::InvalidParams(format!(
        "Hack not found: {id}; use action 'list' to see the current hacks"
    )))
}

#[derive(Serialize, JsonSchema)]
struct Cleanup {
    expired_hacks: Vec<ExpiredHack>,
    count: usize,
    message: String,
}

#[derive(Serialize, JsonSchema)]
struct ExpiredHack {
    id: String,
    file: String,
    reason: String,
    expires: String,
}

fn cleanup(journal: &Journal) -> Result<Cleanup, JournalError> {
    let expired_hacks: Vec<ExpiredHack> = all_hacks(journal)?
        .into_iter()
        .filter(|hack| hack.expired)
        .map(|hack| ExpiredHack {
            id: hack.id,
            file: hack.file,
            reason: hack.reason,
            expires: hack.expires.unwrap_or_default(),
        })
        .collect();
    let count = expired_hacks.len();
    Ok(Cleanup {
        expired_hacks,
        count,
        message: format!("Found {count} expired hack(s). Use 'revert' to remove."),
    })
}

/// The journal's live markers and the index's hacks, sorted by file, line and id.
fn all_hacks(journal: &Journal) -> Result<Vec<Hack>, JournalError> {
    let today = journal.now().date_naive();
    let mut hacks = journal.read(|tx| {
        let mut stmt = tx.prepare(
            "SELECT id, file, line, reason, ticket, expires, created_at
             FROM hacks WHERE reverted_at IS NULL",
        )?;
        let rows = stmt.query_map([], |row| {
            let expires: Option<String> = row.get(5)?;
            Ok(Hack {
                id: row.get(0)?,
                file: row.get(1)?,
                line: row.get(2)?,
                reason: row.get(3)?,
                ticket: row.get(4)?,
                expired: expires
                    .as_deref()
                    .and_then(|text| NaiveDate::parse_from_str(text, "%Y-%m-%d").ok())
                    .is_some_and(|date| date < today),
                expires,
                created_at: row.get(6)?,
                source: "mcp",
            })
        })?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    })?;
    hacks.extend(cache_hacks(journal)?.into_iter().map(|hack| Hack {
        id: hack.id,
        file: paths::normalise(&hack.file),
        line: hack.line.map(i64::from),
        reason: hack.reason,
        ticket: hack.ticket,
        expired: hack.expires.is_some_and(|date| date < today),
        expires: hack.expires.map(|date| date.format("%Y-%m-%d").to_string()),
        created_at: hack.created_at,
        source: "cache",
    }));
    hacks.sort_by(|a, b| {
        (&a.file, a.line.unwrap_or(0), &a.id).cmp(&(&b.file, b.line.unwrap_or(0), &b.id))
    });
    Ok(hacks)
}

fn cache_hacks(journal: &Journal) -> Result<Vec<CacheHack>, JournalError> {
    match &journal.index {
        Some(index) => index
            .cache_hacks()
            .map_err(|e| JournalError::Internal(format!("Index error: {e:#}"))),
        None => Ok(Vec::new()),
    }
}

/// A strict `YYYY-MM-DD` date.
fn parse_date(text: &str) -> Result<NaiveDate, JournalError> {
    let shaped = text.len() == 10
        && text.bytes().enumerate().all(|(i, b)| match i {
            4 | 7 => b == b'-',
            _ => b.is_ascii_digit(),
        });
    shaped
        .then(|| NaiveDate::parse_from_str(text, "%Y-%m-%d").ok())
        .flatten()
        .ok_or_else(|| {
            JournalError::InvalidParams(format!(
                "Invalid expires date: {text} (expected YYYY-MM-DD)"
            ))
        })
}
