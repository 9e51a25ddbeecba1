//! The least work an import of a cache can do with this schema: what the JSON parser and SQLite
//! alone spend on the content of an imported database, measured step by step, so that the
//! import's own figures can be set against a floor no importer of this schema goes below.
//!
//! [`measure`] parses the cache whole (serde_json on the file read into memory, values
//! discarded: a bounded-memory reader can only be slower), copies every table but the
//! full-text ones out of the imported database into a scratch database with the import's
//! connection settings (rows already encoded, appended in key order, no index), builds each
//! full-text index from its content table the way the import's builder does (FTS5 merges off
//! while rows arrive, one `optimize` at the end), then builds each index on one thread. What it
//! leaves out is everything the importer adds: turning JSON values into rows and binding them,
//! the call graph's ids and lists, digests, summaries, `ANALYZE`, and waiting between phases.
//!
//! [`scan_unchanged`] is a delta's floor: reading the stored entry digests, then the reader's
//! scan of a cache none of whose entries changed (each recognised from its bytes, none
//! parsed), before anything is written.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rusqlite::{Connection, OpenFlags};

use crate::cache::event::{DocumentKind, Event};
use crate::cache::reader::Limits;
use crate::cache::scanner::Progress;

use super::pipeline::{Reading, READ_AHEAD};

/// One step of [`measure`]: what ran, its wall time, and the CPU time the process spent
/// meanwhile (user and system, every thread; `None` where the platform does not say).
#[derive(Debug, Clone)]
pub struct FloorStep {
    /// What the step did, e.g. "index `symbols_name`".
    pub step: String,
    /// Wall time.
    pub wall: Duration,
    /// CPU time of the process during the step.
    pub cpu: Option<Duration>,
}

/// Measures the floor of an import of `cache` whose result is the database `db` (an `acpdb
/// import` of that cache), in a scratch database created at `scratch` (replaced if present,
/// about as large as `db`). `db` is only read.
pub fn measure(cache: &Path, db: &Path, scratch: &Path) -> Result<Vec<FloorStep>> {
    let mut steps = Vec::new();
    timed(
        &mut steps,
        "read and parse the JSON (serde_json, values discarded)",
        || {
            let bytes =
                std::fs::read(cache).with_context(|| format!("cannot read {}", cache.display()))?;
            serde_json::from_slice::<serde::de::IgnoredAny>(&bytes)
                .with_context(|| format!("{} is not JSON", cache.display()))?;
            Ok(())
        },
    )?;

    match std::fs::remove_file(scratch) {
        Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
            return Err(err).with_context(|| format!("cannot remove {}", scratch.display()))
        }
        _ => {}
    }
    let conn = Connection::open(scratch)
        .with_context(|| format!("cannot create {}", scratch.display()))?;
    conn.execute_batch(super::WRITE_PRAGMAS)?;
    let source = Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .with_context(|| format!("cannot open {}", db.display()))?;
    let schema = Schema::read(&source)?;
    drop(source);
    conn.execute("ATTACH ?1 AS src", [db.to_string_lossy()])?;

    timed(
        &mut steps,
        "copy the tables (no index, no full-text table)",
        || {
            for (name, sql) in &schema.tables {
                conn.execute_batch(sql)?;
                conn.execute_batch(&format!(
                    "INSERT INTO main.\"{name}\" SELECT * FROM src.\"{name}\""
                ))?;
            }
            Ok(())
        },
    )?;
    conn.execute_batch("DETACH src")?;
    for sql in &schema.views {
        conn.execute_batch(sql)?;
    }
    for table in &schema.full_text {
        conn.execute_batch(&table.sql)?;
        conn.execute_batch(&super::fts::merge_settings(&table.name))?;
        let columns = table_columns(&conn, &table.name)?.join(", ");
        let (name, content, rowid) = (&table.name, &table.content, &table.content_rowid);
        timed(&mut steps, &format!("full-text index `{name}`"), || {
            conn.execute_batch(&format!(
                "INSERT INTO \"{name}\"(rowid, {columns})
                     SELECT {rowid}, {columns} FROM \"{content}\" ORDER BY {rowid};
                 INSERT INTO \"{name}\"(\"{name}\") VALUES ('optimize');"
            ))?;
            Ok(())
        })?;
    }
    conn.execute_batch(super::INDEXING_PRAGMAS)?;
    conn.execute_batch("PRAGMA threads = 0")?;
    for (name, sql) in &schema.indexes {
        timed(&mut steps, &format!("index `{name}` (one thread)"), || {
            conn.execute_batch(sql)?;
            Ok(())
        })?;
    }
    Ok(steps)
}

