//! The symbols' full-text indexes (`symbols_fts` and the two trigram indexes), built on a thread of their
//! own while the entries load, so that the second core tokenises while the first inserts.
//!
//! The loading thread sends each inserted symbol's indexed columns; the builder inserts them into
//! the same FTS5 tables in a separate database file. After the load, [`FtsBuilder::finish`]
//! creates the tables in the index database and copies their shadow tables over, a sequential
//! copy instead of a rebuild. The separate file is a temporary file of [`crate::replace`], so one
//! left by a killed import is swept like the database's own.

use std::fmt::Write as _;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread::JoinHandle;

use anyhow::{anyhow, Context, Result};
use rusqlite::{params, Connection};

use crate::cache::fields::Cell;

/// Definitions of the tables: the index schema's migration V11, run here on the builder's file.
const SYMBOLS_FTS_SQL: &str = include_str!("../../migrations/index/V11__symbols_fts.sql");

/// The FTS5 shadow tables that hold the indexes' content (`_config` is the same in every build).
const SHADOW_TABLES: &[&str] = &[
    "symbols_fts_data",
    "symbols_fts_idx",
    "symbols_fts_docsize",
    "symbols_name_trigram_data",
    "symbols_name_trigram_idx",
    "symbols_qname_trigram_data",
    "symbols_qname_trigram_idx",
];

/// Symbols sent to the builder at a time.
const BATCH: usize = 1024;

/// Columns per row: `name`, `qualified_name`, `signature`, `purpose`, `summary`.
const COLUMNS: usize = 5;

/// Rows for the builder, their texts in one buffer so that a batch is a few allocations, made on
/// the loading thread and freed on the builder's.
#[derive(Default)]
struct Batch {
    ids: Vec<i64>,
    text: String,
    /// Per row and column, where its text is in `text`, or `None` for NULL.
    spans: Vec<Option<Range<usize>>>,
}

impl Batch {
    fn len(&self) -> usize {
        self.ids.len()
    }

    /// Appends one row.
    fn push(&mut self, id: i64, columns: [&Cell; COLUMNS]) {
        self.ids.push(id);
        for cell in columns {
            let start = self.text.len();
            let span = match cell {
                Cell::Null => None,
                Cell::Text(text) => Some(text.as_str()),
                Cell::Int(n) => {
                    // Not a type these columns take; indexed as FTS5 would, by its text.
                    let _ = write!(self.text, "{n}");
                    Some("")
                }
            };
            self.spans.push(span.map(|text| {
                self.text.push_str(text);
                start..self.text.len()
            }));
        }
    }

    /// The columns of row `row`.
    fn row(&self, row: usize) -> [Option<&str>; COLUMNS] {
        std::array::from_fn(|c| {
            self.spans[row * COLUMNS + c]
                .clone()
                .map(|span| &self.text[span])
        })
    }
}

/// Builds the symbols' full-text indexes on another thread.
pub(super) struct FtsBuilder {
    path: PathBuf,
    batch: Batch,
    tx: Option<SyncSender<Batch>>,
    thread: Option<JoinHandle<Result<()>>>,
}

impl FtsBuilder {
    /// Starts the builder on a new database file at `path`.
    pub(super) fn start(path: PathBuf) -> Result<FtsBuilder> {
        let _ = std::fs::remove_file(&path);
        let conn =
            Connection::open(&path).with_context(|| format!("cannot create {}", path.display()))?;
        conn.execute_batch(
            "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; PRAGMA locking_mode = EXCLUSIVE;
             PRAGMA cache_size = -4096;",
        )?;
        conn.execute_batch(SYMBOLS_FTS_SQL)?;
        let (tx, rx) = sync_channel::<Batch>(8);
        let thread = std::thread::Builder::new()
            .name("acpdb-fts".into())
            .spawn(move || build(conn, rx))?;
        Ok(FtsBuilder {
            path,
            batch: Batch::default(),
            tx: Some(tx),
            thread: Some(thread),
        })
    }

    /// Adds the symbol stored at rowid `id` with its indexed columns.
    pub(super) fn push(&mut self, id: i64, columns: [&Cell; COLUMNS]) -> Result<()> {
        self.batch.push(id, columns);
        if self.batch.len() >= BATCH {
            self.send()?;
        }
        Ok(())
    }

    fn send(&mut self) -> Result<()> {
        let batch = std::mem::take(&mut self.batch);
        let sent = self.tx.as_ref().map(|tx| tx.send(batch));
        if let Some(Err(_)) = sent {
            // The builder stopped early; its error says why.
            self.join()?;
            return Err(anyhow!("the full-text index builder stopped"));
        }
        Ok(())
    }

    fn join(&mut self) -> Result<()> {
        self.tx = None;
        match self.thread.take() {
            Some(thread) => thread
                .join()
                .map_err(|_| anyhow!("the full-text index builder panicked"))?
                .context("building the symbols' full-text indexes"),
            None => Ok(()),
        }
    }

    /// Waits for the builder and puts the finished indexes into `conn`'s database, whose
    /// (empty) tables migration V11 created.
    pub(super) fn finish(mut self, conn: &Connection) -> Result<()> {
        self.send()?;
        self.join()?;
        conn.execute("ATTACH ?1 AS fts", params![self.path.to_string_lossy()])?;
        let copied = (|| -> Result<()> {
            conn.execute_batch("BEGIN")?;
            for table in SHADOW_TABLES {
                conn.execute_batch(&format!(
                    "DELETE FROM main.{table}; INSERT INTO main.{table} SELECT * FROM fts.{table};"
                ))?;
            }
            conn.execute_batch("COMMIT")?;
            Ok(())
        })();
        conn.execute_batch("DETACH fts")?;
        copied
    }
}

impl Drop for FtsBuilder {
    fn drop(&mut self) {
        let _ = self.join();
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The builder thread: inserts every row it receives, in one transaction.
fn build(conn: Connection, rx: Receiver<Batch>) -> Result<()> {
    conn.execute_batch("BEGIN")?;
    {
        let mut words = conn.prepare(
            "INSERT INTO symbols_fts(rowid, name, qualified_name, signature, purpose, summary)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )?;
        let mut name_trigrams =
            conn.prepare("INSERT INTO symbols_name_trigram(rowid, name) VALUES (?1, ?2)")?;
        let mut qname_trigrams = conn
            .prepare("INSERT INTO symbols_qname_trigram(rowid, qualified_name) VALUES (?1, ?2)")?;
        for batch in rx {
            for (row, id) in batch.ids.iter().enumerate() {
                let [name, qualified_name, signature, purpose, summary] = batch.row(row);
                words.execute(params![
                    id,
                    name,
                    qualified_name,
                    signature,
                    purpose,
                    summary
                ])?;
                name_trigrams.execute(params![id, name])?;
                qname_trigrams.execute(params![id, qualified_name])?;
            }
        }
    }
    conn.execute_batch("COMMIT")?;
    Ok(())
}

/// Where the builder of the database at `db` writes: a temporary file beside it.
pub(super) fn temp_path(db: &Path) -> PathBuf {
    crate::replace::temp_path(&fts_target(db))
}

/// The name the builder's temporary files are named after (never created itself).
pub(super) fn fts_target(db: &Path) -> PathBuf {
    let mut name = db.file_name().unwrap_or_default().to_os_string();
    name.push("-fts");
    db.with_file_name(name)
}
