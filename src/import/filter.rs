//! The project config's rules applied to the cache as it is imported (`.acp.config.json`,
//! see `crate::config`): excluded paths never reach the database.
//!
//! Every event of the reader passes [`Filter::apply`] before it is written, in a full and a
//! delta import alike: entries keyed by an excluded path (`files`, `source_files`,
//! `constraints.by_file`), symbols of excluded files, hacks in excluded files and variables
//! naming excluded files or symbols are dropped; inside kept entries the items naming an
//! excluded path are dropped from the fields the cache format defines as project paths or
//! symbol names (file `imported_by`, domain `files` and `symbols`, symbol `calls` and
//! `called_by`, `by_lock_level` lists, the targets of `provenance.lowConfidence` and the file
//! lists of `documentation`). Strings that are not project paths (import specifiers) are kept.
//!
//! A name without a path (acp-cli's call graph uses bare function names) names an excluded
//! symbol only once every symbol is known, so a full import removes such names at the end
//! ([`scrub_excluded_names`]): call-graph nodes that name an excluded symbol (by key, qualified
//! name or simple name) or an excluded path and resolve to no kept symbol go, with their lists,
//! their edges and their places in other lists, symbols' `calls`/`called_by` and domains'
//! `symbols`. A delta import never meets an exclusion: it refuses to start when the previous
//! import dropped anything, and gives up (for a full import) when the new cache has something
//! to drop, so both kinds of import agree.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

use anyhow::Result;
use rusqlite::{params, Connection};
use serde_json::Value;

use crate::cache::event::{DocumentKind, Event, List, Scope, Section};
use crate::cache::fields::{
    Cell, FILE_IMPORTED_BY_CELL, SYMBOL_CALLED_BY_CELL, SYMBOL_CALLS_CELL, SYMBOL_FILE_CELL,
    SYMBOL_NAME_CELL, SYMBOL_QUALIFIED_NAME_CELL,
};
use crate::cache::paths::{canonical_path, split_qualified_name};
use crate::config::{Exclusion, PathRules, CONFIG_FILE};
use crate::db;

use super::tables::Tables;

/// The temporary table of the names of excluded symbols (never in the database file).
const EXCLUDED_NAMES: &str =
    "CREATE TEMP TABLE IF NOT EXISTS excluded_names(name TEXT PRIMARY KEY) WITHOUT ROWID";

/// The config's rules as the reader's events meet them, and what they left out.
pub(super) struct Filter {
    rules: PathRules,
    /// The rules' answers already given.
    memo: RefCell<Memo>,
    /// Whether a call-graph list that names an excluded symbol counts as left out (a delta
    /// then gives up), rather than being kept whole for the full import to scrub at its end.
    lists_checked: bool,
    /// Entries and items the rules dropped.
    pub(super) dropped: u64,
}

/// Answers of the rules already given, by path and by name as written: symbols' `calls` name
/// the same symbols again and again, and a config may hold many patterns. Emptied when a map
/// holds [`MEMO_LIMIT`] answers, and when the project root changes.
#[derive(Default)]
struct Memo {
    root: Option<String>,
    paths: HashMap<Box<str>, bool>,
    names: HashMap<Box<str>, bool>,
}

/// Answers a [`Memo`] map keeps at most.
const MEMO_LIMIT: usize = 1 << 18;

/// The rules with the project root the paths they judge are canonical under.
struct Rules<'a> {
    rules: &'a PathRules,
    root: Option<&'a str>,
    memo: &'a RefCell<Memo>,
}

