//! `acp_unused`: dead-code candidates, the symbols nothing in the call graph calls.
//!
//! Symbols are read largest first through the index `symbols_size` (migration V19) and kept
//! when no call-graph edge leads to them and no rule makes them an entry point: exported
//! symbols (unless asked for), entry points by name (`main`), symbols of test files (the rule
//! `acp_impact` uses for likely tests), constructors and other names the runtime calls, and,
//! unless a `type` is asked for, anything but functions and methods (a static call graph holds
//! calls, not references to classes or types). A call graph from static indexing misses dynamic
//! calls (callbacks, reflection, routing tables), so every answer says how many symbols of the
//! languages listed have any call edge at all: candidates, never proof.
//!
//! The work is bounded: at most [`MAX_READ`] symbols are read to fill a page, and at most
//! [`COUNT_READ`] in all once it is full; past either, `total` counts only the candidates among
//! the symbols read (`total_capped`).

use std::collections::BTreeSet;

use rusqlite::{params, Connection, OptionalExtension};
use serde::{Deserialize, Serialize};

use super::cursor::{page_info, requested_page, within, Page};
use super::impact::looks_like_test;
use super::QueryResult;

/// Candidates per page when no limit is given.
pub const DEFAULT_LIMIT: u32 = 20;

/// Most candidates per page.
pub const MAX_LIMIT: u32 = 100;

/// Most symbols read (in size order) to fill one page, whatever the filters.
pub const MAX_READ: usize = 20_000;

/// Symbols read in all, once the page is full, to count the candidates: `total` counts those
/// among them (exactly, when the symbols end first).
pub const COUNT_READ: usize = 500;

/// Symbols of each language sampled to say how much of it the call graph covers.
pub const COVERAGE_SAMPLE: usize = 1_000;

/// Names the runtime or a framework calls, which no static call graph shows being called.
const CALLED_BY_THE_RUNTIME: &[&str] = &[
    "main",
    "__main__",
    "__init__",
    "__new__",
    "__call__",
    "constructor",
    "new",
    "init",
    "default",
    "drop",
    "setup",
    "teardown",
];

/// Symbol types a call graph can see called; others (classes, interfaces, types, constants)
/// are referenced, not called, and are listed only when their type is asked for.
const CALLABLE_TYPES: &[&str] = &["function", "method"];

/// Arguments of `acp_unused`.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
pub struct UnusedParams {
    /// Only symbols of files in this domain.
    #[serde(default)]
    pub domain: Option<String>,
    /// Only symbols of files matching this glob (`src/billing/**`).
    #[serde(default)]
    pub path: Option<String>,
    /// Only symbols of this type (`function`, `method`, `class`, ...); default: functions and
    /// methods.
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    /// Also list exported symbols (default false: another package may call them).
    #[serde(default)]
    pub include_exported: Option<bool>,
    /// Candidates per page (default 20, at most 100).
    #[serde(default)]
    pub limit: Option<u32>,
    /// The `next_cursor` of a previous answer, for the next page.
    #[serde(default)]
    pub cursor: Option<String>,
}

/// One dead-code candidate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct UnusedSymbol {
    /// Qualified name.
    pub name: String,
    /// Symbol type.
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Canonical file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// `[start, end]` lines.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lines: Option<[i64; 2]>,
    /// Lines it spans (its size).
    pub size: i64,
    /// Whether it is exported.
    pub exported: bool,
    /// Why it is listed.
    pub reason: String,
}

/// How much of one language the call graph covers, from a sample.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct CallCoverage {
    /// Language of the files (`unknown` when the file names none).
    pub language: String,
    /// Symbols of the language sampled (in index order).
    pub sampled: u64,
    /// Of those, the symbols with at least one call edge (calling or called).
    pub with_call_edges: u64,
}

