//! Delta import: a new cache applied to the served database, in place and in one transaction,
//! by writing only what changed.
//!
//! Files, symbols and call-graph lists (the bulk of a cache) are compared with their stored rows
//! one by one, exactly (every column and `extra`), and only entries that differ are written:
//! rows updated in place (keeping their ids) or inserted, full-text rows deleted with their old
//! values and inserted with the new ones, call-edge counts adjusted by the difference between
//! the old and the new lists. Entries of the previous import that the new cache no longer has
//! are removed at the end. Domains and source files are compared with their stored rows by
//! key, and only one that differs is written (a domain with the memberships of its name). The
//! other small sections (the root members, constraints, hacks, debug sessions, conventions, and
//! the variables unless their file is the one imported last) are rewritten whole. Then what
//! depends on many entries is brought up to date for the names and paths that changed: node
//! resolution, unreferenced nodes, domain memberships from files, inline annotations and the
//! summaries.
//!
//! Invariants: after a delta the database answers exactly as a full import of the same cache
//! would, except that entries added since the full import come after the others in `id` order
//! (the tie-breaker among entries sharing a path or a qualified name). Memory is bounded by the
//! node-name map (a fixed record per node, as in a full import), one bit per stored entry, and
//! the changes themselves.

use std::sync::Arc;

use anyhow::{Context, Result};
use foldhash::{HashMap, HashSet};
use rusqlite::types::{Value as SqlValue, ValueRef};
use rusqlite::{Connection, OptionalExtension, Statement};
use serde_json::Value;

use crate::cache::digest::KnownEntries;
use crate::cache::event::{Event, Section};
use crate::cache::fields::{Cell, SYMBOL_NAME_CELL, SYMBOL_QUALIFIED_NAME_CELL};
use crate::db;

use super::fts::{TrigramTexts, FILE_FTS_COLUMNS, SYMBOL_FTS_CELLS, SYMBOL_FTS_COLUMNS};
use super::loader::Entry;
use super::rows::{entry_values, file_columns, symbol_calls, symbol_columns};
use super::tables::DUPLICATE_KEY;
use fts_rows::FtsRows;
use nodes::NodeIds;

mod compare;
mod derive;
mod digests;
mod fts_rows;
mod nodes;

pub(super) use digests::DigestReading;

/// Tables of the sections a delta rewrites whole (cleared before the new cache is read). The
/// domains and the source files are compared with their stored rows instead
/// (`Tables::keep_domains`, `Tables::keep_source_files`).
const REWRITTEN_TABLES: &[&str] = &[
    "cache_root",
    "graph_root",
    "constraints_root",
    "constraints",
    "lock_level_lists",
    "cache_hacks",
    "cache_debug_sessions",
    "conventions",
];

/// The tables of the vars file, rewritten whole unless the file is the one imported last.
const VARS_TABLES: &[&str] = &["vars", "vars_root"];

/// The prefix of the warning paths of the vars file.
const VARS_WARNING_PREFIX: &str = "variables";

/// Prefixes of the warning paths of entries a delta compares one by one; other warnings belong
/// to the rewritten sections and are cleared with them.
const COMPARED_WARNING_PREFIXES: &[&str] =
    &["files[", "symbols[", "graph.forward[", "graph.reverse["];

/// An SQL condition: the warning's `path` begins with one of `prefixes` (constants of this
/// module, never input); false without any.
fn paths_under<'p>(prefixes: impl IntoIterator<Item = &'p &'static str>) -> String {
    let conditions: Vec<String> = prefixes
        .into_iter()
        .map(|p| format!("substr(path, 1, {}) = '{p}'", p.len()))
        .collect();
    if conditions.is_empty() {
        return "0".to_string();
    }
    conditions.join(" OR ")
}

/// Why a delta gives up: the new cache has something the config excludes (a full import then
/// runs, and says this).
#[derive(Debug, thiserror::Error)]
#[error("the cache has entries that {} excludes", crate::config::CONFIG_FILE)]
pub(super) struct DeltaMeetsExcluded;

/// Why a delta gives up part way: so many of the entries read so far changed that writing them
/// one by one would take longer than a full import (a full import then runs, and says this).
#[derive(Debug, thiserror::Error)]
#[error("{changed} of the first {read} entries changed, more than the {MAX_CHANGED_PERCENT} % a delta is faster for")]
pub(super) struct TooManyChanges {
    changed: u64,
    read: u64,
}