impl Rules<'_> {
    /// Whether the canonical form of the path `raw` is excluded.
    fn path_excluded(&self, raw: &str) -> bool {
        self.memoized(false, raw, || {
            self.rules.excludes(&canonical_path(raw, self.root))
        })
    }

    /// Whether `name` is a qualified name whose path part is excluded ([`name_excluded`]).
    fn name_excluded(&self, name: &str) -> bool {
        self.memoized(true, name, || name_excluded(self.rules, self.root, name))
    }

    /// The answer for `text`, a name or a path, from the memo or else from `judge`.
    fn memoized(&self, name: bool, text: &str, judge: impl FnOnce() -> bool) -> bool {
        {
            let mut memo = self.memo.borrow_mut();
            if memo.root.as_deref() != self.root {
                *memo = Memo {
                    root: self.root.map(str::to_string),
                    ..Memo::default()
                };
            }
            let answers = if name { &memo.names } else { &memo.paths };
            if let Some(&answer) = answers.get(text) {
                return answer;
            }
        }
        let answer = judge();
        let mut memo = self.memo.borrow_mut();
        let answers = if name {
            &mut memo.names
        } else {
            &mut memo.paths
        };
        if answers.len() >= MEMO_LIMIT {
            answers.clear();
        }
        answers.insert(text.into(), answer);
        answer
    }

    /// A path or a qualified name (`provenance` targets are either).
    fn target_excluded(&self, target: &str) -> bool {
        self.path_excluded(target) || self.name_excluded(target)
    }

    /// Whether a variable names an excluded file or symbol (its `value` for `file` and
    /// `symbol` variables, or its `source` file).
    fn variable_excluded(&self, value: &Value) -> bool {
        let text = |k: &str| value.get(k).and_then(Value::as_str);
        let by_value = match (text("type"), text("value")) {
            (Some("file"), Some(path)) => self.path_excluded(path),
            (Some("symbol"), Some(name)) => self.name_excluded(name),
            _ => false,
        };
        by_value || text("source").is_some_and(|s| self.path_excluded(s))
    }
}

impl Filter {
    /// The filter of a full import (`lists_checked` false) or of a delta (true).
    pub(super) fn new(rules: PathRules, lists_checked: bool) -> Filter {
        Filter {
            rules,
            memo: RefCell::default(),
            lists_checked,
            dropped: 0,
        }
    }

    /// Applies the config's rules to one event: `None` when it is dropped, else the event with
    /// the items naming excluded paths removed.
    pub(super) fn apply(
        &mut self,
        tables: &Tables<'_>,
        kind: DocumentKind,
        event: Event,
    ) -> Result<Option<Event>> {
        if self.rules.keeps_everything() {
            return Ok(Some(event));
        }
        let mut pass = Pass {
            r: Rules {
                rules: &self.rules,
                root: tables.root.as_deref(),
                memo: &self.memo,
            },
            lists_checked: self.lists_checked,
            dropped: &mut self.dropped,
        };
        pass.event(tables.conn, kind, event)
    }
}

/// One event's pass through the rules.
struct Pass<'a> {
    r: Rules<'a>,
    lists_checked: bool,
    dropped: &'a mut u64,
}

