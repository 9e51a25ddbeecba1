//! Streaming reader for ACP cache and vars documents.
//!
//! A structural scanner walks the document through a sliding buffer and cuts it into entries:
//! each entry of `files`, `symbols`, `source_files`, `domains`, `graph.forward`/`graph.reverse`,
//! `constraints.by_file`/`by_lock_level`, the `constraints` lists and the vars file's
//! `variables` is parsed on its own with `serde_json::from_slice` and sent as an [`Event`] in
//! batches over a bounded channel. Memory stays bounded by the largest single entry, whatever
//! the document's size, and top-level keys may come in any order. In a full import a
//! call-graph list is read name by name and a long one goes over in parts of [`LIST_PART`]
//! names, so that a hub's list, the longest entry of a large cache, is never held whole.
//!
//! Errors name the file, the JSON path of the entry being read, and the line and column.

use std::collections::VecDeque;
use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::Arc;

use super::digest::{entry_digest, EntryDigest, Hints, KnownEntries, DIGESTED};
use super::fields::{self, Record, RecordSeed};
use super::names::{name_hash, NameList, NameListSeed};
use serde::de::{DeserializeOwned, DeserializeSeed};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::marker::PhantomData;

/// A streamed map section of a cache or vars document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    /// `source_files`
    SourceFiles,
    /// `files`
    Files,
    /// `symbols`
    Symbols,
    /// `domains`
    Domains,
    /// `graph.forward`
    GraphForward,
    /// `graph.reverse`
    GraphReverse,
    /// `constraints.by_file`
    ByFile,
    /// `constraints.by_lock_level`
    ByLockLevel,
    /// `variables` of a vars document
    Variables,
}

impl Section {
    /// The JSON path of the section.
    pub fn path(self) -> &'static str {
        match self {
            Section::SourceFiles => "source_files",
            Section::Files => "files",
            Section::Symbols => "symbols",
            Section::Domains => "domains",
            Section::GraphForward => "graph.forward",
            Section::GraphReverse => "graph.reverse",
            Section::ByFile => "constraints.by_file",
            Section::ByLockLevel => "constraints.by_lock_level",
            Section::Variables => "variables",
        }
    }

    /// Whether every entry must be a JSON object.
    fn entries_are_objects(self) -> bool {
        matches!(
            self,
            Section::Files
                | Section::Symbols
                | Section::Domains
                | Section::ByFile
                | Section::Variables
        )
    }
}

/// A streamed array section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum List {
    /// `constraints.hacks`
    Hacks,
    /// `constraints.debug_sessions`
    DebugSessions,
}

impl List {
    fn path(self) -> &'static str {
        match self {
            List::Hacks => "constraints.hacks",
            List::DebugSessions => "constraints.debug_sessions",
        }
    }
}

/// Which object a member that is kept verbatim belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The document root.
    Root,
    /// The `graph` object.
    Graph,
    /// The `constraints` object.
    Constraints,
}

impl Scope {
    /// The JSON path of the object (empty for the root).
    pub fn path(self) -> &'static str {
        match self {
            Scope::Root => "",
            Scope::Graph => "graph",
            Scope::Constraints => "constraints",
        }
    }
}

/// One thing read from the document, in document order.
#[derive(Debug)]
pub enum Event {
    /// A member kept verbatim; `value` is `None` when the member is an object streamed as
    /// entries (or as a nested scope) that came before this event.
    Member {
        scope: Scope,
        key: String,
        value: Option<Value>,
    },
    /// One file entry, split into the model's columns on the reading thread, with its digest
    /// (`cache::digest`).
    File {
        key: String,
        record: Record,
        digest: i64,
    },
    /// One symbol entry, split into the model's columns on the reading thread, with its digest.
    Symbol {
        key: String,
        record: Record,
        digest: i64,
    },
    /// One entry of another streamed map section, with its digest for the sections that have
    /// one (`cache::digest::DIGESTED`).
    Entry {
        section: Section,
        key: String,
        value: Value,
        digest: Option<i64>,
    },
    /// One `graph.forward` or `graph.reverse` list whose items are all names, with the hash of
    /// its key (`cache::names`); other lists come as [`Event::Entry`]. In a full import, a list
    /// of [`LIST_PART`] names or more comes in parts: [`Event::GraphListPart`]s, then this
    /// event with the last names and the digest of the whole entry, or, when an item turns out
    /// not to be a name, an [`Event::Entry`] with the whole list, which replaces the parts.
    GraphList {
        section: Section,
        key: String,
        key_hash: u128,
        names: NameList,
        digest: i64,
    },
    /// The next [`LIST_PART`] names of a call-graph list being read (see [`Event::GraphList`]).
    GraphListPart {
        section: Section,
        key: String,
        key_hash: u128,
        names: NameList,
    },
    /// An entry whose digest the database already holds (see [`read_document_with`]): not
    /// parsed, only the id of the row that holds it.
    Unchanged { section: Section, id: u32 },
    /// One element of a streamed array section.
    Item { list: List, value: Value },
}

/// Where the reader is in the file, shared with the thread that consumes events.
#[derive(Debug, Default)]
pub struct Progress {
    /// Bytes read from the file so far.
    pub bytes: AtomicU64,
}

/// A read failure with its location.
#[derive(Debug)]
pub struct ReadError {
    /// The file being read.
    pub file: PathBuf,
    /// JSON path of the entry being read, when known.
    pub json_path: Option<String>,
    /// What went wrong, with the line and column when known.
    pub message: String,
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(path) = &self.json_path {
            write!(f, ": at {path}")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ReadError {}

/// What the reader learned about the file besides its events.
#[derive(Debug, Clone)]
pub struct ReadOutcome {
    /// SHA-256 of the file's bytes, hex.
    pub sha256: String,
    /// Bytes read.
    pub bytes: u64,
}

/// The kind of document being read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocumentKind {
    /// An ACP cache (`acp.cache.json`).
    Cache,
    /// An ACP vars file (`acp.vars.json`).
    Vars,
}

/// Limits that protect the reader from hostile input.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Largest single entry accepted, in bytes.
    pub max_entry_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_entry_bytes: 256 << 20,
        }
    }
}

/// Entries per batch, at most.
const BATCH: usize = 512;
/// Document bytes a batch spans, at most (but for its last entry): large entries go one or a
/// few at a time, within [`BYTES_AHEAD`].
const BATCH_BYTES: u64 = 1 << 20;
const READ_SIZE: usize = 1 << 20;

#[cfg(test)]
thread_local! {
    /// Bytes read at a time by readers started on this thread, in tests: a few bytes make
    /// every entry, name and escape fall across reads.
    static TEST_READ_SIZE: std::cell::Cell<usize> = const { std::cell::Cell::new(READ_SIZE) };
}

/// Bytes read from the file at a time.
fn read_size() -> usize {
    #[cfg(test)]
    return TEST_READ_SIZE.with(std::cell::Cell::get);
    #[cfg(not(test))]
    READ_SIZE
}

/// Names of a long call-graph list handed over at a time ([`Event::GraphListPart`]): a hub's
/// list is never held whole, only a part of about half a megabyte per batch in flight.
pub const LIST_PART: usize = 8192;

