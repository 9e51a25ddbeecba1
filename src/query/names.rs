//! Resolving the names agents give (files, symbols, domains) to rows, with candidates for
//! ambiguous names and suggestions for unknown ones.

use rusqlite::{params, Connection, OptionalExtension, Row};
use serde::Serialize;
use serde_json::json;

use super::similar::{
    closest, containing, similar_names, trigram_sql, TrigramCounts, TrigramSql, FILE_PATHS,
    PIECE_CAP, PROBE_CAP, SYMBOL_NAMES, VARIABLE_NAMES,
};
use super::{QueryError, QueryResult};
use crate::cache::paths::{canonical_path, split_qualified_name};

/// Most suggestions or candidates listed in an error.
pub const MAX_SUGGESTIONS: usize = 5;

/// Most symbols of one file read for the suggestions of a qualified name in it.
const FILE_SYMBOLS_READ: usize = 256;

/// The qualified names of the symbols whose simple name contains a text, through the name
/// trigram index ([`containing`]).
const SYMBOL_QUALIFIED_NAMES: TrigramSql = trigram_sql!(
    "symbols_name_trigram",
    "symbols",
    "coalesce(t.qualified_name, t.key)",
    "name"
);

/// A symbol row, enough to locate it.
/// A `WHERE` condition: the symbol's qualified name is `?1` (exactly), read through the
/// case-insensitive index `symbols_qualified_name`.
pub(crate) const QUALIFIED_NAME_IS: &str =
    "coalesce(qualified_name, key) = ?1 COLLATE NOCASE AND qualified_name = ?1";

/// A `WHERE` condition: the symbol's simple name is `?1` (exactly), read through the
/// case-insensitive index `symbols_name`.
pub(crate) const NAME_IS: &str = "name = ?1 COLLATE NOCASE AND name = ?1";

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SymbolRef {
    /// Row id.
    #[serde(skip)]
    pub id: i64,
    /// The cache's own map key.
    #[serde(skip)]
    pub key: String,
    /// Simple name.
    pub name: Option<String>,
    /// Qualified name (falls back to the map key).
    pub qualified_name: String,
    /// Canonical file path.
    pub file: Option<String>,
    /// `[start, end]` lines.
    pub lines: Option<[i64; 2]>,
    /// Symbol type.
    #[serde(rename = "type")]
    pub kind: Option<String>,
}

const SYMBOL_COLUMNS: &str =
    "id, key, name, coalesce(qualified_name, key), file_path, line_start, line_end, type";

fn symbol_ref(row: &Row) -> rusqlite::Result<SymbolRef> {
    let start: Option<i64> = row.get(5)?;
    let end: Option<i64> = row.get(6)?;
    Ok(SymbolRef {
        id: row.get(0)?,
        key: row.get(1)?,
        name: row.get(2)?,
        qualified_name: row.get(3)?,
        file: row.get(4)?,
        lines: start.map(|s| [s, end.unwrap_or(s)]),
        kind: row.get(7)?,
    })
}

/// How a symbol name matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SymbolMatch {
    /// The cache's map key.
    Key,
    /// The qualified name (possibly after canonicalising its path part).
    QualifiedName,
    /// A unique simple name.
    SimpleName,
}

/// Finds the symbol an agent means: the cache's map key first, then the qualified name (its path
/// part canonicalised, so `./src/a.ts:f` works), then a unique simple name. An ambiguous simple
/// name is an error listing the candidates; an unknown one lists close names.
pub fn resolve_symbol(conn: &Connection, name: &str) -> QueryResult<(SymbolRef, SymbolMatch)> {
    if let Some(found) = find_symbol(conn, name)? {
        return Ok(found);
    }
    let suggestions = symbol_suggestions(conn, name)?;
    Err(not_found("Symbol", name, suggestions))
}

