//! The call graph while it is imported: node ids by name and the edges seen, in memory bounded
//! by two fixed edge buffers plus a small fixed-size record per distinct node name.
//!
//! Node names go to `graph_nodes` the moment they are first seen; the loader keeps in memory
//! only 64 bits of a 128-bit hash of each name and its id (`hashes::NodeIds`, 12-byte slots at
//! most four fifths used) and two bits saying which lists the name has. The length of each
//! reverse list goes to a temporary file, read back once the ids are no longer needed. Edges
//! are packed as `caller << 32 | callee` into a buffer that is sorted and written to an
//! anonymous temporary file whenever it fills, and the sorted runs are merged at the end, so
//! the edge list never has to fit in memory.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use rusqlite::functions::FunctionFlags;
use rusqlite::{params, Connection, Statement};

use super::edge_feed::{self, EdgeRows};
use super::hashes::NodeIds;
use super::loader::RESOLVED_SYMBOL;
use crate::cache::names::name_hash;

/// Edges held in memory per direction before a sorted run is written to disk (4 MiB each).
const EDGE_BUFFER: usize = 1 << 19;

/// Ids of call-graph nodes by name, and the edges between them.
pub(super) struct CallGraph<'c> {
    ids: NodeIds,
    insert_node: Statement<'c>,
    /// The length of each `graph.reverse[name]` (duplicates counted), packed as
    /// `id << 32 | length`, in a temporary file until the load ends: read back once the
    /// node-id table is freed.
    reverse_lens: BufWriter<File>,
    /// Which lists were stored under each node's name.
    lists: ListBits,
    /// Edges seen in `graph.forward` and symbols' `calls`.
    forward: EdgeLog,
    /// Edges seen in `graph.reverse` and symbols' `called_by`.
    reverse: EdgeLog,
}

impl<'c> CallGraph<'c> {
    /// An empty graph; sorted edge runs go to temporary files in `spill_dir`.
    pub(super) fn new(conn: &'c Connection, spill_dir: &Path) -> Result<CallGraph<'c>> {
        Ok(CallGraph {
            ids: NodeIds::new(spill_dir)?,
            insert_node: conn.prepare("INSERT INTO graph_nodes(id, name) VALUES (?1, ?2)")?,
            reverse_lens: BufWriter::with_capacity(
                1 << 16,
                super::spill_file(spill_dir, "the call graph's list lengths")?,
            ),
            lists: ListBits::default(),
            forward: EdgeLog::new(spill_dir),
            reverse: EdgeLog::new(spill_dir),
        })
    }

    /// The id of the node called `name`, created (and stored) on first sight.
    pub(super) fn node(&mut self, name: &str) -> Result<u32> {
        self.node_hashed(name, name_hash(name))
    }

    /// Announces that the node whose name hashes to `hash` is about to be looked up
    /// ([`NodeIds::prefetch`]).
    pub(super) fn prefetch(&self, hash: u128) {
        self.ids.prefetch(hash);
    }

    /// [`CallGraph::node`] of a name whose [`name_hash`] is known.
    pub(super) fn node_hashed(&mut self, name: &str, hash: u128) -> Result<u32> {
        if let Some(id) = self.ids.get(hash) {
            return Ok(id);
        }
        let id = self.ids.insert(hash)?;
        self.insert_node.execute(params![id, name])?;
        self.lists.add_node(id);
        Ok(id)
    }

    /// Records that node `id` has a forward (or reverse) list; false when it already had one.
    pub(super) fn claim_list(&mut self, id: u32, reverse: bool) -> bool {
        self.lists.claim(id, reverse)
    }

    /// Records `n` as the length of node `id`'s reverse list.
    pub(super) fn set_reverse_len(&mut self, id: u32, n: usize) -> Result<()> {
        let n = u32::try_from(n).unwrap_or(u32::MAX);
        let packed = (u64::from(id) << 32) | u64::from(n);
        self.reverse_lens.write_all(&packed.to_le_bytes())?;
        Ok(())
    }

    /// Records one occurrence of the edge `caller → callee` in a forward or a reverse source.
    pub(super) fn push_edge(&mut self, caller: u32, callee: u32, forward: bool) -> Result<()> {
        let packed = (u64::from(caller) << 32) | u64::from(callee);
        if forward {
            self.forward.push(packed)
        } else {
            self.reverse.push(packed)
        }
    }

    /// Writes `call_edges` (the union of both directions, with counts); each node's counts
    /// are written with its symbol by [`LinkedGraph::write_nodes`] once the indexes exist.
    pub(super) fn finish(self, conn: &Connection) -> Result<LinkedGraph> {
        let nodes = self.ids.len();
        drop(self.ids);
        drop(self.lists);
        let reverse_len = read_reverse_lens(self.reverse_lens, nodes)?;
        let rows = EdgeRows::new(
            self.forward.into_sorted()?,
            self.reverse.into_sorted()?,
            nodes,
        );
        let EdgeRows {
            callers,
            callees,
            edges,
            ..
        } = edge_feed::insert_all(conn, rows)?;
        Ok(LinkedGraph {
            edges,
            callers,
            callees,
            reverse_len,
        })
    }
}

/// The lengths [`CallGraph::set_reverse_len`] wrote, by node id - 1 (a length given twice
/// for one node is summed).
fn read_reverse_lens(file: BufWriter<File>, nodes: usize) -> Result<Vec<u32>> {
    let file = file.into_inner().map_err(|e| e.into_error())?;
    let mut records = FileRun::whole(file)?;
    let mut lens = vec![0u32; nodes];
    while let Some(packed) = records.next()? {
        let (id, len) = ((packed >> 32) as usize, packed as u32);
        let slot = id
            .checked_sub(1)
            .and_then(|i| lens.get_mut(i))
            .context("a list length for a node id the import did not give")?;
        *slot = slot.saturating_add(len);
    }
    Ok(lens)
}

/// Two bits per node: whether a forward and a reverse list were stored under its name.
#[derive(Default)]
struct ListBits {
    words: Vec<u64>,
}

impl ListBits {
    /// Nodes per word.
    const PER_WORD: usize = 32;

