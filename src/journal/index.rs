//! The journal's view of the imported index: which files exist and which hacks the cache
//! lists. The MCP server reads it from the database it serves, the CLI from the project's
//! database, so `acpdb hack list` and the `acp_hack list` tool show the same markers.

use std::ops::Deref;

use chrono::NaiveDate;
use rusqlite::{Connection, OptionalExtension};
use serde_json::Value;

/// What the journal may ask of the imported code index, without depending on its schema.
pub trait ProjectIndex: Send + Sync {
    /// Whether the canonical root-relative `path` is a file of the index.
    fn is_indexed(&self, path: &str) -> bool;

    /// The hacks the indexer found (`constraints.hacks` and inline `@acp:hack` annotations);
    /// `acp_hack` lists them read-only next to its own markers.
    fn cache_hacks(&self) -> anyhow::Result<Vec<CacheHack>> {
        Ok(Vec::new())
    }
}

impl<F: Fn(&str) -> bool + Send + Sync> ProjectIndex for F {
    fn is_indexed(&self, path: &str) -> bool {
        self(path)
    }
}

/// A hack the indexer recorded from an `@acp:hack` annotation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheHack {
    /// Id as in the cache (`./src/legacy/export.ts:12`) or `<file key>:<line>`.
    pub id: String,
    /// File key as in the cache; compared after normalisation.
    pub file: String,
    /// Line of the annotation.
    pub line: Option<u32>,
    /// Why the hack exists.
    pub reason: String,
    /// Tracking ticket.
    pub ticket: Option<String>,
    /// Expiry date.
    pub expires: Option<NaiveDate>,
    /// When the indexer recorded it (RFC 3339).
    pub created_at: String,
}

/// A connection to the index, however the caller holds it (pooled or owned).
pub type IndexConnection = Box<dyn Deref<Target = Connection>>;

/// Answers the journal's questions from an index database; without one (no import yet), no
/// file is indexed and the cache lists no hacks.
pub struct DatabaseIndex {
    connect: Box<dyn Fn() -> Option<IndexConnection> + Send + Sync>,
}

impl DatabaseIndex {
    /// A view over the database `connect` opens (or `None` when there is none).
    pub fn new(connect: impl Fn() -> Option<IndexConnection> + Send + Sync + 'static) -> Self {
        DatabaseIndex {
            connect: Box::new(connect),
        }
    }
}

impl ProjectIndex for DatabaseIndex {
    fn is_indexed(&self, path: &str) -> bool {
        let Some(conn) = (self.connect)() else {
            return false;
        };
        conn.query_row(
            "SELECT 1 FROM files WHERE path = ?1 LIMIT 1",
            [path],
            |_| Ok(()),
        )
        .optional()
        .ok()
        .flatten()
        .is_some()
    }

    fn cache_hacks(&self) -> anyhow::Result<Vec<CacheHack>> {
        let Some(conn) = (self.connect)() else {
            return Ok(Vec::new());
        };
        let mut stmt = conn.prepare("SELECT raw_json FROM cache_hacks ORDER BY ord")?;
        let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
        let mut hacks = Vec::new();
        for raw in rows {
            let value: Value = serde_json::from_str(&raw?)?;
            let text = |key: &str| value.get(key).and_then(Value::as_str).map(str::to_string);
            let file = text("file").unwrap_or_default();
            let line = value
                .get("line")
                .and_then(Value::as_u64)
                .and_then(|l| u32::try_from(l).ok());
            hacks.push(CacheHack {
                id: text("id").unwrap_or_else(|| format!("{file}:{}", line.unwrap_or(0))),
                file,
                line,
                reason: text("reason").unwrap_or_else(|| "Temporary hack".into()),
                ticket: text("ticket"),
                expires: text("expires").and_then(|e| {
                    NaiveDate::parse_from_str(e.get(..10).unwrap_or(&e), "%Y-%m-%d").ok()
                }),
                created_at: text("created_at").unwrap_or_default(),
            });
        }
        Ok(hacks)
    }
}
