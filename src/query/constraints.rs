//! `acp_constraints`: the normalised, spec-shaped view of what may be done to a file.
//!
//! The lock level, reason, directive, style, behaviour and quality list come from the imported
//! `constraints.by_file` entry (either cache shape, normalised by the importer). When several
//! entries map to the same canonical path the most restrictive one wins. Files without an
//! entry, and files unknown to the index, are `normal`. Symbol-level constraints of the file's
//! symbols are listed after the file's own.

use rusqlite::{params, Connection, OptionalExtension};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::names::{find_file, user_path};
use super::{QueryError, QueryResult};
use crate::cache::{lock_level_rank, normalize_lock_level};

/// Parameters of `acp_constraints`.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
pub struct ConstraintsParams {
    /// Path of the file to check, relative to the project root (`./src/a.ts`, `src\a.ts` and
    /// `src/a.ts` are the same file). Also accepted as `path` or `filepath`.
    #[serde(alias = "path", alias = "filepath")]
    #[schemars(with = "String")]
    pub file: Option<String>,
}

/// Whether and how the file may be modified.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct CanModify {
    /// Changes are allowed at all.
    pub allowed: bool,
    /// Changes need explicit approval first.
    pub approval_needed: bool,
    /// What a change must come with.
    pub requirements: Vec<String>,
}

/// A constraint declared on one symbol of the file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct SymbolConstraint {
    /// Qualified name of the symbol.
    pub symbol: String,
    /// `[start, end]` lines.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lines: Option<[i64; 2]>,
    /// Normalised lock level (`normal` when the entry names none).
    pub lock_level: String,
    /// Why it is locked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lock_reason: Option<String>,
    /// Instruction for agents.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub directive: Option<String>,
}

/// Answer of `acp_constraints`.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ConstraintsResponse {
    /// Canonical path.
    pub file: String,
    /// Whether the file is in the index.
    pub exists: bool,
    /// Effective lock level.
    pub lock_level: String,
    /// Why it is locked.
    pub lock_reason: Option<String>,
    /// Instruction for agents.
    pub directive: Option<String>,
    /// Style guide.
    pub style: Option<String>,
    /// Expected behaviour (`conservative`, ...).
    pub behavior: Option<String>,
    /// Quality requirements (`tests-required`, `security-review`, ...).
    pub quality: Vec<String>,
    /// Whether and how the file may be modified.
    pub can_modify: CanModify,
    /// What the lock level asks of an agent.
    pub lock_level_meaning: &'static str,
    /// Constraints declared on the file's symbols (omitted when none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub symbols: Vec<SymbolConstraint>,
}

/// The file-level constraint fields, as stored.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct FileConstraint {
    /// Normalised lock level.
    pub lock_level: String,
    /// Why it is locked.
    pub lock_reason: Option<String>,
    /// Instruction for agents.
    pub directive: Option<String>,
    /// Style guide.
    pub style: Option<String>,
    /// Expected behaviour.
    pub behavior: Option<String>,
    /// Quality requirements.
    pub quality: Vec<String>,
}

/// What a lock level asks of an agent (cache-format §18.1).
pub fn lock_level_meaning(level: &str) -> &'static str {
    match level {
        "frozen" => "Never modify this code.",
        "restricted" => "Explain proposed changes and obtain explicit approval before any change.",
        "approval-required" => "Ask for approval before significant changes.",
        "tests-required" => "Changes must include tests.",
        "docs-required" => "Changes must update the documentation.",
        "review-required" => "Changes need code review.",
        "experimental" => "Experimental code: aggressive changes are welcome.",
        _ => "No restrictions: change freely.",
    }
}

/// `can_modify` of a lock level (unknown levels behave as `normal`).
pub fn can_modify(level: &str) -> CanModify {
    let (allowed, approval_needed, requirement) = match level {
        "frozen" => (false, false, Some("Do not modify this file")),
        "restricted" => (true, true, Some("Explain changes before making them")),
        "approval-required" => (true, true, Some("Get approval before significant changes")),
        "tests-required" => (true, false, Some("Include tests with changes")),
        "docs-required" => (true, false, Some("Update documentation with changes")),
        "review-required" => (true, false, Some("Request code review for changes")),
        _ => (true, false, None),
    };
    CanModify {
        allowed,
        approval_needed,
        requirements: requirement.into_iter().map(str::to_string).collect(),
    }
}

/// SQL of the constraint entries of a file (parameters: key as given, canonical path).
pub const FILE_CONSTRAINTS_SQL: &str = "SELECT lock_level, lock_reason, directive, style, behavior, quality_json FROM constraints WHERE key = ?1
     UNION ALL
     SELECT lock_level, lock_reason, directive, style, behavior, quality_json FROM constraints WHERE path = ?2";

