//! The journal's view of the served index: which files exist and which hacks the cache lists.

use std::sync::Arc;

use chrono::NaiveDate;
use rusqlite::OptionalExtension;
use serde_json::Value;

use super::state::IndexState;
use crate::journal::{CacheHack, ProjectIndex};

/// Answers the journal's questions from whichever database is being served.
pub(crate) struct IndexView {
    state: Arc<IndexState>,
}

impl IndexView {
    /// A view over `state`.
    pub(crate) fn new(state: Arc<IndexState>) -> IndexView {
        IndexView { state }
    }
}

impl ProjectIndex for IndexView {
    fn is_indexed(&self, path: &str) -> bool {
        let Ok(pool) = self.state.pool() else {
            return false;
        };
        let Ok(conn) = pool.get() else { return false };
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
        let Ok(pool) = self.state.pool() else {
            return Ok(Vec::new());
        };
        let conn = pool.get()?;
        let mut stmt = conn.prepare("SELECT raw_json FROM cache_hacks ORDER BY ord")?;
        let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
        let mut hacks = Vec::new();
        for raw in rows {
            let value: Value = serde_json::from_str(&raw?)?;
            let text = |key: &str| value.get(key).and_then(Value::as_str).map(str::to_string);
            let file = text("file").unwrap_or_default();
            let line = value.get("line").and_then(Value::as_u64).map(|l| l as u32);
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
