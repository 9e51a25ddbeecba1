//! MCP resources: converts the query layer's resource documents to rmcp types.

use rmcp::model::{Resource, ResourceContents, ResourceTemplate};
use rmcp::ErrorData;
use rusqlite::Connection;

use crate::query::resources::{self as q, ResourceError};

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
        Err(ResourceError::NotFound { uri }) => Err(ErrorData::resource_not_found(
            format!("Resource not found: {uri}"),
            Some(serde_json::json!({
                "uri": uri,
                "templates": q::resource_templates().into_iter().map(|t| t.uri_template).collect::<Vec<_>>(),
            })),
        )),
        Err(ResourceError::Query(err)) => Err(super::server::query_error(err)),
    }
}