    /// Makes room for node `id` (ids come in order from 1).
    fn add_node(&mut self, id: u32) {
        let index = id as usize - 1;
        if index / Self::PER_WORD >= self.words.len() {
            self.words.push(0);
        }
    }

    /// The word and the bit of node `id`'s forward (or reverse) list.
    fn place(id: u32, reverse: bool) -> (usize, u64) {
        let index = id as usize - 1;
        let shift = 2 * (index % Self::PER_WORD) + usize::from(reverse);
        (index / Self::PER_WORD, 1 << shift)
    }

    /// Sets node `id`'s bit; false when it was set already.
    fn claim(&mut self, id: u32, reverse: bool) -> bool {
        let (word, bit) = Self::place(id, reverse);
        let fresh = self.words[word] & bit == 0;
        self.words[word] |= bit;
        fresh
    }
}

/// The call graph once its edges are written: what each node's row still lacks.
pub(super) struct LinkedGraph {
    /// Distinct edges written.
    pub(super) edges: u64,
    /// Distinct callers per node id (index 0 unused).
    callers: Vec<u32>,
    /// Distinct callees per node id (index 0 unused).
    callees: Vec<u32>,
    /// Length of `graph.reverse[name]` (duplicates counted), by node id - 1.
    reverse_len: Vec<u32>,
}

impl LinkedGraph {
    /// Resolves every node to its symbol ([`RESOLVED_SYMBOL`], which reads the name indexes of
    /// migration V14) and writes each node's symbol and counts in one pass over `graph_nodes`.
    /// The names are resolved in name order, so that the lookups walk the name indexes in
    /// order instead of at random, and the results are written in rowid order with the counts.
    pub(super) fn write_nodes(self, conn: &Connection) -> Result<()> {
        let mut symbols = vec![0u32; self.callers.len()];
        let mut resolve = conn.prepare(&format!(
            "SELECT n.id, {RESOLVED_SYMBOL} FROM graph_nodes AS n ORDER BY n.name"
        ))?;
        let mut rows = resolve.query([])?;
        while let Some(row) = rows.next()? {
            let (id, symbol): (i64, Option<i64>) = (row.get(0)?, row.get(1)?);
            let slot = usize::try_from(id)
                .ok()
                .and_then(|id| symbols.get_mut(id))
                .context("a call-graph node id the import did not give")?;
            *slot = match symbol {
                None => 0,
                Some(symbol) => u32::try_from(symbol)
                    .ok()
                    .filter(|&s| s != 0)
                    .context("a symbol id out of range")?,
            };
        }
        drop(rows);
        drop(resolve);
        // One statement over the table in rowid order (one per node read each node's page at
        // random): the values come from a function over the vectors, by node id.
        let LinkedGraph {
            callers,
            callees,
            reverse_len,
            ..
        } = self;
        let value = move |ctx: &rusqlite::functions::Context<'_>| -> rusqlite::Result<Option<i64>> {
            let id = usize::try_from(ctx.get::<i64>(0)?).unwrap_or(0);
            let which: i64 = ctx.get(1)?;
            let value = match which {
                0 => callers.get(id),
                1 => callees.get(id),
                2 => id.checked_sub(1).and_then(|i| reverse_len.get(i)),
                3 => return Ok(symbols.get(id).filter(|&&s| s != 0).map(|&s| i64::from(s))),
                _ => return Ok(None),
            };
            Ok(Some(i64::from(value.copied().unwrap_or(0))))
        };
        conn.create_scalar_function(
            "acpdb_node_value",
            2,
            FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DIRECTONLY,
            value,
        )?;
        let updated = conn.execute_batch(
            "UPDATE graph_nodes SET callers = acpdb_node_value(id, 0),
                                    callees = acpdb_node_value(id, 1),
                                    reverse_len = acpdb_node_value(id, 2),
                                    symbol_id = acpdb_node_value(id, 3)",
        );
        conn.remove_function("acpdb_node_value", 2)?;
        updated?;
        Ok(())
    }
}

