//! The project state the primer's conditions and dynamic sections read, computed from the index.
//!
//! As in acp-mcp, constraint counts come from `by_file` entries that have a `mutation` object;
//! variables, debug attempts, hacks and entry points always count 0 (the reference never fills
//! them). Counts come from the summary tables computed at import.

use std::collections::HashMap;

use rusqlite::{Connection, OptionalExtension};

use crate::cache::normalize_lock_level;
use crate::query::QueryResult;

/// Counts that primer conditions refer to.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct ProjectState {
    /// `by_file` entries with a `mutation`, by lock level (frozen, restricted,
    /// approval-required, tests-required, docs-required; anything else counts as normal).
    pub levels: HashMap<&'static str, u64>,
    /// All `by_file` entries.
    pub constraint_total: u64,
    /// Number of domains.
    pub domains: u64,
    /// Number of distinct file layers.
    pub layers: u64,
    /// Number of file entries.
    pub files: u64,
    /// Number of symbol entries.
    pub symbols: u64,
    /// The cache's `stats.lines`.
    pub lines: u64,
    /// Files whose path looks like an entry point (`main.rs`, `index.ts`, …).
    pub entry_point_files: u64,
}

impl ProjectState {
    /// Reads the state from the index.
    pub(super) fn load(conn: &Connection) -> QueryResult<ProjectState> {
        let mut state = ProjectState::default();
        let mut stmt =
            conn.prepare_cached("SELECT level, entries FROM constraint_mutation_levels")?;
        let rows = stmt.query_map([], |r| {
            Ok((r.get::<_, Option<String>>(0)?, r.get::<_, i64>(1)?))
        })?;
        for row in rows {
            let (level, count) = row?;
            let count = count.max(0) as u64;
            state.constraint_total += count;
            if let Some(level) = level {
                *state.levels.entry(level_bucket(&level)).or_default() += count;
            }
        }
        let count = |r: &rusqlite::Row, i: usize| -> rusqlite::Result<u64> {
            Ok(r.get::<_, i64>(i)?.max(0) as u64)
        };
        (
            state.domains,
            state.layers,
            state.files,
            state.symbols,
            state.entry_point_files,
        ) = conn
            .prepare_cached(
                "SELECT domains, layers, files, symbols, entry_point_files FROM index_summary",
            )?
            .query_row([], |r| {
                Ok((
                    count(r, 0)?,
                    count(r, 1)?,
                    count(r, 2)?,
                    count(r, 3)?,
                    count(r, 4)?,
                ))
            })?;
        state.lines = conn
            .prepare_cached(
                "SELECT CAST(json_extract(value_json, '$.lines') AS INTEGER) FROM cache_root WHERE key = 'stats'",
            )?
            .query_row([], |r| r.get::<_, Option<i64>>(0))
            .optional()?
            .flatten()
            .unwrap_or(0)
            .max(0) as u64;
        Ok(state)
    }

    fn level(&self, level: &str) -> u64 {
        self.levels.get(level).copied().unwrap_or(0)
    }

    /// Frozen plus restricted entries.
    pub(super) fn protected(&self) -> u64 {
        self.level("frozen") + self.level("restricted")
    }

    /// Entries whose bucketed level is one of `levels`.
    pub(super) fn entries_in(&self, levels: &[&str]) -> u64 {
        levels.iter().map(|l| self.level(l)).sum()
    }

    /// The value of a condition path (`constraints.frozenCount`, `domains.count`, …).
    pub(super) fn value(&self, path: &str) -> Option<f64> {
        let value = match path {
            "constraints.frozenCount" => self.level("frozen"),
            "constraints.restrictedCount" => self.level("restricted"),
            "constraints.approvalCount" => self.level("approval-required"),
            "constraints.testsRequiredCount" => self.level("tests-required"),
            "constraints.docsRequiredCount" => self.level("docs-required"),
            "constraints.protectedCount" => self.protected(),
            "constraints.totalCount" => self.constraint_total,
            "domains.count" => self.domains,
            "layers.count" => self.layers,
            "stats.fileCount" => self.files,
            "stats.symbolCount" => self.symbols,
            "stats.lineCount" => self.lines,
            "variables.count"
            | "attempts.activeCount"
            | "attempts.totalCount"
            | "hacks.count"
            | "hacks.expiredCount"
            | "entryPoints.count" => 0,
            _ => return None,
        };
        Some(value as f64)
    }

    /// Estimated item count of a dynamic section's data source.
    pub(super) fn item_estimate(&self, source: &str) -> u64 {
        match source {
            "cache.domains" => self.domains,
            "cache.layers" => self.layers,
            "cache.constraints.by_lock_level" => self.protected(),
            "vars.variables" | "attempts.active" | "cache.hacks" | "cache.entryPoints" => 0,
            _ => 5,
        }
    }
}

/// The level names acp-mcp distinguishes; every other level is `normal`.
fn level_bucket(level: &str) -> &'static str {
    match normalize_lock_level(level).as_str() {
        "frozen" => "frozen",
        "restricted" => "restricted",
        "approval-required" => "approval-required",
        "tests-required" => "tests-required",
        "docs-required" => "docs-required",
        _ => "normal",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn condition_paths() {
        let mut state = ProjectState::default();
        state.levels.insert("frozen", 2);
        state.levels.insert("restricted", 1);
        state.domains = 6;
        assert_eq!(state.value("constraints.protectedCount"), Some(3.0));
        assert_eq!(state.value("domains.count"), Some(6.0));
        assert_eq!(state.value("hacks.count"), Some(0.0));
        assert_eq!(state.value("unknown.path"), None);
        assert_eq!(state.item_estimate("cache.constraints.by_lock_level"), 3);
        assert_eq!(state.item_estimate("somewhere.else"), 5);
        assert_eq!(level_bucket("approvalrequired"), "approval-required");
        assert_eq!(level_bucket("review-required"), "normal");
    }
}
