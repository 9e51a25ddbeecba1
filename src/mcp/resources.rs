//! MCP resources: the static `acp://` documents and the file/symbol/domain templates.

use rmcp::model::{Resource, ResourceTemplate};
use rmcp::ErrorData;
use rusqlite::Connection;

const JSON: &str = "application/json";

/// (uri, name, description) of the static resources.
const STATIC: &[(&str, &str, &str)] = &[
    (
        "acp://cache",
        "cache",
        "Summary of the imported ACP cache: project, version, counts, languages, domains",
    ),
    (
        "acp://vars",
        "vars",
        "The ACP variables document (acp.vars.json)",
    ),
    (
        "acp://constraints",
        "constraints",
        "Lock levels and constraints per file, and hack markers",
    ),
];

/// (uri template, name, description) of the templates.
const TEMPLATES: &[(&str, &str, &str)] = &[
    (
        "acp://file/{path}",
        "file",
        "One file's context (same JSON as acp_get_file_context)",
    ),
    (
        "acp://symbol/{qualified_name}",
        "symbol",
        "One symbol's entry",
    ),
    (
        "acp://domain/{name}",
        "domain",
        "One domain with its files (same JSON as acp_get_domain_files)",
    ),
];

/// The static resources.
pub fn list() -> Vec<Resource> {
    STATIC
        .iter()
        .map(|(uri, name, description)| {
            Resource::new(*uri, *name)
                .with_description(*description)
                .with_mime_type(JSON)
        })
        .collect()
}

/// The resource templates.
pub fn templates() -> Vec<ResourceTemplate> {
    TEMPLATES
        .iter()
        .map(|(uri, name, description)| {
            ResourceTemplate::new(*uri, *name)
                .with_description(*description)
                .with_mime_type(JSON)
        })
        .collect()
}

/// Reads one resource as pretty JSON text.
pub fn read(_conn: &Connection, uri: &str) -> Result<String, ErrorData> {
    Err(not_found(uri))
}

fn not_found(uri: &str) -> ErrorData {
    ErrorData::resource_not_found(
        format!("Resource not found: {uri}"),
        Some(
            serde_json::json!({"uri": uri, "templates": TEMPLATES.iter().map(|t| t.0).collect::<Vec<_>>()}),
        ),
    )
}
