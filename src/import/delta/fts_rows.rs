//! A delta's changes to the full-text tables, applied in row id order.
//!
//! FTS5 keeps the terms of the rows written in a transaction in memory and writes them out as a
//! new segment whenever a row id is not greater than the last one written (or the terms pass its
//! `hashsize`). A delta meets entries in the cache's order, which acp-cli's hash maps make
//! random in row ids, so writing each change as it came made a segment, and soon a merge, for
//! almost every row. So the changes wait in a temporary table, in the order they came, and go
//! to each table at the end sorted by row id (a row's removal before its new values), a few
//! segments a table.

use anyhow::Result;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, Statement};

use super::super::fts::merge_delta_segments;
use super::super::rows::sql_params;

/// Most columns of a staged row (`symbols_fts` has five).
const MAX_COLUMNS: usize = 5;

/// Pages of the temporary table kept in memory (16 MiB, the changes of about 25,000 symbols);
/// the rest waits in SQLite's temporary file.
const STAGE_CACHE_KIB: i64 = 16 * 1024;

/// Creates the temporary table every [`FtsRows`] of `conn` stages its changes in.
pub(super) fn create_stage(conn: &Connection) -> Result<()> {
    conn.execute_batch(&format!(
        "PRAGMA temp.cache_size = -{STAGE_CACHE_KIB};
         CREATE TEMP TABLE fts_changes(
             seq INTEGER PRIMARY KEY, tab TEXT NOT NULL, id INTEGER NOT NULL, command TEXT, {});
         CREATE INDEX temp.fts_changes_order ON fts_changes(tab, id, seq);",
        stage_columns(MAX_COLUMNS)
    ))?;
    Ok(())
}

/// The changes of one external-content FTS5 table, staged.
pub(super) struct FtsRows<'c> {
    table: &'static str,
    columns: &'static str,
    /// How many `columns`.
    n: usize,
    stage: Statement<'c>,
}

impl<'c> FtsRows<'c> {
    /// Stages changes of `table`, whose indexed `columns` (comma-separated) the values give, in
    /// the table [`create_stage`] made.
    pub(super) fn new(
        conn: &'c Connection,
        table: &'static str,
        columns: &'static str,
    ) -> Result<FtsRows<'c>> {
        let n = columns.split(',').count();
        assert!(
            n <= MAX_COLUMNS,
            "{table} has more than {MAX_COLUMNS} columns"
        );
        let stage = conn.prepare(&format!(
            "INSERT INTO temp.fts_changes(tab, id, command, {}) VALUES ('{table}', ?1, ?2, {})",
            stage_columns(n),
            value_placeholders(n)
        ))?;
        Ok(FtsRows {
            table,
            columns,
            n,
            stage,
        })
    }

    /// Brings row `id` from its old values to its new ones (`None`: no row), staging nothing
    /// when they are the same.
    pub(super) fn rewrite<const N: usize>(
        &mut self,
        id: i64,
        values: [Option<[ValueRef<'_>; N]>; 2],
    ) -> Result<()> {
        if values[0] == values[1] {
            return Ok(());
        }
        for (command, values) in [Some("delete"), None].into_iter().zip(values) {
            if let Some(values) = values {
                let head = [
                    ValueRef::Integer(id),
                    command.map_or(ValueRef::Null, |c| ValueRef::Text(c.as_bytes())),
                ];
                self.stage
                    .execute(sql_params(head.into_iter().chain(values)))?;
            }
        }
        Ok(())
    }

    /// Writes the staged changes into the table, in row id order, forgets them, and merges the
    /// table's small segments ([`merge_delta_segments`]). One statement a row, as SQLite's
    /// statement journal for one `INSERT … SELECT` of them all would spill to a file.
    pub(super) fn apply(&mut self, conn: &Connection) -> Result<()> {
        let (table, n) = (self.table, self.n);
        let mut staged = conn.prepare_cached(&format!(
            "SELECT command, id, {} FROM temp.fts_changes WHERE tab = ?1 ORDER BY id, seq",
            stage_columns(n)
        ))?;
        let mut write = conn.prepare_cached(&format!(
            "INSERT INTO {table}({table}, rowid, {}) VALUES (?1, ?2, {})",
            self.columns,
            value_placeholders(n)
        ))?;
        let mut rows = staged.query([table])?;
        let mut written = false;
        while let Some(row) = rows.next()? {
            let values = (0..n + 2)
                .map(|i| row.get_ref(i))
                .collect::<rusqlite::Result<Vec<_>>>()?;
            write.execute(sql_params(values))?;
            written = true;
        }
        if written {
            conn.prepare_cached("DELETE FROM temp.fts_changes WHERE tab = ?1")?
                .execute([table])?;
            merge_delta_segments(conn, table)?;
        }
        Ok(())
    }
}

/// The first `n` value columns of the staging table.
fn stage_columns(n: usize) -> String {
    (1..=n)
        .map(|i| format!("c{i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The parameters of `n` values after a row id and a command: `?3, ?4, …`.
fn value_placeholders(n: usize) -> String {
    (3..n + 3)
        .map(|i| format!("?{i}"))
        .collect::<Vec<_>>()
        .join(", ")
}
