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

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use anyhow::{Context, Result};
use rusqlite::functions::FunctionFlags;
use rusqlite::{params, Connection, Statement};

use super::edge_feed::{self, EdgeRows};
use super::edges::{EdgeLog, FileRun};
use super::hashes::NodeIds;
use super::scratch;
use crate::cache::names::name_hash;

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
                scratch::spill_file(spill_dir, "the call graph's list lengths")?,
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

/// The symbol a call-graph node `n` resolves to: by exact key, then by qualified name (the
/// first such symbol in id order), then by a simple name that only one symbol has; NULL
/// otherwise. Names are compared exactly, read through the case-insensitive name indexes. The
/// one definition of resolution, for a full import (`graph.rs`) and a delta alike.
///
/// Each step reads a bounded number of index entries, found or not. The name is compared as
/// `+n.name`, without the column's text affinity: a comparison with text affinity may not use
/// the index on the expression `coalesce(qualified_name, key)` (which has none), and SQLite
/// then walked the symbols in id order for each name that no qualified name matches. A simple
/// name resolves when its first symbol has no second, however many symbols share it.
pub(super) const RESOLVED_SYMBOL: &str = "coalesce(
    (SELECT s.id FROM symbols s WHERE s.key = n.name),
    (SELECT min(s.id) FROM symbols s WHERE coalesce(s.qualified_name, s.key) = +n.name COLLATE NOCASE
                                        AND s.qualified_name = n.name),
    (SELECT CASE WHEN NOT EXISTS (SELECT 1 FROM symbols t WHERE t.name = n.name COLLATE NOCASE
                                                          AND t.name = n.name AND t.id <> s.id)
                 THEN s.id END
     FROM symbols s WHERE s.name = n.name COLLATE NOCASE AND s.name = n.name LIMIT 1))";

/// Resolves the call-graph nodes of these names again (those that exist).
pub(super) fn resolve_graph_nodes_named(conn: &Connection, names: &[String]) -> Result<()> {
    let mut resolve = conn.prepare(&format!(
        "UPDATE graph_nodes AS n SET symbol_id = {RESOLVED_SYMBOL} WHERE n.name = ?1"
    ))?;
    for name in names {
        resolve.execute([name])?;
    }
    Ok(())
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
}
