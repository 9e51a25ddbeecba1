//! Streaming reader for ACP cache and vars documents.
//!
//! The document is parsed with a serde visitor, one entry at a time: each entry of `files`,
//! `symbols`, `source_files`, `domains`, `graph.forward`/`graph.reverse` and of the
//! `constraints` lists becomes an [`Event`] sent in batches over a bounded channel, so memory
//! stays bounded by the largest single entry, whatever the document's size. Top-level keys may
//! come in any order.
//!
//! Errors name the file, the JSON path of the entry being read, and the line and column.

use std::cell::RefCell;
use std::fmt;
use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::Arc;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use sha2::{Digest, Sha256};

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

/// One thing read from the document, in document order.
#[derive(Debug)]
pub enum Event {
    /// A member kept verbatim; `value` is `None` when the member is an object streamed as
    /// entries (or as a nested scope) that follow.
    Member {
        scope: Scope,
        key: String,
        value: Option<Value>,
    },
    /// One entry of a streamed map section.
    Entry {
        section: Section,
        key: String,
        value: Value,
    },
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
    /// The parser's message (includes line and column when known).
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

const BATCH: usize = 512;

/// Reads `path`, sending events in batches to `tx`. Returns when the document has been read or
/// the receiver hung up.
pub fn read_document(
    path: &Path,
    kind: DocumentKind,
    limits: Limits,
    progress: Arc<Progress>,
    tx: SyncSender<Vec<Event>>,
) -> Result<ReadOutcome, ReadError> {
    let fail = |json_path: Option<String>, message: String| ReadError {
        file: path.to_path_buf(),
        json_path,
        message,
    };
    let file = File::open(path).map_err(|e| fail(None, format!("cannot open: {e}")))?;
    let entry_start = Arc::new(AtomicU64::new(u64::MAX));
    let tap = Tap {
        inner: file,
        hasher: Sha256::new(),
        progress: progress.clone(),
        entry_start: entry_start.clone(),
        max_entry_bytes: limits.max_entry_bytes,
        read: 0,
    };
    let mut buffered = BufReader::with_capacity(1 << 18, tap);
    let ctx = Ctx {
        tx,
        batch: RefCell::new(Vec::with_capacity(BATCH)),
        json_path: RefCell::new(None),
        entry_start,
        progress,
        hung_up: RefCell::new(false),
    };
    let result = {
        let mut de = serde_json::Deserializer::from_reader(&mut buffered);
        let root = RootSeed { ctx: &ctx, kind };
        root.deserialize(&mut de).and_then(|()| de.end())
    };
    if *ctx.hung_up.borrow() {
        return Err(fail(
            None,
            "import stopped before the document was read".into(),
        ));
    }
    match result {
        Ok(()) => {
            ctx.flush();
            let tap = buffered.into_inner();
            Ok(ReadOutcome {
                sha256: hex(&tap.hasher.finalize()),
                bytes: tap.read,
            })
        }
        Err(err) => {
            let json_path = ctx.json_path.borrow().clone();
            let message = if err.is_eof() {
                format!("the file ends in the middle of the document (truncated?): {err}")
            } else {
                err.to_string()
            };
            Err(fail(json_path, message))
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Hashes and counts bytes as they are read, and refuses entries larger than the limit.
struct Tap {
    inner: File,
    hasher: Sha256,
    progress: Arc<Progress>,
    entry_start: Arc<AtomicU64>,
    max_entry_bytes: u64,
    read: u64,
}

impl Read for Tap {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        self.read += n as u64;
        self.progress.bytes.store(self.read, Ordering::Relaxed);
        let start = self.entry_start.load(Ordering::Relaxed);
        if start != u64::MAX && self.read.saturating_sub(start) > self.max_entry_bytes + (1 << 18) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "an entry near byte {start} is larger than the {} MiB limit for one entry (raise it with --max-entry-mb)",
                    self.max_entry_bytes >> 20
                ),
            ));
        }
        Ok(n)
    }
}

struct Ctx {
    tx: SyncSender<Vec<Event>>,
    batch: RefCell<Vec<Event>>,
    json_path: RefCell<Option<String>>,
    entry_start: Arc<AtomicU64>,
    progress: Arc<Progress>,
    hung_up: RefCell<bool>,
}

impl Ctx {
    fn send<E: de::Error>(&self, event: Event) -> Result<(), E> {
        let mut batch = self.batch.borrow_mut();
        batch.push(event);
        if batch.len() >= BATCH {
            let full = std::mem::replace(&mut *batch, Vec::with_capacity(BATCH));
            if self.tx.send(full).is_err() {
                *self.hung_up.borrow_mut() = true;
                return Err(E::custom("the importer stopped"));
            }
        }
        Ok(())
    }