/// For a name [`find_symbol`] found nothing for: the error listing the candidates when it is
/// an ambiguous simple name, else the symbols [`suggest_symbols`] finds close to it.
pub fn symbol_suggestions(conn: &Connection, name: &str) -> QueryResult<Vec<String>> {
    let candidates = symbols_named(conn, name, MAX_SUGGESTIONS + 1)?;
    if candidates.len() > 1 {
        let total = count_symbols_named(conn, name)?;
        let shown: Vec<_> = candidates.into_iter().take(MAX_SUGGESTIONS).collect();
        let list = shown
            .iter()
            .map(|c| c.qualified_name.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        return Err(QueryError::invalid_with(
            format!(
                "Symbol name is ambiguous: {name} matches {total} symbols ({list}{}). Call again with a qualified name (path:name).",
                if total as usize > shown.len() { ", ..." } else { "" }
            ),
            json!({"candidates": shown, "total": total}),
        ));
    }
    suggest_symbols(conn, name)
}

/// Like [`resolve_symbol`] but `None` instead of a not-found error (ambiguity is still an error).
pub fn find_symbol(conn: &Connection, name: &str) -> QueryResult<Option<(SymbolRef, SymbolMatch)>> {
    let by_key = conn
        .prepare_cached(&format!(
            "SELECT {SYMBOL_COLUMNS} FROM symbols WHERE key = ?1"
        ))?
        .query_row([name], symbol_ref)
        .optional()?;
    if let Some(symbol) = by_key {
        return Ok(Some((symbol, SymbolMatch::Key)));
    }
    let mut forms = vec![name.to_string()];
    if let Some((path, member)) = split_qualified_name(name, None) {
        let canonical = format!("{}:{member}", canonical_path(path, None));
        if canonical != name {
            forms.push(canonical);
        }
    }
    for form in &forms {
        let by_qualified = conn
            .prepare_cached(&format!("SELECT {SYMBOL_COLUMNS} FROM symbols WHERE {QUALIFIED_NAME_IS} ORDER BY id LIMIT 1"))?
            .query_row([form], symbol_ref)
            .optional()?;
        if let Some(symbol) = by_qualified {
            return Ok(Some((symbol, SymbolMatch::QualifiedName)));
        }
    }
    if let Some((path, member)) = split_qualified_name(name, None) {
        let by_file_and_name = conn
            .prepare_cached(&format!(
                "SELECT {SYMBOL_COLUMNS} FROM symbols WHERE file_path = ?1 AND name = ?2 ORDER BY id LIMIT 1"
            ))?
            .query_row(params![canonical_path(path, None), member], symbol_ref)
            .optional()?;
        if let Some(symbol) = by_file_and_name {
            return Ok(Some((symbol, SymbolMatch::QualifiedName)));
        }
    }
    let named = symbols_named(conn, name, 2)?;
    if named.len() == 1 {
        return Ok(named
            .into_iter()
            .next()
            .map(|s| (s, SymbolMatch::SimpleName)));
    }
    Ok(None)
}

fn symbols_named(conn: &Connection, name: &str, limit: usize) -> QueryResult<Vec<SymbolRef>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {SYMBOL_COLUMNS} FROM symbols WHERE {NAME_IS} ORDER BY qualified_name, id LIMIT ?2"
    ))?;
    let rows = stmt.query_map(params![name, limit as i64], symbol_ref)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

fn count_symbols_named(conn: &Connection, name: &str) -> QueryResult<i64> {
    Ok(conn
        .prepare_cached(&format!("SELECT count(*) FROM symbols WHERE {NAME_IS}"))?
        .query_row([name], |r| r.get(0))?)
}

/// Up to [`MAX_SUGGESTIONS`] qualified names close to `name`: for a qualified name, the
/// symbols of its file a few typos from its member when there are any; else names it begins
/// (ignoring case), then substring matches, then names a few typos away.
pub fn suggest_symbols(conn: &Connection, name: &str) -> QueryResult<Vec<String>> {
    let qualified = split_qualified_name(name, None);
    // A qualified name in an indexed file: the file's own symbols close to the member are what
    // was meant, read from the file's rows alone.
    if let Some((path, member)) = qualified {
        let mut in_file = conn.prepare_cached(
            "SELECT name, coalesce(qualified_name, key) FROM symbols
             WHERE file_path = ?1 ORDER BY line_start LIMIT ?2",
        )?;
        let rows = in_file.query_map(
            params![canonical_path(path, None), FILE_SYMBOLS_READ as i64],
            |r| Ok((r.get::<_, Option<String>>(0)?, r.get::<_, String>(1)?)),
        )?;
        let mut candidates = Vec::new();
        for row in rows {
            if let (Some(name), qualified) = row? {
                candidates.push((name, qualified));
            }
        }
        let close = closest(member, candidates, MAX_SUGGESTIONS);
        if !close.is_empty() {
            return Ok(close);
        }
    }
    let member = qualified.map(|(_, m)| m).unwrap_or(name);
    let mut out: Vec<String> = Vec::new();
    let mut counts = TrigramCounts::default();
    // Names starting with `member`, ignoring case: a range of the case-insensitive name index
    // (a case-sensitive range could not use it and would read every name).
    let mut prefix = conn.prepare_cached(
        "SELECT coalesce(qualified_name, key) FROM symbols
         WHERE name COLLATE NOCASE >= ?1 AND name COLLATE NOCASE < ?1 || char(1114111)
         ORDER BY name COLLATE NOCASE LIMIT ?2",
    )?;
    for row in prefix.query_map(params![member, MAX_SUGGESTIONS as i64], |r| {
        r.get::<_, String>(0)
    })? {
        out.push(row?);
    }
    if out.len() < MAX_SUGGESTIONS {
        for qualified in containing(conn, SYMBOL_QUALIFIED_NAMES, member, PROBE_CAP, &mut counts)? {
            push_suggestion(&mut out, qualified);
        }
    }
    if out.len() < MAX_SUGGESTIONS {
        for close in similar_names(conn, SYMBOL_NAMES, member, MAX_SUGGESTIONS, &mut counts)? {
            for symbol in symbols_named(conn, &close, MAX_SUGGESTIONS)? {
                push_suggestion(&mut out, symbol.qualified_name);
            }
        }
    }
    Ok(out)
}

