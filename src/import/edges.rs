//! Call-graph edges too many to hold: packed as `caller << 32 | callee` into a bounded buffer,
//! sorted and written to an anonymous temporary file as a run whenever it fills, and the runs
//! merged in order at the end ([`SortedEdges`]), duplicates kept together.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};

use super::scratch;

/// Edges held in memory per direction before a sorted run is written to disk (4 MiB each).
const EDGE_BUFFER: usize = 1 << 19;

/// Packed edges: a bounded buffer, and sorted runs one after the other in a temporary file.
pub(super) struct EdgeLog {
    dir: PathBuf,
    buffer: Vec<u64>,
    /// The runs' file, made when the buffer first fills.
    file: Option<File>,
    /// Edges in each run, in file order.
    runs: Vec<u64>,
}

impl EdgeLog {
    pub(super) fn new(dir: &Path) -> EdgeLog {
        EdgeLog {
            dir: dir.to_path_buf(),
            buffer: Vec::new(),
            file: None,
            runs: Vec::new(),
        }
    }

    pub(super) fn push(&mut self, edge: u64) -> Result<()> {
        self.buffer.push(edge);
        if self.buffer.len() >= EDGE_BUFFER {
            self.spill()?;
        }
        Ok(())
    }

    /// Sorts the buffer and appends it to the file as a run.
    fn spill(&mut self) -> Result<()> {
        self.buffer.sort_unstable();
        let file = match &mut self.file {
            Some(file) => file,
            None => self
                .file
                .insert(scratch::spill_file(&self.dir, "the call graph")?),
        };
        let mut writer = BufWriter::with_capacity(1 << 16, file);
        for edge in &self.buffer {
            writer.write_all(&edge.to_le_bytes())?;
        }
        writer.flush()?;
        self.runs.push(self.buffer.len() as u64);
        self.buffer.clear();
        Ok(())
    }

    /// All edges in ascending order (duplicates kept).
    pub(super) fn into_sorted(mut self) -> Result<SortedEdges> {
        self.buffer.sort_unstable();
        let file = self.file.map(Arc::new);
        let mut runs = Vec::with_capacity(self.runs.len() + 1);
        let mut start = 0;
        for &edges in &self.runs {
            let file = file.clone().expect("runs were written to the file");
            runs.push(Run::File(FileRun {
                file,
                next: start,
                end: start + edges * PACKED_BYTES,
                block: Vec::new(),
                at: 0,
            }));
            start += edges * PACKED_BYTES;
        }
        runs.push(Run::Memory(self.buffer.into_iter()));
        let mut heads = BinaryHeap::new();
        for (i, run) in runs.iter_mut().enumerate() {
            if let Some(edge) = run.next()? {
                heads.push(Reverse((edge, i)));
            }
        }
        Ok(SortedEdges { runs, heads })
    }
}

/// Bytes of a packed number (an edge, a reverse list's length) in a temporary file.
const PACKED_BYTES: u64 = std::mem::size_of::<u64>() as u64;

/// One sorted run of edges.
enum Run {
    Memory(std::vec::IntoIter<u64>),
    File(FileRun),
}

/// Packed numbers in a temporary file, from `next` to `end`, read a block at a time: a run of
/// edges in the runs' file, read from its own place in it (one file for all runs, however
/// many: no descriptor per run), or a whole file of them.
pub(super) struct FileRun {
    file: Arc<File>,
    /// Where the next block starts in the file, and where the run ends.
    next: u64,
    end: u64,
    /// The block read, and the index of its next edge's first byte.
    block: Vec<u8>,
    at: usize,
}

impl Run {
    fn next(&mut self) -> Result<Option<u64>> {
        match self {
            Run::Memory(edges) => Ok(edges.next()),
            Run::File(run) => run.next(),
        }
    }
}

impl FileRun {
    /// Bytes read at a time.
    const BLOCK: u64 = 1 << 16;

    /// Every number written to `file`.
    pub(super) fn whole(file: File) -> Result<FileRun> {
        let end = file.metadata()?.len();
        Ok(FileRun {
            file: Arc::new(file),
            next: 0,
            end,
            block: Vec::new(),
            at: 0,
        })
    }

    pub(super) fn next(&mut self) -> Result<Option<u64>> {
        if self.at == self.block.len() {
            if self.next == self.end {
                return Ok(None);
            }
            let len = (self.end - self.next).min(Self::BLOCK);
            self.block.resize(len as usize, 0);
            scratch::read_exact_at(&self.file, &mut self.block, self.next)
                .context("reading back the call graph")?;
            self.next += len;
            self.at = 0;
        }
        let bytes = &self.block[self.at..self.at + PACKED_BYTES as usize];
        self.at += PACKED_BYTES as usize;
        Ok(Some(u64::from_le_bytes(
            bytes.try_into().expect("eight bytes"),
        )))
    }
}

/// A k-way merge of sorted runs.
pub(super) struct SortedEdges {
    runs: Vec<Run>,
    heads: BinaryHeap<Reverse<(u64, usize)>>,
}

impl SortedEdges {
    /// The smallest edge not yet taken.
    pub(super) fn peek(&self) -> Option<u64> {
        self.heads.peek().map(|Reverse((edge, _))| *edge)
    }

    /// Takes every occurrence of `edge` (the current smallest) and returns how many there were.
    pub(super) fn take_all(&mut self, edge: u64) -> Result<u64> {
        let mut n = 0;
        while self.peek() == Some(edge) {
            let Reverse((_, i)) = self.heads.pop().expect("peeked");
            n += 1;
            if let Some(next) = self.runs[i].next()? {
                self.heads.push(Reverse((next, i)));
            }
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_merge_in_order_with_duplicates() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = EdgeLog::new(dir.path());
        // More than two buffers' worth, in descending order, each edge twice.
        let total = EDGE_BUFFER as u64 + 1000;
        for edge in (0..total).rev() {
            log.push(edge * 7).unwrap();
            log.push(edge * 7).unwrap();
        }
        assert!(log.runs.len() > 1, "the buffer spilled less than twice");
        let mut sorted = log.into_sorted().unwrap();
        let mut expected = 0;
        while let Some(edge) = sorted.peek() {
            assert_eq!(edge, expected * 7);
            assert_eq!(sorted.take_all(edge).unwrap(), 2);
            expected += 1;
        }
        assert_eq!(expected, total);
    }
}