/// The share of changed entries, in percent of those read, past which a delta gives up for a
/// full import ([`TooManyChanges`]): where a delta's time meets a full import's on the curve of
/// `benches/delta.sh --changed` (docs/benchmarks.md, "Delta import").
pub(super) const MAX_CHANGED_PERCENT: u64 = 8;

/// Entries a delta reads before it judges the share of changed ones (and between two
/// judgements): a few edited files at the start of a small cache say little of the rest, and
/// what a delta that gives up wrote is work lost.
const JUDGED_AFTER: u64 = 4096;

/// Gives up ([`TooManyChanges`]) when more than [`MAX_CHANGED_PERCENT`] of the entries `read`
/// changed.
fn judge(read: u64, changed: u64) -> Result<()> {
    if changed * 100 > read * MAX_CHANGED_PERCENT {
        return Err(TooManyChanges { changed, read }.into());
    }
    Ok(())
}

/// File and symbol entries at the start of a new cache that a delta compares before it starts
/// ([`Sample`]): few enough to cost a few hundredths of a second, enough that a share of
/// changed entries well below [`MAX_CHANGED_PERCENT`] is not taken for one above it.
const SAMPLED: u64 = 1024;

/// The first [`SAMPLED`] file and symbol entries of a new cache, compared with the stored rows
/// by key (digest, then values, as the delta compares them) before a delta starts: a delta
/// bound to give up learns it from them without reading every stored digest first (a tenth of
/// a full import's time at 100K symbols).
pub(super) struct Sample<'c> {
    /// A file's, then a symbol's stored row by key.
    by_key: [Statement<'c>; 2],
    columns: [usize; 2],
    /// The project root the stored canonical paths were computed with.
    root: Option<String>,
    read: u64,
    changed: u64,
}

impl<'c> Sample<'c> {
    /// An empty sample of the database on `conn`.
    pub(super) fn new(conn: &'c Connection) -> Result<Sample<'c>> {
        let (files, file_columns) = entry_by_key(conn, "files", &file_columns())?;
        let (symbols, symbol_columns) = entry_by_key(conn, "symbols", &symbol_columns())?;
        Ok(Sample {
            by_key: [files, symbols],
            columns: [file_columns, symbol_columns],
            root: project_root(conn)?,
            read: 0,
            changed: 0,
        })
    }

    /// Compares the entry of a file or symbol event (other events are passed over); false
    /// once the sample is complete.
    pub(super) fn look(&mut self, event: &Event) -> Result<bool> {
        let (slot, entry) = match event {
            Event::File {
                key,
                record,
                digest,
            } => (
                0,
                Entry::new(Section::Files, key, record, *digest, self.root.as_deref()),
            ),
            Event::Symbol {
                key,
                record,
                digest,
            } => (
                1,
                Entry::new(Section::Symbols, key, record, *digest, self.root.as_deref()),
            ),
            _ => return Ok(true),
        };
        let stored = lookup(
            &mut self.by_key[slot],
            self.columns[slot],
            entry.key,
            entry.path.as_deref(),
            &entry.record.cells,
            &entry.record.extra,
            entry.digest,
        )?;
        self.read += 1;
        self.changed += u64::from(!matches!(stored, Stored::Same(..)));
        Ok(self.read < SAMPLED)
    }

    /// Gives up ([`TooManyChanges`]) when the sample is complete and too many of its entries
    /// changed.
    pub(super) fn verdict(&self) -> Result<()> {
        if self.read < SAMPLED {
            return Ok(());
        }
        judge(self.read, self.changed)
    }
}

/// What a delta changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeltaCounts {
    /// File entries added, changed, removed and left as they were.
    pub files_added: u64,
    /// File entries whose content changed.
    pub files_changed: u64,
    /// File entries the new cache no longer has.
    pub files_removed: u64,
    /// File entries identical to the stored ones.
    pub files_unchanged: u64,
    /// Symbol entries added.
    pub symbols_added: u64,
    /// Symbol entries whose content changed.
    pub symbols_changed: u64,
    /// Symbol entries the new cache no longer has.
    pub symbols_removed: u64,
    /// Symbol entries identical to the stored ones.
    pub symbols_unchanged: u64,
    /// Call-graph lists added, changed or removed.
    pub lists_changed: u64,
    /// Distinct call edges that appeared.
    pub edges_added: u64,
    /// Distinct call edges that disappeared.
    pub edges_removed: u64,
}