/// What [`measure`] rebuilds, read from the imported database's `sqlite_schema`.
struct Schema {
    /// Ordinary tables (neither full-text nor their shadow tables, nor SQLite's own), by name.
    tables: Vec<(String, String)>,
    /// `CREATE VIEW` statements (the content of a full-text table may be a view).
    views: Vec<String>,
    /// Indexes with a `CREATE INDEX` statement (not the automatic ones), by name.
    indexes: Vec<(String, String)>,
    full_text: Vec<FullText>,
}

/// An external-content FTS5 table.
struct FullText {
    name: String,
    sql: String,
    content: String,
    content_rowid: String,
}

impl Schema {
    fn read(conn: &Connection) -> Result<Schema> {
        let mut statement = conn.prepare(
            "SELECT type, name, sql FROM sqlite_schema
             WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'
             ORDER BY rowid",
        )?;
        let rows = statement
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))?
            .collect::<rusqlite::Result<Vec<(String, String, String)>>>()?;
        let full_text = rows
            .iter()
            .filter(|(kind, _, sql)| kind == "table" && is_virtual(sql))
            .map(|(_, name, sql)| {
                Ok(FullText {
                    name: name.clone(),
                    sql: sql.clone(),
                    content: fts_option(sql, "content")
                        .with_context(|| format!("{name} has no content table"))?,
                    content_rowid: fts_option(sql, "content_rowid")
                        .with_context(|| format!("{name} has no content_rowid"))?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let is_shadow = |name: &str| {
            full_text
                .iter()
                .any(|table| name.starts_with(&format!("{}_", table.name)))
        };
        let of_kind = |wanted: &str| -> Vec<(String, String)> {
            rows.iter()
                .filter(|(kind, name, sql)| kind == wanted && !is_virtual(sql) && !is_shadow(name))
                .map(|(_, name, sql)| (name.clone(), sql.clone()))
                .collect()
        };
        Ok(Schema {
            tables: of_kind("table"),
            views: of_kind("view").into_iter().map(|(_, sql)| sql).collect(),
            indexes: of_kind("index"),
            full_text,
        })
    }
}

/// Whether the definition `sql` makes a virtual (here: full-text) table.
fn is_virtual(sql: &str) -> bool {
    sql.starts_with("CREATE VIRTUAL TABLE")
}

/// The value of `option = 'value'` (or `option="value"`) in an FTS5 table's definition.
fn fts_option(sql: &str, option: &str) -> Option<String> {
    sql.match_indices(option).find_map(|(at, _)| {
        // `option = 'value'`, `option="value"`: spaces around `=` and either quote.
        let value = sql[at + option.len()..].trim_start().strip_prefix('=')?;
        let value = value.trim_start();
        let quote = value.chars().next().filter(|c| matches!(c, '\'' | '"'))?;
        let value = &value[1..];
        Some(value[..value.find(quote)?].to_string())
    })
}

/// The column names of `table`, in order.
fn table_columns(conn: &Connection, table: &str) -> Result<Vec<String>> {
    let mut statement = conn.prepare("SELECT name FROM pragma_table_info(?1)")?;
    let columns = statement
        .query_map([table], |row| row.get(0))?
        .collect::<rusqlite::Result<Vec<String>>>()?;
    Ok(columns)
}

/// A delta's floor: the steps that read a cache none of whose entries changed, and what the
/// reader sent.
#[derive(Debug, Clone)]
pub struct UnchangedScan {
    /// Reading the stored entry digests.
    pub digests: FloorStep,
    /// Scanning the cache with them.
    pub scan: FloorStep,
    /// Bytes of the cache.
    pub bytes: u64,
    /// Entries recognised from their bytes (digested, not parsed).
    pub unchanged: u64,
    /// Other events: entries of the sections without digests, and any entry not recognised.
    pub parsed: u64,
}

/// Measures what a delta import of `cache` onto `db` (an `acpdb import` of that same cache)
/// spends before it writes anything: reading the database's entry digests, then the reader's
/// scan of the cache, each entry recognised from its bytes. `db` is only read.
pub fn scan_unchanged(cache: &Path, db: &Path) -> Result<UnchangedScan> {
    let (known, digests) = measured("read the stored entry digests", || {
        let reading = super::delta::DigestReading::start(db, std::time::Instant::now())?;
        let known = reading.known();
        reading.finish()?;
        anyhow::Ok(known)
    })?;
    let ((unchanged, parsed), scan) = measured("scan the cache (every entry known)", || {
        let reading = Reading::start(
            cache,
            DocumentKind::Cache,
            Limits::default(),
            Some(known),
            Arc::new(Progress::default()),
            READ_AHEAD,
        )?;
        let (mut unchanged, mut parsed) = (0, 0);
        let (taken, read) = reading.drain(|batch| {
            for event in &batch {
                match event {
                    Event::Unchanged { .. } => unchanged += 1,
                    _ => parsed += 1,
                }
            }
            (batch, Ok(true))
        });
        taken?;
        read??;
        Ok((unchanged, parsed))
    })?;
    Ok(UnchangedScan {
        digests,
        scan,
        bytes: std::fs::metadata(cache)?.len(),
        unchanged,
        parsed,
    })
}

/// Runs `work` and records it as `step`.
fn timed(steps: &mut Vec<FloorStep>, step: &str, work: impl FnOnce() -> Result<()>) -> Result<()> {
    let ((), measure) = measured(step, work)?;
    steps.push(measure);
    Ok(())
}

/// Runs `work`: what it gives, and its wall and CPU time as `step`.
fn measured<T>(step: &str, work: impl FnOnce() -> Result<T>) -> Result<(T, FloorStep)> {
    let (cpu_before, started) = (process_cpu(), Instant::now());
    let value = work().with_context(|| format!("floor step: {step}"))?;
    let wall = started.elapsed();
    let cpu = process_cpu()
        .zip(cpu_before)
        .map(|(after, before)| after.saturating_sub(before));
    let measure = FloorStep {
        step: step.to_string(),
        wall,
        cpu,
    };
    Ok((value, measure))
}

/// User and system CPU time of this process so far, every thread included.
#[cfg(unix)]
fn process_cpu() -> Option<Duration> {
    // SAFETY: `getrusage` writes only into the zeroed struct it is given.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_SELF, &mut usage) != 0 {
            return None;
        }
        usage
    };
    let time = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    Some(time(usage.ru_utime) + time(usage.ru_stime))
}

/// CPU time is not measured on this platform.
#[cfg(not(unix))]
fn process_cpu() -> Option<Duration> {
    None
}

#[cfg(test)]
mod tests {
    use super::fts_option;

    #[test]
    fn fts_options_are_read_in_either_quoting() {
        let single =
            "CREATE VIRTUAL TABLE t USING fts5(name, content = 'symbols', content_rowid = 'id')";
        let double =
            r#"CREATE VIRTUAL TABLE t USING fts5(content, content="files", content_rowid="id")"#;
        assert_eq!(fts_option(single, "content").as_deref(), Some("symbols"));
        assert_eq!(fts_option(single, "content_rowid").as_deref(), Some("id"));
        assert_eq!(fts_option(double, "content").as_deref(), Some("files"));
        assert_eq!(fts_option(double, "content_rowid").as_deref(), Some("id"));
        assert_eq!(fts_option(double, "tokenize"), None);
    }
}
