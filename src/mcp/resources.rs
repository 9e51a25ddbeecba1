//! MCP resources: converts the query layer's resource documents to rmcp types.

use rmcp::model::{MetaObject, Resource, ResourceContents, ResourceTemplate};
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

/// Reads one resource. An entry naming files changed on disk since the import says so in its
/// `_meta` (`stale_files`, and `note` in words), the text staying the entry as indexed.
pub(crate) fn read(conn: &Connection, uri: &str) -> Result<ResourceContents, ErrorData> {
    let content = q::read_resource(conn, uri).map_err(super::errors::resource)?;
    let stale = q::stale_files_of(conn, &content).map_err(super::errors::query)?;
    let meta = match crate::query::staleness::stale_note(&stale) {
        Some(note) => {
            let mut meta = MetaObject::new();
            meta.insert("stale_files".into(), serde_json::json!(stale));
            meta.insert("note".into(), note.into());
            Some(meta)
        }
        None => None,
    };
    Ok(ResourceContents::TextResourceContents {
        uri: content.uri,
        mime_type: Some(content.mime_type),
        text: content.text,
        meta,
    })
}
