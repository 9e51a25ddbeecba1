//! The loader: the writing side of an import. Turns the reader's entries into rows of the
//! index tables (one prepared statement per table), counts what it wrote, and records
//! warnings for values it kept verbatim.

use std::path::Path;

use anyhow::{bail, Result};
use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{params, Connection, OptionalExtension, Statement, ToSql};
use serde_json::Value;

use crate::cache::event::{DocumentKind, Event, List, Scope, Section};
use crate::cache::fields::{
    self, Cell, Record, FILE_DOMAINS_CELL, FILE_INLINE_CELL, FILE_LANGUAGE_CELL,
    SYMBOL_CALLED_BY_CELL, SYMBOL_CALLS_CELL, SYMBOL_FILE_CELL, SYMBOL_NAME_CELL,
    SYMBOL_PURPOSE_CELL, SYMBOL_QUALIFIED_NAME_CELL, SYMBOL_SIGNATURE_CELL, SYMBOL_SUMMARY_CELL,
    SYMBOL_TYPE_CELL, SYMBOL_VISIBILITY_CELL,
};
use crate::cache::names::{name_hash, NameList};
use crate::cache::paths::canonical_path;
use crate::cache::reader;
use crate::cache::{normalize_lock_level, LOCK_LEVELS};
use crate::config::PathRules;
use crate::db;

use super::delta::Delta;
use super::fts::FtsBuilder;
use super::graph::{CallGraph, LinkedGraph};
use super::hashes::SeenKeys;

/// A cell as a SQL value.
pub(super) struct Sql<'a>(&'a Cell);

impl ToSql for Sql<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(cell_value(self.0)))
    }
}

#[derive(Debug, Default)]
pub(super) struct Counts {
    pub(super) files: u64,
    pub(super) symbols: u64,
    pub(super) edges: u64,
    pub(super) domains: u64,
    pub(super) warnings: u64,
}

pub(super) const MAX_WARNING_ROWS: u64 = 10_000;

/// The warning about a key that appears twice in one map of the cache.
pub(super) const DUPLICATE_KEY: &str = "duplicate key; the first entry is kept";

pub(super) const KNOWN_LANGUAGES: &[&str] = &[
    "typescript",
    "javascript",
    "python",
    "rust",
    "go",
    "java",
    "c-sharp",
    "cpp",
    "c",
    "ruby",
    "php",
    "swift",
    "kotlin",
];
pub(super) const KNOWN_SYMBOL_TYPES: &[&str] = &[
    "function",
    "method",
    "class",
    "interface",
    "type",
    "enum",
    "struct",
    "trait",
    "const",
];
pub(super) const KNOWN_INLINE_TYPES: &[&str] = &["critical", "todo", "fixme", "perf", "hack"];
pub(super) const KNOWN_VISIBILITY: &[&str] = &["public", "private", "protected"];

pub(super) struct Loader<'c> {
    pub(super) conn: &'c Connection,
    pub(super) insert_file: Statement<'c>,
    pub(super) insert_symbol: Statement<'c>,
    pub(super) insert_source_file: Statement<'c>,
    pub(super) insert_domain: Statement<'c>,
    pub(super) insert_domain_file: Statement<'c>,
    pub(super) insert_domain_symbol: Statement<'c>,
    pub(super) insert_inline: Statement<'c>,
    pub(super) insert_constraint: Statement<'c>,
    pub(super) insert_graph_list: Statement<'c>,
    pub(super) insert_var: Statement<'c>,
    pub(super) insert_warning: Statement<'c>,
    pub(super) sink: Sink<'c>,
    /// Hashes of the keys inserted so far, per section, to spot duplicates; `None` while keys
    /// are trusted to be unique (the first attempt of a full import: the unique key indexes
    /// built after the load find any duplicate, and the import then runs again with the set).
    pub(super) seen_keys: Option<SeenKeys>,
    pub(super) root: Option<String>,
    pub(super) root_ord: i64,
    pub(super) graph_ord: i64,
    pub(super) constraints_ord: i64,
    pub(super) vars_ord: i64,
    pub(super) hack_ord: i64,
    pub(super) debug_ord: i64,
    pub(super) saw_files: bool,
    pub(super) saw_symbols: bool,
    pub(super) counts: Counts,
    /// The project config's rules (`filter.rs`); none with `--ignore-config`.
    pub(super) rules: PathRules,
    /// Entries and items the rules dropped.
    pub(super) dropped: u64,
    /// The node ids of the call-graph list being written, kept from list to list so that
    /// their buffer is allocated once.
    list_ids: Vec<u32>,
    /// The same list's `graph_lists.items` blob, likewise.
    items_blob: Vec<u8>,
    /// The call-graph list whose first parts have been written ([`Loader::graph_part`]).
    open_list: Option<OpenList>,
}

