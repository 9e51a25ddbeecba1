//! Streaming reader for ACP cache and vars documents: the document's grammar and its batching.
//!
//! The byte scanner (`scanner.rs`) walks the document through a sliding buffer; this reader
//! follows the document's structure with it and cuts it into entries:
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
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::Arc;

use serde_json::Value;

use super::digest::{entry_digest, EntryDigest, Hints, KnownEntries, DIGESTED};
use super::event::{DocumentKind, Event, List, Scope, Section};
use super::fields::{self, RecordSeed};
use super::names::{name_hash, NameList, NameListSeed};
use super::scanner::{read_size, Failure, Progress, ReadError, Scanner, SourceHash};

/// What the reader learned about the file besides its events.
#[derive(Debug, Clone)]
pub struct ReadOutcome {
    /// SHA-256 of the file's bytes, hex.
    pub sha256: String,
    /// Bytes read.
    pub bytes: u64,
}

impl ReadOutcome {
    /// The outcome of reading `file` to its end, taken without parsing it: its SHA-256 and
    /// length, as a reading of it records them.
    pub fn of_bytes(mut file: impl std::io::Read) -> std::io::Result<ReadOutcome> {
        use sha2::{Digest, Sha256};
        let (mut hasher, mut buffer, mut bytes) = (Sha256::new(), vec![0u8; 1 << 20], 0u64);
        loop {
            match file.read(&mut buffer) {
                Ok(0) => break,
                Ok(n) => {
                    hasher.update(&buffer[..n]);
                    bytes += n as u64;
                }
                Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
                Err(err) => return Err(err),
            }
        }
        Ok(ReadOutcome {
            sha256: crate::hex::encode(&hasher.finalize()),
            bytes,
        })
    }
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
            std::io::ErrorKind::InvalidInput => e.to_string(),
            _ => format!("cannot open: {e}"),
        },
    })?;
    let opened = disk_state(&file);
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
        key: String::new(),
    };
    match reader.document() {
        Ok(()) => {
            reader.flush().map_err(|f| f.into_error(path))?;
            // A writer that rewrote the file in place while it was read (its size or time
            // moved) may have mixed two versions into what was read; one that replaced it by a
            // rename left the file opened whole.
            if opened.is_some() && disk_state(&reader.scan.file) != opened {
                return Err(ReadError {
                    file: path.to_path_buf(),
                    json_path: None,
                    message: REWRITTEN.to_string(),
                });
            }
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

/// The error of a reading whose file was rewritten in place while it was read.
const REWRITTEN: &str =
    "changed while it was read (rewritten in place, not replaced): import it again once its \
     writer is done";

/// The size and modification time of the open `file`, when they can be read.
fn disk_state(file: &std::fs::File) -> Option<crate::regular_file::DiskState> {
    file.metadata()
        .and_then(|meta| crate::regular_file::DiskState::of(&meta))
        .ok()
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
    /// The member name being read, kept between members so that its memory is reused.
    key: String,
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
            let section = match (reader.kind, key) {
                (DocumentKind::Cache, "source_files") => Some(Section::SourceFiles),
                (DocumentKind::Cache, "files") => Some(Section::Files),
                (DocumentKind::Cache, "symbols") => Some(Section::Symbols),
                (DocumentKind::Cache, "domains") => Some(Section::Domains),
                (DocumentKind::Vars, "variables") => Some(Section::Variables),
                _ => None,
            };
            let value = match (reader.kind, key, section) {
                (_, _, Some(section)) => reader.map_section(section)?,
                (DocumentKind::Cache, "graph", _) => reader.scope(Scope::Graph)?,
                (DocumentKind::Cache, "constraints", _) => reader.scope(Scope::Constraints)?,
                _ => Some(
                    reader
                        .scan
                        .value::<Value>()
                        .map_err(|f| f.in_path(|| member_path("", key)))?,
                ),
            };
            reader.send(Event::Member {
                scope: Scope::Root,
                key: key.to_string(),
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
        mut member: impl FnMut(&mut Reader, &str) -> Result<(), Failure>,
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
            let mut key = std::mem::take(&mut self.key);
            self.member_name(&mut key)
                .map_err(|f| f.in_path(|| parent.to_string()))?;
            self.scan
                .expect(b':', "`:`")
                .map_err(|f| f.in_path(|| member_path(parent, &key)))?;
            member(self, &key)?;
            self.key = key;
        }
    }

    /// Reads the member name at the next byte into `key`: its bytes as they are when it has
    /// no escape and no control character (most names; no allocation once `key` has grown),
    /// else parsed.
    fn member_name(&mut self, key: &mut String) -> Result<(), Failure> {
        let (start, end) = self.scan.value_range()?;
        key.clear();
        let inner = &self.scan.buf[start + 1..end - 1];
        let plain = inner.iter().all(|&b| b >= 0x20 && b != b'\\');
        match std::str::from_utf8(inner) {
            Ok(text) if plain => key.push_str(text),
            // Escapes to decode, or bytes for the parser to refuse (control characters, bytes
            // that are not UTF-8), with its message.
            _ => *key = self.scan.parse(start, end)?,
        }
        Ok(())
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
            let path = || member_path(parent, key);
            let first = reader.scan.peek()?;
            let entry_offset = reader.scan.offset();
            // A full import reads a call-graph list name by name (a delta needs the whole
            // entry's bytes first, to recognise it unchanged).
            let graph = matches!(section, Section::GraphForward | Section::GraphReverse);
            let mut parts_sent = false;
            if graph && reader.known.is_none() && first == Some(b'[') {
                match reader
                    .name_list(section, key)
                    .map_err(|f| f.in_path(path))?
                {
                    Listed::Names { names, digest } => {
                        return reader.send(Event::GraphList {
                            section,
                            key_hash: name_hash(key),
                            key: key.to_string(),
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
            let digest = digested.then(|| entry_digest(section, key, &reader.scan.buf[start..end]));
            if let (Some(digest), Some(known)) = (digest, &reader.known) {
                let found = known
                    .find(section, digest, &mut reader.hints)
                    .map_err(|e| Failure {
                        offset: None,
                        json_path: None,
                        message: e.to_string(),
                    })?;
                if let Some(id) = found {
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
                let (key, digest) = (key.to_string(), digest.unwrap_or_default());
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
                        key_hash: name_hash(key),
                        key: key.to_string(),
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
                key: key.to_string(),
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
            let section = match (scope, key) {
                (Scope::Graph, "forward") => Some(Section::GraphForward),
                (Scope::Graph, "reverse") => Some(Section::GraphReverse),
                (Scope::Constraints, "by_file") => Some(Section::ByFile),
                (Scope::Constraints, "by_lock_level") => Some(Section::ByLockLevel),
                _ => None,
            };
            let list = match (scope, key) {
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
                        .map_err(|f| f.in_path(|| member_path(parent, key)))?,
                )
            };
            reader.send(Event::Member {
                scope,
                key: key.to_string(),
                value,
            })
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
mod tests;
