//! The full-text indexes (the symbols' `symbols_fts` and two trigram indexes, the files'
//! `files_fts` and `files_trigram`), built on a thread of their own, so that the second core
//! tokenises while the first inserts, and indexes the files while the first builds the other
//! indexes.
//!
//! The loading thread sends each inserted symbol's indexed columns as it goes, and the files'
//! once the load is over and their paths are final; the builder inserts them into the same FTS5
//! tables in a separate database file. The loading thread never waits for the builder: batches
//! beyond [`MEMORY_IN_FLIGHT`] bytes wait in an anonymous spool file instead of memory, so the
//! builder, which needs about as much CPU as loading the symbols, goes on indexing while the
//! call graph loads and the other indexes are built; memory stays bounded, and the spool file
//! (next to the database, gone when the import ends) takes at most the spooled batches' size.
//! After the load, [`FtsBuilder::finish`] creates the tables in the index database and copies
//! their shadow tables over, a sequential copy instead of a rebuild. An import that fails stops
//! the builder at its next batch. The separate file is a temporary file of [`crate::replace`], so one left by a
//! killed import is swept like the database's own. The symbols' file paths (`symbol_files`
//! and its trigram index) are filled afterwards from the loaded symbols, on the loading
//! thread: about 100K distinct paths at 1M symbols.

use std::borrow::Cow;
use std::fs::File;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

use anyhow::{anyhow, Context, Result};
use rusqlite::{params, Connection, OptionalExtension, Statement};

use crate::cache::fields::{
    SYMBOL_NAME_CELL, SYMBOL_PURPOSE_CELL, SYMBOL_QUALIFIED_NAME_CELL, SYMBOL_SIGNATURE_CELL,
    SYMBOL_SUMMARY_CELL,
};

use super::scratch;

/// Definitions of the tables: the index schema's migrations V16 to V18 and V25, run here on the
/// builder's file.
const FTS_SQL: [&str; 4] = [
    include_str!("../../migrations/index/V16__symbols_fts.sql"),
    include_str!("../../migrations/index/V17__files_fts.sql"),
    include_str!("../../migrations/index/V18__qualified_names.sql"),
    include_str!("../../migrations/index/V25__trigram_name_ends.sql"),
];

/// Nice levels the full-text thread runs below the process (in a re-import while serving,
/// the import thread is as low already, and the full-text thread stays at its level). During
/// the load every core is busy, and the reading and loading threads go first: what the
/// full-text thread has not indexed yet waits (in a bounded amount of memory, the rest in the
/// spool file), and it catches up after the load, while the index builds leave part of a core
/// idle. At 1M symbols the load ends about 1.5 s sooner and the import about 1 s sooner than at
/// equal priority.
const LAG_NICENESS: i32 = 10;

/// The full-text tables, each with whether it keeps per-row token counts (a `_docsize` table).
const TABLES: [(&str, bool); 5] = [
    ("symbols_fts", true),
    ("symbols_name_trigram", false),
    ("symbols_qname_trigram", false),
    ("files_fts", true),
    ("files_trigram", false),
];

/// The FTS5 shadow tables that hold a table's content (`_config` is the same in every build).
fn shadow_tables(table: &str, docsize: bool) -> impl Iterator<Item = String> + '_ {
    let suffixes: &[&str] = if docsize {
        &["data", "idx", "docsize"]
    } else {
        &["data", "idx"]
    };
    suffixes
        .iter()
        .map(move |suffix| format!("{table}_{suffix}"))
}

/// How the builder merges each table's segments: never while rows arrive (FTS5's default
/// merges each level every 4 segments, which rewrites the postings again and again, half the
/// builder's time at 1M symbols), at most 64 segments a level, then once into one segment at
/// the end (`optimize`), which is also the layout queries read fastest. The settings live in
/// the builder's file only; the index database keeps FTS5's defaults for later changes.
pub(super) fn merge_settings(table: &str) -> String {
    format!(
        "INSERT INTO {table}({table}, rank) VALUES ('automerge', 0);
         INSERT INTO {table}({table}, rank) VALUES ('crisismerge', 64);"
    )
}

/// Rows sent to the builder at a time.
const BATCH: usize = 1024;