/// The call graph of a full import (a delta writes its lists itself, and never in parts).
fn full_graph<'s, 'c>(sink: &'s mut Sink<'c>) -> &'s mut CallGraph<'c> {
    let Sink::Full { graph, .. } = sink else {
        unreachable!("a delta import writes its lists itself")
    };
    graph
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
    fn check(&self, section: Section, key_hash: u128) -> Result<()> {
        anyhow::ensure!(
            self.section == section && self.key_hash == key_hash,
            "a call-graph list ended with another list's names"
        );
        Ok(())
    }
}

/// Where files, symbols and call-graph lists go.
pub(super) enum Sink<'c> {
    /// A full import into empty tables: node ids and edges in memory and spilled runs, the
    /// symbols' full-text rows to the builder thread.
    Full {
        graph: Box<CallGraph<'c>>,
        fts: FtsBuilder,
    },
    /// A delta import: entries are compared with the stored rows and only differences written.
    Delta(Box<Delta<'c>>),
}

/// The columns of `files` a file entry fills, in the order of its values: key, canonical path,
/// the modelled columns from `cache::fields`, `extra`, the entry's digest.
pub(super) fn file_columns() -> String {
    format!(
        "key, path, {}, digest",
        fields::select_list(fields::FILE_FIELDS)
    )
}

/// The columns of `symbols` a symbol entry fills, in the order of its values.
pub(super) fn symbol_columns() -> String {
    format!(
        "key, file_path, {}, digest",
        fields::select_list(fields::SYMBOL_FIELDS)
    )
}

/// Indexes into a symbol record's cells (`cache::fields::SYMBOL_FIELDS`) of the columns of
/// `symbols_fts`: name, qualified_name, signature, purpose, summary.
pub(super) const SYMBOL_FTS_CELLS: [usize; 5] = [
    SYMBOL_NAME_CELL,
    SYMBOL_QUALIFIED_NAME_CELL,
    SYMBOL_SIGNATURE_CELL,
    SYMBOL_PURPOSE_CELL,
    SYMBOL_SUMMARY_CELL,
];

