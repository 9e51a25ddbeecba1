//! The delta's comparison of entries: each file, symbol and call-graph list of the new cache
//! is looked up by key and compared with its stored row, exactly (every column and `extra`);
//! only an entry that is new or differs is written (a row updated in place, keeping its id, or
//! inserted), with its full-text rows replaced and its call edges counted in and out. What
//! depends on many entries is brought up to date at the end (`derive.rs`).

use anyhow::Result;
use rusqlite::types::{Value as SqlValue, ValueRef};
use rusqlite::{params, OptionalExtension};
use serde_json::Value;

use crate::cache::event::Section;
use crate::cache::fields::Record;
use crate::cache::names::NameList;
use crate::db;

use super::{lookup, Change, Delta, DeltaMeetsExcluded, NewList, Stored, StoredRow};
use crate::import::loader::{Entry, EntryWriter, Items, List, ListKey};
use crate::import::rows::{entry_values, list_items, sql_params, update_columns_sql};
use crate::import::tables::{Tables, DUPLICATE_KEY};

impl<'c> EntryWriter<'c> for Delta<'c> {
    fn file(&mut self, tables: &mut Tables<'c>, entry: Entry<'_>) -> Result<()> {
        self.read_one()?;
        let Some((id, old)) = self.write_entry(tables, Section::Files, &entry)? else {
            return Ok(());
        };
        let (key, cells) = (entry.key, &entry.record.cells);
        let delta = &mut *self;
        if let Some(old) = &old {
            if let Some(old_path) = old.text(1) {
                delta.paths.insert(old_path.to_string());
            }
            delta.files_to_clear.push(id);
        }
        tables.check_file(key, cells)?;
        let delta = &mut *self;
        let columns = delta.column_names[0].len();
        let row = delta
            .file_by_id
            .query_row([id], |r| StoredRow::read(r, columns))?;
        delta.fts_file(old.as_ref(), Some(&row))?;
        delta.paths.insert(entry.path.unwrap_or_default());
        delta.files_to_derive.push(id);
        Ok(())
    }

    fn symbol(&mut self, tables: &mut Tables<'c>, entry: Entry<'_>) -> Result<()> {
        self.read_one()?;
        let Some((id, old)) = self.write_entry(tables, Section::Symbols, &entry)? else {
            return Ok(());
        };
        let (key, path, cells) = (entry.key, entry.path.as_deref(), &entry.record.cells);
        let old_cells = old.as_ref().map(StoredRow::cells);
        if let (Some(old), Some(old_cells)) = (&old, &old_cells) {
            let old_key = old.text(0).unwrap_or_default().to_string();
            self.symbol_edges(&old_key, old_cells, -1)?;
            self.symbol_names(&old_key, old_cells);
        }
        tables.check_symbol(key, cells)?;
        let delta = &mut *self;
        let old_side = old
            .as_ref()
            .zip(old_cells.as_deref())
            .map(|(old, cells)| (cells, old.text(1)));
        delta.fts_symbol(id, old_side, Some((cells, path)))?;
        delta.symbol_edges(key, cells, 1)?;
        delta.symbol_names(key, cells);
        Ok(())
    }

    /// A list, compared whole (a list of names the reader hashed as its JSON value).
    fn graph_list(&mut self, tables: &mut Tables<'c>, list: List<'_>) -> Result<()> {
        self.read_one()?;
        let List {
            key: ListKey { section, key, .. },
            items,
            digest,
        } = list;
        let reverse = section == Section::GraphReverse;
        let json_path = || format!("{}[{key:?}]", section.path());
        let delta = &mut *self;
        let key_id = delta.node(key)?;
        let mut ids = std::mem::take(&mut delta.ids);
        ids.clear();
        let (items, len) = match items {
            Items::Names(names) => {
                delta.nodes_of(names.iter().map(|(name, _)| name), &mut ids)?;
                (
                    SqlValue::Blob(db::encode_graph_items(&ids)),
                    Some(names.len()),
                )
            }
            Items::Value(Value::Array(items)) => {
                delta.nodes_of(items.iter().filter_map(Value::as_str), &mut ids)?;
                (list_items(items, &ids), Some(items.len()))
            }
            Items::Value(other) => (SqlValue::Text(other.to_string()), None),
        };
        // The stored list, read into memory only when it differs.
        let stored: Option<(i64, Option<SqlValue>)> = delta
            .list_by_node
            .query_row(params![key_id, reverse], |r| {
                let same = r.get_ref(1)? == ValueRef::from(&items);
                Ok((r.get(0)?, if same { None } else { Some(r.get(1)?) }))
            })
            .optional()?;
        let list = NewList {
            section,
            key,
            key_id,
            len,
            items,
            ids: &ids,
            digest,
        };
        let result = self.apply_list(tables, list, stored, json_path);
        self.ids = ids;
        result
    }

    fn graph_part(&mut self, _: &mut Tables<'c>, _: ListKey, _: &NameList) -> Result<()> {
        anyhow::bail!("a delta import reads call-graph lists whole")
    }

    /// An entry whose digest the database holds: only marked as seen (a second time, it is a
    /// duplicate key).
    fn unchanged(&mut self, tables: &mut Tables<'c>, section: Section, id: u32) -> Result<()> {
        self.read_one()?;
        let delta = &mut *self;
        if !delta.seen_mut(section).insert(i64::from(id)) {
            let key: String = self
                .conn
                .prepare_cached(match section {
                    Section::Files => "SELECT key FROM files WHERE id = ?1",
                    Section::Symbols => "SELECT key FROM symbols WHERE id = ?1",
                    _ => "SELECT n.name FROM graph_lists l JOIN graph_nodes n ON n.id = l.node_id WHERE l.id = ?1",
                })?
                .query_row([id], |r| r.get(0))?;
            return tables.warn(format!("{}[{key:?}]", section.path()), DUPLICATE_KEY);
        }
        delta.counts.count(section, Change::Unchanged);
        Ok(())
    }

    /// Gives up: a full import then runs, and the rules agree with it.
    fn excluded(&mut self) -> Result<()> {
        Err(DeltaMeetsExcluded.into())
    }
}

