//! MCP resources as plain data: the static `acp://cache`, `acp://vars` and `acp://constraints`
//! documents and the `acp://file/{path}`, `acp://symbol/{qualified_name}` and
//! `acp://domain/{name}` templates. The protocol layer converts these structs.
//!
//! Documents are pretty-printed JSON. `acp://cache` is a summary (counts, version, project),
//! never the whole cache. `acp://vars`, `acp://constraints` and `acp://domain/{name}` come in
//! pages of at most [`PAGE_ITEMS`] items per list, as the tools' lists do: a page that is not
//! the last says `truncated: true` and carries `next_cursor` and `next_uri` (the same URI with
//! `?cursor=…`) to read the next page; the first page of a document that has more also says
//! its `total`, counted once. Template values are
//! percent-decoded and take the whole remainder of the URI (up to a `?cursor=`), so qualified
//! names keep their `/` and `:`.

use std::fmt;

use rusqlite::{params, Connection, OptionalExtension};
use serde_json::{json, Value};

use super::acp_query::MAX_LIMIT;
use super::constraints::file_constraint;
use super::cursor::{page_info, Cursor, Page};
use super::lookup::{
    cache_root_value, domain_entry, file_entry, symbol_entry, var_entry, vars_loaded, Entry,
};
use super::names::{find_file, find_symbol};
use super::{QueryError, QueryResult};
use crate::cache::lock_level_rank;

/// MIME type of every resource.
pub const MIME_JSON: &str = "application/json";

/// Most items of each list on one page of a resource: as many as a tool's largest page.
pub const PAGE_ITEMS: u32 = MAX_LIMIT;

/// The cursor kind of resource pages; the cursor's query is the resource's URI without cursor.
const CURSOR_KIND: &str = "resource";

/// A static resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceInfo {
    /// `acp://...`.
    pub uri: String,
    /// Short name.
    pub name: String,
    /// What it holds.
    pub description: String,
    /// Always [`MIME_JSON`].
    pub mime_type: String,
}

/// A resource template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateInfo {
    /// RFC 6570 template, e.g. `acp://file/{path}`.
    pub uri_template: String,
    /// Short name.
    pub name: String,
    /// What it holds.
    pub description: String,
    /// Always [`MIME_JSON`].
    pub mime_type: String,
}

/// The content of one read resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceContent {
    /// The URI as requested.
    pub uri: String,
    /// Always [`MIME_JSON`].
    pub mime_type: String,
    /// Pretty-printed JSON.
    pub text: String,
}

/// Why a resource could not be read.
#[derive(Debug)]
pub enum ResourceError {
    /// Unknown URI, or a template whose target does not exist (MCP -32002).
    NotFound {
        /// The URI as requested.
        uri: String,
    },
    /// Any other failure (an ambiguous symbol name, a database error).
    Query(QueryError),
}

impl fmt::Display for ResourceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResourceError::NotFound { uri } => write!(f, "Resource not found: {uri}"),
            ResourceError::Query(err) => err.fmt(f),
        }
    }
}

impl std::error::Error for ResourceError {}

impl From<QueryError> for ResourceError {
    fn from(err: QueryError) -> Self {
        ResourceError::Query(err)
    }
}

impl From<rusqlite::Error> for ResourceError {
    fn from(err: rusqlite::Error) -> Self {
        ResourceError::Query(err.into())
    }
}

impl From<serde_json::Error> for ResourceError {
    fn from(err: serde_json::Error) -> Self {
        ResourceError::Query(err.into())
    }
}

fn count(conn: &Connection, sql: &str) -> QueryResult<u64> {
    Ok(conn
        .prepare_cached(sql)?
        .query_row([], |r| r.get::<_, Option<i64>>(0))?
        .unwrap_or(0) as u64)
}

/// The static resources; descriptions carry the current sizes when they can be read.
pub fn list_resources(conn: &Connection) -> Vec<ResourceInfo> {
    let sizes = |sql: &str, what: &str| {
        count(conn, sql)
            .map(|n| format!(" ({n} {what})"))
            .unwrap_or_default()
    };
    let info = |uri: &str, name: &str, description: String| ResourceInfo {
        uri: uri.into(),
        name: name.into(),
        description,
        mime_type: MIME_JSON.into(),
    };
    vec![
        info(
            "acp://cache",
            "cache",
            format!(
                "Summary of the imported ACP cache{}: project, version, generated_at, counts, languages, domains",
                sizes("SELECT files FROM index_summary", "files")
            ),
        ),
        info(
            "acp://vars",
            "vars",
            format!(
                "The ACP variables document{}: name -> {{type, value, description}}",
                sizes("SELECT count(*) FROM vars", "variables")
            ),
        ),
        info(
            "acp://constraints",
            "constraints",
            format!(
                "Lock levels and constraints per file{}, and hack markers",
                sizes("SELECT count(*) FROM constraints", "entries")
            ),
        ),
    ]
}

