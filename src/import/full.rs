//! The full import's writer: files, symbols and call-graph lists appended to empty tables. The
//! call graph's node ids and edges go to [`CallGraph`] (memory bounded, edges spilled in
//! sorted runs), the symbols' full-text rows to the builder thread ([`FtsBuilder`]); a long
//! call-graph list comes in parts, whose node ids are kept until its last names.

use anyhow::Result;
use rusqlite::params;
use serde_json::Value;

use crate::cache::event::Section;
use crate::cache::fields::{Record, FILE_DOMAINS_CELL, FILE_INLINE_CELL};
use crate::cache::names::{name_hash, NameList};
use crate::db;

use super::fts::{FtsBuilder, SYMBOL_FTS_CELLS};
use super::graph::{CallGraph, LinkedGraph};
use super::loader::{Entry, EntryWriter, Items, List, ListKey};
use super::rows::{entry_values, list_items, sql_params, symbol_calls};
use super::tables::{rebase_absolute_paths, Tables, DUPLICATE_KEY};

/// The state of a full import's writer.
pub(super) struct FullWriter<'c> {
    graph: CallGraph<'c>,
    fts: FtsBuilder,
    /// The node ids of the call-graph list being written, kept from list to list so that
    /// their buffer is allocated once.
    list_ids: Vec<u32>,
    /// The same list's `graph_lists.items` blob, likewise.
    items_blob: Vec<u8>,
    /// The call-graph list whose first parts have been written ([`EntryWriter::graph_part`]).
    open_list: Option<OpenList>,
}

/// A call-graph list being written part by part.
struct OpenList {
    section: Section,
    key_hash: u128,
    /// The key's node id; `None` when the key already had a list (its names are skipped).
    key_id: Option<u32>,
}

impl OpenList {
    /// Fails unless the list's next part or its end is for this list: the reader sends a list's
    /// parts one after the other.
    fn check(&self, list: ListKey) -> Result<()> {
        anyhow::ensure!(
            self.section == list.section && self.key_hash == list.key_hash,
            "a call-graph list ended with another list's names"
        );
        Ok(())
    }
}

impl<'c> FullWriter<'c> {
    pub(super) fn new(graph: CallGraph<'c>, fts: FtsBuilder) -> FullWriter<'c> {
        FullWriter {
            graph,
            fts,
            list_ids: Vec::new(),
            items_blob: Vec::new(),
            open_list: None,
        }
    }

    /// Builds the de-duplicated edge table (its count goes to `tables.counts`); returns the
    /// full-text builder and the linked graph, both to finish once the indexes are built (the
    /// nodes' symbols and counts are written by [`LinkedGraph::write_nodes`]).
    pub(super) fn finish(self, tables: &mut Tables<'_>) -> Result<(FtsBuilder, LinkedGraph)> {
        let FullWriter { graph, mut fts, .. } = self;
        if let Some(root) = tables
            .root
            .clone()
            .filter(|r| r.starts_with('/') || r.contains(":\\") || r.contains(":/"))
        {
            rebase_absolute_paths(tables.conn, &root)?;
        }
        // The files' paths are final: the full-text thread indexes them while the call graph
        // is linked here.
        fts.end_input(tables.conn)?;
        let graph = graph.finish(tables.conn)?;
        tables.counts.edges = graph.edges;
        Ok((fts, graph))
    }

    /// The node id of the list being written: the one its first parts claimed, or
    /// [`FullWriter::begin_list`]'s.
    fn list_key(&mut self, tables: &mut Tables<'_>, list: ListKey) -> Result<Option<u32>> {
        match self.open_list.take() {
            Some(open) => {
                open.check(list)?;
                Ok(open.key_id)
            }
            None => self.begin_list(tables, list),
        }
    }

    /// The node id of a call-graph list's key, with the list claimed for it and no names
    /// looked up yet; `None` (after a warning) when the key already had a list in this
    /// direction.
    fn begin_list(&mut self, tables: &mut Tables<'_>, list: ListKey) -> Result<Option<u32>> {
        let ListKey {
            section,
            key,
            key_hash,
        } = list;
        self.list_ids.clear();
        self.graph.prefetch(key_hash);
        let key_id = self.graph.node_hashed(key, key_hash)?;
        if !self
            .graph
            .claim_list(key_id, section == Section::GraphReverse)
        {
            tables.warn(format!("{}[{key:?}]", section.path()), DUPLICATE_KEY)?;
            return Ok(None);
        }
        Ok(Some(key_id))
    }

    /// Appends the node ids of `names` to the list being written. `ahead` gives the names'
    /// hashes again (or nothing), to fetch their node-id slots a few names ahead of the lookups.
    fn lookup_names<'n>(
        &mut self,
        names: impl IntoIterator<Item = (&'n str, u128)>,
        mut ahead: impl Iterator<Item = u128>,
    ) -> Result<()> {
        /// Names whose slots are fetched before the first lookup, and kept ahead of it.
        const PREFETCH_DISTANCE: usize = 16;
        let graph = &mut self.graph;
        (&mut ahead)
            .take(PREFETCH_DISTANCE)
            .for_each(|hash| graph.prefetch(hash));
        for (name, hash) in names {
            if let Some(next) = ahead.next() {
                graph.prefetch(next);
            }
            self.list_ids.push(graph.node_hashed(name, hash)?);
        }
        Ok(())
    }

    /// Records the edges of the list being written (node `key_id`'s, of `len` items in all).
    fn end_list(&mut self, section: Section, key_id: u32, len: usize) -> Result<()> {
        let forward = section == Section::GraphForward;
        if !forward {
            self.graph.set_reverse_len(key_id, len)?;
        }
        for &other_id in &self.list_ids {
            let (caller, callee) = if forward {
                (key_id, other_id)
            } else {
                (other_id, key_id)
            };
            self.graph.push_edge(caller, callee, forward)?;
        }
        Ok(())
    }
}

impl<'c> EntryWriter<'c> for FullWriter<'c> {
    fn file(&mut self, tables: &mut Tables<'c>, entry: Entry<'_>) -> Result<()> {
        let Entry {
            key,
            path,
            record: Record { cells, extra },
            digest,
        } = entry;
        if tables.is_duplicate(1, "files", key)? {
            return tables.warn(format!("files[{key:?}]"), DUPLICATE_KEY);
        }
        tables.check_file(key, cells)?;
        tables.insert_file.execute(sql_params(entry_values(
            key,
            path.as_deref(),
            cells,
            extra,
            digest,
        )))?;
        tables.counts.files += 1;
        let file_id = tables.conn.last_insert_rowid();
        tables.file_rows(
            file_id,
            key,
            path.as_deref().unwrap_or_default(),
            cells[FILE_DOMAINS_CELL].as_str(),
            cells[FILE_INLINE_CELL].as_str(),
        )
    }