/// What happened to one entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Change {
    Added,
    Changed,
    Unchanged,
}

impl DeltaCounts {
    /// Counts one file or symbol entry (call-graph lists are counted as `lists_changed`).
    fn count(&mut self, section: Section, change: Change) {
        let slot = match (section, change) {
            (Section::Files, Change::Added) => &mut self.files_added,
            (Section::Files, Change::Changed) => &mut self.files_changed,
            (Section::Files, Change::Unchanged) => &mut self.files_unchanged,
            (Section::Symbols, Change::Added) => &mut self.symbols_added,
            (Section::Symbols, Change::Changed) => &mut self.symbols_changed,
            (Section::Symbols, Change::Unchanged) => &mut self.symbols_unchanged,
            _ => return,
        };
        *slot += 1;
    }

    /// `+12 files ~40 symbols -3 symbols +180 edges -95 edges`, leaving out zeros.
    pub fn changes(&self) -> String {
        let parts: Vec<String> = [
            ('+', self.files_added, "files"),
            ('~', self.files_changed, "files"),
            ('-', self.files_removed, "files"),
            ('+', self.symbols_added, "symbols"),
            ('~', self.symbols_changed, "symbols"),
            ('-', self.symbols_removed, "symbols"),
            ('~', self.lists_changed, "call-graph lists"),
            ('+', self.edges_added, "edges"),
            ('-', self.edges_removed, "edges"),
        ]
        .iter()
        .filter(|(_, n, _)| *n > 0)
        .map(|(sign, n, what)| format!("{sign}{n} {what}"))
        .collect();
        if parts.is_empty() {
            "no entry changed".into()
        } else {
            parts.join(" ")
        }
    }
}

/// `project.root` as stored in `cache_root`.
fn project_root(conn: &Connection) -> Result<Option<String>> {
    Ok(conn
        .query_row(
            "SELECT CASE WHEN json_type(value_json, '$.root') = 'text'
                         THEN json_extract(value_json, '$.root') END
             FROM cache_root WHERE key = 'project'",
            [],
            |r| r.get(0),
        )
        .optional()?
        .flatten())
}

/// One bit per row id.
#[derive(Default)]
struct IdSet(Vec<u64>);

impl IdSet {
    /// Adds `id`; false when it was already there.
    fn insert(&mut self, id: i64) -> bool {
        let id = usize::try_from(id).unwrap_or(0);
        let (word, bit) = (id / 64, 1u64 << (id % 64));
        if word >= self.0.len() {
            self.0.resize(word + 1, 0);
        }
        let fresh = self.0[word] & bit == 0;
        self.0[word] |= bit;
        fresh
    }

    fn contains(&self, id: i64) -> bool {
        let id = usize::try_from(id).unwrap_or(0);
        self.0
            .get(id / 64)
            .is_some_and(|word| word & (1u64 << (id % 64)) != 0)
    }
}

/// A stored entry row: its id and its values in the order of the section's columns.
struct StoredRow {
    id: i64,
    values: Vec<SqlValue>,
}

impl StoredRow {
    fn read(row: &rusqlite::Row<'_>, columns: usize) -> rusqlite::Result<StoredRow> {
        let id = row.get(0)?;
        let values = (1..=columns)
            .map(|i| row.get::<_, SqlValue>(i))
            .collect::<rusqlite::Result<_>>()?;
        Ok(StoredRow { id, values })
    }

    fn text(&self, i: usize) -> Option<&str> {
        match &self.values[i] {
            SqlValue::Text(s) => Some(s),
            _ => None,
        }
    }

    /// The row's modelled columns as cells (the values after key and path, before `extra` and
    /// `digest`).
    fn cells(&self) -> Vec<Cell> {
        self.values[2..self.values.len() - 2]
            .iter()
            .map(|v| match v {
                SqlValue::Text(s) => Cell::Text(s.clone()),
                SqlValue::Integer(i) => Cell::Int(*i),
                _ => Cell::Null,
            })
            .collect()
    }
}

/// What the database holds under an entry's key.
enum Stored {
    /// Nothing: the entry is new.
    Absent,
    /// A row with exactly the entry's values, perhaps under another digest (the entry was
    /// written differently: other spacing or key order); `true` when the digest differs.
    Same(i64, bool),
    /// A row with other values.
    Differs(StoredRow),
}