/// Appends `item` unless it is listed already or the list is full.
fn push_suggestion(out: &mut Vec<String>, item: String) {
    if out.len() < MAX_SUGGESTIONS && !out.contains(&item) {
        out.push(item);
    }
}

/// A file row, enough to locate it.
#[derive(Debug, Clone, PartialEq)]
pub struct FileRef {
    /// Row id.
    pub id: i64,
    /// The cache's own map key.
    pub key: String,
    /// Canonical path.
    pub path: String,
}

/// Finds a file by its exact key, then by canonical path (so `./x`, `x`, `.\x` and `x/` all work).
pub fn find_file(conn: &Connection, path: &str) -> QueryResult<Option<FileRef>> {
    let map = |r: &Row| {
        Ok(FileRef {
            id: r.get(0)?,
            key: r.get(1)?,
            path: r.get(2)?,
        })
    };
    if let Some(found) = conn
        .prepare_cached("SELECT id, key, path FROM files WHERE key = ?1")?
        .query_row([path], map)
        .optional()?
    {
        return Ok(Some(found));
    }
    let canonical = user_path(conn, path)?;
    Ok(conn
        .prepare_cached("SELECT id, key, path FROM files WHERE path = ?1 ORDER BY id LIMIT 1")?
        .query_row([canonical], map)
        .optional()?)
}

/// Like [`find_file`] but a not-found error with suggestions.
pub fn resolve_file(conn: &Connection, path: &str) -> QueryResult<FileRef> {
    match find_file(conn, path)? {
        Some(file) => Ok(file),
        None => Err(not_found("File", path, suggest_files(conn, path)?)),
    }
}

/// The cache's `project.root`, used to relativise absolute paths.
pub fn project_root(conn: &Connection) -> QueryResult<Option<String>> {
    Ok(conn
        .prepare_cached(
            "SELECT json_extract(value_json, '$.root') FROM cache_root WHERE key = 'project'",
        )?
        .query_row([], |r| r.get::<_, Option<String>>(0))
        .optional()?
        .flatten())
}

/// A path as a user gives it, canonical ([`canonical_path`]): an absolute path under the
/// directory the index was imported in, or under the cache's `project.root`, is made relative.
pub fn user_path(conn: &Connection, raw: &str) -> QueryResult<String> {
    let dir: Option<String> = conn
        .prepare_cached("SELECT value FROM meta WHERE key = ?1")?
        .query_row([crate::db::PROJECT_DIR_KEY], |r| r.get(0))
        .optional()?;
    let under_dir = canonical_path(raw, dir.as_deref());
    Ok(canonical_path(&under_dir, project_root(conn)?.as_deref()))
}

/// Up to [`MAX_SUGGESTIONS`] file paths close to `path`: paths containing its file name
/// (shortest first), then paths a few typos away.
pub fn suggest_files(conn: &Connection, path: &str) -> QueryResult<Vec<String>> {
    let canonical = canonical_path(path, None);
    let base = canonical
        .rsplit('/')
        .next()
        .unwrap_or(&canonical)
        .to_string();
    let trigrams = FILE_PATHS
        .trigram_sql
        .expect("file paths have a trigram index");
    // Paths containing the file name, shortest first, among a bounded read.
    let mut counts = TrigramCounts::default();
    let mut out = containing(conn, trigrams, &base, PIECE_CAP, &mut counts)?;
    out.sort_by(|a, b| a.len().cmp(&b.len()).then_with(|| a.cmp(b)));
    out.truncate(MAX_SUGGESTIONS);
    if out.len() < MAX_SUGGESTIONS {
        for close in similar_names(conn, FILE_PATHS, &canonical, MAX_SUGGESTIONS, &mut counts)? {
            push_suggestion(&mut out, close);
        }
    }
    Ok(out)
}

/// Up to [`MAX_SUGGESTIONS`] variable names a few typos away from `name` (without `$`).
pub fn suggest_variables(conn: &Connection, name: &str) -> QueryResult<Vec<String>> {
    similar_names(
        conn,
        VARIABLE_NAMES,
        name,
        MAX_SUGGESTIONS,
        &mut TrigramCounts::default(),
    )
}

/// Domain names close to `name` (case-insensitive equal or containing it).
pub fn suggest_domains(conn: &Connection, name: &str) -> QueryResult<Vec<String>> {
    let mut stmt = conn.prepare_cached(
        "SELECT key FROM domains WHERE lower(key) = lower(?1) OR instr(lower(key), lower(?1)) > 0 OR instr(lower(?1), lower(key)) > 0 ORDER BY key LIMIT ?2",
    )?;
    let rows = stmt.query_map(params![name, MAX_SUGGESTIONS as i64], |r| {
        r.get::<_, String>(0)
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// A not-found error: `<What> not found: <name>`, with suggestions when there are any.
pub fn not_found(what: &str, name: &str, suggestions: Vec<String>) -> QueryError {
    if suggestions.is_empty() {
        QueryError::invalid(format!("{what} not found: {name}"))
    } else {
        QueryError::invalid_with(
            format!(
                "{what} not found: {name}. Did you mean: {}?",
                suggestions.join(", ")
            ),
            json!({"suggestions": suggestions}),
        )
    }
}