/// Packed edges: a bounded buffer, and sorted runs one after the other in a temporary file.
struct EdgeLog {
    dir: PathBuf,
    buffer: Vec<u64>,
    /// The runs' file, made when the buffer first fills.
    file: Option<File>,
    /// Edges in each run, in file order.
    runs: Vec<u64>,
}

impl EdgeLog {
    fn new(dir: &Path) -> EdgeLog {
        EdgeLog {
            dir: dir.to_path_buf(),
            buffer: Vec::new(),
            file: None,
            runs: Vec::new(),
        }
    }

    fn push(&mut self, edge: u64) -> Result<()> {
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
                .insert(super::spill_file(&self.dir, "the call graph")?),
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
    fn into_sorted(mut self) -> Result<SortedEdges> {
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
struct FileRun {
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
    fn whole(file: File) -> Result<FileRun> {
        let end = file.metadata()?.len();
        Ok(FileRun {
            file: Arc::new(file),
            next: 0,
            end,
            block: Vec::new(),
            at: 0,
        })
    }

    fn next(&mut self) -> Result<Option<u64>> {
        if self.at == self.block.len() {
            if self.next == self.end {
                return Ok(None);
            }
            let len = (self.end - self.next).min(Self::BLOCK);
            self.block.resize(len as usize, 0);
            super::read_exact_at(&self.file, &mut self.block, self.next)
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
    fn list_bits_are_kept_apart_by_node_and_direction() {
        let mut bits = ListBits::default();
        for id in 1..=100 {
            bits.add_node(id);
        }
        assert!(bits.claim(33, false));
        assert!(!bits.claim(33, false));
        assert!(bits.claim(33, true));
        for id in [1, 32, 34, 100] {
            assert!(bits.claim(id, false), "{id}");
        }
        assert!(!bits.claim(33, true));
        assert!(!bits.claim(100, false));
        assert!(bits.claim(100, true));
    }

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