/// SQL of the symbol constraints of a file (parameter: canonical path).
pub const SYMBOL_CONSTRAINTS_SQL: &str =
    "SELECT coalesce(qualified_name, key), line_start, line_end, constraints_json FROM symbols
     WHERE file_path = ?1 AND constraints_json IS NOT NULL ORDER BY line_start, id";

/// The most restrictive constraint entry stored for `key` or `path`, if any.
pub fn file_constraint(
    conn: &Connection,
    key: &str,
    path: &str,
) -> QueryResult<Option<FileConstraint>> {
    let mut stmt = conn.prepare_cached(FILE_CONSTRAINTS_SQL)?;
    let rows = stmt.query_map(params![key, path], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, Option<String>>(1)?,
            r.get::<_, Option<String>>(2)?,
            r.get::<_, Option<String>>(3)?,
            r.get::<_, Option<String>>(4)?,
            r.get::<_, String>(5)?,
        ))
    })?;
    let mut best: Option<FileConstraint> = None;
    for row in rows {
        let (lock_level, lock_reason, directive, style, behavior, quality) = row?;
        let candidate = FileConstraint {
            lock_level,
            lock_reason,
            directive,
            style,
            behavior,
            quality: serde_json::from_str(&quality)?,
        };
        let better = best.as_ref().is_none_or(|b| {
            lock_level_rank(&candidate.lock_level) < lock_level_rank(&b.lock_level)
        });
        if better {
            best = Some(candidate);
        }
    }
    Ok(best)
}

/// The lock level of the file at canonical `path`: its most restrictive constraint's, or
/// `normal` when no constraint names it.
pub fn file_lock_level(conn: &Connection, path: &str) -> QueryResult<String> {
    let key: Option<String> = conn
        .prepare_cached("SELECT key FROM files WHERE path = ?1 ORDER BY id LIMIT 1")?
        .query_row([path], |r| r.get(0))
        .optional()?;
    Ok(file_constraint(conn, key.as_deref().unwrap_or(path), path)?
        .map_or_else(|| "normal".to_string(), |c| c.lock_level))
}

fn symbol_constraints(conn: &Connection, path: &str) -> QueryResult<Vec<SymbolConstraint>> {
    let mut stmt = conn.prepare_cached(SYMBOL_CONSTRAINTS_SQL)?;
    let rows = stmt.query_map([path], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, Option<i64>>(1)?,
            r.get::<_, Option<i64>>(2)?,
            r.get::<_, String>(3)?,
        ))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (symbol, start, end, raw) = row?;
        let Ok(Value::Object(entry)) = serde_json::from_str::<Value>(&raw) else {
            continue;
        };
        let text = |a: &str, b: &str| {
            entry
                .get(a)
                .or_else(|| entry.get(b))
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        out.push(SymbolConstraint {
            symbol,
            lines: start.map(|s| [s, end.unwrap_or(s)]),
            lock_level: text("lock_level", "level")
                .map(|l| normalize_lock_level(&l))
                .unwrap_or_else(|| "normal".into()),
            lock_reason: text("lock_reason", "reason"),
            directive: text("directive", "directive"),
        });
    }
    Ok(out)
}

/// Whether a canonical path points outside the project (climbs above it or stays absolute).
fn outside_root(canonical: &str) -> bool {
    let bytes = canonical.as_bytes();
    canonical == ".."
        || canonical.starts_with("../")
        || canonical.starts_with('/')
        || (bytes.len() >= 2 && bytes[1] == b':' && bytes[0].is_ascii_alphabetic())
}

/// `acp_constraints`: the effective constraints of one file.
pub fn acp_constraints(
    conn: &Connection,
    params: &ConstraintsParams,
) -> QueryResult<ConstraintsResponse> {
    let given = params
        .file
        .as_deref()
        .filter(|f| !f.trim().is_empty())
        .ok_or_else(|| {
            QueryError::invalid_with(
                "Missing required parameter: file",
                serde_json::json!({"field": "file"}),
            )
        })?;
    let found = find_file(conn, given)?;
    let path = match &found {
        Some(file) => file.path.clone(),
        None => {
            let canonical = user_path(conn, given)?;
            if outside_root(&canonical) {
                return Err(QueryError::invalid_with(
                    format!("Path outside project root: {given}"),
                    serde_json::json!({"field": "file"}),
                ));
            }
            canonical
        }
    };
    let constraint = file_constraint(conn, given, &path)?.unwrap_or_else(|| FileConstraint {
        lock_level: "normal".into(),
        ..FileConstraint::default()
    });
    let symbols = symbol_constraints(conn, &path)?;
    Ok(ConstraintsResponse {
        file: path,
        exists: found.is_some(),
        can_modify: can_modify(&constraint.lock_level),
        lock_level_meaning: lock_level_meaning(&constraint.lock_level),
        lock_level: constraint.lock_level,
        lock_reason: constraint.lock_reason,
        directive: constraint.directive,
        style: constraint.style,
        behavior: constraint.behavior,
        quality: constraint.quality,
        symbols,
    })
}