impl<'c> Loader<'c> {
    pub(super) fn new(conn: &'c Connection, sink: Sink<'c>) -> Result<Loader<'c>> {
        // The modelled columns come from `cache::fields`, in the order records hold their cells.
        let file_cols = file_columns();
        let symbol_cols = symbol_columns();
        let domain_cols = format!("key, {}", fields::select_list(fields::DOMAIN_FIELDS));
        let var_cols = format!("name, {}", fields::select_list(fields::VAR_FIELDS));
        Ok(Loader {
            conn,
            insert_file: conn.prepare(&insert_sql("files", &file_cols, false))?,
            insert_symbol: conn.prepare(&insert_sql("symbols", &symbol_cols, false))?,
            insert_source_file: conn.prepare(&insert_sql("source_files", "key, path, mtime, value_json", false))?,
            insert_domain: conn.prepare(&insert_sql("domains", &domain_cols, true))?,
            insert_domain_file: conn.prepare(&insert_sql("domain_files", "domain, path, source", true))?,
            insert_domain_symbol: conn.prepare(&insert_sql("domain_symbols", "domain, symbol", true))?,
            insert_inline: conn.prepare(&insert_sql(
                "inline_annotations",
                "file_id, ord, line, type, directive, value, ticket, expires, auto_generated",
                false,
            ))?,
            insert_constraint: conn.prepare(&insert_sql(
                "constraints",
                "key, path, lock_level, lock_reason, directive, style, behavior, quality_json, raw_json",
                true,
            ))?,
            insert_graph_list: conn.prepare(&insert_sql("graph_lists", "node_id, reverse, items, digest", false))?,
            insert_var: conn.prepare(&insert_sql("vars", &var_cols, true))?,
            insert_warning: conn.prepare("INSERT INTO import_warnings(path, message) VALUES (?1, ?2)")?,
            sink,
            seen_keys: Some(SeenKeys::default()),
            root: None,
            root_ord: 0,
            graph_ord: 0,
            constraints_ord: 0,
            vars_ord: 0,
            hack_ord: 0,
            debug_ord: 0,
            saw_files: false,
            saw_symbols: false,
            counts: Counts::default(),
            rules: PathRules::none(),
            dropped: 0,
            list_ids: Vec::new(),
            items_blob: Vec::new(),
            open_list: None,
        })
    }

    pub(super) fn warn(
        &mut self,
        path: impl Into<String>,
        message: impl Into<String>,
    ) -> Result<()> {
        self.counts.warnings += 1;
        if self.counts.warnings <= MAX_WARNING_ROWS {
            self.insert_warning
                .execute(params![path.into(), message.into()])?;
        }
        Ok(())
    }

    pub(super) fn check_enum(
        &mut self,
        path: impl FnOnce() -> String,
        what: &str,
        value: Option<&str>,
        known: &[&str],
    ) -> Result<()> {
        if let Some(value) = value {
            if !known.contains(&value) {
                self.warn(
                    path(),
                    format!("unknown {what} `{value}` (kept as written)"),
                )?;
            }
        }
        Ok(())
    }

    pub(super) fn canonical(&self, raw: &str) -> String {
        canonical_path(raw, self.root.as_deref())
    }

    /// Writes one event. A file, symbol or call-graph list is written from borrowed fields and
    /// handed back, for the reading thread, which allocated it, to free.
    pub(super) fn event(&mut self, kind: DocumentKind, event: Event) -> Result<Option<Event>> {
        let Some(event) = self.filter(kind, event)? else {
            return Ok(None);
        };
        match event {
            Event::File {
                ref key,
                ref record,
                digest,
            } => self.file(key, record, digest)?,
            Event::Symbol {
                ref key,
                ref record,
                digest,
            } => self.symbol(key, record, digest)?,
            Event::GraphList {
                section,
                ref key,
                key_hash,
                ref names,
                digest,
            } => self.graph_names(section, key, key_hash, names, digest)?,
            Event::GraphListPart {
                section,
                ref key,
                key_hash,
                ref names,
            } => self.graph_part(section, key, key_hash, names)?,
            Event::Member { scope, key, value } => {
                return self.member(kind, scope, key, value).map(|()| None)
            }
            Event::Entry {
                section,
                key,
                value,
                digest,
            } => return self.entry(section, key, value, digest).map(|()| None),
            Event::Unchanged { section, id } => return self.unchanged(section, id).map(|()| None),
            Event::Item { list, value } => return self.item(list, value).map(|()| None),
        }
        Ok(Some(event))
    }

    pub(super) fn member(
        &mut self,
        kind: DocumentKind,
        scope: Scope,
        key: String,
        value: Option<Value>,
    ) -> Result<()> {
        let text = value.as_ref().map(Value::to_string);
        if let Some(value) = &value {
            let streamed = match (kind, scope) {
                (DocumentKind::Vars, _) => key == "variables",
                (DocumentKind::Cache, Scope::Root) => [
                    "source_files",
                    "files",
                    "symbols",
                    "domains",
                    "graph",
                    "constraints",
                ]
                .contains(&key.as_str()),
                (DocumentKind::Cache, Scope::Graph) => {
                    ["forward", "reverse"].contains(&key.as_str())
                }
                (DocumentKind::Cache, Scope::Constraints) => {
                    ["by_file", "by_lock_level"].contains(&key.as_str())
                }
            };
            if streamed && !value.is_null() {
                self.warn(
                    reader::member_path(scope.path(), &key),
                    format!(
                        "expected an object, found {}; kept verbatim, no entries imported from it",
                        reader::json_type(value)
                    ),
                )?;
            }
        }
        match (kind, scope) {
            (DocumentKind::Vars, _) => {
                self.vars_ord += 1;
                self.conn.execute(
                    "INSERT OR REPLACE INTO vars_root(key, ord, value_json) VALUES (?1, ?2, ?3)",
                    params![key, self.vars_ord, text],
                )?;
            }
            (DocumentKind::Cache, Scope::Root) => {
                self.root_ord += 1;
                match key.as_str() {
                    "files" => self.saw_files = true,
                    "symbols" => self.saw_symbols = true,
                    "project" => {
                        self.root = value
                            .as_ref()
                            .and_then(|p| p.get("root"))
                            .and_then(Value::as_str)
                            .map(str::to_string);
                    }
                    "conventions" => {
                        if let Some(conventions) = &value {
                            self.conventions(conventions)?;
                        }
                    }
                    _ => {}
                }
                self.conn.execute(
                    "INSERT OR REPLACE INTO cache_root(key, ord, value_json) VALUES (?1, ?2, ?3)",
                    params![key, self.root_ord, text],
                )?;
            }
            (DocumentKind::Cache, Scope::Graph) => {
                self.graph_ord += 1;
                self.conn.execute(
                    "INSERT OR REPLACE INTO graph_root(key, ord, value_json) VALUES (?1, ?2, ?3)",
                    params![key, self.graph_ord, text],
                )?;
            }
            (DocumentKind::Cache, Scope::Constraints) => {
                self.constraints_ord += 1;
                self.conn.execute(
                    "INSERT OR REPLACE INTO constraints_root(key, ord, value_json) VALUES (?1, ?2, ?3)",
                    params![key, self.constraints_ord, text],
                )?;
            }
        }
        Ok(())
    }

    pub(super) fn conventions(&mut self, conventions: &Value) -> Result<()> {
        let naming = conventions
            .get("fileNaming")
            .or_else(|| conventions.get("file_naming"));
        if let Some(Value::Array(rules)) = naming {
            for rule in rules {
                self.conn.execute(
                    "INSERT INTO conventions(kind, directory, pattern, confidence, value_json) VALUES ('file_naming', ?1, ?2, ?3, ?4)",
                    params![
                        rule.get("directory").and_then(Value::as_str),
                        rule.get("pattern").and_then(Value::as_str),
                        rule.get("confidence").and_then(Value::as_f64),
                        rule.to_string()
                    ],
                )?;
            }
        }
        if let Some(imports) = conventions.get("imports").filter(|v| !v.is_null()) {
            self.conn.execute(
                "INSERT INTO conventions(kind, value_json) VALUES ('imports', ?1)",
                params![imports.to_string()],
            )?;
        }
        Ok(())
    }

    pub(super) fn entry(
        &mut self,
        section: Section,
        key: String,
        value: Value,
        digest: Option<i64>,
    ) -> Result<()> {
        match section {
            Section::Files | Section::Symbols => {
                unreachable!("the reader sends file and symbol entries as records")
            }
            Section::GraphForward | Section::GraphReverse => {
                self.graph_list(section, key, value, digest.unwrap_or_default())
            }
            Section::SourceFiles => {
                let path = self.canonical(&key);
                let (mtime, raw) = match value {
                    Value::String(s) => (Some(s), None),
                    other => (None, Some(other.to_string())),
                };
                let duplicate = self.is_duplicate(0, "source_files", &key)?;
                if !duplicate {
                    self.insert_source_file
                        .execute(params![key, path, mtime, raw])?;
                }
                if duplicate {
                    self.warn(format!("source_files[{key:?}]"), DUPLICATE_KEY)?;
                }
                Ok(())
            }
            Section::Domains => self.domain(key, value),
            Section::ByFile => self.constraint(key, value),
            Section::ByLockLevel => {
                let level = normalize_lock_level(&key);
                if !LOCK_LEVELS.contains(&level.as_str()) {
                    self.warn(
                        format!("constraints.by_lock_level[{key:?}]"),
                        format!("unknown lock level `{key}`"),
                    )?;
                }
                self.conn.execute(
                    "INSERT OR IGNORE INTO lock_level_lists(key, lock_level, items_json) VALUES (?1, ?2, ?3)",
                    params![key, level, value.to_string()],
                )?;
                Ok(())
            }
            Section::Variables => self.variable(key, value),
        }
    }

    pub(super) fn file(&mut self, key: &str, record: &Record, digest: i64) -> Result<()> {
        let path = self.canonical(key);
        let Record { cells, extra } = record;
        if matches!(self.sink, Sink::Delta(_)) {
            return self.delta_file(key, path, cells, extra, digest);
        }
        let json_path = || format!("files[{key:?}]");
        if self.is_duplicate(1, "files", key)? {
            return self.warn(json_path(), DUPLICATE_KEY);
        }
        self.check_file(key, cells)?;
        self.insert_file.execute(sql_params(entry_values(
            key,
            Some(&path),
            cells,
            extra,
            digest,
        )))?;
        self.counts.files += 1;
        let file_id = self.conn.last_insert_rowid();
        self.file_rows(
            file_id,
            key,
            &path,
            cells[FILE_DOMAINS_CELL].as_str(),
            cells[FILE_INLINE_CELL].as_str(),
        )
    }

    /// Warns about values of a file entry outside the spec's enums.
    pub(super) fn check_file(&mut self, key: &str, cells: &[Cell]) -> Result<()> {
        self.check_enum(
            || format!("files[{key:?}]"),
            "language",
            cells[FILE_LANGUAGE_CELL].as_str(),
            KNOWN_LANGUAGES,
        )
    }

    /// The rows derived from a stored file entry: its domain memberships (from `domains`) and
    /// its inline annotations (from `inline`).
    pub(super) fn file_rows(
        &mut self,
        file_id: i64,
        key: &str,
        path: &str,
        domains_json: Option<&str>,
        inline_json: Option<&str>,
    ) -> Result<()> {
        if let Some(domains) = domains_json {
            if let Ok(Value::Array(domains)) = serde_json::from_str::<Value>(domains) {
                for domain in domains.iter().filter_map(Value::as_str) {
                    self.insert_domain_file
                        .execute(params![domain, path, "file"])?;
                }
            }
        }
        if let Some(inline) = inline_json {
            if let Ok(Value::Array(items)) = serde_json::from_str::<Value>(inline) {
                for (ord, item) in items.iter().enumerate() {
                    let text = |k: &str| item.get(k).and_then(Value::as_str).map(str::to_string);
                    let kind = text("type");
                    self.check_enum(
                        || format!("files[{key:?}].inline[{ord}]"),
                        "inline annotation type",
                        kind.as_deref(),
                        KNOWN_INLINE_TYPES,
                    )?;
                    self.insert_inline.execute(params![
                        file_id,
                        ord as i64,
                        item.get("line").and_then(Value::as_i64),
                        kind,
                        text("directive"),
                        text("value"),
                        text("ticket"),
                        text("expires"),
                        item.get("auto_generated")
                            .and_then(Value::as_bool)
                            .unwrap_or(false),
                    ])?;
                }
            }
        }
        Ok(())
    }

    pub(super) fn symbol(&mut self, key: &str, record: &Record, digest: i64) -> Result<()> {
        let Record { cells, extra } = record;
        let file_path = cells[SYMBOL_FILE_CELL].as_str().map(|f| self.canonical(f));
        if matches!(self.sink, Sink::Delta(_)) {
            return self.delta_symbol(key, file_path, cells, extra, digest);
        }
        if self.is_duplicate(2, "symbols", key)? {
            return self.warn(format!("symbols[{key:?}]"), DUPLICATE_KEY);
        }
        self.check_symbol(key, cells)?;
        self.insert_symbol.execute(sql_params(entry_values(
            key,
            file_path.as_deref(),
            cells,
            extra,
            digest,
        )))?;
        self.counts.symbols += 1;
        let id = self.conn.last_insert_rowid();
        let Sink::Full { graph, fts } = &mut self.sink else {
            unreachable!("only a full import gets here")
        };
        let [name, qualified_name, signature, purpose, summary] =
            SYMBOL_FTS_CELLS.map(|i| cells[i].as_str());
        fts.push_symbol(
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
            let me = graph.node(&own_name)?;
            for (other, forward) in calls {
                let other = graph.node(&other)?;
                let (caller, callee) = if forward { (me, other) } else { (other, me) };
                graph.push_edge(caller, callee, forward)?;
            }
        }
        Ok(())
    }

    /// Warns about values of a symbol entry outside the spec's enums.
    pub(super) fn check_symbol(&mut self, key: &str, cells: &[Cell]) -> Result<()> {
        let json_path = || format!("symbols[{key:?}]");
        self.check_enum(
            json_path,
            "symbol type",
            cells[SYMBOL_TYPE_CELL].as_str(),
            KNOWN_SYMBOL_TYPES,
        )?;
        self.check_enum(
            json_path,
            "visibility",
            cells[SYMBOL_VISIBILITY_CELL].as_str(),
            KNOWN_VISIBILITY,
        )
    }

    /// Whether `key` was already inserted in `section` (an exact check in SQL confirms a hash
    /// match, so distinct keys are never taken for duplicates); always false while keys are
    /// not checked.
    pub(super) fn is_duplicate(&mut self, section: u8, table: &str, key: &str) -> Result<bool> {
        let Some(seen_keys) = self.seen_keys.as_mut() else {
            return Ok(false);
        };
        if seen_keys.insert(section, key) {
            return Ok(false);
        }
        let found: Option<i64> = self
            .conn
            .query_row(
                &format!("SELECT 1 FROM {table} WHERE key = ?1 LIMIT 1"),
                [key],
                |r| r.get(0),
            )
            .optional()?;
        Ok(found.is_some())
    }

    pub(super) fn graph_list(
        &mut self,
        section: Section,
        key: String,
        value: Value,
        digest: i64,
    ) -> Result<()> {
        if matches!(self.sink, Sink::Delta(_)) {
            return self.delta_graph_list(section, &key, &value, digest);
        }
        let key_hash = name_hash(&key);
        let key_id = self.list_key(section, &key, key_hash)?;
        // An item that is not a name after the first parts: the whole list replaces them.
        self.list_ids.clear();
        let Some(key_id) = key_id else {
            return Ok(());
        };
        let Value::Array(items) = &value else {
            self.insert_graph_list.execute(params![
                key_id,
                section == Section::GraphReverse,
                value.to_string(),
                digest
            ])?;
            return self.warn_list_not_names(section, &key);
        };
        let names = items
            .iter()
            .filter_map(Value::as_str)
            .map(|name| (name, name_hash(name)));
        self.lookup_names(names, std::iter::empty())?;
        self.end_list(section, key_id, items.len())?;
        self.insert_graph_list.execute(params![
            key_id,
            section == Section::GraphReverse,
            list_items(items, &self.list_ids),
            digest
        ])?;
        Ok(())
    }

    /// A call-graph list whose items are all names (hashed by the reader), or the last names
    /// of one whose first parts came before ([`Loader::graph_part`]).
    pub(super) fn graph_names(
        &mut self,
        section: Section,
        key: &str,
        key_hash: u128,
        names: &NameList,
        digest: i64,
    ) -> Result<()> {
        if matches!(self.sink, Sink::Delta(_)) {
            return self.delta_graph_list(section, key, &names.to_value(), digest);
        }
        let Some(key_id) = self.list_key(section, key, key_hash)? else {
            return Ok(());
        };
        self.lookup_names(names.iter(), names.hashes())?;
        self.end_list(section, key_id, self.list_ids.len())?;
        db::encode_graph_items_into(&self.list_ids, &mut self.items_blob);
        self.insert_graph_list.execute(params![
            key_id,
            section == Section::GraphReverse,
            self.items_blob,
            digest
        ])?;
        Ok(())
    }

    /// The first names of a long call-graph list ([`reader::LIST_PART`] at a time): their node
    /// ids are kept until the list's last names come ([`Loader::graph_names`]).
    pub(super) fn graph_part(
        &mut self,
        section: Section,
        key: &str,
        key_hash: u128,
        names: &NameList,
    ) -> Result<()> {
        if matches!(self.sink, Sink::Delta(_)) {
            anyhow::bail!("a delta import reads call-graph lists whole");
        }
        let key_id = match &self.open_list {
            Some(open) => {
                open.check(section, key_hash)?;
                open.key_id
            }
            None => {
                let key_id = self.begin_list(section, key, key_hash)?;
                self.open_list = Some(OpenList {
                    section,
                    key_hash,
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

    fn graph(&mut self) -> &mut CallGraph<'c> {
        full_graph(&mut self.sink)
    }

    /// The node id of the list being written: the one its first parts claimed, or
    /// [`Loader::begin_list`]'s.
    fn list_key(&mut self, section: Section, key: &str, key_hash: u128) -> Result<Option<u32>> {
        match self.open_list.take() {
            Some(open) => {
                open.check(section, key_hash)?;
                Ok(open.key_id)
            }
            None => self.begin_list(section, key, key_hash),
        }
    }

    /// In a full import, the node id of a call-graph list's key, with the list claimed for it
    /// and no names looked up yet; `None` (after a warning) when the key already had a list in
    /// this direction.
    fn begin_list(&mut self, section: Section, key: &str, key_hash: u128) -> Result<Option<u32>> {
        self.list_ids.clear();
        let graph = self.graph();
        graph.prefetch(key_hash);
        let key_id = graph.node_hashed(key, key_hash)?;
        if !graph.claim_list(key_id, section == Section::GraphReverse) {
            self.warn(format!("{}[{key:?}]", section.path()), DUPLICATE_KEY)?;
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
        let graph = full_graph(&mut self.sink);
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
        let graph = full_graph(&mut self.sink);
        if !forward {
            graph.set_reverse_len(key_id, len)?;
        }
        for &other_id in &self.list_ids {
            let (caller, callee) = if forward {
                (key_id, other_id)
            } else {
                (other_id, key_id)
            };
            graph.push_edge(caller, callee, forward)?;
        }
        Ok(())
    }

    /// Warns that a call-graph list is not a list (it is kept verbatim, without edges).
    pub(super) fn warn_list_not_names(&mut self, section: Section, key: &str) -> Result<()> {
        self.warn(
            format!("{}[{key:?}]", section.path()),
            "expected a list of names; kept verbatim but not added to the call graph",
        )
    }

    pub(super) fn domain(&mut self, key: String, value: Value) -> Result<()> {
        let Value::Object(map) = value else {
            unreachable!("the reader only yields object entries")
        };
        let (cells, extra) = fields::split(map, fields::DOMAIN_FIELDS);
        let extra_text = Value::Object(extra).to_string();
        let inserted = self.insert_domain.execute(params![
            key,
            Sql(&cells[0]),
            Sql(&cells[1]),
            Sql(&cells[2]),
            Sql(&cells[3]),
            extra_text
        ])?;
        if inserted == 0 {
            return self.warn(format!("domains[{key:?}]"), DUPLICATE_KEY);
        }
        self.counts.domains += 1;
        let name = cells[fields::DOMAIN_NAME_CELL]
            .as_str()
            .unwrap_or(&key)
            .to_string();
        if let Some(Ok(Value::Array(files))) = cells[fields::DOMAIN_FILES_CELL]
            .as_str()
            .map(serde_json::from_str::<Value>)
        {
            for file in files.iter().filter_map(Value::as_str) {
                let path = self.canonical(file);
                self.insert_domain_file
                    .execute(params![name, path, "domain"])?;
            }
        }
        if let Some(Ok(Value::Array(symbols))) = cells[fields::DOMAIN_SYMBOLS_CELL]
            .as_str()
            .map(serde_json::from_str::<Value>)
        {
            for symbol in symbols.iter().filter_map(Value::as_str) {
                self.insert_domain_symbol.execute(params![name, symbol])?;
            }
        }
        Ok(())
    }

    pub(super) fn constraint(&mut self, key: String, value: Value) -> Result<()> {
        let path = self.canonical(&key);
        let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_string);
        let mutation = value.get("mutation");
        let raw_level =
            text(value.get("lock_level")).or_else(|| text(mutation.and_then(|m| m.get("level"))));
        let lock_level = raw_level
            .as_deref()
            .map(normalize_lock_level)
            .unwrap_or_else(|| "normal".into());
        if !LOCK_LEVELS.contains(&lock_level.as_str()) {
            self.warn(
                format!("constraints.by_file[{key:?}]"),
                format!("unknown lock level `{lock_level}` (kept as written)"),
            )?;
        }
        let lock_reason =
            text(value.get("lock_reason")).or_else(|| text(mutation.and_then(|m| m.get("reason"))));
        let style = match value.get("style") {
            Some(Value::String(s)) => Some(s.clone()),
            Some(style) => text(style.get("guide")),
            None => None,
        };
        let behavior = match value.get("behavior") {
            Some(Value::String(s)) => Some(s.clone()),
            Some(behavior) => text(behavior.get("approach")),
            None => None,
        };
        let quality = quality_list(&value);
        self.insert_constraint.execute(params![
            key,
            path,
            lock_level,
            lock_reason,
            text(value.get("directive")),
            style,
            behavior,
            Value::from(quality).to_string(),
            value.to_string()
        ])?;
        Ok(())
    }

    pub(super) fn item(&mut self, list: List, value: Value) -> Result<()> {
        match list {
            List::Hacks => {
                self.hack_ord += 1;
                let file = value
                    .get("file")
                    .and_then(Value::as_str)
                    .map(|f| self.canonical(f));
                self.conn.execute(
                    "INSERT INTO cache_hacks(ord, id, path, line, expires, raw_json) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    params![
                        self.hack_ord,
                        value.get("id").and_then(Value::as_str),
                        file,
                        value.get("line").and_then(Value::as_i64),
                        value.get("expires").and_then(Value::as_str),
                        value.to_string()
                    ],
                )?;
            }
            List::DebugSessions => {
                self.debug_ord += 1;
                self.conn.execute(
                    "INSERT INTO cache_debug_sessions(ord, raw_json) VALUES (?1, ?2)",
                    params![self.debug_ord, value.to_string()],
                )?;
            }
        }
        Ok(())
    }

    pub(super) fn variable(&mut self, key: String, value: Value) -> Result<()> {
        let Value::Object(map) = value else {
            unreachable!("the reader only yields object entries")
        };
        let (cells, extra) = fields::split(map, fields::VAR_FIELDS);
        self.check_enum(
            || format!("variables[{key:?}]"),
            "variable type",
            cells[fields::VAR_TYPE_CELL].as_str(),
            &["symbol", "file", "domain", "layer", "pattern", "context"],
        )?;
        let extra_text = Value::Object(extra).to_string();
        let mut values: Vec<&dyn ToSql> = vec![&key];
        let sql_cells: Vec<Sql> = cells.iter().map(Sql).collect();
        for cell in &sql_cells {
            values.push(cell);
        }
        values.push(&extra_text);
        if self.insert_var.execute(values.as_slice())? == 0 {
            self.warn(format!("variables[{key:?}]"), DUPLICATE_KEY)?;
        }
        Ok(())
    }

    /// Refuses a document that has no `files` or `symbols` member (it is not an ACP cache) and
    /// warns about other missing required members.
    pub(super) fn check_cache_shape(&mut self, path: &Path) -> Result<()> {
        let present: Vec<String> = {
            let mut stmt = self.conn.prepare("SELECT key FROM cache_root")?;
            let keys = stmt
                .query_map([], |r| r.get(0))?
                .collect::<rusqlite::Result<_>>()?;
            keys
        };
        for required in [
            "version",
            "generated_at",
            "project",
            "stats",
            "source_files",
        ] {
            if !present.iter().any(|k| k == required) {
                self.warn(required, format!("required member `{required}` is missing"))?;
            }
        }
        let mut missing = Vec::new();
        if !self.saw_files {
            missing.push("`files`");
        }
        if !self.saw_symbols {
            missing.push("`symbols`");
        }
        if !missing.is_empty() {
            bail!(
                "{}: not an ACP cache: the top-level object has no {} member (run `acp index` to regenerate it)",
                path.display(),
                missing.join(" or ")
            );
        }
        Ok(())
    }

    /// Builds the de-duplicated edge table; returns the final counts, the full-text builder
    /// and the linked graph, both to finish once the indexes are built (the nodes' symbols and
    /// counts are written by [`LinkedGraph::write_nodes`]).
    pub(super) fn finish(mut self) -> Result<(Counts, FtsBuilder, LinkedGraph)> {
        let Sink::Full { graph, mut fts } = self.sink else {
            unreachable!("a delta import finishes with `finish_delta`")
        };
        if let Some(root) = self
            .root
            .clone()
            .filter(|r| r.starts_with('/') || r.contains(":\\") || r.contains(":/"))
        {
            rebase_absolute_paths(self.conn, &root)?;
        }
        // The files' paths are final: the full-text thread indexes them while the call graph
        // is linked here.
        fts.end_input(self.conn)?;
        let graph = graph.finish(self.conn)?;
        self.counts.edges = graph.edges;
        Ok((std::mem::take(&mut self.counts), fts, graph))
    }
}

/// The values of an entry's row, in the order of [`file_columns`] or [`symbol_columns`].
pub(super) fn entry_values<'a>(
    key: &'a str,
    path: Option<&'a str>,
    cells: &'a [Cell],
    extra: &'a str,
    digest: i64,
) -> impl Iterator<Item = ValueRef<'a>> + 'a {
    let text = |s: &'a str| ValueRef::Text(s.as_bytes());
    std::iter::once(text(key))
        .chain(std::iter::once(path.map_or(ValueRef::Null, text)))
        .chain(cells.iter().map(cell_value))
        .chain([text(extra), ValueRef::Integer(digest)])
}

/// Values as statement parameters.
pub(super) fn sql_params<'a, I: IntoIterator<Item = ValueRef<'a>>>(
    values: I,
) -> impl rusqlite::Params + use<'a, I> {
    rusqlite::params_from_iter(values.into_iter().map(ToSqlOutput::Borrowed))
}