/// Reads the row `stmt` finds for `key` and compares it with the entry's values, reading the
/// row into memory only when it differs.
fn lookup(
    stmt: &mut Statement<'_>,
    columns: usize,
    key: &str,
    path: Option<&str>,
    cells: &[Cell],
    extra: &str,
    digest: i64,
) -> Result<Stored> {
    let found = stmt
        .query_row([key], |row| {
            // Every column but the digest, which comes last.
            let same = (1..columns)
                .map(|i| row.get_ref(i))
                .zip(entry_values(key, path, cells, extra, digest))
                .all(|(stored, new)| matches!(stored, Ok(stored) if stored == new));
            if same && columns == cells.len() + 4 {
                let redigested = row.get::<_, i64>(columns)? != digest;
                Ok(Stored::Same(row.get(0)?, redigested))
            } else {
                Ok(Stored::Differs(StoredRow::read(row, columns)?))
            }
        })
        .optional()?;
    Ok(found.unwrap_or(Stored::Absent))
}

/// A call-graph list of the new cache, with its node ids.
struct NewList<'a> {
    section: Section,
    key: &'a str,
    key_id: u32,
    /// Its number of items, `None` when it is not a list (kept verbatim).
    len: Option<usize>,
    /// As stored (see `loader::list_items`).
    items: SqlValue,
    /// Node ids of its names.
    ids: &'a [u32],
    digest: i64,
}

/// What a symbol puts in its full-text tables: the words of `symbols_fts` and the texts of the
/// two trigram indexes of names.
struct SymbolText<'a> {
    words: [ValueRef<'a>; 5],
    trigrams: TrigramTexts<'a>,
}

impl<'a> SymbolText<'a> {
    fn new(cells: &'a [Cell], file_path: Option<&'a str>) -> SymbolText<'a> {
        // The columns as the full import's builder indexes them: text, or nothing.
        let texts = SYMBOL_FTS_CELLS.map(|i| cells[i].as_str());
        SymbolText {
            words: texts.map(text_value),
            trigrams: TrigramTexts::new(texts[0], texts[1], file_path),
        }
    }

    /// The values of `symbols_name_trigram`'s columns.
    fn names(&self) -> [ValueRef<'_>; 2] {
        self.trigrams.names().map(text_value)
    }

    /// The values of `symbols_qname_trigram`'s columns.
    fn terms(&self) -> [ValueRef<'_>; 2] {
        self.trigrams.terms().map(text_value)
    }
}

/// `text` as a value, NULL for `None`.
fn text_value(text: Option<&str>) -> ValueRef<'_> {
    text.map_or(ValueRef::Null, |t| ValueRef::Text(t.as_bytes()))
}

/// The state of a delta import.
pub(super) struct Delta<'c> {
    conn: &'c Connection,
    /// The columns of `files`, then of `symbols`, an entry fills, in the order of its values.
    column_names: [Vec<String>; 2],
    file_by_key: Statement<'c>,
    file_by_id: Statement<'c>,
    symbol_by_key: Statement<'c>,
    symbol_by_id: Statement<'c>,
    list_by_node: Statement<'c>,
    symbols_fts: FtsRows<'c>,
    symbols_name_trigram: FtsRows<'c>,
    symbols_qname_trigram: FtsRows<'c>,
    files_fts: FtsRows<'c>,
    files_trigram: FtsRows<'c>,
    nodes: NodeIds<'c>,
    /// The digests of the stored entries, which the reader skips.
    pub(super) known: Arc<KnownEntries>,
    seen_files: IdSet,
    seen_symbols: IdSet,
    seen_lists: IdSet,
    /// A reused buffer of node ids.
    ids: Vec<u32>,
    /// Changes of forward and reverse occurrences per packed edge (`caller << 32 | callee`).
    edge_changes: HashMap<u64, (i64, i64)>,
    /// Nodes that lost an edge, a list or a symbol naming them (checked for removal at the end).
    touched_nodes: HashSet<u32>,
    /// New lengths of reverse lists, by node.
    reverse_len: HashMap<u32, i64>,
    /// Names whose node resolution may have changed.
    names: HashSet<String>,
    /// Ids of files added or changed, whose derived rows are rewritten at the end.
    files_to_derive: Vec<i64>,
    /// Ids of files changed or removed, whose inline annotations are removed at the end.
    files_to_clear: Vec<i64>,
    /// Canonical paths whose domain memberships from files are recomputed at the end.
    paths: HashSet<String>,
    /// File paths of symbols added, changed or removed, whose `symbol_files` rows are brought up
    /// to date at the end.
    symbol_paths: HashSet<String>,
    /// Whether `import_warnings` held rows of compared entries (then a changed entry's old
    /// warnings are removed).
    entry_warnings: bool,
    /// The project root the stored canonical paths were computed with.
    pub(super) root: Option<String>,
    pub(super) counts: DeltaCounts,
    /// File, symbol and call-graph list entries read so far.
    entries_read: u64,
}