    fn symbol(&mut self, tables: &mut Tables<'c>, entry: Entry<'_>) -> Result<()> {
        let Entry {
            key,
            path: file_path,
            record: Record { cells, extra },
            digest,
        } = entry;
        if tables.is_duplicate(2, "symbols", key)? {
            return tables.warn(format!("symbols[{key:?}]"), DUPLICATE_KEY);
        }
        tables.check_symbol(key, cells)?;
        tables.insert_symbol.execute(sql_params(entry_values(
            key,
            file_path.as_deref(),
            cells,
            extra,
            digest,
        )))?;
        tables.counts.symbols += 1;
        let id = tables.conn.last_insert_rowid();
        let [name, qualified_name, signature, purpose, summary] =
            SYMBOL_FTS_CELLS.map(|i| cells[i].as_str());
        self.fts.push_symbol(
            id,
            [
                name,
                qualified_name,
                signature,
                purpose,
                summary,
                file_path.as_deref(),
            ],
        )?;
        if let Some((own_name, calls)) = symbol_calls(key, cells) {
            let me = self.graph.node(&own_name)?;
            for (other, forward) in calls {
                let other = self.graph.node(&other)?;
                let (caller, callee) = if forward { (me, other) } else { (other, me) };
                self.graph.push_edge(caller, callee, forward)?;
            }
        }
        Ok(())
    }

    fn graph_list(&mut self, tables: &mut Tables<'c>, list: List<'_>) -> Result<()> {
        match list.items {
            Items::Names(names) => self.names_list(tables, list.key, names, list.digest),
            Items::Value(value) => self.value_list(tables, list.key, value, list.digest),
        }
    }

    /// The first names of a long call-graph list (`cache::reader::LIST_PART` at a time): their
    /// node ids are kept until the list's last names come ([`EntryWriter::graph_list`]).
    fn graph_part(
        &mut self,
        tables: &mut Tables<'c>,
        list: ListKey,
        names: &NameList,
    ) -> Result<()> {
        let key_id = match &self.open_list {
            Some(open) => {
                open.check(list)?;
                open.key_id
            }
            None => {
                let key_id = self.begin_list(tables, list)?;
                self.open_list = Some(OpenList {
                    section: list.section,
                    key_hash: list.key_hash,
                    key_id,
                });
                key_id
            }
        };
        if key_id.is_some() {
            self.lookup_names(names.iter(), names.hashes())?;
        }
        Ok(())
    }

    fn unchanged(&mut self, _: &mut Tables<'c>, _: Section, _: u32) -> Result<()> {
        anyhow::bail!("a full import reads every entry: none is known unchanged")
    }

    /// Kept going: the names of excluded symbols are scrubbed at the end
    /// (`filter::scrub_excluded_names`).
    fn excluded(&mut self) -> Result<()> {
        Ok(())
    }
}

impl FullWriter<'_> {
    /// A call-graph list read as a JSON value.
    fn value_list(
        &mut self,
        tables: &mut Tables<'_>,
        list: ListKey,
        value: &Value,
        digest: i64,
    ) -> Result<()> {
        let ListKey { section, key, .. } = list;
        let key_id = self.list_key(tables, list)?;
        // An item that is not a name after the first parts: the whole list replaces them.
        self.list_ids.clear();
        let Some(key_id) = key_id else {
            return Ok(());
        };
        let Value::Array(items) = value else {
            tables.insert_graph_list.execute(params![
                key_id,
                section == Section::GraphReverse,
                value.to_string(),
                digest
            ])?;
            return tables.warn_list_not_names(section, key);
        };
        let names = items
            .iter()
            .filter_map(Value::as_str)
            .map(|name| (name, name_hash(name)));
        self.lookup_names(names, std::iter::empty())?;
        self.end_list(section, key_id, items.len())?;
        tables.insert_graph_list.execute(params![
            key_id,
            section == Section::GraphReverse,
            list_items(items, &self.list_ids),
            digest
        ])?;
        Ok(())
    }

    /// A call-graph list whose items are all names, or the last names of a long one.
    fn names_list(
        &mut self,
        tables: &mut Tables<'_>,
        list: ListKey,
        names: &NameList,
        digest: i64,
    ) -> Result<()> {
        let section = list.section;
        let Some(key_id) = self.list_key(tables, list)? else {
            return Ok(());
        };
        self.lookup_names(names.iter(), names.hashes())?;
        self.end_list(section, key_id, self.list_ids.len())?;
        db::encode_graph_items_into(&self.list_ids, &mut self.items_blob);
        tables.insert_graph_list.execute(params![
            key_id,
            section == Section::GraphReverse,
            self.items_blob,
            digest
        ])?;
        Ok(())
    }
}