/// A cell as a SQL value.
pub(super) fn cell_value(cell: &Cell) -> ValueRef<'_> {
    match cell {
        Cell::Null => ValueRef::Null,
        Cell::Text(s) => ValueRef::Text(s.as_bytes()),
        Cell::Int(i) => ValueRef::Integer(*i),
    }
}

/// A symbol's own call-graph node name (its qualified name, else its key) and the names in its
/// `calls` (forward) and `called_by` lists, when either is a list.
pub(super) fn symbol_calls(key: &str, cells: &[Cell]) -> Option<(String, Vec<(String, bool)>)> {
    let mut calls = Vec::new();
    let mut any_list = false;
    for (column, forward) in [(SYMBOL_CALLS_CELL, true), (SYMBOL_CALLED_BY_CELL, false)] {
        let Some(list) = cells[column].as_str() else {
            continue;
        };
        let Ok(Value::Array(items)) = serde_json::from_str::<Value>(list) else {
            continue;
        };
        any_list = true;
        calls.extend(items.into_iter().filter_map(|v| match v {
            Value::String(s) => Some((s, forward)),
            _ => None,
        }));
    }
    any_list.then(|| {
        let own_name = cells[SYMBOL_QUALIFIED_NAME_CELL].as_str().unwrap_or(key);
        (own_name.to_string(), calls)
    })
}

