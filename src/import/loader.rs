//! The loader: where the reader's events go. Each event passes the config's rules
//! (`filter.rs`), then goes to the tables both kinds of import write alike (`tables.rs`) or,
//! for files, symbols and call-graph lists, to the import's [`EntryWriter`]: the full
//! import's (`full.rs`), which appends to empty tables, or the delta's (`delta/`), which
//! compares each entry with its stored row and writes the differences.

use anyhow::Result;
use serde_json::Value;

use crate::cache::event::{DocumentKind, Event, Section};
use crate::cache::fields::{Record, SYMBOL_FILE_CELL};
use crate::cache::names::{name_hash, NameList};
use crate::cache::paths::canonical_path;

use super::filter::Filter;
use super::tables::Tables;

/// A file or symbol entry as a writer gets it.
pub(super) struct Entry<'a> {
    pub(super) key: &'a str,
    /// The canonical path: a file's own, a symbol's file's.
    pub(super) path: Option<String>,
    pub(super) record: &'a Record,
    pub(super) digest: i64,
}

impl<'a> Entry<'a> {
    /// The entry of a file or symbol event, with the canonical path it is stored with (a file's
    /// key, a symbol's `file`, under the project `root`).
    pub(super) fn new(
        section: Section,
        key: &'a str,
        record: &'a Record,
        digest: i64,
        root: Option<&str>,
    ) -> Entry<'a> {
        let raw = match section {
            Section::Files => Some(key),
            _ => record.cells[SYMBOL_FILE_CELL].as_str(),
        };
        Entry {
            key,
            path: raw.map(|raw| canonical_path(raw, root)),
            record,
            digest,
        }
    }
}

/// Which call-graph list a writer gets: its direction, its key and the key's node-name hash.
#[derive(Clone, Copy)]
pub(super) struct ListKey<'a> {
    pub(super) section: Section,
    pub(super) key: &'a str,
    pub(super) key_hash: u128,
}

/// A call-graph list's items as the reader sent them.
pub(super) enum Items<'a> {
    /// Every item a name, hashed by the reader.
    Names(&'a NameList),
    /// The list as a JSON value: one with an item that is not a name, or not a list at all.
    Value(&'a Value),
}

/// A call-graph list as a writer gets it.
pub(super) struct List<'a> {
    pub(super) key: ListKey<'a>,
    pub(super) items: Items<'a>,
    pub(super) digest: i64,
}

/// Writes the entries of the big sections (files, symbols, call-graph lists): one writer per
/// kind of import.
pub(super) trait EntryWriter<'c> {
    /// A file entry.
    fn file(&mut self, tables: &mut Tables<'c>, entry: Entry<'_>) -> Result<()>;

    /// A symbol entry.
    fn symbol(&mut self, tables: &mut Tables<'c>, entry: Entry<'_>) -> Result<()>;

    /// A call-graph list, whole, or the last names of one whose first parts came before.
    fn graph_list(&mut self, tables: &mut Tables<'c>, list: List<'_>) -> Result<()>;

    /// The first names of a long call-graph list.
    fn graph_part(
        &mut self,
        tables: &mut Tables<'c>,
        list: ListKey,
        names: &NameList,
    ) -> Result<()>;

    /// An entry whose digest the database holds (`id`: its row).
    fn unchanged(&mut self, tables: &mut Tables<'c>, section: Section, id: u32) -> Result<()>;

    /// The config's rules left an entry or an item out.
    fn excluded(&mut self) -> Result<()>;
}

/// Writes events: the rules first, then the tables or the writer.
pub(super) struct Loader<'c, W> {
    pub(super) tables: Tables<'c>,
    pub(super) filter: Filter,
    pub(super) writer: W,
}

impl<'c, W: EntryWriter<'c>> Loader<'c, W> {
    /// Writes one event. A file, symbol or call-graph list is written from borrowed fields and
    /// handed back, for the reading thread, which allocated it, to free.
    pub(super) fn event(&mut self, kind: DocumentKind, event: Event) -> Result<Option<Event>> {
        let dropped = self.filter.dropped;
        let kept = self.filter.apply(&self.tables, kind, event)?;
        if self.filter.dropped != dropped {
            self.writer.excluded()?;
        }
        let Some(event) = kept else {
            return Ok(None);
        };
        let tables = &mut self.tables;
        match event {
            Event::File {
                ref key,
                ref record,
                digest,
            } => {
                let entry = Entry::new(Section::Files, key, record, digest, tables.root.as_deref());
                self.writer.file(tables, entry)?
            }
            Event::Symbol {
                ref key,
                ref record,
                digest,
            } => {
                let root = tables.root.as_deref();
                let entry = Entry::new(Section::Symbols, key, record, digest, root);
                self.writer.symbol(tables, entry)?
            }
            Event::GraphList {
                section,
                ref key,
                key_hash,
                ref names,
                digest,
            } => {
                let key = ListKey {
                    section,
                    key,
                    key_hash,
                };
                let items = Items::Names(names);
                let list = List { key, items, digest };
                self.writer.graph_list(tables, list)?
            }
            Event::GraphListPart {
                section,
                ref key,
                key_hash,
                ref names,
            } => {
                let list = ListKey {
                    section,
                    key,
                    key_hash,
                };
                self.writer.graph_part(tables, list, names)?
            }
            Event::Member { scope, key, value } => {
                return tables.member(kind, scope, key, value).map(|()| None)
            }
            Event::Entry {
                section: section @ (Section::GraphForward | Section::GraphReverse),
                key,
                value,
                digest,
            } => {
                let key = ListKey {
                    section,
                    key: &key,
                    key_hash: name_hash(&key),
                };
                let items = Items::Value(&value);
                let digest = digest.unwrap_or_default();
                let list = List { key, items, digest };
                return self.writer.graph_list(tables, list).map(|()| None);
            }
            Event::Entry {
                section,
                key,
                value,
                ..
            } => return tables.entry(section, key, value).map(|()| None),
            Event::Unchanged { section, id } => {
                return self.writer.unchanged(tables, section, id).map(|()| None)
            }
            Event::Item { list, value } => return tables.item(list, value).map(|()| None),
        }
        Ok(Some(event))
    }
}