/// The number of columns of a comma-separated column list.
fn column_count(columns: &str) -> usize {
    columns.split(',').count()
}

/// The statement that reads an entry's stored row by key (`SELECT id, columns`, as [`lookup`]
/// reads it) and the number of `columns`.
fn entry_by_key<'c>(
    conn: &'c Connection,
    table: &str,
    columns: &str,
) -> Result<(Statement<'c>, usize)> {
    let sql = format!("SELECT id, {columns} FROM {table} WHERE key = ?1");
    Ok((conn.prepare(&sql)?, column_count(columns)))
}

impl<'c> Delta<'c> {
    /// Prepares a delta on `conn` (the served database, in a write transaction), clears the
    /// sections that are rewritten whole (the vars file's too, unless `keep_vars`: it is the
    /// one imported last) and loads the node names. It recognises no stored entry until
    /// [`Delta::recognise`] gives it their digests.
    pub(super) fn start(conn: &'c Connection, keep_vars: bool) -> Result<Delta<'c>> {
        let files = file_columns();
        let symbols = symbol_columns();
        let (file_by_key, _) = entry_by_key(conn, "files", &files)?;
        let (symbol_by_key, _) = entry_by_key(conn, "symbols", &symbols)?;
        let root = project_root(conn)?;
        let vars_tables = if keep_vars { &[][..] } else { VARS_TABLES };
        for table in REWRITTEN_TABLES.iter().chain(vars_tables) {
            conn.execute(&format!("DELETE FROM {table}"), [])?;
        }
        let vars_warnings = keep_vars.then_some(&VARS_WARNING_PREFIX);
        let kept = paths_under(COMPARED_WARNING_PREFIXES.iter().chain(vars_warnings));
        conn.execute(
            &format!("DELETE FROM import_warnings WHERE NOT ({kept})"),
            [],
        )?;
        // Duplicate keys are a matter of the whole map, not of one entry: the delta sees every
        // entry (of the vars file too, unless it keeps them), so it raises them again.
        conn.execute(
            &format!(
                "DELETE FROM import_warnings WHERE message = ?1 AND NOT ({})",
                paths_under(vars_warnings)
            ),
            [DUPLICATE_KEY],
        )?;
        // Whether an entry's warnings may need clearing (those of kept vars never do).
        let entry_warnings = conn.query_row(
            &format!(
                "SELECT EXISTS (SELECT 1 FROM import_warnings WHERE {})",
                paths_under(COMPARED_WARNING_PREFIXES)
            ),
            [],
            |r| r.get(0),
        )?;
        fts_rows::create_stage(conn)?;
        Ok(Delta {
            conn,
            column_names: [&files, &symbols]
                .map(|columns| columns.split(',').map(|c| c.trim().to_string()).collect()),
            file_by_key,
            file_by_id: conn.prepare(&format!("SELECT id, {files} FROM files WHERE id = ?1"))?,
            symbol_by_key,
            symbol_by_id: conn
                .prepare(&format!("SELECT id, {symbols} FROM symbols WHERE id = ?1"))?,
            list_by_node: conn
                .prepare("SELECT id, items FROM graph_lists WHERE node_id = ?1 AND reverse = ?2")?,
            symbols_fts: FtsRows::new(conn, "symbols_fts", SYMBOL_FTS_COLUMNS)?,
            symbols_name_trigram: FtsRows::new(conn, "symbols_name_trigram", "name, name_end")?,
            symbols_qname_trigram: FtsRows::new(conn, "symbols_qname_trigram", "terms, terms_end")?,
            files_fts: FtsRows::new(conn, "files_fts", FILE_FTS_COLUMNS)?,
            files_trigram: FtsRows::new(conn, "files_trigram", "path")?,
            nodes: NodeIds::load(conn)?,
            known: Arc::default(),
            seen_files: IdSet::default(),
            seen_symbols: IdSet::default(),
            seen_lists: IdSet::default(),
            ids: Vec::new(),
            edge_changes: HashMap::default(),
            touched_nodes: HashSet::default(),
            reverse_len: HashMap::default(),
            names: HashSet::default(),
            files_to_derive: Vec::new(),
            files_to_clear: Vec::new(),
            paths: HashSet::default(),
            symbol_paths: HashSet::default(),
            entry_warnings,
            root,
            counts: DeltaCounts::default(),
            entries_read: 0,
        })
    }

    /// The digests of the stored entries, which the reader recognises unchanged entries by.
    pub(super) fn recognise(&mut self, known: Arc<KnownEntries>) {
        self.known = known;
    }

    /// Counts one more entry read, and gives up ([`TooManyChanges`]) once the share of changed
    /// ones among those read passes [`MAX_CHANGED_PERCENT`].
    fn read_one(&mut self) -> Result<()> {
        self.entries_read += 1;
        let read = self.entries_read;
        if read < JUDGED_AFTER || !read.is_multiple_of(JUDGED_AFTER) {
            return Ok(());
        }
        let c = &self.counts;
        let changed =
            c.files_added + c.files_changed + c.symbols_added + c.symbols_changed + c.lists_changed;
        judge(read, changed)
    }

    /// The rows of `section` the new cache has shown so far.
    fn seen(&self, section: Section) -> &IdSet {
        match section {
            Section::Files => &self.seen_files,
            Section::Symbols => &self.seen_symbols,
            _ => &self.seen_lists,
        }
    }

    fn seen_mut(&mut self, section: Section) -> &mut IdSet {
        match section {
            Section::Files => &mut self.seen_files,
            Section::Symbols => &mut self.seen_symbols,
            _ => &mut self.seen_lists,
        }
    }

    /// The id of the node called `name`, created when new.
    fn node(&mut self, name: &str) -> Result<u32> {
        let (id, created) = self.nodes.get_or_create(name)?;
        if created {
            self.names.insert(name.to_string());
        }
        Ok(id)
    }

    /// The ids of the nodes called `names`, in order, appended to `ids`; each created when new.
    fn nodes_of<'n>(
        &mut self,
        names: impl Iterator<Item = &'n str>,
        ids: &mut Vec<u32>,
    ) -> Result<()> {
        let created = &mut self.names;
        self.nodes.get_or_create_all(names, ids, |name| {
            created.insert(name.to_string());
        })
    }