/// Where the reader sends its batches, and where they may come back to be freed here.
pub struct Channels {
    /// Batches of events, in document order.
    pub events: SyncSender<Vec<Event>>,
    /// Events the consumer is done with: freed on the reading thread, which allocated their
    /// contents (freeing another thread's allocations contends for its allocator's lock).
    pub spent: Option<Receiver<Vec<Event>>>,
    /// Batches the consumer has written, counted by it ([`InFlight`]); `None` when nothing
    /// but the channel's length bounds the batches ahead.
    pub written: Option<Arc<InFlight>>,
}

/// The consumer's side of the bound on the bytes the reader may be ahead: the reader sends a
/// batch only while the document bytes of the batches not yet written stay under
/// [`BYTES_AHEAD`] (a batch always goes when none is waiting). Without it, a run of large
/// entries (a cache's domains, each listing thousands of files) would all wait in the channel
/// at once, parsed.
#[derive(Debug, Default)]
pub struct InFlight {
    written: AtomicU64,
}

impl InFlight {
    /// Counts one batch as written.
    pub fn wrote_batch(&self) {
        self.written.fetch_add(1, Ordering::Release);
    }

    /// Says that no more batches will be written (the consumer stopped): the reader no longer
    /// waits for them.
    pub fn stopped(&self) {
        self.written.store(u64::MAX, Ordering::Release);
    }
}

/// Bytes of the document the batches waiting for the writer may span (see [`InFlight`]).
pub const BYTES_AHEAD: u64 = 8 << 20;

/// Reads `path`, sending events in batches to `tx`. Returns when the document has been read or
/// the receiver hung up.
pub fn read_document(
    path: &Path,
    kind: DocumentKind,
    limits: Limits,
    progress: Arc<Progress>,
    tx: SyncSender<Vec<Event>>,
) -> Result<ReadOutcome, ReadError> {
    let channels = Channels {
        events: tx,
        spent: None,
        written: None,
    };
    read_document_with(path, kind, limits, None, progress, channels)
}

/// Like [`read_document`]; an entry whose digest is in `known` is sent as
/// [`Event::Unchanged`] without being parsed.
pub fn read_document_with(
    path: &Path,
    kind: DocumentKind,
    limits: Limits,
    known: Option<Arc<KnownEntries>>,
    progress: Arc<Progress>,
    channels: Channels,
) -> Result<ReadOutcome, ReadError> {
    let file = crate::regular_file::open(path).map_err(|e| ReadError {
        file: path.to_path_buf(),
        json_path: None,
        message: match e.kind() {
            io::ErrorKind::InvalidInput => e.to_string(),
            _ => format!("cannot open: {e}"),
        },
    })?;
    let mut reader = Reader {
        scan: Scanner {
            file,
            hasher: SourceHash::start().map_err(|e| ReadError {
                file: path.to_path_buf(),
                json_path: None,
                message: format!("cannot start the thread that hashes the file: {e}"),
            })?,
            progress,
            buf: Vec::with_capacity(2 * read_size()),
            read_size: read_size(),
            pos: 0,
            base: 0,
            eof: false,
            hashed: 0,
            max_entry_bytes: limits.max_entry_bytes,
        },
        tx: channels.events,
        spent: channels.spent,
        ahead: channels.written.map(|written| Ahead {
            written,
            sent: 0,
            waiting: VecDeque::new(),
        }),
        flushed_at: 0,
        batch: Vec::with_capacity(BATCH),
        kind,
        known,
        hints: Hints::default(),
    };
    match reader.document() {
        Ok(()) => {
            reader.flush().map_err(|f| f.into_error(path))?;
            let read = reader.scan.base + reader.scan.buf.len() as u64;
            let sha256 = reader.scan.hasher.finish().ok_or_else(|| ReadError {
                file: path.to_path_buf(),
                json_path: None,
                message: "the thread that hashes the file stopped".into(),
            })?;
            Ok(ReadOutcome {
                sha256: crate::hex::encode(&sha256),
                bytes: read,
            })
        }
        Err(failure) => Err(failure.into_error(path)),
    }
}

/// A failure before it is tied to a file: an absolute byte offset and a message.
struct Failure {
    offset: Option<u64>,
    json_path: Option<String>,
    message: String,
}

impl Failure {
    fn at(offset: u64, message: impl Into<String>) -> Failure {
        Failure {
            offset: Some(offset),
            json_path: None,
            message: message.into(),
        }
    }

    fn in_path(mut self, path: impl FnOnce() -> String) -> Failure {
        if self.json_path.is_none() {
            self.json_path = Some(path());
        }
        self
    }

    fn into_error(self, file: &Path) -> ReadError {
        let mut message = self.message;
        if let Some(offset) = self.offset {
            if let Some((line, column)) = line_column(file, offset) {
                message = format!("{message} at line {line} column {column}");
            }
        }
        ReadError {
            file: file.to_path_buf(),
            json_path: self.json_path,
            message,
        }
    }
}

/// 1-based line and column of a byte offset, counted by reading the file again.
fn line_column(file: &Path, offset: u64) -> Option<(u64, u64)> {
    let mut reader = BufReader::with_capacity(READ_SIZE, crate::regular_file::open(file).ok()?);
    let (mut line, mut column, mut seen) = (1u64, 1u64, 0u64);
    while seen < offset {
        let chunk = reader.fill_buf().ok()?;
        if chunk.is_empty() {
            break;
        }
        let take = chunk.len().min((offset - seen) as usize);
        for &b in &chunk[..take] {
            if b == b'\n' {
                line += 1;
                column = 1;
            } else {
                column += 1;
            }
        }
        seen += take as u64;
        reader.consume(take);
    }
    Some((line, column))
}

/// SHA-256 of the bytes read, computed on a thread of its own: the reading thread only copies
/// each chunk it reads (into a buffer the hashing thread hands back), and waits only when two
/// chunks are queued already (hashing is several times faster than parsing).
struct SourceHash {
    chunks: Option<SyncSender<Vec<u8>>>,
    free: Receiver<Vec<u8>>,
    thread: Option<std::thread::JoinHandle<[u8; 32]>>,
}

impl SourceHash {
    /// Chunks waiting to be hashed, at most.
    const QUEUE: usize = 2;

    fn start() -> io::Result<SourceHash> {
        let (chunks, queued) = std::sync::mpsc::sync_channel::<Vec<u8>>(Self::QUEUE);
        let (recycle, free) = std::sync::mpsc::sync_channel(Self::QUEUE + 2);
        let thread = std::thread::Builder::new()
            .name("acpdb-hash".into())
            .spawn(move || {
                let mut hasher = Sha256::new();
                for chunk in queued {
                    hasher.update(&chunk);
                    let _ = recycle.try_send(chunk);
                }
                hasher.finalize().into()
            })?;
        Ok(SourceHash {
            chunks: Some(chunks),
            free,
            thread: Some(thread),
        })
    }

    /// Hands `bytes` to the hashing thread; false when that thread is gone.
    fn update(&mut self, bytes: &[u8]) -> bool {
        let mut chunk = self.free.try_recv().unwrap_or_default();
        chunk.clear();
        chunk.extend_from_slice(bytes);
        self.chunks
            .as_ref()
            .is_some_and(|chunks| chunks.send(chunk).is_ok())
    }

    /// The hash of every byte given, or `None` if the hashing thread died.
    fn finish(&mut self) -> Option<[u8; 32]> {
        drop(self.chunks.take());
        self.thread.take()?.join().ok()
    }
}

