//! `acp_get_architecture`: project name, entry counts, domains and languages.
//!
//! Counts are the number of imported entries (not the cache's `stats`), read from the summary
//! computed at import. Domains and languages,
//! which acp-mcp lists in hash order, are sorted.

use rusqlite::{Connection, OptionalExtension};
use serde::Serialize;

use super::hotpaths::debug_name;
use super::QueryResult;

/// Answer of `acp_get_architecture`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Architecture {
    /// `project.name`.
    pub project_name: String,
    /// Number of file entries.
    pub total_files: i64,
    /// Number of symbol entries.
    pub total_symbols: i64,
    /// Every domain, sorted by name.
    pub domains: Vec<DomainSummary>,
    /// Distinct file languages as Rust debug names (`Typescript`, `CSharp`, …), sorted.
    pub languages: Vec<String>,
}

/// One domain of [`Architecture`].
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct DomainSummary {
    /// The domain's map key.
    pub name: String,
    /// Its description (`null` when absent).
    pub description: Option<String>,
    /// Length of its `files` list.
    pub file_count: i64,
}

/// Builds the architecture overview.
pub fn architecture(conn: &Connection) -> QueryResult<Architecture> {
    let project_name: Option<String> = conn
        .prepare_cached(
            "SELECT json_extract(value_json, '$.name') FROM cache_root WHERE key = 'project'",
        )?
        .query_row([], |r| r.get(0))
        .optional()?
        .flatten();
    let (total_files, total_symbols) = conn
        .prepare_cached("SELECT files, symbols FROM index_summary")?
        .query_row([], |r| Ok((r.get(0)?, r.get(1)?)))?;
    let domains = conn
        .prepare_cached("SELECT key, description, file_count FROM domains ORDER BY key")?
        .query_map([], |r| {
            Ok(DomainSummary {
                name: r.get(0)?,
                description: r.get(1)?,
                file_count: r.get(2)?,
            })
        })?
        .collect::<rusqlite::Result<_>>()?;
    let mut languages: Vec<String> = conn
        .prepare_cached("SELECT language FROM file_languages")?
        .query_map([], |r| r.get::<_, String>(0))?
        .map(|id| id.map(|id| debug_name(&id)))
        .collect::<rusqlite::Result<_>>()?;
    languages.sort();
    languages.dedup();
    Ok(Architecture {
        project_name: project_name.unwrap_or_default(),
        total_files,
        total_symbols,
        domains,
        languages,
    })
}
