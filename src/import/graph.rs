//! The call graph while it is imported: node ids by name and the edges seen, in memory bounded
//! by a fixed edge buffer plus a small fixed-size record per distinct node name.
//!
//! Node names go to `graph_nodes` the moment they are first seen; the loader keeps in memory
//! only 64 bits of a 128-bit hash of each name and its id (`hashes::NodeIds`, 12-byte slots at most four
//! fifths used). Edges are packed as `caller << 32 | callee` into a buffer that is sorted and
//! written to an anonymous temporary file whenever it fills, and the sorted runs are merged at
//! the end, so the edge list never has to fit in memory.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use rusqlite::functions::FunctionFlags;
use rusqlite::{params, Connection, Statement};

use super::edge_feed::{self, EdgeRows};
use super::hashes::NodeIds;
use super::loader::RESOLVED_SYMBOL;
use crate::cache::names::name_hash;

/// Edges held in memory per direction before a sorted run is written to disk (16 MiB each).
const EDGE_BUFFER: usize = 1 << 21;

/// Ids of call-graph nodes by name, and the edges between them.
pub(super) struct CallGraph<'c> {
    ids: NodeIds,
    insert_node: Statement<'c>,
    /// Length of `graph.reverse[name]` (duplicates counted), by node id - 1.
    reverse_len: Vec<u32>,
    /// Which lists were stored under each node's name (bit 0 forward, bit 1 reverse), by id - 1.
    lists: Vec<u8>,
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
            reverse_len: Vec::new(),
            lists: Vec::new(),
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
        self.reverse_len.push(0);
        self.lists.push(0);
        Ok(id)
    }

    /// Records that node `id` has a forward (or reverse) list; false when it already had one.
    pub(super) fn claim_list(&mut self, id: u32, reverse: bool) -> bool {
        let bit = if reverse { 2 } else { 1 };
        let slot = &mut self.lists[id as usize - 1];
        let fresh = *slot & bit == 0;
        *slot |= bit;
        fresh
    }

    /// Adds `n` to the recorded length of node `id`'s reverse list.
    pub(super) fn add_reverse_len(&mut self, id: u32, n: usize) {
        let slot = &mut self.reverse_len[id as usize - 1];
        *slot = slot.saturating_add(u32::try_from(n).unwrap_or(u32::MAX));
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
            reverse_len: self.reverse_len,
        })
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

/// Packed edges: a bounded buffer, and sorted runs in temporary files.
struct EdgeLog {
    dir: PathBuf,
    buffer: Vec<u64>,
    runs: Vec<File>,
}

impl EdgeLog {
    fn new(dir: &Path) -> EdgeLog {
        EdgeLog {
            dir: dir.to_path_buf(),
            buffer: Vec::new(),
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

    /// Sorts the buffer and writes it out as a run.
    fn spill(&mut self) -> Result<()> {
        self.buffer.sort_unstable();
        let file = super::spill_file(&self.dir, "the call graph")?;
        let mut writer = BufWriter::with_capacity(1 << 16, file);
        for edge in &self.buffer {
            writer.write_all(&edge.to_le_bytes())?;
        }
        let mut file = writer.into_inner().map_err(|e| e.into_error())?;
        file.rewind()?;
        self.runs.push(file);
        self.buffer.clear();
        Ok(())
    }

    /// All edges in ascending order (duplicates kept).
    fn into_sorted(mut self) -> Result<SortedEdges> {
        self.buffer.sort_unstable();
        let mut runs: Vec<Run> = self
            .runs
            .into_iter()
            .map(|f| Run::File(BufReader::with_capacity(1 << 16, f)))
            .collect();
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

/// One sorted run of edges.
enum Run {
    Memory(std::vec::IntoIter<u64>),
    File(BufReader<File>),
}

impl Run {
    fn next(&mut self) -> Result<Option<u64>> {
        match self {
            Run::Memory(edges) => Ok(edges.next()),
            Run::File(reader) => {
                let mut bytes = [0u8; 8];
                match reader.read_exact(&mut bytes) {
                    Ok(()) => Ok(Some(u64::from_le_bytes(bytes))),
                    Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(None),
                    Err(e) => Err(e).context("reading back the call graph"),
                }
            }
        }
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
        // More than one buffer's worth, in descending order, each edge twice.
        let total = EDGE_BUFFER as u64 + 1000;
        for edge in (0..total).rev() {
            log.push(edge * 7).unwrap();
            log.push(edge * 7).unwrap();
        }
        assert!(!log.runs.is_empty(), "the buffer never spilled");
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