    /// Counts `sign` occurrences of `caller → callee` from a forward or a reverse source.
    fn edge(&mut self, caller: u32, callee: u32, forward: bool, sign: i64) {
        let change = self
            .edge_changes
            .entry((u64::from(caller) << 32) | u64::from(callee))
            .or_default();
        if forward {
            change.0 += sign;
        } else {
            change.1 += sign;
        }
    }

    /// Adds (`sign` 1) or takes away (-1) the edges of a symbol's `calls` and `called_by`.
    fn symbol_edges(&mut self, key: &str, cells: &[Cell], sign: i64) -> Result<()> {
        let Some((own_name, calls)) = symbol_calls(key, cells) else {
            return Ok(());
        };
        let me = self.node(&own_name)?;
        if sign < 0 {
            // No longer the own name of this symbol.
            self.touched_nodes.insert(me);
        }
        for (other, forward) in calls {
            let other = self.node(&other)?;
            let (caller, callee) = if forward { (me, other) } else { (other, me) };
            self.edge(caller, callee, forward, sign);
        }
        Ok(())
    }

    /// Adds or takes away the edges of a stored call-graph list of node `key_id`.
    fn list_edges(&mut self, key_id: u32, reverse: bool, items: &[u32], sign: i64) {
        for &other in items {
            let (caller, callee) = if reverse {
                (other, key_id)
            } else {
                (key_id, other)
            };
            self.edge(caller, callee, !reverse, sign);
        }
    }

