//! `acp_query` lookups — `symbol`, `file`, `domain`, `stats` — and the stored cache entries
//! they return.
//!
//! Entries are rebuilt from their modelled columns plus `extra` (see `cache::fields`) and keep
//! a stable key order: modelled fields in cache order, then the remaining fields by name. Every
//! list inside an answer that can grow with the project (a file's symbols, a domain's files, a
//! symbol's callers and callees) is bounded by the request's `limit`.

use rusqlite::{params, Connection, OptionalExtension};
use serde::Serialize;
use serde_json::Value;

use super::cursor::{page_info, Page};
use super::entries::{self, Section};
use super::graph::{walk, Direction, Endpoint, Relation};
use super::names::{not_found, resolve_file, resolve_symbol, suggest_domains};
pub use super::ordered::Entry;
use super::staleness::{source_state, SourceState};
use super::{QueryError, QueryResult};

/// The stored `section` entry whose column `by` equals `key`, in field order.
fn load_entry(
    conn: &Connection,
    section: Section,
    by: &str,
    key: &dyn rusqlite::ToSql,
) -> QueryResult<Option<Entry>> {
    Ok(section
        .load(conn, by, key)?
        .map(|map| Entry::in_field_order(map, section.fields)))
}

/// The stored symbol entry of row `id`.
pub fn symbol_entry(conn: &Connection, id: i64) -> QueryResult<Entry> {
    load_entry(conn, entries::SYMBOLS, "id", &id)?
        .ok_or_else(|| QueryError::Internal(format!("symbol row {id} vanished")))
}

/// The stored file entry of row `id`.
pub fn file_entry(conn: &Connection, id: i64) -> QueryResult<Entry> {
    load_entry(conn, entries::FILES, "id", &id)?
        .ok_or_else(|| QueryError::Internal(format!("file row {id} vanished")))
}

/// The stored domain entry whose map key is `name` (exact, case-sensitive).
pub fn domain_entry(conn: &Connection, name: &str) -> QueryResult<Option<Entry>> {
    load_entry(conn, entries::DOMAINS, "key", &name)
}

/// The stored variable entry named `name` (exact, case-sensitive).
pub fn var_entry(conn: &Connection, name: &str) -> QueryResult<Option<Entry>> {
    load_entry(conn, entries::VARS, "name", &name)
}

/// Answer of `acp_query` type `symbol`.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct SymbolResponse {
    /// Always `symbol`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The symbol entry followed by `callers` and `callees` (direct, at most `limit` each).
    pub result: Entry,
    /// Distinct direct callers (at most [`TOTAL_CAP`](super::graph::TOTAL_CAP)).
    pub callers_total: u64,
    /// Distinct direct callees (at most [`TOTAL_CAP`](super::graph::TOTAL_CAP)).
    pub callees_total: u64,
    /// Whether `callers` or `callees` was cut at `limit` (page them with type `callers` /
    /// `callees`).
    pub truncated: bool,
}

/// `acp_query` symbol: the entry with its direct callers and callees (qualified names when
/// resolved, else raw graph names; sorted).
pub fn symbol(conn: &Connection, name: &str, limit: u32) -> QueryResult<SymbolResponse> {
    let (found, _) = resolve_symbol(conn, name)?;
    let mut result = symbol_entry(conn, found.id)?;
    let page = Page { offset: 0, limit };
    let callers = walk(
        conn,
        Endpoint::Symbol(found.id),
        Direction::Callers,
        1,
        page,
    )?;
    let callees = walk(
        conn,
        Endpoint::Symbol(found.id),
        Direction::Callees,
        1,
        page,
    )?;
    let names =
        |items: &[Relation]| Value::from(items.iter().map(|r| r.name.clone()).collect::<Vec<_>>());
    result.insert("callers", names(&callers.items));
    result.insert("callees", names(&callees.items));
    Ok(SymbolResponse {
        kind: "symbol",
        result,
        callers_total: callers.total,
        callees_total: callees.total,
        truncated: callers.total > callers.items.len() as u64
            || callees.total > callees.items.len() as u64,
    })
}

/// Answer of `acp_query` types `file` and `domain`: an entry with one paged list inside it.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct EntryResponse {
    /// `file` or `domain`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The entry; for a file followed by `symbols`, for a domain its `files` are paged.
    pub result: Entry,
    /// Items in the paged list (a file's symbols, a domain's files).
    pub total: u64,
    /// More items of the paged list follow this page.
    pub truncated: bool,
    /// Cursor of the next page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// SQL of one page of a file's symbols (parameters: canonical path, limit, offset).
pub const FILE_SYMBOLS_SQL: &str = "SELECT coalesce(qualified_name, key) FROM symbols WHERE file_path = ?1 ORDER BY line_start, name, id LIMIT ?2 OFFSET ?3";