/// The resource templates.
pub fn resource_templates() -> Vec<TemplateInfo> {
    let template = |uri: &str, name: &str, description: &str| TemplateInfo {
        uri_template: uri.into(),
        name: name.into(),
        description: description.into(),
        mime_type: MIME_JSON.into(),
    };
    vec![
        template(
            "acp://file/{path}",
            "file",
            "One file entry (path relative to the project root; ./ and backslashes accepted)",
        ),
        template(
            "acp://symbol/{qualified_name}",
            "symbol",
            "One symbol entry (qualified name path:name, map key or unique simple name)",
        ),
        template(
            "acp://domain/{name}",
            "domain",
            "One domain entry with its files",
        ),
    ]
}

/// The files a read resource names that changed on disk since the import: for the entries
/// of the templates (a file, a symbol, a domain's files), none for the whole documents.
pub fn stale_files_of(
    conn: &Connection,
    content: &ResourceContent,
) -> QueryResult<Vec<super::staleness::StaleFile>> {
    let is_entry = resource_templates().iter().any(|t| {
        let prefix = t.uri_template.split('{').next().unwrap_or_default();
        content.uri.starts_with(prefix)
    });
    if !is_entry {
        return Ok(Vec::new());
    }
    let named = super::staleness::files_named_in(&content.text);
    super::staleness::stale_files(conn, named.iter().map(String::as_str))
}

/// Reads one resource (or one page of it: `…?cursor=<next_cursor>`).
pub fn read_resource(conn: &Connection, uri: &str) -> Result<ResourceContent, ResourceError> {
    let not_found = || ResourceError::NotFound {
        uri: uri.to_string(),
    };
    let (base, cursor) = match uri.split_once('?') {
        None => (uri, None),
        Some((base, query)) => match query.strip_prefix("cursor=") {
            Some(token) => (base, Some(token)),
            None => return Err(not_found()),
        },
    };
    let page = match cursor {
        None => Page {
            offset: 0,
            limit: PAGE_ITEMS,
        },
        Some(token) => {
            let cursor = Cursor::decode(conn, token, CURSOR_KIND)?;
            if cursor.query != base {
                return Err(QueryError::invalid_with(
                    format!(
                        "Invalid cursor: it belongs to {}, not to {base}",
                        cursor.query
                    ),
                    json!({"field": "cursor"}),
                )
                .into());
            }
            Page {
                offset: cursor.offset,
                limit: PAGE_ITEMS,
            }
        }
    };
    let document: Entry = match base {
        "acp://cache" if cursor.is_none() => cache_summary(conn)?,
        "acp://vars" => vars_document(conn, base, page)?,
        "acp://constraints" => constraints_document(conn, base, page)?,
        _ => {
            let (kind, rest) = base
                .strip_prefix("acp://")
                .and_then(|r| r.split_once('/'))
                .ok_or_else(not_found)?;
            let value = percent_decode(rest).ok_or_else(not_found)?;
            if value.is_empty() || value.contains('\0') {
                return Err(not_found());
            }
            match kind {
                "file" if cursor.is_none() => match find_file(conn, &value)? {
                    Some(file) => file_entry(conn, file.id)?,
                    None => return Err(not_found()),
                },
                "symbol" if cursor.is_none() => match find_symbol(conn, &value)? {
                    Some((symbol, _)) => symbol_entry(conn, symbol.id)?,
                    None => return Err(not_found()),
                },
                "domain" => match domain_entry(conn, &value)? {
                    Some(entry) => domain_document(conn, base, entry, page)?,
                    None => return Err(not_found()),
                },
                _ => return Err(not_found()),
            }
        }
    };
    Ok(ResourceContent {
        uri: uri.to_string(),
        mime_type: MIME_JSON.into(),
        text: serde_json::to_string_pretty(&document)?,
    })
}

/// Adds the paging members to a page of `base` whose lists have `total` items (the longest
/// list) and continue past `next_offset` when `more`.
fn finish_page(
    conn: &Connection,
    doc: &mut Entry,
    base: &str,
    total: Option<u64>,
    next_offset: u64,
    more: bool,
) -> QueryResult<()> {
    let info = page_info(conn, CURSOR_KIND, base, None, next_offset, more)?;
    if let Some(token) = info.next_cursor {
        if let Some(total) = total {
            doc.insert("total", Value::from(total));
        }
        doc.insert("truncated", Value::Bool(true));
        doc.insert("next_uri", Value::from(format!("{base}?cursor={token}")));
        doc.insert("next_cursor", Value::from(token));
    }
    Ok(())
}

