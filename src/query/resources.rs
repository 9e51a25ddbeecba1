//! MCP resources as plain data: the static `acp://cache`, `acp://vars` and `acp://constraints`
//! documents and the `acp://file/{path}`, `acp://symbol/{qualified_name}` and
//! `acp://domain/{name}` templates. The protocol layer converts these structs.
//!
//! Documents are pretty-printed JSON. `acp://cache` is a summary (counts, version, project),
//! never the whole cache; `acp://vars` and `acp://constraints` list at most [`MAX_LISTED`]
//! items per list and say when they were cut. Template values are percent-decoded and take the
//! whole remainder of the URI, so qualified names keep their `/` and `:`.

use std::fmt;

use rusqlite::{Connection, OptionalExtension};
use serde_json::{json, Value};

use super::constraints::file_constraint;
use super::lookup::{
    cache_root_value, domain_entry, file_entry, symbol_entry, var_entry, vars_loaded, Entry,
};
use super::names::{find_file, find_symbol};
use super::{QueryError, QueryResult};
use crate::cache::lock_level_rank;

/// MIME type of every resource.
pub const MIME_JSON: &str = "application/json";

/// Most items listed per list in a static document.
pub const MAX_LISTED: usize = 1000;

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

/// Reads one resource.
pub fn read_resource(conn: &Connection, uri: &str) -> Result<ResourceContent, ResourceError> {
    let not_found = || ResourceError::NotFound {
        uri: uri.to_string(),
    };
    let document: Entry = match uri {
        "acp://cache" => cache_summary(conn)?,
        "acp://vars" => vars_document(conn)?,
        "acp://constraints" => constraints_document(conn)?,
        _ => {
            let (kind, rest) = uri
                .strip_prefix("acp://")
                .and_then(|r| r.split_once('/'))
                .ok_or_else(not_found)?;
            let value = percent_decode(rest).ok_or_else(not_found)?;
            if value.is_empty() {
                return Err(not_found());
            }
            match kind {
                "file" => match find_file(conn, &value)? {
                    Some(file) => file_entry(conn, file.id)?,
                    None => return Err(not_found()),
                },
                "symbol" => match find_symbol(conn, &value)? {
                    Some((symbol, _)) => symbol_entry(conn, symbol.id)?,
                    None => return Err(not_found()),
                },
                "domain" => match domain_entry(conn, &value)? {
                    Some(mut entry) => {
                        entry.move_to_end("description");
                        entry
                    }
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
    doc.insert_entry("counts", counts);
    let languages: Vec<String> = conn
        .prepare_cached("SELECT language FROM file_languages ORDER BY language")?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    doc.insert("languages", Value::from(languages));
    let mut domains: Vec<String> = conn
        .prepare_cached("SELECT key FROM domains ORDER BY key LIMIT ?1")?
        .query_map([MAX_LISTED as i64 + 1], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let domains_cut = domains.len() > MAX_LISTED;
    domains.truncate(MAX_LISTED);
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
            "Read acp://file/{path}, acp://symbol/{qualified_name} or acp://domain/{name} for one entry; acp_query searches and pages.",
        ),
    );
    Ok(doc)
}

fn vars_document(conn: &Connection) -> QueryResult<Entry> {
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
        .prepare_cached("SELECT name FROM vars ORDER BY name LIMIT ?1")?
        .query_map([MAX_LISTED as i64 + 1], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let mut variables = Entry::default();
    for name in names.iter().take(MAX_LISTED) {
        if let Some(entry) = var_entry(conn, name)? {
            variables.insert_entry(name, entry);
        }
    }
    let mut variables = Some(variables);
    for (key, value) in members {
        match value {
            Some(value) => doc.insert(&key, serde_json::from_str(&value)?),
            None if key == "variables" => {
                if let Some(variables) = variables.take() {
                    doc.insert_entry("variables", variables);
                }
            }
            None => {}
        }
    }
    if let Some(variables) = variables {
        doc.insert_entry("variables", variables);
    }
    if names.len() > MAX_LISTED {
        doc.insert(
            "total",
            Value::from(count(conn, "SELECT count(*) FROM vars")?),
        );
        doc.insert("truncated", Value::Bool(true));
    }
    Ok(doc)
}

fn constraints_document(conn: &Connection) -> QueryResult<Entry> {
    let limit = MAX_LISTED as i64 + 1;
    let mut truncated = false;
    let mut totals = Entry::default();

    let mut levels: Vec<String> = conn
        .prepare_cached("SELECT DISTINCT lock_level FROM constraints")?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    levels.sort_by(|a, b| lock_level_rank(a).cmp(&lock_level_rank(b)).then(a.cmp(b)));
    let mut by_level = Entry::default();
    for level in &levels {
        let mut paths: Vec<String> = conn
            .prepare_cached(
                "SELECT DISTINCT path FROM constraints WHERE lock_level = ?1 ORDER BY path LIMIT ?2",
            )?
            .query_map(rusqlite::params![level, limit], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        if paths.len() > MAX_LISTED {
            paths.truncate(MAX_LISTED);
            truncated = true;
        }
        let total: i64 = conn
            .prepare_cached("SELECT count(DISTINCT path) FROM constraints WHERE lock_level = ?1")?
            .query_row([level], |r| r.get(0))?;
        totals.insert(level, Value::from(total));
        by_level.insert(level, Value::from(paths));
    }

    let files: Vec<(String, String)> = conn
        .prepare_cached(
            "SELECT key, path FROM constraints WHERE id IN (SELECT min(id) FROM constraints GROUP BY path) ORDER BY path LIMIT ?1",
        )?
        .query_map([limit], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    let mut by_file = Entry::default();
    for (key, path) in files.iter().take(MAX_LISTED) {
        if let Some(constraint) = file_constraint(conn, key, path)? {
            let mut item = Entry::default();
            item.insert("lock_level", Value::from(constraint.lock_level));
            item.insert("lock_reason", Value::from(constraint.lock_reason));
            item.insert("directive", Value::from(constraint.directive));
            item.insert("style", Value::from(constraint.style));
            item.insert("behavior", Value::from(constraint.behavior));
            item.insert("quality", Value::from(constraint.quality));
            by_file.insert_entry(path, item);
        }
    }
    truncated |= files.len() > MAX_LISTED;

    let raw: Vec<String> = conn
        .prepare_cached("SELECT raw_json FROM cache_hacks ORDER BY ord LIMIT ?1")?
        .query_map([limit], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    truncated |= raw.len() > MAX_LISTED;
    let hacks = raw
        .iter()
        .take(MAX_LISTED)
        .map(|item| serde_json::from_str(item))
        .collect::<Result<Vec<Value>, _>>()?;

    let mut doc = Entry::default();
    doc.insert_entry("by_lock_level", by_level);
    doc.insert_entry("by_file", by_file);
    doc.insert("hacks", Value::from(hacks));
    if truncated {
        totals.insert(
            "files",
            Value::from(count(conn, "SELECT count(DISTINCT path) FROM constraints")?),
        );
        totals.insert(
            "hacks",
            Value::from(count(conn, "SELECT count(*) FROM cache_hacks")?),
        );
        doc.insert_entry("totals", totals);
        doc.insert("truncated", Value::Bool(true));
    }
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