impl Pass<'_> {
    fn event(
        &mut self,
        conn: &Connection,
        kind: DocumentKind,
        event: Event,
    ) -> Result<Option<Event>> {
        let r = &self.r;
        Ok(match event {
            Event::File {
                key,
                mut record,
                digest,
            } => {
                if r.path_excluded(&key) {
                    *self.dropped += 1;
                    return Ok(None);
                }
                *self.dropped += drop_from_cell(&mut record.cells[FILE_IMPORTED_BY_CELL], |s| {
                    r.path_excluded(s)
                });
                Some(Event::File {
                    key,
                    record,
                    digest,
                })
            }
            Event::Symbol {
                key,
                mut record,
                digest,
            } => {
                let cells = &record.cells;
                let excluded = match cells[SYMBOL_FILE_CELL].as_str() {
                    Some(file) => r.path_excluded(file),
                    None => cells[SYMBOL_QUALIFIED_NAME_CELL]
                        .as_str()
                        .is_some_and(|q| r.name_excluded(q)),
                };
                if excluded {
                    *self.dropped += 1;
                    excluded_symbol(conn, &key, &record.cells)?;
                    return Ok(None);
                }
                for column in [SYMBOL_CALLS_CELL, SYMBOL_CALLED_BY_CELL] {
                    *self.dropped +=
                        drop_from_cell(&mut record.cells[column], |s| r.name_excluded(s));
                }
                Some(Event::Symbol {
                    key,
                    record,
                    digest,
                })
            }
            Event::Entry {
                section,
                key,
                mut value,
                digest,
            } => {
                let keep = match section {
                    Section::SourceFiles | Section::ByFile => !r.path_excluded(&key),
                    Section::Domains => {
                        *self.dropped += drop_items(value.get_mut("files"), |s| r.path_excluded(s));
                        *self.dropped +=
                            drop_items(value.get_mut("symbols"), |s| r.name_excluded(s));
                        true
                    }
                    Section::ByLockLevel => {
                        *self.dropped += drop_items(Some(&mut value), |s| r.path_excluded(s));
                        true
                    }
                    Section::GraphForward | Section::GraphReverse => {
                        let names = value.as_array().into_iter().flatten();
                        self.check_graph_list(&key, names.filter_map(Value::as_str));
                        true
                    }
                    Section::Variables => !r.variable_excluded(&value),
                    Section::Files | Section::Symbols => true,
                };
                if !keep {
                    *self.dropped += 1;
                    return Ok(None);
                }
                Some(Event::Entry {
                    section,
                    key,
                    value,
                    digest,
                })
            }
            Event::GraphList {
                ref key, ref names, ..
            } => {
                self.check_graph_list(key, names.iter().map(|(name, _)| name));
                Some(event)
            }
            Event::Item {
                list: List::Hacks,
                value,
            } => {
                let file = value.get("file").and_then(Value::as_str);
                if file.is_some_and(|f| r.path_excluded(f)) {
                    *self.dropped += 1;
                    return Ok(None);
                }
                Some(Event::Item {
                    list: List::Hacks,
                    value,
                })
            }
            Event::Member {
                scope: Scope::Root,
                key,
                value: Some(mut value),
            } if kind == DocumentKind::Cache => {
                match key.as_str() {
                    "provenance" => {
                        for spelling in ["lowConfidence", "low_confidence"] {
                            if let Some(Value::Array(items)) = value.get_mut(spelling) {
                                let before = items.len();
                                items.retain(|item| {
                                    !item
                                        .get("target")
                                        .and_then(Value::as_str)
                                        .is_some_and(|t| r.target_excluded(t))
                                });
                                *self.dropped += (before - items.len()) as u64;
                            }
                        }
                    }
                    "documentation" => {
                        for group in ["sources", "styles"] {
                            if let Some(Value::Object(map)) = value.get_mut(group) {
                                let mut lists: Vec<&mut Value> = map
                                    .values_mut()
                                    .filter_map(|v| v.get_mut("files"))
                                    .collect();
                                for list in lists.iter_mut() {
                                    let mut dropped = 0;
                                    if let Value::Array(items) = list {
                                        let before = items.len();
                                        items.retain(|v| {
                                            !v.as_str().is_some_and(|s| r.path_excluded(s))
                                        });
                                        dropped = before - items.len();
                                    }
                                    *self.dropped += dropped as u64;
                                }
                            }
                        }
                    }
                    _ => {}
                }
                Some(Event::Member {
                    scope: Scope::Root,
                    key,
                    value: Some(value),
                })
            }
            other => Some(other),
        })
    }

    /// A call-graph list, kept whole: a full import scrubs excluded names at its end; a delta
    /// only counts a list that names one (and then gives up for a full import).
    fn check_graph_list<'n>(&mut self, key: &str, mut names: impl Iterator<Item = &'n str>) {
        let r = &self.r;
        if self.lists_checked && (r.name_excluded(key) || names.any(|name| r.name_excluded(name))) {
            *self.dropped += 1;
        }
    }
}

/// Removes the string items `drop` says go from a JSON list held in a cell; returns how many
/// went.
fn drop_from_cell(cell: &mut Cell, drop: impl Fn(&str) -> bool) -> u64 {
    let Some(text) = cell.as_str() else {
        return 0;
    };
    let Ok(mut list) = serde_json::from_str::<Value>(text) else {
        return 0;
    };
    let gone = drop_items(Some(&mut list), drop);
    if gone > 0 {
        *cell = Cell::Text(list.to_string());
    }
    gone
}