/// Bytes of batches waiting for the builder in memory at most (about twenty batches of
/// symbols); the loading thread spools any further batch to a file.
const MEMORY_IN_FLIGHT: usize = 8 << 20;

/// Batches the builder hands back for reuse at most (more than fit in [`MEMORY_IN_FLIGHT`]).
const BATCHES_GIVEN_BACK: usize = 64;

/// The indexed columns of a symbol: `name`, `qualified_name`, `signature`, `purpose`, `summary`,
/// and the `file_path` its qualified name's terms are computed with ([`TrigramTexts`]).
const SYMBOL_COLUMNS: usize = 6;

/// The columns of `symbols_fts`, in the order of [`SYMBOL_FTS_CELLS`].
pub(super) const SYMBOL_FTS_COLUMNS: &str = "name, qualified_name, signature, purpose, summary";

/// Indexes into a symbol record's cells (`cache::fields::SYMBOL_FIELDS`) of the columns of
/// `symbols_fts`: name, qualified_name, signature, purpose, summary.
pub(super) const SYMBOL_FTS_CELLS: [usize; 5] = [
    SYMBOL_NAME_CELL,
    SYMBOL_QUALIFIED_NAME_CELL,
    SYMBOL_SIGNATURE_CELL,
    SYMBOL_PURPOSE_CELL,
    SYMBOL_SUMMARY_CELL,
];

/// What a symbol's rows in the two trigram indexes of names hold, as the views
/// `symbols_name_terms` and `symbols_qname_terms` of migrations V18 and V25 say: its name and
/// how it ends ([`crate::db::trigram_text_end`]); when the qualified name is the file path, a
/// colon and the simple name, the two characters on each side of that colon (the path and the
/// name have indexes of their own) and no ending, otherwise the qualified name and its ending.
pub(super) struct TrigramTexts<'a> {
    name: Option<&'a str>,
    name_end: Option<String>,
    terms: Option<Cow<'a, str>>,
    terms_end: Option<String>,
}

impl<'a> TrigramTexts<'a> {
    pub(super) fn new(
        name: Option<&'a str>,
        qualified_name: Option<&'a str>,
        file_path: Option<&str>,
    ) -> TrigramTexts<'a> {
        let (terms, terms_end) = match (name, qualified_name, file_path) {
            (_, None, _) => (None, None),
            (Some(name), Some(qualified), Some(path))
                if qualified.len() == path.len() + 1 + name.len()
                    && qualified.starts_with(path)
                    && qualified.ends_with(name)
                    && qualified.as_bytes()[path.len()] == b':' =>
            {
                let name = crate::db::before_nul(name);
                let head = name.char_indices().nth(2).map_or(name.len(), |(i, _)| i);
                let path = crate::db::last_two_chars(path);
                (Some(Cow::Owned(format!("{path}:{}", &name[..head]))), None)
            }
            (_, Some(qualified), _) => (
                Some(Cow::Borrowed(qualified)),
                Some(crate::db::trigram_text_end(qualified)),
            ),
        };
        TrigramTexts {
            name,
            name_end: name.map(crate::db::trigram_text_end),
            terms,
            terms_end,
        }
    }

    /// The values of `symbols_name_trigram`'s columns, `name, name_end`.
    pub(super) fn names(&self) -> [Option<&str>; 2] {
        [self.name, self.name_end.as_deref()]
    }

    /// The values of `symbols_qname_trigram`'s columns, `terms, terms_end`.
    pub(super) fn terms(&self) -> [Option<&str>; 2] {
        [self.terms.as_deref(), self.terms_end.as_deref()]
    }
}

/// The indexed columns of a file, as `files` stores them and `files_fts` indexes them.
pub(super) const FILE_FTS_COLUMNS: &str = "path, module, summary, purpose";