    fn flush(&self) {
        let rest = std::mem::take(&mut *self.batch.borrow_mut());
        if !rest.is_empty() && self.tx.send(rest).is_err() {
            *self.hung_up.borrow_mut() = true;
        }
    }

    /// Records the innermost JSON path at which an error happened.
    fn at<T, E>(&self, result: Result<T, E>, path: impl FnOnce() -> String) -> Result<T, E> {
        if result.is_err() && self.json_path.borrow().is_none() {
            *self.json_path.borrow_mut() = Some(path());
        }
        result
    }

    fn begin_entry(&self) {
        self.entry_start.store(
            self.progress.bytes.load(Ordering::Relaxed),
            Ordering::Relaxed,
        );
    }

    fn end_entry(&self) {
        self.entry_start.store(u64::MAX, Ordering::Relaxed);
    }
}

fn member_path(parent: &str, key: &str) -> String {
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

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

struct RootSeed<'a> {
    ctx: &'a Ctx,
    kind: DocumentKind,
}

impl<'de> DeserializeSeed<'de> for RootSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for RootSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self.kind {
            DocumentKind::Cache => {
                f.write_str("an ACP cache: a JSON object with `files` and `symbols`")
            }
            DocumentKind::Vars => f.write_str("an ACP vars file: a JSON object with `variables`"),
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let ctx = self.ctx;
        while let Some(key) = ctx.at(map.next_key::<String>(), || "(top level)".into())? {
            let section = match (self.kind, key.as_str()) {
                (DocumentKind::Cache, "source_files") => Some(Section::SourceFiles),
                (DocumentKind::Cache, "files") => Some(Section::Files),
                (DocumentKind::Cache, "symbols") => Some(Section::Symbols),
                (DocumentKind::Cache, "domains") => Some(Section::Domains),
                (DocumentKind::Vars, "variables") => Some(Section::Variables),
                _ => None,
            };
            let nested = match (self.kind, key.as_str()) {
                (DocumentKind::Cache, "graph") => Some(Scope::Graph),
                (DocumentKind::Cache, "constraints") => Some(Scope::Constraints),
                _ => None,
            };
            let path = member_path("", &key);
            let value = if let Some(section) = section {
                ctx.at(map.next_value_seed(MapSectionSeed { ctx, section }), || {
                    path.clone()
                })?
            } else if let Some(scope) = nested {
                ctx.at(map.next_value_seed(ScopeSeed { ctx, scope }), || {
                    path.clone()
                })?
            } else {
                ctx.begin_entry();
                let value = ctx.at(map.next_value::<Value>(), || path.clone())?;
                ctx.end_entry();
                Some(value)
            };
            ctx.send(Event::Member {
                scope: Scope::Root,
                key,
                value,
            })?;
        }
        Ok(())
    }
}

/// Reads the value of a member that is normally an object of entries. Returns `None` when it was
/// an object (its entries were sent as events) and the literal value otherwise.
struct MapSectionSeed<'a> {
    ctx: &'a Ctx,
    section: Section,
}

impl<'de> DeserializeSeed<'de> for MapSectionSeed<'_> {
    type Value = Option<Value>;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Option<Value>, D::Error> {
        deserializer.deserialize_any(LiteralOr { inner: self })
    }
}

/// Reads a nested object (`graph`, `constraints`) whose members are sections themselves.
struct ScopeSeed<'a> {
    ctx: &'a Ctx,
    scope: Scope,
}

impl<'de> DeserializeSeed<'de> for ScopeSeed<'_> {
    type Value = Option<Value>;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Option<Value>, D::Error> {
        deserializer.deserialize_any(LiteralOr { inner: self })
    }
}

/// Reads an array whose elements are streamed as items.
struct ListSeed<'a> {
    ctx: &'a Ctx,
    list: List,
}

impl<'de> DeserializeSeed<'de> for ListSeed<'_> {
    type Value = Option<Value>;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Option<Value>, D::Error> {
        deserializer.deserialize_any(LiteralOr { inner: self })
    }
}

/// A streaming visitor for one container type that falls back to keeping any other JSON value
/// verbatim.
trait Streamer<'de> {
    fn expecting_text(&self) -> &'static str;
    fn stream_map<A: MapAccess<'de>>(&self, _map: A) -> Result<Option<Value>, A::Error> {
        Err(de::Error::custom(format!(
            "expected {}",
            self.expecting_text()
        )))
    }
    fn stream_seq<A: SeqAccess<'de>>(&self, seq: A) -> Result<Option<Value>, A::Error> {
        let value = Value::deserialize(de::value::SeqAccessDeserializer::new(seq))?;
        Ok(Some(value))
    }
    fn is_map_streamer(&self) -> bool;
}

use serde::Deserialize;

struct LiteralOr<S> {
    inner: S,
}