/// Removes the string items `drop` says go from a JSON list; returns how many went.
fn drop_items(list: Option<&mut Value>, drop: impl Fn(&str) -> bool) -> u64 {
    let Some(Value::Array(items)) = list else {
        return 0;
    };
    let before = items.len();
    items.retain(|v| !v.as_str().is_some_and(&drop));
    (before - items.len()) as u64
}

/// Remembers the names of an excluded symbol, for [`scrub_excluded_names`] (a delta gives up at
/// the first thing left out, so it never reads them).
fn excluded_symbol(conn: &Connection, key: &str, cells: &[Cell]) -> Result<()> {
    conn.execute_batch(EXCLUDED_NAMES)?;
    let mut insert =
        conn.prepare_cached("INSERT OR IGNORE INTO temp.excluded_names(name) VALUES (?1)")?;
    insert.execute([key])?;
    for cell in [&cells[SYMBOL_NAME_CELL], &cells[SYMBOL_QUALIFIED_NAME_CELL]] {
        if let Some(name) = cell.as_str() {
            insert.execute([name])?;
        }
    }
    Ok(())
}

/// Whether `name` is a qualified name (`path:member`) whose path part is excluded. A part that
/// matches no `include` pattern counts only when it looks like a file path (a `/` or a `.` in
/// it): a call-graph name such as `lodash:debounce` names no project file, and `include`
/// (`**/*.ts`) must not drop it.
fn name_excluded(rules: &PathRules, root: Option<&str>, name: &str) -> bool {
    let Some((path, _)) = split_qualified_name(name, None) else {
        return false;
    };
    let path = canonical_path(path, root);
    match rules.exclusion(&path) {
        Some(Exclusion::Pattern(_)) => true,
        Some(Exclusion::NotIncluded) => path.contains(['/', '.']),
        None => false,
    }
}

