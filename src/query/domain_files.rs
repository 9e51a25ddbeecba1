//! `acp_get_domain_files`: a domain entry (`name, files, symbols, description`).
//!
//! The domain is found by its exact map key, as acp-mcp does; unknown names get suggestions.
//! A long `files` list is cut into pages like the symbol tool's caller lists.

use rusqlite::Connection;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::cli_shape::cli_domain_entry;
use super::cursor::{continues, next_cursor, page_of, requested_page};
use super::entries::DOMAINS;
use super::names::{not_found, suggest_domains};
use super::ordered::{Entry, Ordered};
use super::without_description;
use super::QueryResult;

/// The list kind recorded in this tool's cursors.
const CURSOR_KIND: &str = "domain_files";

/// Arguments of `acp_get_domain_files`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[schemars(transform = without_description)]
pub struct GetDomainFilesParams {
    /// Name of the domain
    pub name: String,
    /// Most files to return (default 200, at most 1000). A longer list is cut and the answer
    /// carries `"truncated": true` and a `next_cursor`.
    #[serde(default)]
    pub limit: Option<u32>,
    /// The `next_cursor` of a previous answer, passed back unchanged with the same name, to get
    /// the next page of files.
    #[serde(default)]
    pub cursor: Option<String>,
}

/// Returns the domain entry named `name` (exact, case-sensitive).
pub fn domain_files(conn: &Connection, params: &GetDomainFilesParams) -> QueryResult<Entry> {
    let page = requested_page(
        conn,
        CURSOR_KIND,
        &params.name,
        None,
        params.limit,
        params.cursor.as_deref(),
    )?;
    let Some(mut entry) = DOMAINS.load(conn, "key", &params.name)? else {
        return Err(not_found(
            "Domain",
            &params.name,
            suggest_domains(conn, &params.name)?,
        ));
    };
    if !entry.contains_key("name") {
        entry.insert("name".into(), Value::String(params.name.clone()));
    }
    let mut shaped = cli_domain_entry(entry);
    let mut more = false;
    for (key, value) in shaped.0.iter_mut() {
        if key == "files" {
            if let Ordered::Plain(Value::Array(files)) = value {
                more = continues(page, files.len());
                *files = page_of(page, std::mem::take(files));
            }
        }
    }
    if more {
        shaped.push("truncated", Value::Bool(true));
        shaped.push(
            "next_cursor",
            Value::String(next_cursor(conn, CURSOR_KIND, &params.name, page)?),
        );
    }
    Ok(shaped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_accept_paging() {
        let params: GetDomainFilesParams =
            serde_json::from_value(serde_json::json!({"name": "x", "limit": 5, "cursor": "ab"}))
                .unwrap();
        assert_eq!(params.limit, Some(5));
        assert_eq!(params.cursor.as_deref(), Some("ab"));
    }
}
