//! The delta's end: the entries the new cache no longer has are removed, then what depends
//! on many entries is brought up to date for the names and paths that changed: inline
//! annotations and domain memberships of changed files, the call edges and the nodes' counts
//! (from the differences counted while comparing), nodes nothing refers to any more, the
//! symbols' file paths and node resolution.

use std::collections::BTreeMap;

use foldhash::{HashMap, HashSet};

use anyhow::{bail, Result};
use rusqlite::types::Value as SqlValue;
use rusqlite::{params, OptionalExtension};

use crate::cache::event::Section;
use crate::import::fts;
use crate::import::graph::resolve_graph_nodes_named;
use crate::import::scratch::DELTA_CACHE_KIB;
use crate::import::tables::Tables;

use super::{project_root, Delta, DeltaCounts, StoredRow};

impl Delta<'_> {
    /// Removes what the new cache no longer has, brings every derived table up to date and
    /// returns what changed, with the new `graph.reverse` lengths of the nodes whose list
    /// changed (for the summaries).
    pub(in crate::import) fn finish(
        mut self,
        tables: &mut Tables<'_>,
    ) -> Result<(DeltaCounts, Vec<(u32, i64)>)> {
        let root = project_root(self.conn)?;
        if root != self.root {
            bail!("the project root changed, so every stored path must be computed again");
        }
        self.remove_unseen()?;
        // The stored digests are done with once the rows not seen are removed, and the page
        // cache takes their memory (about 75 MB at 1M symbols): the changes below then spill
        // fewer pages to the WAL before the commit. A 1 % delta at 1M wrote 865.8 MB instead of
        // 987.9 MB and took 3.22–3.32 s instead of 3.35–3.49 s, peak RSS 268–271 MB against
        // 265–266 MB (three alternating pairs).
        let known = std::mem::take(&mut self.known);
        let freed = std::sync::Arc::into_inner(known).map_or(0, |known| known.heap_bytes());
        let cache_kib = DELTA_CACHE_KIB + i64::try_from(freed / 1024).unwrap_or(0);
        self.conn.pragma_update(None, "cache_size", -cache_kib)?;
        tables.finish_domains()?;
        tables.finish_source_files()?;
        let conn = self.conn;

        // Inline annotations of changed files, then of added and changed files.
        let cleared: HashSet<i64> = self.files_to_clear.drain(..).collect();
        if !cleared.is_empty() {
            let mut stmt = conn.prepare("SELECT DISTINCT file_id FROM inline_annotations")?;
            let present: Vec<i64> = stmt
                .query_map([], |r| r.get(0))?
                .collect::<rusqlite::Result<_>>()?;
            let mut clear = conn.prepare("DELETE FROM inline_annotations WHERE file_id = ?1")?;
            for id in present.into_iter().filter(|id| cleared.contains(id)) {
                clear.execute([id])?;
            }
        }
        let derive = std::mem::take(&mut self.files_to_derive);
        {
            let mut stmt =
                conn.prepare("SELECT key, path, inline_json FROM files WHERE id = ?1")?;
            for id in derive {
                let (key, path, inline): (String, String, Option<String>) =
                    stmt.query_row([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
                // Domain memberships are recomputed per path below.
                tables.file_rows(id, &key, &path, None, inline.as_deref())?;
            }
        }

        let delta = &mut self;
        {
            let mut clear =
                conn.prepare("DELETE FROM domain_files WHERE path = ?1 AND source = 'file'")?;
            let mut fill = conn.prepare(
                "INSERT OR IGNORE INTO domain_files(domain, path, source)
                 SELECT j.value, f.path, 'file' FROM files f, json_each(f.domains_json) j
                 WHERE f.path = ?1 AND json_type(f.domains_json) = 'array' AND j.type = 'text'",
            )?;
            for path in &delta.paths {
                clear.execute([path])?;
                fill.execute([path])?;
            }
        }
        let step = std::time::Instant::now();
        delta.apply_edges()?;
        tracing::debug!(
            "applied edge changes in {:.2} s",
            step.elapsed().as_secs_f64()
        );
        delta.remove_unreferenced_nodes()?;
        tracing::debug!(
            "removed unreferenced nodes at {:.2} s",
            step.elapsed().as_secs_f64()
        );
        delta.apply_fts_changes()?;
        fts::update_symbol_files(conn, delta.symbol_paths.drain())?;
        tracing::debug!(
            "wrote and merged the full-text changes at {:.2} s",
            step.elapsed().as_secs_f64()
        );
        let names: Vec<String> = delta.names.drain().collect();
        resolve_graph_nodes_named(conn, &names)?;
        tracing::debug!(
            "resolved {} names at {:.2} s",
            names.len(),
            step.elapsed().as_secs_f64()
        );
        Ok((
            std::mem::take(&mut delta.counts),
            delta.reverse_len.drain().collect(),
        ))
    }

    /// Removes the files, symbols and lists the new cache did not have.
    fn remove_unseen(&mut self) -> Result<()> {
        let conn = self.conn;
        // Every stored row has a digest, so the known entries not seen are the rows to remove.
        let unseen = |delta: &Delta<'_>, sections: &[Section]| -> Result<Vec<i64>> {
            Ok(delta
                .known
                .entries()?
                .filter(|(section, _)| sections.contains(section))
                .map(|(section, id)| (section, i64::from(id)))
                .filter(|(section, id)| !delta.seen(*section).contains(*id))
                .map(|(_, id)| id)
                .collect())
        };
        let files = unseen(self, &[Section::Files])?;
        let file_columns = self.column_names[0].len();
        for id in files {
            let delta = &mut *self;
            let row = delta
                .file_by_id
                .query_row([id], |r| StoredRow::read(r, file_columns))?;
            delta.fts_file(Some(&row), None)?;
            if let Some(path) = row.text(1) {
                delta.paths.insert(path.to_string());
            }
            delta.files_to_clear.push(id);
            delta.counts.files_removed += 1;
            conn.prepare_cached("DELETE FROM files WHERE id = ?1")?
                .execute([id])?;
            let key = row.text(0).unwrap_or_default().to_string();
            self.clear_warnings(&format!("files[{key:?}]"))?;
        }
        let symbols = unseen(self, &[Section::Symbols])?;
        let symbol_columns = self.column_names[1].len();
        for id in symbols {
            let delta = &mut *self;
            let row = delta
                .symbol_by_id
                .query_row([id], |r| StoredRow::read(r, symbol_columns))?;
            delta.unlink_symbol(&row)?;
            delta.counts.symbols_removed += 1;
            conn.prepare_cached("DELETE FROM symbols WHERE id = ?1")?
                .execute([id])?;
            let key = row.text(0).unwrap_or_default().to_string();
            self.clear_warnings(&format!("symbols[{key:?}]"))?;
        }
        let lists = unseen(self, &[Section::GraphForward, Section::GraphReverse])?;
        for id in lists {
            let (node_id, reverse, items, name): (u32, bool, SqlValue, String) = conn
                .prepare_cached(
                    "SELECT l.node_id, l.reverse, l.items, n.name FROM graph_lists l
                     JOIN graph_nodes n ON n.id = l.node_id WHERE l.id = ?1",
                )?
                .query_row([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?;
            let delta = &mut *self;
            let (ids, _) = delta.stored_list(&items)?;
            delta.list_edges(node_id, reverse, &ids, -1);
            delta.touched_nodes.insert(node_id);
            delta.counts.lists_changed += 1;
            if reverse {
                delta.reverse_len.insert(node_id, 0);
            }
            conn.prepare_cached("DELETE FROM graph_lists WHERE id = ?1")?
                .execute([id])?;
            let section = if reverse {
                "graph.reverse"
            } else {
                "graph.forward"
            };
            self.clear_warnings(&format!("{section}[{name:?}]"))?;
        }
        Ok(())
    }

    /// Applies the edge changes to `call_edges` and the nodes' counts.
    fn apply_edges(&mut self) -> Result<()> {
        let mut changes: Vec<(u64, (i64, i64))> = self
            .edge_changes
            .drain()
            .filter(|(_, (f, r))| *f != 0 || *r != 0)
            .collect();
        changes.sort_unstable();
        let conn = self.conn;
        let mut read = conn.prepare(
            "SELECT forward_count, reverse_count FROM call_edges WHERE caller_id = ?1 AND callee_id = ?2",
        )?;
        let mut insert = conn.prepare(
            "INSERT INTO call_edges(caller_id, callee_id, count, forward_count, reverse_count)
             VALUES (?1, ?2, max(?3, ?4), ?3, ?4)",
        )?;
        let mut update = conn.prepare(
            "UPDATE call_edges SET count = max(?3, ?4), forward_count = ?3, reverse_count = ?4
             WHERE caller_id = ?1 AND callee_id = ?2",
        )?;
        let mut delete =
            conn.prepare("DELETE FROM call_edges WHERE caller_id = ?1 AND callee_id = ?2")?;
        // Changes of (callers, callees) per node.
        let mut degree: HashMap<u32, (i64, i64)> = HashMap::default();
        for (edge, (forward, reverse)) in changes {
            let (caller, callee) = ((edge >> 32) as u32, (edge & 0xffff_ffff) as u32);
            let old: Option<(i64, i64)> = read
                .query_row(params![caller, callee], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()?;
            let (old_forward, old_reverse) = old.unwrap_or((0, 0));
            let (new_forward, new_reverse) = (old_forward + forward, old_reverse + reverse);
            if new_forward < 0 || new_reverse < 0 {
                bail!("the stored call graph does not match its lists");
            }
            let gone = new_forward == 0 && new_reverse == 0;
            if gone {
                delete.execute(params![caller, callee])?;
            } else if old.is_some() {
                update.execute(params![caller, callee, new_forward, new_reverse])?;
            } else {
                insert.execute(params![caller, callee, new_forward, new_reverse])?;
            }
            let step = match (old.is_some(), gone) {
                (false, false) => 1,
                (true, true) => -1,
                _ => 0,
            };
            if step != 0 {
                degree.entry(callee).or_default().0 += step;
                degree.entry(caller).or_default().1 += step;
                if step > 0 {
                    self.counts.edges_added += 1;
                } else {
                    self.counts.edges_removed += 1;
                }
            }
        }
        // Each node's counts and reverse list length in one statement, in id order, as the
        // nodes are stored: each page is read and written once.
        let mut nodes: BTreeMap<u32, (i64, i64, Option<i64>)> = BTreeMap::new();
        for (node, (callers, callees)) in degree {
            if callers < 0 || callees < 0 {
                // Lost an edge: perhaps no longer referenced at all.
                self.touched_nodes.insert(node);
            }
            if callers != 0 || callees != 0 {
                let counts = nodes.entry(node).or_default();
                (counts.0, counts.1) = (callers, callees);
            }
        }
        for (&node, &len) in &self.reverse_len {
            nodes.entry(node).or_default().2 = Some(len);
        }
        let mut update = conn.prepare(
            "UPDATE graph_nodes SET callers = callers + ?2, callees = callees + ?3,
                                    reverse_len = coalesce(?4, reverse_len) WHERE id = ?1",
        )?;
        for (node, (callers, callees, len)) in nodes {
            update.execute(params![node, callers, callees, len])?;
        }
        Ok(())
    }

    /// Removes nodes a full import would not have created: no edge, no list, and not the own
    /// name of a symbol with a `calls` or `called_by` list.
    fn remove_unreferenced_nodes(&mut self) -> Result<()> {
        let conn = self.conn;
        let mut node = conn.prepare(
            "SELECT name FROM graph_nodes n WHERE id = ?1 AND callers = 0 AND callees = 0
               AND NOT EXISTS (SELECT 1 FROM graph_lists l WHERE l.node_id = n.id)",
        )?;
        let mut own_name = conn.prepare(
            "SELECT 1 FROM symbols WHERE coalesce(qualified_name, key) = ?1 COLLATE NOCASE
               AND coalesce(qualified_name, key) = ?1
               AND (json_type(calls_json) = 'array' OR json_type(called_by_json) = 'array')
             LIMIT 1",
        )?;
        let mut delete = conn.prepare("DELETE FROM graph_nodes WHERE id = ?1")?;
        for id in self.touched_nodes.drain() {
            let Some(name) = node.query_row([id], |r| r.get::<_, String>(0)).optional()? else {
                continue;
            };
            if own_name.exists([&name])? {
                continue;
            }
            delete.execute([id])?;
            self.names.remove(&name);
            self.nodes.removed(&name);
        }
        Ok(())
    }
}