/// How a call-graph list is stored: the node ids of its items when every item is a name (see
/// `db::encode_graph_items`), otherwise the list verbatim as JSON text.
pub(super) fn list_items(items: &[Value], ids: &[u32]) -> rusqlite::types::Value {
    if ids.len() == items.len() {
        rusqlite::types::Value::Blob(db::encode_graph_items(ids))
    } else {
        rusqlite::types::Value::Text(Value::Array(items.to_vec()).to_string())
    }
}

pub(super) fn insert_sql(table: &str, columns: &str, or_ignore: bool) -> String {
    let n = columns.split(',').count();
    let placeholders = (1..=n)
        .map(|i| format!("?{i}"))
        .collect::<Vec<_>>()
        .join(", ");
    let verb = if or_ignore {
        "INSERT OR IGNORE"
    } else {
        "INSERT"
    };
    format!("{verb} INTO {table}({columns}) VALUES ({placeholders})")
}

/// The normalised quality list of a constraint entry in either shape.
pub(super) fn quality_list(value: &Value) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    match value.get("quality") {
        Some(Value::Array(items)) => {
            out.extend(items.iter().filter_map(Value::as_str).map(str::to_string))
        }
        Some(Value::Object(q)) => {
            if q.get("tests_required").and_then(Value::as_bool) == Some(true) {
                out.push("tests-required".into());
            }
            if q.get("security_review").and_then(Value::as_bool) == Some(true) {
                out.push("security-review".into());
            }
        }
        _ => {}
    }
    if let Some(Value::Object(m)) = value.get("mutation") {
        for (flag, name) in [
            ("requires_tests", "tests-required"),
            ("requires_docs", "docs-required"),
            ("requires_approval", "approval-required"),
        ] {
            if m.get(flag).and_then(Value::as_bool) == Some(true) && !out.iter().any(|q| q == name)
            {
                out.push(name.into());
            }
        }
    }
    out
}