/// A domain entry with one page of its `files` (and of its `symbols`, when stored).
fn domain_document(
    conn: &Connection,
    base: &str,
    mut entry: Entry,
    page: Page,
) -> QueryResult<Entry> {
    let mut longest = 0;
    for list in ["files", "symbols"] {
        if let Some(Value::Array(items)) = entry.get(list) {
            longest = longest.max(items.len() as u64);
            let window: Vec<Value> = items
                .iter()
                .skip(page.offset as usize)
                .take(page.limit as usize)
                .cloned()
                .collect();
            entry.insert(list, Value::from(window));
        }
    }
    entry.move_to_end("description");
    let next = page.offset + u64::from(page.limit);
    let total = (page.offset == 0).then_some(longest);
    finish_page(conn, &mut entry, base, total, next, next < longest)?;
    Ok(entry)
}

fn cache_summary(conn: &Connection) -> QueryResult<Entry> {
    let mut doc = Entry::default();
    for key in ["project", "version", "generated_at", "git_commit"] {
        if let Some(value) = cache_root_value(conn, key)? {
            doc.insert(key, value);
        }
    }
    let imported_at: Option<String> = conn
        .prepare_cached("SELECT value FROM meta WHERE key = 'imported_at'")?
        .query_row([], |r| r.get(0))
        .optional()?;
    if let Some(imported_at) = imported_at {
        doc.insert("imported_at", Value::from(imported_at));
    }
    let mut counts = Entry::default();
    for (name, sql) in [
        ("files", "SELECT files FROM index_summary"),
        ("symbols", "SELECT symbols FROM index_summary"),
        ("call_edges", "SELECT call_edges FROM index_summary"),
        ("domains", "SELECT domains FROM index_summary"),
        ("constraints", "SELECT count(*) FROM constraints"),
        ("hacks", "SELECT count(*) FROM cache_hacks"),
        ("variables", "SELECT count(*) FROM vars"),
    ] {
        counts.insert(name, Value::from(count(conn, sql)?));
    }
    doc.insert("counts", counts);
    doc.insert(
        "source",
        serde_json::to_value(super::staleness::source_state(conn)?)?,
    );
    let languages: Vec<String> = conn
        .prepare_cached("SELECT language FROM file_languages ORDER BY language")?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    doc.insert("languages", Value::from(languages));
    let mut domains: Vec<String> = conn
        .prepare_cached("SELECT key FROM domains ORDER BY key LIMIT ?1")?
        .query_map([i64::from(PAGE_ITEMS) + 1], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let domains_cut = domains.len() > PAGE_ITEMS as usize;
    domains.truncate(PAGE_ITEMS as usize);
    doc.insert("domains", Value::from(domains));
    if domains_cut {
        doc.insert("domains_truncated", Value::Bool(true));
    }
    if let Some(stats) = cache_root_value(conn, "stats")? {
        doc.insert("stats", stats);
    }
    doc.insert(
        "resources",
        Value::from(
            "Read acp://file/{path}, acp://symbol/{qualified_name} or acp://domain/{name} for one entry; acp_get_architecture lists every domain; acp_query searches and pages.",
        ),
    );
    Ok(doc)
}

fn vars_document(conn: &Connection, base: &str, page: Page) -> QueryResult<Entry> {
    let mut doc = Entry::default();
    if !vars_loaded(conn)? {
        doc.insert("version", Value::from("1.0.0"));
        doc.insert("variables", json!({}));
        return Ok(doc);
    }
    let members: Vec<(String, Option<String>)> = conn
        .prepare_cached("SELECT key, value_json FROM vars_root ORDER BY ord")?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    let names: Vec<String> = conn
        .prepare_cached("SELECT name FROM vars ORDER BY name LIMIT ?1 OFFSET ?2")?
        .query_map(
            params![i64::from(page.limit) + 1, page.offset as i64],
            |r| r.get(0),
        )?
        .collect::<rusqlite::Result<_>>()?;
    let more = names.len() > page.limit as usize;
    let mut variables = Entry::default();
    for name in names.iter().take(page.limit as usize) {
        if let Some(entry) = var_entry(conn, name)? {
            variables.insert(name, entry);
        }
    }
    let mut variables = Some(variables);
    for (key, value) in members {
        match value {
            Some(value) => doc.insert(&key, serde_json::from_str::<Value>(&value)?),
            None if key == "variables" => {
                if let Some(variables) = variables.take() {
                    doc.insert("variables", variables);
                }
            }
            None => {}
        }
    }
    if let Some(variables) = variables {
        doc.insert("variables", variables);
    }
    // The total is counted once, for the first page of a document that has more.
    let total = if more && page.offset == 0 {
        Some(count(conn, "SELECT count(*) FROM vars")?)
    } else {
        None
    };
    let next = page.next_offset(names.len().min(page.limit as usize));
    finish_page(conn, &mut doc, base, total, next, more)?;
    Ok(doc)
}

/// One page of the constraints document: the page's files by lock level (most restrictive
/// first) and with their constraints, and the page's hack markers.
fn constraints_document(conn: &Connection, base: &str, page: Page) -> QueryResult<Entry> {
    let window = params![i64::from(page.limit) + 1, page.offset as i64];
    let files: Vec<(String, String)> = conn
        .prepare_cached(
            "SELECT key, path FROM constraints WHERE id IN (SELECT min(id) FROM constraints GROUP BY path)
             ORDER BY path LIMIT ?1 OFFSET ?2",
        )?
        .query_map(window, |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    let mut levels: Vec<(String, Vec<String>)> = Vec::new();
    let mut by_file = Entry::default();
    for (key, path) in files.iter().take(page.limit as usize) {
        if let Some(constraint) = file_constraint(conn, key, path)? {
            match levels.iter_mut().find(|(l, _)| *l == constraint.lock_level) {
                Some((_, paths)) => paths.push(path.clone()),
                None => levels.push((constraint.lock_level.clone(), vec![path.clone()])),
            }
            let mut item = Entry::default();
            item.insert("lock_level", Value::from(constraint.lock_level));
            item.insert("lock_reason", Value::from(constraint.lock_reason));
            item.insert("directive", Value::from(constraint.directive));
            item.insert("style", Value::from(constraint.style));
            item.insert("behavior", Value::from(constraint.behavior));
            item.insert("quality", Value::from(constraint.quality));
            by_file.insert(path, item);
        }
    }
    levels.sort_by(|(a, _), (b, _)| lock_level_rank(a).cmp(&lock_level_rank(b)).then(a.cmp(b)));
    let mut by_level = Entry::default();
    for (level, paths) in levels {
        by_level.insert(&level, Value::from(paths));
    }

    let raw: Vec<String> = conn
        .prepare_cached("SELECT raw_json FROM cache_hacks ORDER BY ord LIMIT ?1 OFFSET ?2")?
        .query_map(window, |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let hacks = raw
        .iter()
        .take(page.limit as usize)
        .map(|item| serde_json::from_str(item))
        .collect::<Result<Vec<Value>, _>>()?;

    let more = files.len() > page.limit as usize || raw.len() > page.limit as usize;
    let mut doc = Entry::default();
    doc.insert("by_lock_level", by_level);
    doc.insert("by_file", by_file);
    doc.insert("hacks", Value::from(hacks));
    // Totals are counted once, for the first page of a document that has more.
    let mut total = None;
    if more && page.offset == 0 {
        let mut totals = Entry::default();
        let mut counts = conn.prepare_cached(
            "SELECT lock_level, count(DISTINCT path) FROM constraints GROUP BY lock_level",
        )?;
        let mut per_level: Vec<(String, i64)> = counts
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<rusqlite::Result<_>>()?;
        per_level
            .sort_by(|(a, _), (b, _)| lock_level_rank(a).cmp(&lock_level_rank(b)).then(a.cmp(b)));
        for (level, n) in per_level {
            totals.insert(&level, Value::from(n));
        }
        let files_total = count(conn, "SELECT count(DISTINCT path) FROM constraints")?;
        let hacks_total = count(conn, "SELECT count(*) FROM cache_hacks")?;
        totals.insert("files", Value::from(files_total));
        totals.insert("hacks", Value::from(hacks_total));
        doc.insert("totals", totals);
        total = Some(files_total.max(hacks_total));
    }
    let next = page.offset + u64::from(page.limit);
    finish_page(conn, &mut doc, base, total, next, more)?;
    Ok(doc)
}

/// Decodes `%XX` escapes; `None` when the result is not UTF-8.
fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_decoding() {
        assert_eq!(
            percent_decode("src%2Forders%2Ftax.ts").as_deref(),
            Some("src/orders/tax.ts")
        );
        assert_eq!(percent_decode("a%3Ab").as_deref(), Some("a:b"));
        assert_eq!(percent_decode("100%").as_deref(), Some("100%"));
        assert_eq!(percent_decode("%zz%4").as_deref(), Some("%zz%4"));
        assert_eq!(percent_decode("%C3%A9").as_deref(), Some("é"));
        assert_eq!(percent_decode("%ff"), None);
    }
}