/// Answer of `acp_unused`.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct UnusedResponse {
    /// This page of candidates, largest first.
    pub result: Vec<UnusedSymbol>,
    /// Candidates among the symbols read (all the candidates unless `total_capped`).
    pub total: u64,
    /// Set when the answer stopped before the last symbol ([`MAX_READ`], [`COUNT_READ`]):
    /// `total` is then a lower bound, the candidates among the symbols read.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub total_capped: bool,
    /// The call graph's coverage of the languages listed.
    pub coverage: Vec<CallCoverage>,
    /// What a candidate is and is not.
    pub note: String,
    /// More candidates follow this page.
    pub truncated: bool,
    /// Cursor of the next page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// The symbols in size order, largest first, with what the first rules need, read from the
/// index `symbols_size` alone.
const CANDIDATES_SQL: &str = "SELECT s.id, coalesce(s.exported, 0), s.type
 FROM symbols s INDEXED BY symbols_size
 ORDER BY coalesce(s.line_end - s.line_start, -1) DESC, s.id";

/// The rest of a symbol the rules and the answer need (parameter: the symbol).
const SYMBOL_SQL: &str =
    "SELECT coalesce(qualified_name, key), name, file_path, line_start, line_end
 FROM symbols WHERE id = ?1";

/// How many call-graph nodes of a symbol have callers, and how many callees (parameter: the
/// symbol).
const CALLS_SQL: &str =
    "SELECT count(*) FILTER (WHERE callers > 0), count(*) FILTER (WHERE callees > 0)
 FROM graph_nodes WHERE symbol_id = ?1";

/// Whether a file is in the domain and matches the path glob (parameters: the path, the glob or
/// NULL, the domain or NULL).
const PLACE_SQL: &str = "SELECT (?2 IS NULL OR ?1 GLOB ?2)
    AND (?3 IS NULL OR EXISTS (SELECT 1 FROM domain_files d WHERE d.domain = ?3 AND d.path = ?1))";

/// A sample of the symbols of one language, each with whether it has any call edge
/// (parameters: the language, the sample size).
const COVERAGE_SQL: &str = "SELECT count(*), coalesce(sum(EXISTS (SELECT 1 FROM graph_nodes n
            WHERE n.symbol_id = s.id AND (n.callers > 0 OR n.callees > 0))), 0)
 FROM (SELECT s.id FROM files f CROSS JOIN symbols s ON s.file_path = f.path
       WHERE coalesce(f.language, 'unknown') = ?1 LIMIT ?2) s";

/// A symbol's qualified name, name, file and lines.
type Symbol = (
    String,
    Option<String>,
    Option<String>,
    Option<i64>,
    Option<i64>,
);

/// The language of the file at `path`.
fn language_of(conn: &Connection, path: &str) -> QueryResult<String> {
    Ok(conn
        .prepare_cached("SELECT language FROM files WHERE path = ?1 ORDER BY id LIMIT 1")?
        .query_row([path], |r| r.get::<_, Option<String>>(0))
        .optional()?
        .flatten()
        .unwrap_or_else(|| "unknown".to_string()))
}

