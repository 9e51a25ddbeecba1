//! The full-text indexes (the symbols' `symbols_fts` and two trigram indexes, the files'
//! `files_fts` and `files_trigram`), built on a thread of their own, so that the second core
//! tokenises while the first inserts, and indexes the files while the first builds the other
//! indexes.
//!
//! The loading thread sends each inserted symbol's indexed columns as it goes, and the files'
//! once the load is over and their paths are final (queued, so that the thread indexes them
//! while the loading thread builds the other indexes); the builder inserts them into the same
//! FTS5 tables in a separate database file. After the load, [`FtsBuilder::finish`] creates the
//! tables in the index database and copies their shadow tables over, a sequential copy instead
//! of a rebuild. The separate file is a temporary file of [`crate::replace`], so one left by a
//! killed import is swept like the database's own.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread::JoinHandle;

use anyhow::{anyhow, Context, Result};
use rusqlite::{params, Connection, Statement};

/// Definitions of the tables: the index schema's migrations V11 and V12, run here on the
/// builder's file.
const FTS_SQL: [&str; 2] = [
    include_str!("../../migrations/index/V11__symbols_fts.sql"),
    include_str!("../../migrations/index/V12__files_fts.sql"),
];

/// The FTS5 shadow tables that hold the indexes' content (`_config` is the same in every build).
const SHADOW_TABLES: &[&str] = &[
    "symbols_fts_data",
    "symbols_fts_idx",
    "symbols_fts_docsize",
    "symbols_name_trigram_data",
    "symbols_name_trigram_idx",
    "symbols_qname_trigram_data",
    "symbols_qname_trigram_idx",
    "files_fts_data",
    "files_fts_idx",
    "files_fts_docsize",
    "files_trigram_data",
    "files_trigram_idx",
];

/// Rows sent to the builder at a time.
const BATCH: usize = 1024;

/// Symbols' batches waiting for the builder at most (about 2.5 MB).
const SYMBOL_BATCHES_IN_FLIGHT: usize = 8;

/// Files' batches waiting for the builder at most (about 20 MB: every file of a 1M-symbol
/// cache, 100K files).
const FILE_BATCHES_IN_FLIGHT: usize = 128;

/// The indexed columns of a symbol: `name`, `qualified_name`, `signature`, `purpose`, `summary`.
const SYMBOL_COLUMNS: usize = 5;

/// The indexed columns of a file, as `files` stores them.
const FILE_COLUMNS: &str = "path, module, summary, purpose";

/// Rows for the builder, their texts in one buffer so that a batch is a few allocations, made on
/// the loading thread and freed on the builder's.
#[derive(Default)]
struct Batch {
    /// Files' rows rather than symbols'.
    files: bool,
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
    fn push<'a>(&mut self, id: i64, columns: impl IntoIterator<Item = Option<&'a str>>) {
        self.ids.push(id);
        for text in columns {
            self.spans.push(text.map(|text| {
                let start = self.text.len();
                self.text.push_str(text);
                start..self.text.len()
            }));
        }
    }

    /// The rows, each as its id and columns.
    fn rows(&self) -> impl Iterator<Item = (i64, Vec<Option<&str>>)> + '_ {
        let width = self.spans.len() / self.ids.len().max(1);
        self.ids.iter().enumerate().map(move |(row, &id)| {
            let spans = &self.spans[row * width..(row + 1) * width];
            let columns = spans
                .iter()
                .map(|span| span.clone().map(|span| &self.text[span]))
                .collect();
            (id, columns)
        })
    }
}