impl<'de, S: Streamer<'de>> Visitor<'de> for LiteralOr<S> {
    type Value = Option<Value>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.inner.expecting_text())
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Option<Value>, A::Error> {
        if self.inner.is_map_streamer() {
            self.inner.stream_map(map)
        } else {
            let value = Value::deserialize(de::value::MapAccessDeserializer::new(map))?;
            Ok(Some(value))
        }
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Option<Value>, A::Error> {
        self.inner.stream_seq(seq)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Option<Value>, E> {
        Ok(Some(Value::Null))
    }
    fn visit_none<E: de::Error>(self) -> Result<Option<Value>, E> {
        Ok(Some(Value::Null))
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Option<Value>, E> {
        Ok(Some(Value::Bool(v)))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Option<Value>, E> {
        Ok(Some(Value::from(v)))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Option<Value>, E> {
        Ok(Some(Value::from(v)))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Option<Value>, E> {
        Ok(Some(Value::from(v)))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Option<Value>, E> {
        Ok(Some(Value::String(v.to_string())))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Option<Value>, E> {
        Ok(Some(Value::String(v)))
    }
}

impl<'de> Streamer<'de> for MapSectionSeed<'_> {
    fn expecting_text(&self) -> &'static str {
        "an object of entries"
    }
    fn is_map_streamer(&self) -> bool {
        true
    }
    fn stream_map<A: MapAccess<'de>>(&self, mut map: A) -> Result<Option<Value>, A::Error> {
        let ctx = self.ctx;
        let parent = self.section.path();
        while let Some(key) = ctx.at(map.next_key::<String>(), || parent.to_string())? {
            ctx.begin_entry();
            let value: Value = ctx.at(map.next_value(), || member_path(parent, &key))?;
            ctx.end_entry();
            if self.section.entries_are_objects() && !value.is_object() {
                let path = member_path(parent, &key);
                let found = json_type(&value);
                return ctx.at(
                    Err(de::Error::custom(format!(
                        "expected an object for this entry, found {found}"
                    ))),
                    || path,
                );
            }
            ctx.send(Event::Entry {
                section: self.section,
                key,
                value,
            })?;
        }
        Ok(None)
    }
}

impl<'de> Streamer<'de> for ScopeSeed<'_> {
    fn expecting_text(&self) -> &'static str {
        "an object"
    }
    fn is_map_streamer(&self) -> bool {
        true
    }
    fn stream_map<A: MapAccess<'de>>(&self, mut map: A) -> Result<Option<Value>, A::Error> {
        let ctx = self.ctx;
        let parent = match self.scope {
            Scope::Graph => "graph",
            Scope::Constraints => "constraints",
            Scope::Root => "",
        };
        while let Some(key) = ctx.at(map.next_key::<String>(), || parent.to_string())? {
            let path = member_path(parent, &key);
            let section = match (self.scope, key.as_str()) {
                (Scope::Graph, "forward") => Some(Section::GraphForward),
                (Scope::Graph, "reverse") => Some(Section::GraphReverse),
                (Scope::Constraints, "by_file") => Some(Section::ByFile),
                (Scope::Constraints, "by_lock_level") => Some(Section::ByLockLevel),
                _ => None,
            };
            let list = match (self.scope, key.as_str()) {
                (Scope::Constraints, "hacks") => Some(List::Hacks),
                (Scope::Constraints, "debug_sessions") => Some(List::DebugSessions),
                _ => None,
            };
            let value = if let Some(section) = section {
                ctx.at(map.next_value_seed(MapSectionSeed { ctx, section }), || {
                    path.clone()
                })?
            } else if let Some(list) = list {
                ctx.at(map.next_value_seed(ListSeed { ctx, list }), || path.clone())?
            } else {
                ctx.begin_entry();
                let value = ctx.at(map.next_value::<Value>(), || path.clone())?;
                ctx.end_entry();
                Some(value)
            };
            ctx.send(Event::Member {
                scope: self.scope,
                key,
                value,
            })?;
        }
        Ok(None)
    }
}

impl<'de> Streamer<'de> for ListSeed<'_> {
    fn expecting_text(&self) -> &'static str {
        "an array"
    }
    fn is_map_streamer(&self) -> bool {
        false
    }
    fn stream_seq<A: SeqAccess<'de>>(&self, mut seq: A) -> Result<Option<Value>, A::Error> {
        let ctx = self.ctx;
        let parent = match self.list {
            List::Hacks => "constraints.hacks",
            List::DebugSessions => "constraints.debug_sessions",
        };
        let mut index = 0usize;
        loop {
            ctx.begin_entry();
            let next: Option<Value> =
                ctx.at(seq.next_element(), || format!("{parent}[{index}]"))?;
            ctx.end_entry();
            let Some(value) = next else { break };
            ctx.send(Event::Item {
                list: self.list,
                value,
            })?;
            index += 1;
        }
        Ok(None)
    }
}