/// An empty list with room for the names in `rest` (the buffer from a list's next name) up to
/// the first `]` (the list's end, unless a name holds one), at most [`LIST_PART`] of them.
fn sized_list(rest: &[u8]) -> NameList {
    let end = memchr::memchr(b']', rest).unwrap_or(rest.len());
    NameList::sized_for(&rest[..end], LIST_PART)
}

/// What [`Reader::name_list`] made of a call-graph list.
enum Listed {
    /// Every item a name: the last names (after any parts sent) and the entry's digest.
    Names { names: NameList, digest: i64 },
    /// An item that is not a name, or a list that is not well-formed; whether parts were sent.
    NotNames { parts: bool },
}

/// A call-graph list being read by [`Reader::name_list`].
struct ListScan<'k> {
    /// Where the list starts in the file.
    start_offset: u64,
    /// Index into the buffer of the next byte to read.
    i: usize,
    /// Index into the buffer of the first byte not yet added to the digest.
    digested: usize,
    /// The digest of the bytes dropped from the buffer so far, once any were.
    digest: Option<EntryDigest>,
    section: Section,
    key: &'k str,
}

/// A sliding window over the file with a structural JSON scanner.
struct Scanner {
    file: File,
    hasher: SourceHash,
    progress: Arc<Progress>,
    /// Bytes of the file from offset `base`.
    buf: Vec<u8>,
    /// Current index into `buf`.
    pos: usize,
    base: u64,
    eof: bool,
    /// Bytes of the file handed to the hasher (more than `base + buf.len()` after a rewind).
    hashed: u64,
    /// Bytes read at a time ([`read_size`]).
    read_size: usize,
    max_entry_bytes: u64,
}

impl Scanner {
    fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// Reads more of the file, dropping bytes before `keep` (an index into `buf`, not past
    /// `pos`); returns how far indices shifted, or `None` at end of file.
    fn fill(&mut self, keep: usize) -> Result<Option<usize>, Failure> {
        debug_assert!(
            keep <= self.pos,
            "bytes after the position would be dropped"
        );
        if self.eof {
            return Ok(None);
        }
        let old = self.buf.len();
        self.buf.resize(old + self.read_size, 0);
        let n = loop {
            match self.file.read(&mut self.buf[old..]) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.buf.truncate(old);
                    return Err(Failure::at(
                        self.base + old as u64,
                        format!("read error: {e}"),
                    ));
                }
            }
        };
        self.buf.truncate(old + n);
        // Bytes read again after a rewind were hashed the first time.
        let read_from = self.base + old as u64;
        let unhashed = old + self.hashed.saturating_sub(read_from).min(n as u64) as usize;
        if unhashed < old + n {
            if !self.hasher.update(&self.buf[unhashed..]) {
                return Err(Failure::at(
                    read_from,
                    "the thread that hashes the file stopped",
                ));
            }
            self.hashed = read_from + n as u64;
        }
        if n == 0 {
            // Nothing moves at the end of the file, so the caller's offsets stay valid.
            self.eof = true;
            return Ok(None);
        }
        let shift = keep;
        if shift > 0 {
            self.buf.drain(..shift);
            self.base += shift as u64;
            self.pos -= shift;
        }
        // After an entry far larger than a read (a call-graph hub's list), give the memory back.
        if self.buf.capacity() > 8 * self.read_size && self.buf.len() <= 2 * self.read_size {
            self.buf.shrink_to(4 * self.read_size);
        }
        self.progress
            .bytes
            .store(self.base + self.buf.len() as u64, Ordering::Relaxed);
        Ok(Some(shift))
    }

    /// Goes back to the byte at `offset`, dropped from the buffer already, to read it again.
    fn rewind(&mut self, offset: u64) -> Result<(), Failure> {
        self.file
            .seek(io::SeekFrom::Start(offset))
            .map_err(|e| Failure::at(offset, format!("read error: {e}")))?;
        self.buf.clear();
        self.base = offset;
        self.pos = 0;
        self.eof = false;
        Ok(())
    }

    /// The failure of an entry, starting at `offset`, that outgrew `--max-entry-mb`.
    fn entry_too_large(&self, offset: u64) -> Failure {
        Failure::at(
            offset,
            format!(
                "an entry is larger than the {} MiB limit for one entry (raise it with --max-entry-mb)",
                self.max_entry_bytes >> 20
            ),
        )
    }

    /// The next non-whitespace byte, not consumed; `None` at end of file.
    fn peek(&mut self) -> Result<Option<u8>, Failure> {
        loop {
            while self.pos < self.buf.len() {
                match self.buf[self.pos] {
                    b' ' | b'\t' | b'\n' | b'\r' => self.pos += 1,
                    b => return Ok(Some(b)),
                }
            }
            let keep = self.pos;
            if self.fill(keep)?.is_none() {
                return Ok(None);
            }
        }
    }

    fn expect(&mut self, wanted: u8, what: &str) -> Result<(), Failure> {
        match self.peek()? {
            Some(b) if b == wanted => {
                self.pos += 1;
                Ok(())
            }
            Some(b) => Err(Failure::at(
                self.offset(),
                format!("expected {what}, found `{}`", b as char),
            )),
            None => Err(self.truncated()),
        }
    }

    fn truncated(&self) -> Failure {
        Failure::at(
            self.offset(),
            "the file ends in the middle of the document (truncated?)",
        )
    }

    /// Scans one JSON value starting at the next non-whitespace byte and returns its range in
    /// `buf`. Only structure is checked here; the value is parsed by serde_json afterwards.
    fn value_range(&mut self) -> Result<(usize, usize), Failure> {
        let first = self.peek()?.ok_or_else(|| self.truncated())?;
        let mut start = self.pos;
        let mut i = start;
        let mut depth: usize = 0;
        let mut in_string = false;
        let scalar = !matches!(first, b'{' | b'[' | b'"');
        loop {
            while i < self.buf.len() {
                if in_string {
                    // Jump to the next quote or backslash: strings are most of a cache.
                    match memchr::memchr2(b'"', b'\\', &self.buf[i..]) {
                        Some(skip) => i += skip,
                        None => {
                            i = self.buf.len();
                            break;
                        }
                    }
                }
                let b = self.buf[i];
                if in_string {
                    match b {
                        b'\\' => {
                            if i + 1 >= self.buf.len() {
                                break;
                            }
                            i += 2;
                            continue;
                        }
                        b'"' => {
                            in_string = false;
                            if depth == 0 {
                                self.pos = i + 1;
                                return Ok((start, i + 1));
                            }
                        }
                        _ => {}
                    }
                } else if scalar {
                    if matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r') {
                        self.pos = i;
                        return Ok((start, i));
                    }
                } else {
                    match b {
                        b'"' => in_string = true,
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => {
                            depth = depth.saturating_sub(1);
                            if depth == 0 {
                                self.pos = i + 1;
                                return Ok((start, i + 1));
                            }
                        }
                        _ => {}
                    }
                }
                i += 1;
            }
            if (i - start) as u64 > self.max_entry_bytes {
                return Err(self.entry_too_large(self.base + start as u64));
            }
            match self.fill(start)? {
                Some(shift) => {
                    start -= shift;
                    i -= shift;
                }
                None if scalar => {
                    self.pos = i;
                    return Ok((start, i));
                }
                None => {
                    return Err(Failure::at(
                        self.base + i as u64,
                        "the file ends in the middle of the document (truncated?)",
                    ))
                }
            }
        }
    }

    /// Scans and parses one JSON value.
    fn value<T: DeserializeOwned>(&mut self) -> Result<T, Failure> {
        let (start, end) = self.value_range()?;
        self.parse(start, end)
    }

    /// Parses the value at `buf[start..end]` (a range [`Scanner::value_range`] returned).
    fn parse<T: DeserializeOwned>(&self, start: usize, end: usize) -> Result<T, Failure> {
        self.parse_seed(start, end, PhantomData::<T>)
    }

    /// Parses the value at `buf[start..end]` with `seed`.
    fn parse_seed<'a, S: DeserializeSeed<'a>>(
        &'a self,
        start: usize,
        end: usize,
        seed: S,
    ) -> Result<S::Value, Failure> {
        let bytes = &self.buf[start..end];
        let mut de = serde_json::Deserializer::from_slice(bytes);
        let parsed = seed
            .deserialize(&mut de)
            .and_then(|value| de.end().map(|()| value));
        parsed.map_err(|err| {
            let relative = offset_of(bytes, err.line(), err.column());
            let message = err.to_string();
            let message = match message.rfind(" at line ") {
                Some(cut) => message[..cut].to_string(),
                None => message,
            };
            Failure::at(self.base + (start + relative) as u64, message)
        })
    }
}