    /// The node ids of a stored list's name items (a blob of ids, or JSON text whose string items
    /// are names), and its length when it is a list.
    fn stored_list(&mut self, items: &SqlValue) -> Result<(Vec<u32>, Option<usize>)> {
        match items {
            SqlValue::Blob(blob) => {
                let ids = db::decode_graph_items(blob).context("a damaged call-graph list")?;
                let len = ids.len();
                Ok((ids, Some(len)))
            }
            SqlValue::Text(text) => match serde_json::from_str::<Value>(text) {
                Ok(Value::Array(items)) => {
                    let mut ids = Vec::new();
                    for name in items.iter().filter_map(Value::as_str) {
                        ids.push(self.node(name)?);
                    }
                    Ok((ids, Some(items.len())))
                }
                _ => Ok((Vec::new(), None)),
            },
            _ => Ok((Vec::new(), None)),
        }
    }

    /// Removes a symbol's full-text rows and edges, given its stored row.
    fn unlink_symbol(&mut self, row: &StoredRow) -> Result<()> {
        let key = row.text(0).unwrap_or_default().to_string();
        let cells = row.cells();
        self.fts_symbol(row.id, Some((&cells, row.text(1))), None)?;
        self.symbol_edges(&key, &cells, -1)?;
        self.symbol_names(&key, &cells);
        Ok(())
    }

    /// Writes the staged changes of the five full-text tables ([`FtsRows`]).
    fn apply_fts_changes(&mut self) -> Result<()> {
        for rows in [
            &mut self.symbols_fts,
            &mut self.symbols_name_trigram,
            &mut self.symbols_qname_trigram,
            &mut self.files_fts,
            &mut self.files_trigram,
        ] {
            rows.apply(self.conn)?;
        }
        Ok(())
    }

    /// Brings a symbol's rows in its three full-text tables from its `old` cells and canonical
    /// file path to its `new` ones (`None`: no row), writing only the rows that differ.
    fn fts_symbol(
        &mut self,
        id: i64,
        old: Option<(&[Cell], Option<&str>)>,
        new: Option<(&[Cell], Option<&str>)>,
    ) -> Result<()> {
        let text = [old, new].map(|side| side.map(|(cells, path)| SymbolText::new(cells, path)));
        let words = [0, 1].map(|side| text[side].as_ref().map(|t| t.words));
        let names = [0, 1].map(|side| text[side].as_ref().map(SymbolText::names));
        let terms = [0, 1].map(|side| text[side].as_ref().map(SymbolText::terms));
        self.symbols_fts.rewrite(id, words)?;
        self.symbols_name_trigram.rewrite(id, names)?;
        self.symbols_qname_trigram.rewrite(id, terms)?;
        for (_, file_path) in [old, new].into_iter().flatten() {
            if let Some(path) = file_path {
                self.symbol_paths.insert(path.to_string());
            }
        }
        Ok(())
    }

    /// Records the names a symbol can resolve a node by (key, qualified name, simple name).
    fn symbol_names(&mut self, key: &str, cells: &[Cell]) {
        self.names.insert(key.to_string());
        for cell in [&cells[SYMBOL_NAME_CELL], &cells[SYMBOL_QUALIFIED_NAME_CELL]] {
            if let Some(name) = cell.as_str() {
                self.names.insert(name.to_string());
            }
        }
    }

    /// Removes the warnings of an entry that changed (they are raised again if still due).
    pub(super) fn clear_warnings(&mut self, json_path: &str) -> Result<()> {
        if self.entry_warnings {
            self.conn
                .prepare_cached(
                    "DELETE FROM import_warnings WHERE path = ?1 OR (substr(path, 1, length(?1) + 1) IN (?1 || '.', ?1 || '['))",
                )?
                .execute([json_path])?;
        }
        Ok(())
    }

    /// Brings a file's rows in its two full-text tables from its `old` stored row to its `new`
    /// one (`None`: no row), writing only the rows that differ.
    fn fts_file(&mut self, old: Option<&StoredRow>, new: Option<&StoredRow>) -> Result<()> {
        // Values: key, path, then FILE_FIELDS' columns: path_field, lines, language, module,
        // summary, purpose, ...
        fn words(row: Option<&StoredRow>) -> Option<[ValueRef<'_>; 4]> {
            row.map(|row| [1, 5, 6, 7].map(|i| ValueRef::from(&row.values[i])))
        }
        let words = [words(old), words(new)];
        let paths = words.map(|words| words.map(|w| [w[0]]));
        let id = old.or(new).map_or(0, |row| row.id);
        self.files_fts.rewrite(id, words)?;
        self.files_trigram.rewrite(id, paths)?;
        Ok(())
    }
}