/// Recomputes canonical paths once an absolute `project.root` is known (it may come after the
/// entries in the document).
pub(super) fn rebase_absolute_paths(conn: &Connection, root: &str) -> Result<()> {
    let root_pattern = format!("{}%", root.replace('\\', "/").trim_end_matches('/'));
    for (table, raw, column) in [
        ("files", "key", "path"),
        ("source_files", "key", "path"),
        ("symbols", "file", "file_path"),
        ("constraints", "key", "path"),
    ] {
        conn.execute(
            &format!("UPDATE {table} SET {column} = acpdb_canonical_path({raw}, ?1) WHERE {column} LIKE ?2"),
            params![root, root_pattern],
        )?;
    }
    Ok(())
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
    use serde_json::json;

    #[test]
    fn quality_from_both_shapes() {
        assert_eq!(
            quality_list(&json!({"quality": ["security-review"]})),
            vec!["security-review"]
        );
        assert_eq!(
            quality_list(
                &json!({"quality": {"tests_required": true}, "mutation": {"requires_docs": true, "requires_tests": true}})
            ),
            vec!["tests-required", "docs-required"]
        );
        assert!(quality_list(&json!({})).is_empty());
    }

    #[test]
    fn insert_sql_has_one_placeholder_per_column() {
        assert_eq!(
            insert_sql("t", "a, b", true),
            "INSERT OR IGNORE INTO t(a, b) VALUES (?1, ?2)"
        );
    }
}