impl Delta<'_> {
    /// Writes a file or symbol entry if it is new or differs from its stored row. Returns
    /// `None` when there is nothing more to do (unchanged, or a duplicate key), else the row id
    /// and, for a changed entry, its stored row before the update.
    fn write_entry(
        &mut self,
        tables: &mut Tables<'_>,
        section: Section,
        entry: &Entry<'_>,
    ) -> Result<Option<(i64, Option<StoredRow>)>> {
        let Entry {
            key,
            record: Record { cells, extra },
            digest,
            ..
        } = *entry;
        let path = entry.path.as_deref();
        let files = section == Section::Files;
        let json_path = || format!("{}[{key:?}]", section.path());
        let delta = &mut *self;
        let (by_key, columns) = if files {
            (&mut delta.file_by_key, delta.column_names[0].len())
        } else {
            (&mut delta.symbol_by_key, delta.column_names[1].len())
        };
        let stored = lookup(by_key, columns, key, path, cells, extra, digest)?;
        let id = match &stored {
            Stored::Same(id, _) => *id,
            Stored::Differs(row) => row.id,
            Stored::Absent => {
                let insert = if files {
                    &mut tables.insert_file
                } else {
                    &mut tables.insert_symbol
                };
                insert.execute(sql_params(entry_values(key, path, cells, extra, digest)))?;
                let id = self.conn.last_insert_rowid();
                let delta = &mut *self;
                delta.seen_mut(section).insert(id);
                delta.counts.count(section, Change::Added);
                return Ok(Some((id, None)));
            }
        };
        if !self.seen_mut(section).insert(id) {
            tables.warn(json_path(), DUPLICATE_KEY)?;
            return Ok(None);
        }
        match stored {
            Stored::Same(_, redigested) => {
                if redigested {
                    let table = if files { "files" } else { "symbols" };
                    self.conn
                        .prepare_cached(&format!("UPDATE {table} SET digest = ?2 WHERE id = ?1"))?
                        .execute(params![id, digest])?;
                }
                self.counts.count(section, Change::Unchanged);
                Ok(None)
            }
            Stored::Differs(row) => {
                self.clear_warnings(&json_path())?;
                self.counts.count(section, Change::Changed);
                let (table, names) = if files {
                    ("files", &self.column_names[0])
                } else {
                    ("symbols", &self.column_names[1])
                };
                let changed: Vec<(usize, ValueRef<'_>)> =
                    entry_values(key, path, cells, extra, digest)
                        .enumerate()
                        .filter(|(i, new)| ValueRef::from(&row.values[*i]) != *new)
                        .collect();
                if changed.is_empty() {
                    return Ok(Some((id, Some(row))));
                }
                let sql =
                    update_columns_sql(table, changed.iter().map(|(i, _)| names[*i].as_str()));
                let values = changed
                    .iter()
                    .map(|(_, value)| *value)
                    .chain([ValueRef::Integer(id)]);
                self.conn
                    .prepare_cached(&sql)?
                    .execute(sql_params(values))?;
                Ok(Some((id, Some(row))))
            }
            Stored::Absent => unreachable!("inserted above"),
        }
    }

    /// Writes a call-graph list that is new or differs from the stored one (`stored`: its row
    /// id and, when it differs, its items).
    fn apply_list(
        &mut self,
        tables: &mut Tables<'_>,
        list: NewList<'_>,
        stored: Option<(i64, Option<SqlValue>)>,
        json_path: impl Fn() -> String,
    ) -> Result<()> {
        let NewList {
            section,
            key,
            key_id,
            len,
            items,
            ids,
            digest,
        } = list;
        let reverse = section == Section::GraphReverse;
        let delta = &mut *self;
        match stored {
            Some((id, old)) => {
                if !delta.seen_lists.insert(id) {
                    return tables.warn(json_path(), DUPLICATE_KEY);
                }
                let Some(old) = old else {
                    // Written differently, same names: only the digest changes.
                    self.conn
                        .prepare_cached("UPDATE graph_lists SET digest = ?2 WHERE id = ?1")?
                        .execute(params![id, digest])?;
                    return Ok(());
                };
                let (old_ids, _) = delta.stored_list(&old)?;
                delta.list_edges(key_id, reverse, &old_ids, -1);
                self.clear_warnings(&json_path())?;
                self.conn
                    .prepare_cached("UPDATE graph_lists SET items = ?2, digest = ?3 WHERE id = ?1")?
                    .execute(params![id, items, digest])?;
            }
            None => {
                tables
                    .insert_graph_list
                    .execute(params![key_id, reverse, items, digest])?;
                let id = self.conn.last_insert_rowid();
                self.seen_lists.insert(id);
            }
        }
        let delta = &mut *self;
        delta.counts.lists_changed += 1;
        delta.list_edges(key_id, reverse, ids, 1);
        if reverse {
            delta.reverse_len.insert(key_id, len.unwrap_or(0) as i64);
        }
        if len.is_none() {
            tables.warn_list_not_names(section, key)?;
        }
        Ok(())
    }
}
