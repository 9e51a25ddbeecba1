//! In-process mode: calls the query functions through [`crate::tools::call`] on one read-only
//! connection configured like the server's pool, so the figures are the query layer's cost
//! (SQL and JSON serialization) without the protocol.

use std::path::Path;

use anyhow::Result;
use serde_json::Value;

use super::replay::Target;
use super::report::Outcome;
use crate::db;
use crate::query::QueryError;
use crate::tools;

/// The index database, queried directly.
pub struct InProcess {
    conn: r2d2::PooledConnection<r2d2_sqlite::SqliteConnectionManager>,
}

impl InProcess {
    /// Opens `path` with the server's connection settings.
    pub fn open(path: &Path) -> Result<InProcess> {
        let conn = db::read_pool(path, 1)?.get()?;
        Ok(InProcess { conn })
    }
}

impl Target for InProcess {
    fn call(&mut self, tool: &str, arguments: &Value) -> Result<Outcome> {
        Ok(
            match db::in_snapshot(&self.conn, |conn| tools::call(conn, tool, arguments)) {
                Ok(text) => {
                    std::hint::black_box(text);
                    Outcome::Answer
                }
                Err(QueryError::InvalidParams { message, .. })
                    if message.starts_with("Unknown tool") =>
                {
                    Outcome::Unsupported
                }
                Err(err) => Outcome::Error(err.to_string()),
            },
        )
    }
}