/// Builds the full-text indexes on another thread.
pub(super) struct FtsBuilder {
    path: PathBuf,
    batch: Batch,
    /// Symbols' batches while the entries load (a few in flight).
    symbols: Option<SyncSender<Batch>>,
    /// Files' batches once the load is over (enough in flight for every file of a 1M-symbol
    /// cache, so that the caller rarely waits).
    files: Option<SyncSender<Batch>>,
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
        for sql in FTS_SQL {
            conn.execute_batch(sql)?;
        }
        let (symbols, symbols_rx) = sync_channel::<Batch>(SYMBOL_BATCHES_IN_FLIGHT);
        let (files, files_rx) = sync_channel::<Batch>(FILE_BATCHES_IN_FLIGHT);
        let thread = std::thread::Builder::new()
            .name("acpdb-fts".into())
            .spawn(move || build(conn, symbols_rx, files_rx))?;
        Ok(FtsBuilder {
            path,
            batch: Batch::default(),
            symbols: Some(symbols),
            files: Some(files),
            thread: Some(thread),
        })
    }

    /// Adds the symbol stored at rowid `id` with its indexed columns.
    pub(super) fn push_symbol(
        &mut self,
        id: i64,
        columns: [Option<&str>; SYMBOL_COLUMNS],
    ) -> Result<()> {
        self.batch.push(id, columns);
        if self.batch.len() >= BATCH {
            self.send()?;
        }
        Ok(())
    }

    /// Ends the input: sends the symbols not sent yet, then every row of `files` (read from
    /// `conn` once the load is over, so with their final paths). The builder indexes the files
    /// while the caller goes on (the caller waits only when more than
    /// [`FILE_BATCHES_IN_FLIGHT`] batches are not indexed yet).
    pub(super) fn end_input(&mut self, conn: &Connection) -> Result<()> {
        self.send()?;
        self.symbols = None;
        let mut rows =
            conn.prepare(&format!("SELECT id, {FILE_COLUMNS} FROM files ORDER BY id"))?;
        let mut rows = rows.query([])?;
        self.batch.files = true;
        while let Some(row) = rows.next()? {
            let columns = [text(row, 1)?, text(row, 2)?, text(row, 3)?, text(row, 4)?];
            self.batch.push(row.get(0)?, columns);
            if self.batch.len() >= BATCH {
                self.send()?;
                self.batch.files = true;
            }
        }
        self.send()?;
        self.files = None;
        Ok(())
    }

    fn send(&mut self) -> Result<()> {
        let batch = std::mem::take(&mut self.batch);
        if batch.len() == 0 {
            return Ok(());
        }
        let channel = if batch.files {
            &self.files
        } else {
            &self.symbols
        };
        if let Some(Err(_)) = channel.as_ref().map(|tx| tx.send(batch)) {
            // The builder stopped early; its error says why.
            self.join()?;
            return Err(anyhow!("the full-text index builder stopped"));
        }
        Ok(())
    }

    fn join(&mut self) -> Result<()> {
        self.symbols = None;
        self.files = None;
        match self.thread.take() {
            Some(thread) => thread
                .join()
                .map_err(|_| anyhow!("the full-text index builder panicked"))?
                .context("building the full-text indexes"),
            None => Ok(()),
        }
    }

    /// Waits for the builder and puts the finished indexes into `conn`'s database, whose
    /// (empty) tables migrations V11 and V12 created. [`FtsBuilder::end_input`] must have run.
    pub(super) fn finish(mut self, conn: &Connection) -> Result<()> {
        if self.files.is_some() {
            return Err(anyhow!(
                "the full-text builder was finished before it was given the files"
            ));
        }
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

/// The builder's insert statements.
struct Inserts<'c> {
    symbol_words: Statement<'c>,
    symbol_names: Statement<'c>,
    symbol_qualified_names: Statement<'c>,
    file_words: Statement<'c>,
    file_paths: Statement<'c>,
}

impl Inserts<'_> {
    fn row(&mut self, files: bool, id: i64, columns: &[Option<&str>]) -> Result<()> {
        match (files, columns) {
            (true, [path, module, summary, purpose]) => {
                self.file_words
                    .execute(params![id, path, module, summary, purpose])?;
                self.file_paths.execute(params![id, path])?;
            }
            (false, [name, qualified_name, signature, purpose, summary]) => {
                self.symbol_words.execute(params![
                    id,
                    name,
                    qualified_name,
                    signature,
                    purpose,
                    summary
                ])?;
                self.symbol_names.execute(params![id, name])?;
                self.symbol_qualified_names
                    .execute(params![id, qualified_name])?;
            }
            _ => return Err(anyhow!("a full-text row with {} columns", columns.len())),
        }
        Ok(())
    }
}

/// Column `i` of `row` as text, or `None` for NULL.
fn text<'r>(row: &'r rusqlite::Row<'_>, i: usize) -> Result<Option<&'r str>> {
    Ok(row.get_ref(i)?.as_str_or_null()?)
}

/// The builder thread: inserts every row it receives, the symbols' then the files', in one
/// transaction.
fn build(conn: Connection, symbols: Receiver<Batch>, files: Receiver<Batch>) -> Result<()> {
    conn.execute_batch("BEGIN")?;
    {
        let mut inserts = Inserts {
            symbol_words: conn.prepare(
                "INSERT INTO symbols_fts(rowid, name, qualified_name, signature, purpose, summary)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?,
            symbol_names: conn
                .prepare("INSERT INTO symbols_name_trigram(rowid, name) VALUES (?1, ?2)")?,
            symbol_qualified_names: conn.prepare(
                "INSERT INTO symbols_qname_trigram(rowid, qualified_name) VALUES (?1, ?2)",
            )?,
            file_words: conn.prepare(&format!(
                "INSERT INTO files_fts(rowid, {FILE_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5)"
            ))?,
            file_paths: conn.prepare("INSERT INTO files_trigram(rowid, path) VALUES (?1, ?2)")?,
        };
        for batch in symbols.into_iter().chain(files) {
            for (id, columns) in batch.rows() {
                inserts.row(batch.files, id, &columns)?;
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