/// Byte offset within `bytes` of a serde_json line/column (1-based).
fn offset_of(bytes: &[u8], line: usize, column: usize) -> usize {
    if line == 0 {
        return 0;
    }
    let mut current = 1;
    let mut line_start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if current == line {
            break;
        }
        if b == b'\n' {
            current += 1;
            line_start = i + 1;
        }
    }
    (line_start + column.saturating_sub(1)).min(bytes.len())
}

/// The JSON path of member `key` of the object at `parent` (empty for the root): `parent.key`,
/// or `parent["key"]` when the key is not a plain identifier.
pub(crate) fn member_path(parent: &str, key: &str) -> String {
    let simple = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$');
    match (parent.is_empty(), simple) {
        (true, true) => key.to_string(),
        (true, false) => format!("[{}]", Value::String(key.to_string())),
        (false, true) => format!("{parent}.{key}"),
        (false, false) => format!("{parent}[{}]", Value::String(key.to_string())),
    }
}

/// How a JSON value's type reads in a message: "a string", "an object", "null", ….
pub(crate) fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The reader's side of [`InFlight`].
struct Ahead {
    written: Arc<InFlight>,
    /// Batches sent.
    sent: u64,
    /// Document bytes of each batch sent and not known to be written, oldest first.
    waiting: VecDeque<u64>,
}

impl Ahead {
    /// Whether a batch that spans `bytes` of the document may be sent now: the batches
    /// waiting leave room for it, none is waiting, or the consumer is gone.
    fn has_room(&mut self, bytes: u64) -> bool {
        let written = self.written.written.load(Ordering::Acquire);
        while self.sent - (self.waiting.len() as u64) < written && !self.waiting.is_empty() {
            self.waiting.pop_front();
        }
        self.waiting.is_empty()
            || self.waiting.iter().sum::<u64>() + bytes <= BYTES_AHEAD
            || Arc::strong_count(&self.written) == 1
    }

    /// Counts a batch that spans `bytes` of the document as sent.
    fn sent(&mut self, bytes: u64) {
        self.waiting.push_back(bytes);
        self.sent += 1;
    }
}

struct Reader {
    scan: Scanner,
    tx: SyncSender<Vec<Event>>,
    spent: Option<Receiver<Vec<Event>>>,
    /// The bound on the bytes ahead of the writer, when the consumer counts what it wrote.
    ahead: Option<Ahead>,
    /// Where the batch being filled starts in the document.
    flushed_at: u64,
    batch: Vec<Event>,
    kind: DocumentKind,
    /// Digests of the entries a delta import's database holds.
    known: Option<Arc<KnownEntries>>,
    hints: Hints,
}