/// After a full import's call graph is built and its nodes resolved: removes every name that
/// names an excluded symbol or path and resolves to no kept symbol (see the module's
/// documentation). Returns how many names went.
pub(super) fn scrub_excluded_names(
    conn: &Connection,
    rules: &PathRules,
    root: Option<&str>,
) -> Result<u64> {
    if rules.keeps_everything() {
        return Ok(0);
    }
    conn.execute_batch(EXCLUDED_NAMES)?;
    let excluded = |name: &str| name_excluded(rules, root, name);
    // Names that resolve to no kept symbol: graph nodes without a symbol, domain symbols
    // matching no symbol's key or qualified name nor exactly one simple name.
    let mut names: HashSet<String> = HashSet::new();
    let mut nodes: HashSet<u32> = HashSet::new();
    {
        let mut stmt = conn.prepare(
            "SELECT id, name, name IN (SELECT name FROM temp.excluded_names)
             FROM graph_nodes WHERE symbol_id IS NULL",
        )?;
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next()? {
            let (id, name, by_symbol): (u32, String, bool) =
                (row.get(0)?, row.get(1)?, row.get(2)?);
            if by_symbol || excluded(&name) {
                nodes.insert(id);
                names.insert(name);
            }
        }
        let mut stmt = conn.prepare(
            "SELECT DISTINCT d.symbol, d.symbol IN (SELECT name FROM temp.excluded_names)
             FROM domain_symbols d
             WHERE NOT EXISTS (SELECT 1 FROM symbols s WHERE s.key = d.symbol)
               AND NOT EXISTS (SELECT 1 FROM symbols s
                               WHERE coalesce(s.qualified_name, s.key) = +d.symbol COLLATE NOCASE
                                 AND s.qualified_name = d.symbol)
               AND (SELECT count(*) FROM (SELECT 1 FROM symbols s
                    WHERE s.name = d.symbol COLLATE NOCASE AND s.name = d.symbol LIMIT 2)) != 1",
        )?;
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next()? {
            let (name, by_symbol): (String, bool) = (row.get(0)?, row.get(1)?);
            if by_symbol || excluded(&name) {
                names.insert(name);
            }
        }
    }
    conn.execute_batch("DROP TABLE temp.excluded_names")?;
    if names.is_empty() {
        return Ok(0);
    }
    let drop_names = |text: &str| -> Option<String> {
        let Ok(Value::Array(mut items)) = serde_json::from_str::<Value>(text) else {
            return None;
        };
        let before = items.len();
        items.retain(|v| !v.as_str().is_some_and(|s| names.contains(s)));
        (items.len() != before).then(|| Value::Array(items).to_string())
    };
    // Symbols' own lists and domains' symbols.
    for (table, column) in [
        ("symbols", "calls_json"),
        ("symbols", "called_by_json"),
        ("domains", "symbols_json"),
    ] {
        let rows: Vec<(i64, String)> = conn
            .prepare(&format!(
                "SELECT id, {column} FROM {table} WHERE {column} IS NOT NULL"
            ))?
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<rusqlite::Result<_>>()?;
        let mut update =
            conn.prepare(&format!("UPDATE {table} SET {column} = ?2 WHERE id = ?1"))?;
        for (id, text) in rows {
            if let Some(new) = drop_names(&text) {
                update.execute(params![id, new])?;
            }
        }
    }
    {
        let mut delete = conn.prepare("DELETE FROM domain_symbols WHERE symbol = ?1")?;
        for name in &names {
            delete.execute([name])?;
        }
    }
    if !nodes.is_empty() {
        // The call graph: the lists of dropped nodes, their places in other lists (a reverse
        // list's length is the new one), their edges and the nodes themselves.
        let lists: Vec<(i64, u32, bool, rusqlite::types::Value)> = conn
            .prepare("SELECT id, node_id, reverse, items FROM graph_lists")?
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
            .collect::<rusqlite::Result<_>>()?;
        let mut delete_list = conn.prepare("DELETE FROM graph_lists WHERE id = ?1")?;
        let mut update_list = conn.prepare("UPDATE graph_lists SET items = ?2 WHERE id = ?1")?;
        let mut update_len =
            conn.prepare("UPDATE graph_nodes SET reverse_len = ?2 WHERE id = ?1")?;
        for (id, node, reverse, items) in lists {
            if nodes.contains(&node) {
                delete_list.execute([id])?;
                continue;
            }
            let new_len = match items {
                rusqlite::types::Value::Blob(blob) => {
                    let Some(mut ids) = db::decode_graph_items(&blob) else {
                        continue;
                    };
                    let before = ids.len();
                    ids.retain(|i| !nodes.contains(i));
                    if ids.len() == before {
                        continue;
                    }
                    update_list.execute(params![id, db::encode_graph_items(&ids)])?;
                    ids.len()
                }
                rusqlite::types::Value::Text(text) => {
                    let Some(new) = drop_names(&text) else {
                        continue;
                    };
                    update_list.execute(params![id, new])?;
                    serde_json::from_str::<Value>(&new)
                        .ok()
                        .and_then(|v| v.as_array().map(Vec::len))
                        .unwrap_or(0)
                }
                _ => continue,
            };
            if reverse {
                update_len.execute(params![node, new_len as i64])?;
            }
        }
        // A dropped node's neighbours lose one caller or callee per edge to it.
        let mut fewer_callees = conn.prepare(
            "UPDATE graph_nodes SET callees = callees - 1
             WHERE id IN (SELECT caller_id FROM call_edges WHERE callee_id = ?1)",
        )?;
        let mut fewer_callers = conn.prepare(
            "UPDATE graph_nodes SET callers = callers - 1
             WHERE id IN (SELECT callee_id FROM call_edges WHERE caller_id = ?1)",
        )?;
        let mut delete_edges =
            conn.prepare("DELETE FROM call_edges WHERE caller_id = ?1 OR callee_id = ?1")?;
        let mut delete_node = conn.prepare("DELETE FROM graph_nodes WHERE id = ?1")?;
        for node in &nodes {
            fewer_callees.execute([node])?;
            fewer_callers.execute([node])?;
            delete_edges.execute([node])?;
            delete_node.execute([node])?;
        }
    }
    tracing::debug!(
        "removed {} names of symbols or paths that {CONFIG_FILE} excludes",
        names.len()
    );
    Ok(names.len() as u64)
}