/// Rows for the builder, their texts in one buffer so that a batch is a few allocations, made on
/// the loading thread (and handed back to it for reuse, or, when spooled, rebuilt and freed by
/// the builder).
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

    /// The batch without its rows, its buffers kept for the next rows.
    fn emptied(mut self) -> Batch {
        self.files = false;
        self.ids.clear();
        self.text.clear();
        self.spans.clear();
        self
    }

    /// Bytes the batch holds (what [`MEMORY_IN_FLIGHT`] counts).
    fn bytes(&self) -> usize {
        self.text.len()
            + self.ids.len() * std::mem::size_of::<i64>()
            + self.spans.len() * std::mem::size_of::<Option<Range<usize>>>()
    }

    /// The batch as bytes for the spool: the files flag, the counts of rows and spans, the ids,
    /// the spans (start and end, `u64::MAX` for NULL) and the text, integers little-endian.
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(17 + self.bytes());
        out.push(u8::from(self.files));
        out.extend((self.ids.len() as u64).to_le_bytes());
        out.extend((self.spans.len() as u64).to_le_bytes());
        for id in &self.ids {
            out.extend(id.to_le_bytes());
        }
        for span in &self.spans {
            let (start, end) = span
                .as_ref()
                .map_or((u64::MAX, u64::MAX), |s| (s.start as u64, s.end as u64));
            out.extend(start.to_le_bytes());
            out.extend(end.to_le_bytes());
        }
        out.extend(self.text.as_bytes());
        out
    }

    /// The batch [`Batch::encode`] gave `bytes`.
    fn decode(bytes: &[u8]) -> Result<Batch> {
        let malformed = || anyhow!("a malformed batch in the full-text spool file");
        let (&flag, mut rest) = bytes.split_first().ok_or_else(malformed)?;
        let mut word = || -> Result<u64> {
            let (head, tail) = rest.split_first_chunk::<8>().ok_or_else(malformed)?;
            rest = tail;
            Ok(u64::from_le_bytes(*head))
        };
        let rows = usize::try_from(word()?)?;
        let spans = usize::try_from(word()?)?;
        if rows.saturating_add(spans.saturating_mul(2)) > bytes.len() / 8 {
            return Err(malformed());
        }
        let ids = (0..rows)
            .map(|_| word().map(|id| id as i64))
            .collect::<Result<Vec<i64>>>()?;
        let spans = (0..spans)
            .map(|_| {
                let (start, end) = (word()?, word()?);
                Ok((start != u64::MAX).then_some(start as usize..end as usize))
            })
            .collect::<Result<Vec<_>>>()?;
        let text = String::from_utf8(rest.to_vec())?;
        let fits = |span: &Range<usize>| {
            span.start <= span.end
                && span.end <= text.len()
                && text.is_char_boundary(span.start)
                && text.is_char_boundary(span.end)
        };
        if flag > 1 || !spans.iter().flatten().all(fits) {
            return Err(malformed());
        }
        Ok(Batch {
            files: flag == 1,
            ids,
            text,
            spans,
        })
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

/// What the loading thread hands the builder, in order.
enum Message {
    /// A batch in memory.
    Rows(Batch),
    /// A batch in the spool file, at these bytes.
    Spooled(Range<u64>),
}

/// Builds the full-text indexes on another thread.
pub(super) struct FtsBuilder {
    path: PathBuf,
    batch: Batch,
    /// Batches for the builder, until the input ends.
    messages: Option<Sender<Message>>,
    /// Bytes of the batches sent in memory that the builder has not taken yet.
    in_memory: Arc<AtomicUsize>,
    /// Bytes of batches that may wait in memory ([`MEMORY_IN_FLIGHT`]).
    memory_budget: usize,
    /// Where batches beyond the budget wait (written here, read by the builder).
    spool: Arc<File>,
    spooled: u64,
    /// Batches the builder is done with, for reuse, until the input ends.
    returned: Option<Receiver<Batch>>,
    /// Set when the import is abandoned: the builder stops at its next batch.
    abandoned: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<()>>>,
}

impl FtsBuilder {
    /// Starts the builder on a new temporary database file named after the index database
    /// `db` ([`temp_path`]); batches that do not fit in memory wait in an anonymous file in
    /// `spill_dir`.
    pub(super) fn start(db: &Path, spill_dir: &Path) -> Result<FtsBuilder> {
        FtsBuilder::with_memory_budget(temp_path(db), db, spill_dir, MEMORY_IN_FLIGHT)
    }

    /// [`FtsBuilder::start`] on the file `path`, made as private as the database `like`,
    /// with at most `memory_budget` bytes of batches in memory.
    fn with_memory_budget(
        path: PathBuf,
        like: &Path,
        spill_dir: &Path,
        memory_budget: usize,
    ) -> Result<FtsBuilder> {
        let conn = scratch::open_temp_database(&path, like)
            .with_context(|| format!("cannot create {}", path.display()))?;
        conn.execute_batch(
            "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; PRAGMA locking_mode = EXCLUSIVE;
             PRAGMA cache_size = -4096;",
        )?;
        for sql in FTS_SQL {
            conn.execute_batch(sql)?;
        }
        for (table, _) in TABLES {
            conn.execute_batch(&merge_settings(table))?;
        }
        let spool = Arc::new(scratch::spill_file(spill_dir, "the full-text indexes")?);
        let in_memory = Arc::new(AtomicUsize::new(0));
        let (messages, received) = channel::<Message>();
        let (give_back, returned) = sync_channel::<Batch>(BATCHES_GIVEN_BACK);
        let abandoned = Arc::new(AtomicBool::new(false));
        let input = Input {
            abandoned: Arc::clone(&abandoned),
            messages: received,
            give_back,
            in_memory: Arc::clone(&in_memory),
            spool: Arc::clone(&spool),
        };
        let thread = std::thread::Builder::new()
            .name("acpdb-fts".into())
            .spawn(move || build(conn, input))?;
        Ok(FtsBuilder {
            path,
            batch: Batch::default(),
            messages: Some(messages),
            in_memory,
            memory_budget,
            spool,
            spooled: 0,
            returned: Some(returned),
            abandoned,
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
    /// while the caller goes on.
    pub(super) fn end_input(&mut self, conn: &Connection) -> Result<()> {
        self.send()?;
        let mut rows = conn.prepare(&format!(
            "SELECT id, {FILE_FTS_COLUMNS} FROM files ORDER BY id"
        ))?;
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
        self.messages = None;
        self.returned = None;
        Ok(())
    }

    /// Hands the current batch to the builder: in memory while the batches it has not taken
    /// yet fit in its memory budget, else through the spool file.
    fn send(&mut self) -> Result<()> {
        if self.batch.len() == 0 {
            return Ok(());
        }
        let bytes = self.batch.bytes();
        let message = if self.in_memory.load(Ordering::Acquire) + bytes <= self.memory_budget {
            self.in_memory.fetch_add(bytes, Ordering::AcqRel);
            // The next batch reuses one the builder gave back, so that memory is allocated
            // and freed by this thread only (freeing another thread's allocation contends
            // for its allocator's lock).
            let next = (self.returned.as_ref())
                .and_then(|returned| returned.try_recv().ok())
                .map_or_else(Batch::default, Batch::emptied);
            Message::Rows(std::mem::replace(&mut self.batch, next))
        } else {
            let encoded = self.batch.encode();
            let start = self.spooled;
            scratch::write_all_at(&self.spool, &encoded, start)
                .context("writing to the full-text spool file")?;
            self.spooled += encoded.len() as u64;
            self.batch = std::mem::take(&mut self.batch).emptied();
            Message::Spooled(start..self.spooled)
        };
        if let Some(Err(_)) = self.messages.as_ref().map(|tx| tx.send(message)) {
            // The builder stopped early; its error says why.
            self.join()?;
            return Err(anyhow!("the full-text index builder stopped"));
        }
        Ok(())
    }

    fn join(&mut self) -> Result<()> {
        self.messages = None;
        match self.thread.take() {
            Some(thread) => thread
                .join()
                .map_err(|_| anyhow!("the full-text index builder panicked"))?
                .context("building the full-text indexes"),
            None => Ok(()),
        }
    }

    /// Waits for the builder and puts the finished indexes into `conn`'s database, whose
    /// (empty) tables migrations V16 to V18 and V25 created. [`FtsBuilder::end_input`] must have run.
    pub(super) fn finish(mut self, conn: &Connection) -> Result<()> {
        if self.messages.is_some() {
            return Err(anyhow!(
                "the full-text builder was finished before it was given the files"
            ));
        }
        self.join()?;
        conn.execute("ATTACH ?1 AS fts", params![self.path.to_string_lossy()])?;
        let copied = (|| -> Result<()> {
            conn.execute_batch("BEGIN")?;
            for table in TABLES
                .iter()
                .flat_map(|&(table, docsize)| shadow_tables(table, docsize))
            {
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
        // After `finish` the thread is joined already; before it, the import failed.
        self.abandoned.store(true, Ordering::Release);
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
            (false, [name, qualified_name, signature, purpose, summary, file_path]) => {
                self.symbol_words.execute(params![
                    id,
                    name,
                    qualified_name,
                    signature,
                    purpose,
                    summary
                ])?;
                let texts = TrigramTexts::new(*name, *qualified_name, *file_path);
                let [name, name_end] = texts.names();
                self.symbol_names.execute(params![id, name, name_end])?;
                let [terms, terms_end] = texts.terms();
                self.symbol_qualified_names
                    .execute(params![id, terms, terms_end])?;
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

/// The builder's end of the hand-over.
struct Input {
    abandoned: Arc<AtomicBool>,
    messages: Receiver<Message>,
    give_back: SyncSender<Batch>,
    in_memory: Arc<AtomicUsize>,
    spool: Arc<File>,
}

impl Input {
    /// The next batch, in the order they were sent, and whether it is one of the loading
    /// thread's to give back; `None` once the input has ended.
    fn next(&self) -> Option<Result<(Batch, bool)>> {
        let message = self.messages.recv().ok()?;
        if self.abandoned.load(Ordering::Acquire) {
            return Some(Err(anyhow!("the import stopped")));
        }
        Some(match message {
            Message::Rows(batch) => {
                self.in_memory.fetch_sub(batch.bytes(), Ordering::AcqRel);
                Ok((batch, true))
            }
            Message::Spooled(range) => {
                let mut bytes = vec![0; (range.end - range.start) as usize];
                scratch::read_exact_at(&self.spool, &mut bytes, range.start)
                    .context("reading the full-text spool file")
                    .and_then(|()| Batch::decode(&bytes))
                    .map(|batch| (batch, false))
            }
        })
    }

    /// Gives a batch back to the loading thread for reuse (dropped here if it has enough).
    fn give_back(&self, batch: Batch) {
        let _ = self.give_back.try_send(batch);
    }
}

/// The builder thread: inserts every row it receives, the symbols' then the files', in one
/// transaction.
fn build(conn: Connection, input: Input) -> Result<()> {
    if let Err(err) = crate::priority::lower_this_thread(LAG_NICENESS) {
        tracing::debug!("cannot lower the full-text thread's priority: {err}");
    }
    conn.execute_batch("BEGIN")?;
    {
        let mut inserts = Inserts {
            symbol_words: conn.prepare(&format!(
                "INSERT INTO symbols_fts(rowid, {SYMBOL_FTS_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"
            ))?,
            symbol_names: conn.prepare(
                "INSERT INTO symbols_name_trigram(rowid, name, name_end) VALUES (?1, ?2, ?3)",
            )?,
            symbol_qualified_names: conn.prepare(
                "INSERT INTO symbols_qname_trigram(rowid, terms, terms_end) VALUES (?1, ?2, ?3)",
            )?,
            file_words: conn.prepare(&format!(
                "INSERT INTO files_fts(rowid, {FILE_FTS_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5)"
            ))?,
            file_paths: conn.prepare("INSERT INTO files_trigram(rowid, path) VALUES (?1, ?2)")?,
        };
        while let Some(received) = input.next() {
            let (batch, lent) = received?;
            for (id, columns) in batch.rows() {
                inserts.row(batch.files, id, &columns)?;
            }
            if lent {
                input.give_back(batch);
            }
        }
    }
    for (table, _) in TABLES {
        if input.abandoned.load(Ordering::Acquire) {
            return Err(anyhow!("the import stopped"));
        }
        conn.execute(
            &format!("INSERT INTO {table}({table}) VALUES ('optimize')"),
            [],
        )?;
    }
    conn.execute_batch("COMMIT")?;
    Ok(())
}

/// Fills `symbol_files` (migration V18) with the symbols' distinct file paths, read from the
/// index `symbols_file_path`, and indexes them: once the symbols are loaded and V18 applied.
pub(super) fn index_symbol_files(conn: &Connection) -> Result<()> {
    conn.execute_batch(
        "INSERT INTO symbol_files(path)
             SELECT DISTINCT file_path FROM symbols WHERE file_path IS NOT NULL ORDER BY file_path;
         INSERT INTO symbol_files_trigram(rowid, path) SELECT id, path FROM symbol_files;",
    )?;
    Ok(())
}

/// Brings the `symbol_files` rows of `paths` (file paths whose symbols changed) up to date with
/// `symbols`: a path some symbol has is kept or added, any other removed, with their index rows
/// (in a delta, then [`merge_delta_segments`]). The index rows go in row id order, removals
/// first, so that FTS5 writes them as one segment whatever the order of `paths`.
pub(super) fn update_symbol_files(
    conn: &Connection,
    paths: impl Iterator<Item = String>,
) -> Result<()> {
    let mut used = conn.prepare("SELECT 1 FROM symbols WHERE file_path = ?1 LIMIT 1")?;
    let mut stored = conn.prepare("SELECT id FROM symbol_files WHERE path = ?1")?;
    let (mut removed, mut added) = (Vec::new(), Vec::new());
    for path in paths {
        let id: Option<i64> = stored.query_row([&path], |r| r.get(0)).optional()?;
        match (used.exists([&path])?, id) {
            (true, None) => added.push(path),
            (false, Some(id)) => removed.push((id, path)),
            _ => {}
        }
    }
    if removed.is_empty() && added.is_empty() {
        return Ok(());
    }
    removed.sort_unstable();
    added.sort_unstable();
    let mut unindex = conn.prepare(
        "INSERT INTO symbol_files_trigram(symbol_files_trigram, rowid, path) VALUES ('delete', ?1, ?2)",
    )?;
    let mut remove = conn.prepare("DELETE FROM symbol_files WHERE id = ?1")?;
    for (id, path) in &removed {
        unindex.execute(params![id, path])?;
        remove.execute([id])?;
    }
    let mut add = conn.prepare("INSERT INTO symbol_files(path) VALUES (?1)")?;
    let mut index =
        conn.prepare("INSERT INTO symbol_files_trigram(rowid, path) VALUES (?1, ?2)")?;
    for path in &added {
        add.execute([path])?;
        index.execute(params![conn.last_insert_rowid(), path])?;
    }
    merge_delta_segments(conn, "symbol_files_trigram")
}

/// How many segments at one level FTS5 merges into one when a delta asks it to (`usermerge`):
/// two, so that the small segments the deltas add are merged as they come, the result climbing
/// a level each time as in a binary counter. The large segment a full import leaves is merged
/// when they reach its level, after a number of deltas that doubles each time.
const DELTA_USERMERGE: i64 = 2;

/// Segments a table holds before a delta merges them: two read about as fast as one (a word
/// search 1.1 to 1.3 times as slow at the median), so the delta after a full import, whose
/// segment joins the import's one, merges nothing.
const DELTA_MERGE_SEGMENTS: usize = 3;

/// Leaf pages one table's merge writes at most after a delta (16 MiB of 4 KiB pages); a merge
/// left unfinished goes on after the next delta.
const DELTA_MERGE_PAGES: i64 = 4096;

/// After a delta changed `table`: merges the segments the deltas left in it (FTS5 `merge` with
/// [`DELTA_USERMERGE`]) once it holds [`DELTA_MERGE_SEGMENTS`]. Each delta adds a segment to
/// each table it changes, and a search reads every segment: after twelve 1 % deltas at 1M
/// symbols, eight segments made a word search 2.1 times as slow at the median.
pub(super) fn merge_delta_segments(conn: &Connection, table: &str) -> Result<()> {
    // Every segment has a row in `_idx` for its first leaf page; one seek per segment counted.
    let mut next_segment = conn.prepare_cached(&format!(
        "SELECT min(segid) FROM {table}_idx WHERE segid > ?1"
    ))?;
    let mut segments = 0;
    let mut after = i64::MIN;
    while segments < DELTA_MERGE_SEGMENTS {
        match next_segment.query_row([after], |r| r.get::<_, Option<i64>>(0))? {
            Some(segid) => (segments, after) = (segments + 1, segid),
            None => return Ok(()),
        }
    }
    let usermerge: Option<i64> = conn
        .query_row(
            &format!("SELECT v FROM {table}_config WHERE k = 'usermerge'"),
            [],
            |r| r.get(0),
        )
        .optional()?;
    let command = format!("INSERT INTO {table}({table}, rank) VALUES (?1, ?2)");
    let mut command = conn.prepare_cached(&command)?;
    if usermerge != Some(DELTA_USERMERGE) {
        command.execute(params!["usermerge", DELTA_USERMERGE])?;
    }
    command.execute(params!["merge", DELTA_MERGE_PAGES])?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_reads_back_from_the_spool_as_written() {
        let mut batch = Batch::default();
        batch.push(
            7,
            [
                Some("validate"),
                None,
                Some("caf\u{e9} \u{1F600}"),
                Some(""),
                None,
            ],
        );
        batch.push(-3, [None, Some("a::b"), None, None, Some("x")]);
        let encoded = batch.encode();
        let decoded = Batch::decode(&encoded).unwrap();
        assert_eq!(
            decoded.rows().collect::<Vec<_>>(),
            batch.rows().collect::<Vec<_>>()
        );
        batch.files = true;
        assert!(Batch::decode(&batch.encode()).unwrap().files);
        // Cut, or with a span past the text or inside a character: refused, never a panic.
        for cut in [0, 1, 9, encoded.len() - 1] {
            assert!(Batch::decode(&encoded[..cut]).is_err(), "{cut}");
        }
        let mut split_char = encoded.clone();
        let text_start = encoded.len() - batch.text.len();
        // The third span of the first row (`café 😀`): make it end inside the emoji.
        let span = 1 + 16 + 2 * 8 + 2 * 16 + 8;
        let end = u64::from_le_bytes(split_char[span..span + 8].try_into().unwrap());
        split_char[span..span + 8].copy_from_slice(&(end - 1).to_le_bytes());
        assert!(text_start > span && Batch::decode(&split_char).is_err());
    }

    #[test]
    fn trigram_terms_are_what_the_views_say() {
        let mut conn = Connection::open_in_memory().unwrap();
        crate::db::migrate(&mut conn, None).unwrap();
        let cases: [(Option<&str>, Option<&str>, Option<&str>); 11] = [
            (
                Some("validate"),
                Some("src/a.ts:validate"),
                Some("src/a.ts"),
            ),
            (Some("x"), Some("q:x"), Some("q")),
            (Some(""), Some("src/a.rs:"), Some("src/a.rs")),
            (
                Some("\u{c4}rger"),
                Some("src/\u{df}\u{df}.rs:\u{c4}rger"),
                Some("src/\u{df}\u{df}.rs"),
            ),
            (
                Some("\u{1F600}\u{1F600}\u{1F600}"),
                Some("\u{e9}:\u{1F600}\u{1F600}\u{1F600}"),
                Some("\u{e9}"),
            ),
            (Some("b\0c"), Some("a\0bc:b\0c"), Some("a\0bc")),
            (Some("run"), Some("pkg::Outer::run"), Some("src/a.rs")),
            (
                Some("\u{e9}t\0\u{e9}"),
                Some("p::\u{e9}\u{1F600}\0x"),
                Some("p"),
            ),
            (Some("run"), None, Some("src/a.rs")),
            (None, Some("src/a.rs:run"), Some("src/a.rs")),
            (Some("run"), Some("src/a.rs:run"), None),
        ];
        for (id, (name, qualified, path)) in cases.into_iter().enumerate() {
            conn.execute(
                "INSERT INTO symbols(id, key, name, qualified_name, file_path, digest)
                 VALUES (?1, 'k' || ?1, ?2, ?3, ?4, 0)",
                params![id as i64, name, qualified, path],
            )
            .unwrap();
            let view: [Option<String>; 3] = conn
                .query_row(
                    "SELECT terms, terms_end, n.name_end FROM symbols_qname_terms
                     JOIN symbols_name_terms n USING (id) WHERE id = ?1",
                    [id as i64],
                    |r| Ok([r.get(0)?, r.get(1)?, r.get(2)?]),
                )
                .unwrap();
            let texts = TrigramTexts::new(name, qualified, path);
            let [_, name_end] = texts.names();
            let [terms, terms_end] = texts.terms();
            let computed = [terms, terms_end, name_end].map(|t| t.map(str::to_string));
            assert_eq!(computed, view, "{name:?} {qualified:?} {path:?}");
        }
    }

    /// Rowids of `table` matching `query`, from the index alone.
    fn matches(conn: &Connection, table: &str, query: &str) -> Vec<i64> {
        let mut statement = conn
            .prepare(&format!(
                "SELECT rowid FROM {table} WHERE {table} MATCH ?1 ORDER BY rowid"
            ))
            .unwrap();
        let rows = statement.query_map([query], |row| row.get(0)).unwrap();
        rows.collect::<rusqlite::Result<_>>().unwrap()
    }

    #[test]
    fn an_abandoned_build_stops_without_indexing_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let mut builder = FtsBuilder::with_memory_budget(
            dir.path().join("fts.db"),
            &dir.path().join("acp.db"),
            dir.path(),
            0,
        )
        .unwrap();
        for id in 1..=4 * BATCH as i64 {
            builder
                .push_symbol(id, [Some("n"), Some("m::n"), None, None, None, None])
                .unwrap();
        }
        builder.send().unwrap();
        builder.abandoned.store(true, Ordering::Release);
        let err = builder.join().unwrap_err();
        assert!(format!("{err:#}").contains("the import stopped"), "{err:#}");
    }

    #[test]
    fn spooled_batches_index_like_batches_in_memory() {
        let mut answers = Vec::new();
        for budget in [MEMORY_IN_FLIGHT, 0] {
            let dir = tempfile::tempdir().unwrap();
            let mut conn = Connection::open(dir.path().join("index.db")).unwrap();
            crate::db::migrate(&mut conn, None).unwrap();
            for id in 1..=3 {
                conn.execute(
                    "INSERT INTO files(id, key, path, module, digest) VALUES (?1, ?2, ?2, 'm', 0)",
                    params![id, format!("src/file{id}.rs")],
                )
                .unwrap();
            }
            let mut builder = FtsBuilder::with_memory_budget(
                dir.path().join("fts.db"),
                &dir.path().join("acp.db"),
                dir.path(),
                budget,
            )
            .unwrap();
            for id in 1..=2 * BATCH as i64 + 5 {
                let name = format!("validate{id}");
                // Even rows have a qualified name of the `path:name` shape.
                let path = (id % 2 == 0).then(|| format!("src/f{}.rs", id % 5));
                let qualified = match &path {
                    Some(path) => format!("{path}:{name}"),
                    None => format!("mod{}::{name}", id % 7),
                };
                builder
                    .push_symbol(
                        id,
                        [
                            Some(&name),
                            Some(&qualified),
                            None,
                            Some("checks input"),
                            None,
                            path.as_deref(),
                        ],
                    )
                    .unwrap();
            }
            builder.end_input(&conn).unwrap();
            assert_eq!(builder.spooled > 0, budget == 0);
            builder.finish(&conn).unwrap();
            answers.push([
                matches(&conn, "symbols_fts", "validate12 OR checks"),
                matches(&conn, "symbols_name_trigram", "e20"),
                matches(&conn, "symbols_qname_trigram", "\"d3:\""),
                matches(&conn, "symbols_qname_trigram", "\"s:v\" AND \":va\""),
                matches(&conn, "files_fts", "file2"),
                matches(&conn, "files_trigram", "file3"),
            ]);
        }
        assert_eq!(answers[0], answers[1]);
        assert_eq!(answers[0][0].len(), 2 * BATCH + 5);
        // Only the characters around the colon of `src/fN.rs:validateN`; all of `modN::…`.
        assert_eq!(answers[0][2].len(), (2 * BATCH + 5).div_ceil(14));
        assert!(answers[0][2].iter().all(|id| id % 2 == 1));
        assert_eq!(answers[0][3].len(), BATCH + 2);
        assert!(answers[0][3].iter().all(|id| id % 2 == 0));
        assert_eq!(answers[0][4], [2]);
        assert_eq!(answers[0][5], [3]);
    }
}
