//! MCP resources: converts the query layer's resource documents to rmcp types.

use rmcp::model::{Resource, ResourceContents, ResourceTemplate};
use rmcp::ErrorData;
use rusqlite::Connection;

use crate::query::resources as q;

/// The static resources (`acp://cache`, `acp://vars`, `acp://constraints`).
pub(crate) fn list(conn: &Connection) -> Vec<Resource> {
    q::list_resources(conn)
        .into_iter()
        .map(|r| {
            Resource::new(r.uri, r.name)
                .with_description(r.description)
                .with_mime_type(r.mime_type)
        })
        .collect()
}

/// The resource templates (file, symbol, domain).
pub(crate) fn templates() -> Vec<ResourceTemplate> {
    q::resource_templates()
        .into_iter()
        .map(|t| {
            ResourceTemplate::new(t.uri_template, t.name)
                .with_description(t.description)
                .with_mime_type(t.mime_type)
        })
        .collect()
}

/// Reads one resource.
pub(crate) fn read(conn: &Connection, uri: &str) -> Result<ResourceContents, ErrorData> {
    match q::read_resource(conn, uri) {
        Ok(content) => Ok(ResourceContents::TextResourceContents {
            uri: content.uri,
            mime_type: Some(content.mime_type),
            text: content.text,
            meta: None,
        }),
        Err(err) => Err(super::errors::resource(err)),
    }
}