/// `acp_unused`: one page of dead-code candidates, largest first.
pub fn acp_unused(conn: &Connection, params: &UnusedParams) -> QueryResult<UnusedResponse> {
    let limit = within(params.limit, "limit", DEFAULT_LIMIT, MAX_LIMIT)?;
    let include_exported = params.include_exported.unwrap_or(false);
    let kind = params.kind.as_deref().map(str::to_ascii_lowercase);
    // A cursor belongs to one listing: every filter.
    let key = serde_json::json!([params.domain, params.path, kind, include_exported]).to_string();
    let page = requested_page(
        conn,
        "unused",
        &key,
        None,
        Some(limit),
        params.cursor.as_deref(),
    )?;
    if let Some(domain) = &params.domain {
        let known: bool = conn
            .prepare_cached("SELECT EXISTS (SELECT 1 FROM domains WHERE key = ?1)")?
            .query_row([domain], |r| r.get(0))?;
        if !known {
            return Err(super::names::not_found(
                "Domain",
                domain,
                super::names::suggest_domains(conn, domain)?,
            ));
        }
    }
    let path_glob = params
        .path
        .as_deref()
        .map(|p| p.strip_prefix("./").unwrap_or(p));
    let mut stmt = conn.prepare_cached(CANDIDATES_SQL)?;
    let mut symbol = conn.prepare_cached(SYMBOL_SQL)?;
    let mut calls = conn.prepare_cached(CALLS_SQL)?;
    let mut place = conn.prepare_cached(PLACE_SQL)?;
    let mut rows = stmt.query([])?;
    let wanted = page.offset.saturating_add(u64::from(limit));
    let (mut found, mut read) = (Vec::new(), 0usize);
    let mut total = 0u64;
    let mut capped = false;
    while let Some(row) = rows.next()? {
        // The page is filled within MAX_READ symbols; once it is full (and one more is known to
        // follow), counting goes on only within COUNT_READ.
        let budget = if total > wanted { COUNT_READ } else { MAX_READ };
        if read >= budget {
            capped = true;
            break;
        }
        read += 1;
        // The rules the index answers first.
        let id: i64 = row.get(0)?;
        let exported = row.get::<_, i64>(1)? != 0;
        let symbol_type: Option<String> = row.get(2)?;
        let type_kept = match (&kind, symbol_type.as_deref().map(str::to_ascii_lowercase)) {
            (Some(asked), found) => found.as_ref() == Some(asked),
            (None, None) => true,
            (None, Some(found)) => CALLABLE_TYPES.contains(&found.as_str()),
        };
        if (exported && !include_exported) || !type_kept {
            continue;
        }
        let (qualified, name, file, start, end): Symbol = symbol.query_row([id], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })?;
        let runtime_called = name
            .as_deref()
            .is_some_and(|n| CALLED_BY_THE_RUNTIME.contains(&n.to_ascii_lowercase().as_str()));
        if runtime_called || file.as_deref().is_some_and(looks_like_test) {
            continue;
        }
        if path_glob.is_some() || params.domain.is_some() {
            let placed: bool =
                place.query_row(params![file, path_glob, params.domain], |r| r.get(0))?;
            if !placed {
                continue;
            }
        }
        let (called, calling): (i64, i64) =
            calls.query_row([id], |r| Ok((r.get(0)?, r.get(1)?)))?;
        if called > 0 {
            continue;
        }
        total += 1;
        if total <= page.offset || total > wanted {
            continue;
        }
        let lines = start.map(|s| [s, end.unwrap_or(s)]);
        found.push(UnusedSymbol {
            name: qualified,
            kind: symbol_type,
            file,
            lines,
            size: lines.map_or(0, |[s, e]| e - s + 1),
            exported,
            reason: if calling > 0 {
                "nothing in the call graph calls it".to_string()
            } else {
                "nothing in the call graph calls it, and it calls nothing".to_string()
            },
        });
    }
    drop(rows);
    let more = total > wanted;
    let mut languages = BTreeSet::new();
    for file in found.iter().filter_map(|c| c.file.as_deref()) {
        languages.insert(language_of(conn, file)?);
    }
    let mut coverage = Vec::new();
    for language in languages {
        let (sampled, with_edges): (i64, i64) = conn
            .prepare_cached(COVERAGE_SQL)?
            .query_row(params![language, COVERAGE_SAMPLE as i64], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })?;
        coverage.push(CallCoverage {
            language,
            sampled: sampled as u64,
            with_call_edges: with_edges as u64,
        });
    }
    let info = page_info(
        conn,
        "unused",
        &key,
        None,
        Page::next_offset(&page, found.len()),
        more,
    )?;
    Ok(UnusedResponse {
        result: found,
        total,
        total_capped: capped,
        coverage,
        note: "Candidates, not proof: the call graph holds the calls static indexing saw. Calls through callbacks, reflection, dynamic dispatch, routing tables, templates or other packages are missing; coverage says how many sampled symbols of each language have any call edge at all.".to_string(),
        truncated: info.truncated,
        next_cursor: info.next_cursor,
    })
}