impl Reader {
    fn send(&mut self, event: Event) -> Result<(), Failure> {
        self.batch.push(event);
        if self.batch.len() >= BATCH
            || self.scan.offset().saturating_sub(self.flushed_at) >= BATCH_BYTES
        {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), Failure> {
        if self.batch.is_empty() {
            return Ok(());
        }
        let end = self.scan.offset();
        let bytes = end.saturating_sub(self.flushed_at);
        self.flushed_at = end;
        if let Some(spent) = &self.spent {
            spent.try_iter().for_each(drop);
        }
        if let Some(ahead) = &mut self.ahead {
            while !ahead.has_room(bytes) {
                std::thread::sleep(std::time::Duration::from_micros(200));
                if let Some(spent) = &self.spent {
                    spent.try_iter().for_each(drop);
                }
            }
            ahead.sent(bytes);
        }
        let full = std::mem::replace(&mut self.batch, Vec::with_capacity(BATCH));
        self.tx.send(full).map_err(|_| Failure {
            offset: None,
            json_path: None,
            message: "import stopped before the document was read".into(),
        })
    }

    fn document(&mut self) -> Result<(), Failure> {
        match self.scan.peek()? {
            Some(b'{') => {}
            Some(_) => {
                let what = match self.kind {
                    DocumentKind::Cache => {
                        "expected an ACP cache: a JSON object with `files` and `symbols`"
                    }
                    DocumentKind::Vars => {
                        "expected an ACP vars file: a JSON object with `variables`"
                    }
                };
                return Err(Failure::at(self.scan.offset(), what));
            }
            None => return Err(Failure::at(0, "the file is empty")),
        }
        self.object("", |reader, key| {
            let section = match (reader.kind, key.as_str()) {
                (DocumentKind::Cache, "source_files") => Some(Section::SourceFiles),
                (DocumentKind::Cache, "files") => Some(Section::Files),
                (DocumentKind::Cache, "symbols") => Some(Section::Symbols),
                (DocumentKind::Cache, "domains") => Some(Section::Domains),
                (DocumentKind::Vars, "variables") => Some(Section::Variables),
                _ => None,
            };
            let value = match (reader.kind, key.as_str(), section) {
                (_, _, Some(section)) => reader.map_section(section)?,
                (DocumentKind::Cache, "graph", _) => reader.scope(Scope::Graph)?,
                (DocumentKind::Cache, "constraints", _) => reader.scope(Scope::Constraints)?,
                _ => Some(
                    reader
                        .scan
                        .value::<Value>()
                        .map_err(|f| f.in_path(|| member_path("", &key)))?,
                ),
            };
            reader.send(Event::Member {
                scope: Scope::Root,
                key,
                value,
            })
        })?;
        match self.scan.peek()? {
            None => Ok(()),
            Some(b) => Err(Failure::at(
                self.scan.offset(),
                format!("trailing characters after the document (`{}`)", b as char),
            )),
        }
    }

    /// Walks an object's members, calling `member` for each key after its `:`.
    fn object(
        &mut self,
        parent: &str,
        mut member: impl FnMut(&mut Reader, String) -> Result<(), Failure>,
    ) -> Result<(), Failure> {
        self.scan.expect(b'{', "`{`")?;
        let mut first = true;
        loop {
            match self.scan.peek()? {
                Some(b'}') => {
                    self.scan.pos += 1;
                    return Ok(());
                }
                Some(b',') if !first => self.scan.pos += 1,
                Some(_) if first => {}
                Some(b) => {
                    return Err(Failure::at(
                        self.scan.offset(),
                        format!("expected `,` or `}}`, found `{}`", b as char),
                    )
                    .in_path(|| parent.to_string()))
                }
                None => return Err(self.scan.truncated().in_path(|| parent.to_string())),
            }
            first = false;
            if self.scan.peek()? != Some(b'"') {
                let found = self.scan.peek()?;
                return Err(match found {
                    Some(b) => Failure::at(
                        self.scan.offset(),
                        format!("expected a member name, found `{}`", b as char),
                    ),
                    None => self.scan.truncated(),
                }
                .in_path(|| parent.to_string()));
            }
            let key: String = self
                .scan
                .value()
                .map_err(|f| f.in_path(|| parent.to_string()))?;
            self.scan
                .expect(b':', "`:`")
                .map_err(|f| f.in_path(|| member_path(parent, &key)))?;
            member(self, key)?;
        }
    }

    /// A member that is normally an object of entries: streams them and returns `None`, or
    /// returns the literal value when it is not an object.
    fn map_section(&mut self, section: Section) -> Result<Option<Value>, Failure> {
        let parent = section.path();
        if self.scan.peek()? != Some(b'{') {
            return Ok(Some(
                self.scan
                    .value::<Value>()
                    .map_err(|f| f.in_path(|| parent.to_string()))?,
            ));
        }
        let digested = DIGESTED.contains(&section);
        self.object(parent, |reader, key| {
            let path = || member_path(parent, &key);
            let first = reader.scan.peek()?;
            let entry_offset = reader.scan.offset();
            // A full import reads a call-graph list name by name (a delta needs the whole
            // entry's bytes first, to recognise it unchanged).
            let graph = matches!(section, Section::GraphForward | Section::GraphReverse);
            let mut parts_sent = false;
            if graph && reader.known.is_none() && first == Some(b'[') {
                match reader
                    .name_list(section, &key)
                    .map_err(|f| f.in_path(path))?
                {
                    Listed::Names { names, digest } => {
                        return reader.send(Event::GraphList {
                            section,
                            key_hash: name_hash(&key),
                            key,
                            names,
                            digest,
                        })
                    }
                    Listed::NotNames { parts } => {
                        parts_sent = parts;
                        // Read again only what left the buffer; the batch after the parts
                        // weighs the whole list.
                        if reader.scan.offset() != entry_offset {
                            reader.scan.rewind(entry_offset)?;
                        }
                        reader.flushed_at = reader.flushed_at.min(entry_offset);
                    }
                }
            }
            let (start, end) = reader.scan.value_range().map_err(|f| f.in_path(path))?;
            let digest =
                digested.then(|| entry_digest(section, &key, &reader.scan.buf[start..end]));
            if let (Some(digest), Some(known)) = (digest, &reader.known) {
                if let Some(id) = known.find(section, digest, &mut reader.hints) {
                    return reader.send(Event::Unchanged { section, id });
                }
            }
            let fields = match section {
                Section::Files => Some(fields::FILE_FIELDS),
                Section::Symbols => Some(fields::SYMBOL_FIELDS),
                _ => None,
            };
            // File and symbol entries go straight into their records.
            if let Some(fields) = fields.filter(|_| reader.scan.buf[start] == b'{') {
                let record = reader
                    .scan
                    .parse_seed(start, end, RecordSeed(fields))
                    .map_err(|f| f.in_path(path))?;
                let digest = digest.unwrap_or_default();
                return reader.send(if section == Section::Files {
                    Event::File {
                        key,
                        record,
                        digest,
                    }
                } else {
                    Event::Symbol {
                        key,
                        record,
                        digest,
                    }
                });
            }
            // A list of names goes over with its names hashed; any other value is parsed whole,
            // as is a list whose first parts went over before an item that is not a name.
            if graph && !parts_sent && reader.scan.buf[start] == b'[' {
                let seed = NameListSeed::for_json(&reader.scan.buf[start..end]);
                if let Ok(names) = reader.scan.parse_seed(start, end, seed) {
                    return reader.send(Event::GraphList {
                        section,
                        key_hash: name_hash(&key),
                        key,
                        names,
                        digest: digest.unwrap_or_default(),
                    });
                }
            }
            let value: Value = reader.scan.parse(start, end).map_err(|f| f.in_path(path))?;
            if section.entries_are_objects() && !value.is_object() {
                return Err(Failure::at(
                    entry_offset,
                    format!(
                        "expected an object for this entry, found {}",
                        json_type(&value)
                    ),
                )
                .in_path(path));
            }
            reader.send(Event::Entry {
                section,
                key,
                value,
                digest,
            })
        })?;
        Ok(None)
    }

    /// The call-graph list that starts at the next byte, read name by name: every
    /// [`LIST_PART`] names go over as an [`Event::GraphListPart`], and the list's bytes are
    /// dropped as they are read and digested. When an item is not a name, or the list is not
    /// well-formed, the caller reads the entry again from its first byte.
    fn name_list(&mut self, section: Section, key: &str) -> Result<Listed, Failure> {
        let start = self.scan.pos;
        let mut list = ListScan {
            start_offset: self.scan.offset(),
            i: start + 1,
            digested: start,
            digest: None,
            section,
            key,
        };
        let mut names = sized_list(&self.scan.buf[list.i..]);
        let mut parts = false;
        let mut first = true;
        loop {
            let Some(mut b) = self.list_byte(&mut list)? else {
                return Ok(Listed::NotNames { parts });
            };
            if b == b']' {
                break;
            }
            if !first {
                if b != b',' {
                    return Ok(Listed::NotNames { parts });
                }
                list.i += 1;
                b = match self.list_byte(&mut list)? {
                    Some(b) => b,
                    None => return Ok(Listed::NotNames { parts }),
                };
            }
            first = false;
            if b != b'"' {
                return Ok(Listed::NotNames { parts });
            }
            let Some((end, escaped)) = self.string_end(&mut list)? else {
                return Ok(Listed::NotNames { parts });
            };
            let quoted = &self.scan.buf[list.i..end];
            let pushed = if escaped {
                serde_json::from_slice::<String>(quoted)
                    .ok()
                    .map(|name| names.push(&name))
            } else {
                let inner = &quoted[1..quoted.len() - 1];
                (!inner.iter().any(|&b| b < 0x20))
                    .then(|| std::str::from_utf8(inner).ok())
                    .flatten()
                    .map(|name| names.push(name))
            };
            match pushed {
                Some(Ok(())) => {}
                Some(Err(message)) => return Err(Failure::at(list.start_offset, message)),
                None => return Ok(Listed::NotNames { parts }),
            }
            list.i = end;
            if names.len() == LIST_PART {
                // The part's batch weighs the bytes up to its last name.
                self.scan.pos = end;
                self.send(Event::GraphListPart {
                    section,
                    key: key.to_string(),
                    key_hash: name_hash(key),
                    names: std::mem::replace(&mut names, sized_list(&self.scan.buf[end..])),
                })?;
                // Sent at once, so that at most a part per batch waits for the writer.
                self.flush()?;
                parts = true;
            }
        }
        list.i += 1;
        let bytes = &self.scan.buf[list.digested..list.i];
        let digest = match list.digest {
            None => entry_digest(section, key, bytes),
            Some(mut digest) => {
                digest.update(bytes);
                digest.finish()
            }
        };
        self.scan.pos = list.i;
        Ok(Listed::Names { names, digest })
    }

    /// The next byte of a list being read by [`Reader::name_list`] that is not whitespace,
    /// not consumed; `None` at the end of the file.
    fn list_byte(&mut self, list: &mut ListScan) -> Result<Option<u8>, Failure> {
        loop {
            while let Some(&b) = self.scan.buf.get(list.i) {
                match b {
                    b' ' | b'\t' | b'\n' | b'\r' => list.i += 1,
                    b => return Ok(Some(b)),
                }
            }
            if !self.more(list, list.i)? {
                return Ok(None);
            }
        }
    }

    /// Where the string that starts at `list.i` ends (after its closing quote), and whether
    /// it has an escape; `None` at the end of the file.
    fn string_end(&mut self, list: &mut ListScan) -> Result<Option<(usize, bool)>, Failure> {
        let mut j = list.i + 1;
        let mut escaped = false;
        loop {
            if let Some(skip) = memchr::memchr2(b'"', b'\\', &self.scan.buf[j..]) {
                j += skip;
                if self.scan.buf[j] == b'"' {
                    return Ok(Some((j + 1, escaped)));
                }
                escaped = true;
                if j + 1 < self.scan.buf.len() {
                    j += 2;
                    continue;
                }
            } else {
                j = self.scan.buf.len();
            }
            let from_start = j - list.i;
            if !self.more(list, list.i)? {
                return Ok(None);
            }
            j = list.i + from_start;
        }
    }

    /// Reads more of the file for [`Reader::name_list`], dropping (once digested) the bytes
    /// before `keep`; false at the end of the file.
    fn more(&mut self, list: &mut ListScan, keep: usize) -> Result<bool, Failure> {
        let held = self.scan.base + self.scan.buf.len() as u64 - list.start_offset;
        if held > self.scan.max_entry_bytes {
            return Err(self.scan.entry_too_large(list.start_offset));
        }
        list.digest
            .get_or_insert_with(|| EntryDigest::new(list.section, list.key))
            .update(&self.scan.buf[list.digested..keep]);
        list.digested = keep;
        // What comes before `keep` is read: the scanner's position moves there.
        self.scan.pos = keep;
        match self.scan.fill(keep)? {
            Some(shift) => {
                list.digested -= shift;
                list.i -= shift;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// `graph` or `constraints`: an object whose known members are sections themselves.
    fn scope(&mut self, scope: Scope) -> Result<Option<Value>, Failure> {
        let parent = scope.path();
        if self.scan.peek()? != Some(b'{') {
            return Ok(Some(
                self.scan
                    .value::<Value>()
                    .map_err(|f| f.in_path(|| parent.to_string()))?,
            ));
        }
        self.object(parent, |reader, key| {
            let section = match (scope, key.as_str()) {
                (Scope::Graph, "forward") => Some(Section::GraphForward),
                (Scope::Graph, "reverse") => Some(Section::GraphReverse),
                (Scope::Constraints, "by_file") => Some(Section::ByFile),
                (Scope::Constraints, "by_lock_level") => Some(Section::ByLockLevel),
                _ => None,
            };
            let list = match (scope, key.as_str()) {
                (Scope::Constraints, "hacks") => Some(List::Hacks),
                (Scope::Constraints, "debug_sessions") => Some(List::DebugSessions),
                _ => None,
            };
            let value = if let Some(section) = section {
                reader.map_section(section)?
            } else if let Some(list) = list {
                reader.list(list)?
            } else {
                Some(
                    reader
                        .scan
                        .value::<Value>()
                        .map_err(|f| f.in_path(|| member_path(parent, &key)))?,
                )
            };
            reader.send(Event::Member { scope, key, value })
        })?;
        Ok(None)
    }

    /// An array whose elements are streamed as items, or the literal value when not an array.
    fn list(&mut self, list: List) -> Result<Option<Value>, Failure> {
        let parent = list.path();
        if self.scan.peek()? != Some(b'[') {
            return Ok(Some(
                self.scan
                    .value::<Value>()
                    .map_err(|f| f.in_path(|| parent.to_string()))?,
            ));
        }
        self.scan.pos += 1;
        let mut index = 0usize;
        loop {
            match self.scan.peek()? {
                Some(b']') => {
                    self.scan.pos += 1;
                    return Ok(None);
                }
                Some(b',') if index > 0 => self.scan.pos += 1,
                Some(_) if index == 0 => {}
                Some(b) => {
                    return Err(Failure::at(
                        self.scan.offset(),
                        format!("expected `,` or `]`, found `{}`", b as char),
                    )
                    .in_path(|| parent.to_string()))
                }
                None => return Err(self.scan.truncated().in_path(|| parent.to_string())),
            }
            let value: Value = self
                .scan
                .value()
                .map_err(|f| f.in_path(|| format!("{parent}[{index}]")))?;
            self.send(Event::Item { list, value })?;
            index += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str, limits: Limits) -> Result<Vec<Event>, ReadError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.json");
        std::fs::write(&path, text).unwrap();
        let (tx, rx) = std::sync::mpsc::sync_channel(1024);
        let result = read_document(
            &path,
            DocumentKind::Cache,
            limits,
            Arc::new(Progress::default()),
            tx,
        );
        let events: Vec<Event> = rx.try_iter().flatten().collect();
        // Every byte is hashed once, even those read again.
        if let Ok(outcome) = &result {
            let sha256 = crate::hex::encode(&Sha256::digest(text.as_bytes()));
            assert_eq!(outcome.sha256, sha256);
            assert_eq!(outcome.bytes, text.len() as u64);
        }
        result.map(|_| events)
    }

    #[test]
    fn streams_entries_and_members() {
        let events = read(
            r#" {"version": "1", "files": {"a": {"x": "}\"{"}, "b": {}}, "graph": {"reverse": {"f": ["g", "g"], "h": ["g", 1]}, "n": [1]},
                "constraints": {"hacks": [{"id": 1}, {"id": 2}]}, "symbols": {}} "#,
            Limits::default(),
        )
        .unwrap();
        let entries = events
            .iter()
            .filter(|e| matches!(e, Event::File { .. } | Event::Entry { .. }))
            .count();
        let items = events
            .iter()
            .filter(|e| matches!(e, Event::Item { .. }))
            .count();
        assert_eq!((entries, items), (3, 2));
        // A list of names comes with its names hashed; another list as its value.
        let lists: Vec<(&str, usize)> = events
            .iter()
            .filter_map(|e| match e {
                Event::GraphList {
                    key,
                    key_hash,
                    names,
                    ..
                } => {
                    assert_eq!(*key_hash, name_hash(key));
                    Some((key.as_str(), names.len()))
                }
                _ => None,
            })
            .collect();
        assert_eq!(lists, [("f", 2)]);
        assert!(events.iter().any(
            |e| matches!(e, Event::Entry { section: Section::GraphReverse, key, .. } if key == "h")
        ));
        assert!(events.iter().any(|e| matches!(e, Event::Member { scope: Scope::Graph, key, value: Some(_) } if key == "n")));
    }

    #[test]
    fn a_hub_list_larger_than_many_reads_comes_in_parts_and_what_follows_too() {
        // A reverse list of 1M names (about 10 MiB), then lists after it, read through more
        // reads once the buffer that held the hub has been given back.
        let names = |n: usize| -> String {
            serde_json::to_string(&(0..n).map(|i| format!("n{i:07}")).collect::<Vec<_>>()).unwrap()
        };
        let text = format!(
            r#"{{"graph": {{"reverse": {{"hub": {}, "a": ["x"], "after": {}, "b": ["y", "z"]}}}}}}"#,
            names(1_000_000),
            names(300_000)
        );
        assert!(text.len() > 8 * READ_SIZE);
        let events = read(&text, Limits::default()).unwrap();
        // Per list: its key, its parts, its names in order (the last one), and its digest.
        let mut lists: Vec<(String, usize, usize, Option<String>, i64)> = Vec::new();
        let mut parts = 0;
        let mut count = 0;
        let mut expected = 0;
        for event in &events {
            let (key, names) = match event {
                Event::GraphListPart { key, names, .. } => {
                    assert_eq!(names.len(), LIST_PART);
                    parts += 1;
                    (key, names)
                }
                Event::GraphList { key, names, .. } => (key, names),
                _ => continue,
            };
            for (name, hash) in names.iter() {
                assert_eq!(hash, name_hash(name));
                if name.starts_with('n') {
                    assert_eq!(name, format!("n{expected:07}"), "in {key}");
                    expected += 1;
                }
            }
            count += names.len();
            if let Event::GraphList { names, digest, .. } = event {
                let last = names.iter().last().map(|(name, _)| name.to_string());
                lists.push((key.clone(), parts, count, last, *digest));
                (parts, count, expected) = (0, 0, 0);
            }
        }
        let shape: Vec<_> = lists
            .iter()
            .map(|(key, parts, count, last, _)| (key.as_str(), *parts, *count, last.as_deref()))
            .collect();
        assert_eq!(
            shape,
            [
                ("hub", 1_000_000 / LIST_PART, 1_000_000, Some("n0999999")),
                ("a", 0, 1, Some("x")),
                ("after", 300_000 / LIST_PART, 300_000, Some("n0299999")),
                ("b", 0, 2, Some("z"))
            ]
        );
        // Each digest is the digest of the entry's bytes, read whole or not.
        let hub = names(1_000_000);
        assert_eq!(
            lists[0].4,
            entry_digest(Section::GraphReverse, "hub", hub.as_bytes())
        );
        assert_eq!(
            lists[3].4,
            entry_digest(Section::GraphReverse, "b", br#"["y", "z"]"#)
        );
    }

    #[test]
    fn a_list_with_an_item_that_is_not_a_name_is_read_again_whole() {
        // Parts of a long list (several reads long, escapes falling across reads) go over
        // before its last item, a number, is met; then the whole list comes as a value, read
        // again, with the digest of its bytes. A short one has no parts.
        const NAMES: usize = 150_000;
        let mut items: Vec<Value> = (0..NAMES)
            .map(|i| Value::String(format!("name \"{i}\"\n")))
            .collect();
        items.push(Value::from(7));
        let long = serde_json::to_string_pretty(&items).unwrap();
        let text = format!(
            r#"{{"graph": {{"forward": {{"long": {long}, "short": ["a", {{"b": 1}}], "bad": ["a" "b"]}}}}}}"#
        );
        let err = read(&text, Limits::default()).unwrap_err().to_string();
        assert!(
            err.contains("graph.forward.bad") && err.contains("expected"),
            "{err}"
        );
        let text = text.replace(r#", "bad": ["a" "b"]"#, "");
        let events = read(&text, Limits::default()).unwrap();
        let parts = events
            .iter()
            .filter(|e| matches!(e, Event::GraphListPart { key, .. } if key == "long"))
            .count();
        assert_eq!(parts, NAMES / LIST_PART);
        assert!(long.len() > 3 * READ_SIZE);
        let entries: Vec<(&str, &Value, Option<i64>)> = events
            .iter()
            .filter_map(|e| match e {
                Event::Entry {
                    key, value, digest, ..
                } => Some((key.as_str(), value, *digest)),
                _ => None,
            })
            .collect();
        assert_eq!(entries.len(), 2, "{entries:?}");
        assert_eq!(entries[0].0, "long");
        assert_eq!(entries[0].1, &Value::Array(items));
        assert_eq!(
            entries[0].2,
            Some(entry_digest(Section::GraphForward, "long", long.as_bytes()))
        );
        assert_eq!(entries[1].0, "short");
        assert!(!events.iter().any(|e| matches!(e, Event::GraphList { .. })));
    }

    #[test]
    fn a_list_of_names_is_held_to_the_entry_limit_and_may_end_with_a_part() {
        let names = |n: usize| {
            serde_json::to_string(&(0..n).map(|i| format!("n\\{i}")).collect::<Vec<_>>()).unwrap()
        };
        let text = format!(
            r#"{{"graph": {{"reverse": {{"hub": {}}}}}}}"#,
            names(300_000)
        );
        let limits = Limits {
            max_entry_bytes: 1 << 20,
        };
        let err = read(&text, limits).unwrap_err().to_string();
        assert!(
            err.contains("graph.reverse.hub") && err.contains("1 MiB limit"),
            "{err}"
        );
        let text = format!(
            r#"{{"graph": {{"reverse": {{"hub": {}}}}}}}"#,
            names(LIST_PART)
        );
        let events = read(&text, Limits::default()).unwrap();
        let sizes: Vec<(bool, usize)> = events
            .iter()
            .filter_map(|e| match e {
                Event::GraphListPart { names, .. } => Some((true, names.len())),
                Event::GraphList { names, .. } => Some((false, names.len())),
                _ => None,
            })
            .collect();
        assert_eq!(sizes, [(true, LIST_PART), (false, 0)]);
    }

    #[test]
    fn large_entries_go_in_batches_of_their_own() {
        let big = |i: usize| {
            let files: Vec<String> = (0..60_000)
                .map(|f| format!("src/d{i}/file{f}.ts"))
                .collect();
            format!(
                r#""d{i}": {{"files": {}}}"#,
                serde_json::to_string(&files).unwrap()
            )
        };
        let text = format!(
            r#"{{"domains": {{{}, {}, {}}}, "graph": {{"forward": {{"a": ["b"]}}}}}}"#,
            big(0),
            big(1),
            big(2)
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.json");
        std::fs::write(&path, text).unwrap();
        let (tx, rx) = std::sync::mpsc::sync_channel(16);
        read_document(
            &path,
            DocumentKind::Cache,
            Limits::default(),
            Arc::new(Progress::default()),
            tx,
        )
        .unwrap();
        // Each domain spans more than a batch's bytes; what follows them goes together.
        let batches: Vec<Vec<Event>> = rx.try_iter().collect();
        let sizes: Vec<usize> = batches.iter().map(Vec::len).collect();
        assert_eq!(sizes[..3], [1, 1, 1], "entries per batch: {sizes:?}");
        assert!(batches[..3].iter().all(|b| matches!(
            &b[0],
            Event::Entry { section: Section::Domains, value, .. } if value["files"].as_array().unwrap().len() == 60_000
        )));
        assert!(batches.len() <= 4, "{sizes:?}");
    }

    #[test]
    fn the_reader_waits_while_the_bytes_ahead_are_over_the_bound() {
        let written = Arc::new(InFlight::default());
        let mut ahead = Ahead {
            written: written.clone(),
            sent: 0,
            waiting: VecDeque::new(),
        };
        // The first batch always goes, whatever its size; so does one within the bound.
        assert!(ahead.has_room(BYTES_AHEAD * 2));
        ahead.sent(BYTES_AHEAD * 2);
        assert!(!ahead.has_room(1));
        written.wrote_batch();
        for _ in 0..2 {
            assert!(ahead.has_room(BYTES_AHEAD / 2));
            ahead.sent(BYTES_AHEAD / 2);
        }
        // A third is over the bound until the consumer writes one.
        assert!(!ahead.has_room(1));
        written.wrote_batch();
        assert!(ahead.has_room(1));
        ahead.sent(1);
        assert!(!ahead.has_room(BYTES_AHEAD));
        // A consumer that stopped, or is gone, never holds the reader back.
        written.stopped();
        assert!(ahead.has_room(BYTES_AHEAD));
        assert!(ahead.waiting.is_empty());
        let mut orphan = Ahead {
            written: Arc::new(InFlight::default()),
            sent: 0,
            waiting: VecDeque::new(),
        };
        orphan.sent(BYTES_AHEAD);
        assert!(orphan.has_room(BYTES_AHEAD), "no consumer counts batches");
    }

    #[test]
    fn errors_carry_path_and_position() {
        let err = read(
            "{\"files\": {\"a\": {\"lines\": 1,\n \"x\": tru}}}",
            Limits::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("files.a") && err.contains("line 2"), "{err}");
        let err = read("{\"files\": {\"a\": 5}}", Limits::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("expected an object") && err.contains("line 1 column 17"),
            "{err}"
        );
        let err = read(
            "{\"files\": {\"a\": {\"b\": \"unterminated",
            Limits::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("truncated") && err.contains("files.a"),
            "{err}"
        );
        let err = read("{\"files\": {} } x", Limits::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("trailing"), "{err}");
        let big = format!(
            "{{\"files\": {{\"a\": {{\"s\": \"{}\"}}}}}}",
            "x".repeat(3 << 20)
        );
        let err = read(
            &big,
            Limits {
                max_entry_bytes: 1 << 20,
            },
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("1 MiB limit"), "{err}");
    }

    #[test]
    fn a_cache_cut_inside_a_scalar_is_refused() {
        // Found by the fuzz tests below: the end of the file used to shift the buffer under a
        // scalar being scanned, and slicing it panicked.
        let err = read(
            "{\n  \"version\": \"0.7.0\",\n  \"generated_at\": \"2026-01-12T08:41:27Z\",\n  \"git_commit\": n",
            Limits::default(),
        )
        .unwrap_err();
        assert!(err.message.contains("EOF while parsing"), "{err}");
    }

    mod fuzz {
        use super::*;
        use proptest::prelude::*;

        /// A real cache to mutate.
        const SEED: &str = include_str!("../../fixtures/demo/.acp/acp.cache.json");

        /// Bytes that change a JSON document's structure.
        const STRUCTURAL: &[u8] = b"{}[]\",:\\ 0123456789eE-+.tfnul\n\x00\xff";

        /// One edit of a document: cut it, overwrite a byte, or insert structural bytes.
        fn mutated() -> impl Strategy<Value = Vec<u8>> {
            let edits = prop::collection::vec(
                (
                    0usize..3,
                    any::<prop::sample::Index>(),
                    prop::collection::vec(prop::sample::select(STRUCTURAL), 1..8),
                ),
                1..6,
            );
            edits.prop_map(|edits| {
                let mut bytes = SEED.as_bytes().to_vec();
                for (kind, at, insert) in edits {
                    let at = at.index(bytes.len().max(1));
                    match kind {
                        0 => bytes.truncate(at),
                        1 if at < bytes.len() => bytes[at] = insert[0],
                        _ => {
                            let at = at.min(bytes.len());
                            bytes.splice(at..at, insert);
                        }
                    }
                }
                bytes
            })
        }

        fn read_bytes(bytes: &[u8], read_size: usize) -> Result<usize, ReadError> {
            TEST_READ_SIZE.with(|size| size.set(read_size));
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("c.json");
            std::fs::write(&path, bytes).unwrap();
            let (tx, rx) = std::sync::mpsc::sync_channel(4);
            let consumer = std::thread::spawn(move || rx.iter().map(|b: Vec<Event>| b.len()).sum());
            let result = read_document(
                &path,
                DocumentKind::Cache,
                Limits::default(),
                Arc::new(Progress::default()),
                tx,
            );
            let events: usize = consumer.join().unwrap();
            result.map(|_| events)
        }

        proptest! {
            #![proptest_config(ProptestConfig {
                cases: 256,
                failure_persistence: None,
                ..ProptestConfig::default()
            })]

            /// Whatever the bytes, the reader ends with events or an error naming a position,
            /// and never panics or hangs.
            #[test]
            fn mutated_caches_are_read_or_refused(bytes in mutated(), read_size in 1usize..4096) {
                if let Err(err) = read_bytes(&bytes, read_size) {
                    prop_assert!(!err.message.is_empty());
                }
            }

            #[test]
            fn arbitrary_bytes_are_read_or_refused(
                bytes in prop::collection::vec(any::<u8>(), 0..512),
                read_size in 1usize..64,
            ) {
                let _ = read_bytes(&bytes, read_size);
            }

            /// A call-graph list read a few bytes at a time gives what serde_json reads from the
            /// whole: the same names, or the same value when an item is not a name, or an error
            /// for both; with the digest of its bytes.
            #[test]
            fn graph_lists_read_across_reads_are_read_as_whole(
                items in prop::collection::vec(prop_oneof![
                    8 => "[a-z\"\\\\/é\u{1F600}\n\t ]{0,12}".prop_map(Value::String),
                    1 => any::<i64>().prop_map(Value::from),
                ], 0..40),
                pretty in any::<bool>(),
                read_size in 1usize..48,
            ) {
                let list = if pretty {
                    serde_json::to_string_pretty(&items).unwrap()
                } else {
                    serde_json::to_string(&items).unwrap()
                };
                let text = format!(r#"{{"graph": {{"forward": {{"k": {list}, "z": ["y"]}}}}}}"#);
                TEST_READ_SIZE.with(|size| size.set(read_size));
                let events = read(&text, Limits::default()).unwrap();
                TEST_READ_SIZE.with(|size| size.set(READ_SIZE));
                let digest = entry_digest(Section::GraphForward, "k", list.as_bytes());
                let mut names: Vec<Value> = Vec::new();
                let mut whole = None;
                for event in &events {
                    match event {
                        Event::GraphListPart { key, names: part, .. } if key == "k" => {
                            names.extend(part.iter().map(|(n, _)| Value::String(n.to_string())));
                        }
                        Event::GraphList { key, names: last, digest: d, .. } if key == "k" => {
                            names.extend(last.iter().map(|(n, _)| Value::String(n.to_string())));
                            prop_assert!(last.iter().all(|(n, h)| h == name_hash(n)));
                            whole = Some((Value::Array(names.clone()), *d));
                        }
                        Event::Entry { key, value, digest: d, .. } if key == "k" => {
                            whole = Some((value.clone(), d.unwrap_or_default()));
                        }
                        _ => {}
                    }
                }
                prop_assert_eq!(whole, Some((Value::Array(items), digest)));
                let after = events
                    .iter()
                    .any(|e| matches!(e, Event::GraphList { key, .. } if key == "z"));
                prop_assert!(after, "the list after it is read");
            }
        }
    }
}
