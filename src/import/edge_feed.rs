//! The merged call edges handed to SQLite as a virtual table, so that `call_edges` is filled by
//! one `INSERT … SELECT` instead of one statement per edge: the insert keeps its cursor at the
//! end of the table, which at 4.5M edges takes about a third of the per-row time.
//!
//! The table (`acpdb_call_edges`, eponymous, registered only on the importer's connection) reads
//! its rows from an [`EdgeRows`] put in a shared slot just before the insert and taken back
//! after it, with the per-node counts it kept while the rows went by.

use std::borrow::Cow;
use std::ffi::{c_int, CStr};
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, Result};
use rusqlite::vtab::{
    Context, Filters, IndexInfo, Module, VTab, VTabConfig, VTabConnection, VTabCursor,
};
use rusqlite::{ffi, Connection};

use super::edges::SortedEdges;

/// Name of the virtual table.
const TABLE: &CStr = c"acpdb_call_edges";

/// Its columns, in the order of `call_edges`.
const SCHEMA: &CStr = c"CREATE TABLE x(caller_id, callee_id, count, forward_count, reverse_count)";

/// The union of the forward and reverse edges, one row per distinct edge, and what the rows
/// counted per node.
pub(super) struct EdgeRows {
    forward: SortedEdges,
    reverse: SortedEdges,
    /// Distinct callers per node id (index 0 unused).
    pub(super) callers: Vec<u32>,
    /// Distinct callees per node id (index 0 unused).
    pub(super) callees: Vec<u32>,
    /// Rows given.
    pub(super) edges: u64,
}

impl EdgeRows {
    /// The rows of two sorted edge streams over `nodes` node ids.
    pub(super) fn new(forward: SortedEdges, reverse: SortedEdges, nodes: usize) -> EdgeRows {
        EdgeRows {
            forward,
            reverse,
            callers: vec![0; nodes + 1],
            callees: vec![0; nodes + 1],
            edges: 0,
        }
    }

    /// The next distinct edge as `call_edges` columns, counting it for its two nodes.
    fn next_row(&mut self) -> Result<Option<[i64; 5]>> {
        let edge = match (self.forward.peek(), self.reverse.peek()) {
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) => a,
            (None, Some(b)) => b,
            (None, None) => return Ok(None),
        };
        let fwd = self.forward.take_all(edge)?;
        let rev = self.reverse.take_all(edge)?;
        let (caller, callee) = ((edge >> 32) as usize, (edge & 0xffff_ffff) as usize);
        self.callees[caller] += 1;
        self.callers[callee] += 1;
        self.edges += 1;
        Ok(Some([
            caller as i64,
            callee as i64,
            fwd.max(rev) as i64,
            fwd as i64,
            rev as i64,
        ]))
    }
}

/// Where the virtual table finds its rows.
type Slot = Arc<Mutex<Option<EdgeRows>>>;

/// Inserts every row of `rows` into `call_edges` in one statement and gives `rows` back,
/// drained, with its counts.
pub(super) fn insert_all(conn: &Connection, rows: EdgeRows) -> Result<EdgeRows> {
    let slot: Slot = Arc::new(Mutex::new(Some(rows)));
    const MODULE: Module<FeedTable> = Module::eponymous_only_module();
    conn.create_module(TABLE, &MODULE, Some(slot.clone()))?;
    conn.execute_batch(
        "INSERT INTO call_edges(caller_id, callee_id, count, forward_count, reverse_count)
         SELECT caller_id, callee_id, count, forward_count, reverse_count FROM acpdb_call_edges",
    )?;
    let mut rows = slot
        .lock()
        .map_err(|_| anyhow!("the call-edge feed was poisoned"))?
        .take()
        .ok_or_else(|| anyhow!("the call-edge feed lost its rows"))?;
    if rows.next_row()?.is_some() {
        return Err(anyhow!("the call-edge feed was not read to its end"));
    }
    Ok(rows)
}

/// The virtual table.
#[repr(C)]
struct FeedTable {
    /// Base class; must be first.
    base: ffi::sqlite3_vtab,
    slot: Slot,
}

// SAFETY: `FeedTable` is `repr(C)` with the `sqlite3_vtab` base first, as rusqlite requires.
unsafe impl<'vtab> VTab<'vtab> for FeedTable {
    type Aux = Slot;
    type Cursor = FeedCursor;

    fn connect(
        db: &mut VTabConnection,
        aux: Option<&Slot>,
        _module_name: &[u8],
        _database_name: &[u8],
        _table_name: &[u8],
        _args: &[&[u8]],
    ) -> rusqlite::Result<(Cow<'static, CStr>, Self)> {
        let slot = aux
            .cloned()
            .ok_or_else(|| rusqlite::Error::ModuleError("no call-edge feed".into()))?;
        db.config(VTabConfig::DirectOnly)?;
        let table = FeedTable {
            base: ffi::sqlite3_vtab::default(),
            slot,
        };
        Ok((Cow::Borrowed(SCHEMA), table))
    }

    fn best_index(&self, info: &mut IndexInfo) -> rusqlite::Result<bool> {
        info.set_estimated_cost(1e9);
        Ok(true)
    }

    fn open(&mut self) -> rusqlite::Result<FeedCursor> {
        Ok(FeedCursor {
            base: ffi::sqlite3_vtab_cursor::default(),
            slot: self.slot.clone(),
            rows: None,
            row: None,
            rowid: 0,
        })
    }
}

/// A scan of the feed: it holds the rows while it runs and puts them back when closed.
#[repr(C)]
struct FeedCursor {
    /// Base class; must be first.
    base: ffi::sqlite3_vtab_cursor,
    slot: Slot,
    rows: Option<EdgeRows>,
    row: Option<[i64; 5]>,
    rowid: i64,
}

impl FeedCursor {
    fn advance(&mut self) -> rusqlite::Result<()> {
        let rows = self
            .rows
            .as_mut()
            .ok_or_else(|| rusqlite::Error::ModuleError("the call-edge feed is empty".into()))?;
        self.row = rows
            .next_row()
            .map_err(|err| rusqlite::Error::ModuleError(format!("{err:#}")))?;
        self.rowid += 1;
        Ok(())
    }
}

// SAFETY: `FeedCursor` is `repr(C)` with the `sqlite3_vtab_cursor` base first.
unsafe impl VTabCursor for FeedCursor {
    fn filter(&mut self, _: c_int, _: Option<&str>, _: &Filters<'_>) -> rusqlite::Result<()> {
        // The rows can be read once: a second scan would see only what the first left.
        if self.rows.is_some() {
            return Err(rusqlite::Error::ModuleError(
                "the call-edge feed can be read only once".into(),
            ));
        }
        self.rows = self.slot.lock().ok().and_then(|mut slot| slot.take());
        self.advance()
    }

    fn next(&mut self) -> rusqlite::Result<()> {
        self.advance()
    }

    fn eof(&self) -> bool {
        self.row.is_none()
    }

    fn column(&self, ctx: &mut Context, i: c_int) -> rusqlite::Result<()> {
        let value = usize::try_from(i)
            .ok()
            .and_then(|i| self.row.as_ref()?.get(i).copied());
        ctx.set_result(&value)
    }

    fn rowid(&self) -> rusqlite::Result<i64> {
        Ok(self.rowid)
    }
}

impl Drop for FeedCursor {
    fn drop(&mut self) {
        if let (Some(rows), Ok(mut slot)) = (self.rows.take(), self.slot.lock()) {
            *slot = Some(rows);
        }
    }
}
