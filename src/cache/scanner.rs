//! The byte layer of the reader: a sliding window over the file with a structural JSON
//! scanner (strings, nesting and entry boundaries found without parsing values), the SHA-256
//! of every byte read on a thread of its own, and read failures located by line and column.
//! It knows nothing of the ACP document's grammar (`reader.rs`).

use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::Arc;

use serde::de::{DeserializeOwned, DeserializeSeed};
use sha2::{Digest, Sha256};

use super::structure::ValueEnd;
use std::marker::PhantomData;

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

pub(super) const READ_SIZE: usize = 1 << 20;

/// The failure of a document that ends before its last value does.
const TRUNCATED: &str = "the file ends in the middle of the document (truncated?)";

#[cfg(test)]
thread_local! {
    /// Bytes read at a time by readers started on this thread, in tests: a few bytes make
    /// every entry, name and escape fall across reads.
    pub(super) static TEST_READ_SIZE: std::cell::Cell<usize> = const { std::cell::Cell::new(READ_SIZE) };
}

/// Bytes read from the file at a time.
pub(super) fn read_size() -> usize {
    #[cfg(test)]
    return TEST_READ_SIZE.with(std::cell::Cell::get);
    #[cfg(not(test))]
    READ_SIZE
}

/// A failure before it is tied to a file: an absolute byte offset and a message.
pub(super) struct Failure {
    pub(super) offset: Option<u64>,
    pub(super) json_path: Option<String>,
    pub(super) message: String,
}

impl Failure {
    pub(super) fn at(offset: u64, message: impl Into<String>) -> Failure {
        Failure {
            offset: Some(offset),
            json_path: None,
            message: message.into(),
        }
    }

    pub(super) fn in_path(mut self, path: impl FnOnce() -> String) -> Failure {
        if self.json_path.is_none() {
            self.json_path = Some(path());
        }
        self
    }

    pub(super) fn into_error(self, file: &Path) -> ReadError {
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
pub(super) struct SourceHash {
    pub(super) chunks: Option<SyncSender<Vec<u8>>>,
    pub(super) free: Receiver<Vec<u8>>,
    pub(super) thread: Option<std::thread::JoinHandle<[u8; 32]>>,
}

impl SourceHash {
    /// Chunks waiting to be hashed, at most.
    const QUEUE: usize = 2;

    pub(super) fn start() -> io::Result<SourceHash> {
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
    pub(super) fn update(&mut self, bytes: &[u8]) -> bool {
        let mut chunk = self.free.try_recv().unwrap_or_default();
        chunk.clear();
        chunk.extend_from_slice(bytes);
        self.chunks
            .as_ref()
            .is_some_and(|chunks| chunks.send(chunk).is_ok())
    }

    /// The hash of every byte given, or `None` if the hashing thread died.
    pub(super) fn finish(&mut self) -> Option<[u8; 32]> {
        drop(self.chunks.take());
        self.thread.take()?.join().ok()
    }
}

/// A sliding window over the file with a structural JSON scanner.
pub(super) struct Scanner {
    pub(super) file: File,
    pub(super) hasher: SourceHash,
    pub(super) progress: Arc<Progress>,
    /// Bytes of the file from offset `base`.
    pub(super) buf: Vec<u8>,
    /// Current index into `buf`.
    pub(super) pos: usize,
    pub(super) base: u64,
    pub(super) eof: bool,
    /// Bytes of the file handed to the hasher (more than `base + buf.len()` after a rewind).
    pub(super) hashed: u64,
    /// Bytes read at a time ([`read_size`]).
    pub(super) read_size: usize,
    pub(super) max_entry_bytes: u64,
}

impl Scanner {
    pub(super) fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// Reads more of the file, dropping bytes before `keep` (an index into `buf`, not past
    /// `pos`); returns how far indices shifted, or `None` at end of file.
    pub(super) fn fill(&mut self, keep: usize) -> Result<Option<usize>, Failure> {
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
    pub(super) fn rewind(&mut self, offset: u64) -> Result<(), Failure> {
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
    pub(super) fn entry_too_large(&self, offset: u64) -> Failure {
        Failure::at(
            offset,
            format!(
                "an entry is larger than the {} MiB limit for one entry (raise it with --max-entry-mb)",
                self.max_entry_bytes >> 20
            ),
        )
    }

    /// The next non-whitespace byte, not consumed; `None` at end of file.
    pub(super) fn peek(&mut self) -> Result<Option<u8>, Failure> {
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

    pub(super) fn expect(&mut self, wanted: u8, what: &str) -> Result<(), Failure> {
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

    pub(super) fn truncated(&self) -> Failure {
        Failure::at(self.offset(), TRUNCATED)
    }

    /// Scans one JSON value starting at the next non-whitespace byte and returns its range in
    /// `buf`. Only structure is checked here; the value is parsed by serde_json afterwards.
    pub(super) fn value_range(&mut self) -> Result<(usize, usize), Failure> {
        let first = self.peek()?.ok_or_else(|| self.truncated())?;
        if matches!(first, b'{' | b'[' | b'"') {
            let mut scan = ValueEnd::new(first);
            return self.range_until(|bytes| scan.find(bytes), false);
        }
        // A number, `true`, `false` or `null` (or whatever else stands there, for the parser
        // to reject): up to the next delimiter or the end of the file.
        self.range_until(
            |bytes| {
                bytes
                    .iter()
                    .position(|b| matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'))
            },
            true,
        )
    }

    /// The range in `buf` of the value starting at `pos` and ending where `end` finds its end
    /// in the bytes after those it was given before (an index into the bytes it is given);
    /// reading more of the file as needed, within the entry limit. At the end of the file the
    /// value ends there when `ends_at_eof`, else the document is truncated.
    fn range_until(
        &mut self,
        mut end: impl FnMut(&[u8]) -> Option<usize>,
        ends_at_eof: bool,
    ) -> Result<(usize, usize), Failure> {
        let mut start = self.pos;
        let mut scanned = start;
        loop {
            if let Some(at) = end(&self.buf[scanned..]) {
                self.pos = scanned + at;
                return Ok((start, self.pos));
            }
            scanned = self.buf.len();
            if (scanned - start) as u64 > self.max_entry_bytes {
                return Err(self.entry_too_large(self.base + start as u64));
            }
            match self.fill(start)? {
                Some(shift) => {
                    start -= shift;
                    scanned -= shift;
                }
                None if ends_at_eof => {
                    self.pos = scanned;
                    return Ok((start, scanned));
                }
                None => return Err(Failure::at(self.base + scanned as u64, TRUNCATED)),
            }
        }
    }

    /// Scans and parses one JSON value.
    pub(super) fn value<T: DeserializeOwned>(&mut self) -> Result<T, Failure> {
        let (start, end) = self.value_range()?;
        self.parse(start, end)
    }

    /// Parses the value at `buf[start..end]` (a range [`Scanner::value_range`] returned).
    pub(super) fn parse<T: DeserializeOwned>(
        &self,
        start: usize,
        end: usize,
    ) -> Result<T, Failure> {
        self.parse_seed(start, end, PhantomData::<T>)
    }

    /// Parses the value at `buf[start..end]` with `seed`.
    pub(super) fn parse_seed<'a, S: DeserializeSeed<'a>>(
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