/// `acp_query` file: the file entry followed by the qualified names of its symbols (by start
/// line, then name), paged.
pub fn file(conn: &Connection, name: &str, page: Page) -> QueryResult<EntryResponse> {
    let found = resolve_file(conn, name)?;
    let mut result = file_entry(conn, found.id)?;
    let symbols: Vec<String> = conn
        .prepare_cached(FILE_SYMBOLS_SQL)?
        .query_map(params![found.path, page.limit, page.offset as i64], |r| {
            r.get(0)
        })?
        .collect::<rusqlite::Result<_>>()?;
    let total: i64 = conn
        .prepare_cached("SELECT count(*) FROM symbols WHERE file_path = ?1")?
        .query_row([&found.path], |r| r.get(0))?;
    let next = page.next_offset(symbols.len());
    let info = page_info(conn, "file", name, None, next, next < total as u64)?;
    result.insert("symbols", Value::from(symbols));
    Ok(EntryResponse {
        kind: "file",
        result,
        total: total as u64,
        truncated: info.truncated,
        next_cursor: info.next_cursor,
    })
}

/// `acp_query` domain: the domain entry (`name`, `description`, `files`, `symbols` as stored);
/// `files` is paged, `symbols` holds at most `limit` names.
pub fn domain(conn: &Connection, name: &str, page: Page) -> QueryResult<EntryResponse> {
    let Some(mut result) = domain_entry(conn, name)? else {
        return Err(not_found("Domain", name, suggest_domains(conn, name)?));
    };
    let (files, total) = window(result.get("files"), page);
    let (symbols, symbols_total) = window(
        result.get("symbols"),
        Page {
            offset: 0,
            limit: page.limit,
        },
    );
    let next = page.next_offset(files.len());
    let info = page_info(conn, "domain", name, None, next, next < total)?;
    if result.get("files").is_some() {
        result.insert("files", Value::from(files));
    }
    if result.get("symbols").is_some() {
        result.insert("symbols", Value::from(symbols));
        if symbols_total > u64::from(page.limit) {
            result.insert("symbols_total", Value::from(symbols_total));
        }
    }
    Ok(EntryResponse {
        kind: "domain",
        result,
        total,
        truncated: info.truncated,
        next_cursor: info.next_cursor,
    })
}

/// The `page` window of a JSON array, and the array's length.
fn window(list: Option<&Value>, page: Page) -> (Vec<Value>, u64) {
    match list {
        Some(Value::Array(items)) => (
            items
                .iter()
                .skip(page.offset as usize)
                .take(page.limit as usize)
                .cloned()
                .collect(),
            items.len() as u64,
        ),
        _ => (Vec::new(), 0),
    }
}

/// Answer of `acp_query` type `stats`.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct StatsResponse {
    /// Always `stats`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The counts.
    pub result: Stats,
    /// The indexed commit against the project's git `HEAD`.
    pub source: SourceState,
}

/// Codebase statistics.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Stats {
    /// File entries.
    pub files: u64,
    /// Symbol entries.
    pub symbols: u64,
    /// Sum of the files' `lines`.
    pub lines: u64,
    /// Domain entries.
    pub domains: u64,
    /// Files per effective lock level (files without a constraint count as `normal`), most
    /// restrictive first, levels with no file left out.
    pub constraints: Entry,
    /// Distinct file languages, sorted.
    pub languages: Vec<String>,
}

/// `acp_query` stats.
pub fn stats(conn: &Connection) -> QueryResult<StatsResponse> {
    let (files, symbols, lines, domains) = conn
        .prepare_cached("SELECT files, symbols, lines, domains FROM index_summary")?
        .query_row([], |r| {
            Ok((
                r.get::<_, i64>(0)?.max(0) as u64,
                r.get::<_, i64>(1)?.max(0) as u64,
                r.get::<_, i64>(2)?.max(0) as u64,
                r.get::<_, i64>(3)?.max(0) as u64,
            ))
        })?;
    let mut constraints = Entry::default();
    let mut stmt = conn.prepare_cached(
        "SELECT lock_level, files FROM file_lock_levels WHERE files > 0 ORDER BY rank",
    )?;
    for row in stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))? {
        let (level, n) = row?;
        constraints.insert(&level, Value::from(n));
    }
    let languages: Vec<String> = conn
        .prepare_cached("SELECT language FROM file_languages ORDER BY language")?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    Ok(StatsResponse {
        source: source_state(conn)?,
        kind: "stats",
        result: Stats {
            files,
            symbols,
            lines,
            domains,
            constraints,
            languages,
        },
    })
}

/// Whether a vars file was imported.
pub fn vars_loaded(conn: &Connection) -> QueryResult<bool> {
    Ok(conn
        .prepare_cached("SELECT EXISTS (SELECT 1 FROM vars_root) OR EXISTS (SELECT 1 FROM vars)")?
        .query_row([], |r| r.get(0))?)
}

/// A top-level member of the cache document, as JSON (`None` when absent or streamed).
pub fn cache_root_value(conn: &Connection, key: &str) -> QueryResult<Option<Value>> {
    let text: Option<String> = conn
        .prepare_cached("SELECT value_json FROM cache_root WHERE key = ?1")?
        .query_row([key], |r| r.get(0))
        .optional()?
        .flatten();
    Ok(match text {
        Some(text) => Some(serde_json::from_str(&text)?),
        None => None,
    })
}
