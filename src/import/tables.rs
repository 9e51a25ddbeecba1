//! The tables both kinds of import write the same way: the prepared inserts of every index
//! table, the warnings (`import_warnings`) and counts, the checks of values against the spec's
//! enums, and the small sections (the root members, source files, domains, constraints, hacks,
//! debug sessions, conventions, variables) with the rows derived from a file entry (domain
//! memberships, inline annotations). A delta writes the small sections whole too, except the
//! domains and the source files, which it compares with their stored rows by key.

use std::collections::{BTreeSet, HashSet};
use std::hash::BuildHasher;
use std::path::Path;

use anyhow::{bail, Result};
use rusqlite::types::ValueRef;
use rusqlite::{params, Connection, OptionalExtension, Statement, ToSql};
use serde_json::Value;

use crate::cache::event::{DocumentKind, List, Scope, Section};
use crate::cache::fields::{
    self, Cell, FILE_LANGUAGE_CELL, SYMBOL_TYPE_CELL, SYMBOL_VISIBILITY_CELL,
};
use crate::cache::paths::canonical_path;
use crate::cache::reader::{json_type, member_path};
use crate::cache::{normalize_lock_level, LOCK_LEVELS};

use super::hashes::SeenKeys;
use super::rows::{
    cell_value, file_columns, insert_sql, sql_params, symbol_columns, update_columns_sql, Sql,
};

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

/// A stored domain's name as [`Tables::domain`] derives it (its `name` when text, else its key):
/// the `domain` of its `domain_files` and `domain_symbols` rows.
const DOMAIN_NAME_SQL: &str = "CASE WHEN typeof(name) = 'text' THEN name ELSE key END";

/// The rows of a section a delta compares by key instead of rewriting it: those stored when it
/// began, and those the new cache has shown.
struct KeptRows {
    stored: Vec<i64>,
    seen: HashSet<i64>,
}

impl KeptRows {
    /// The rows of `table` now.
    fn load(conn: &Connection, table: &str) -> Result<KeptRows> {
        let mut stmt = conn.prepare(&format!("SELECT id FROM {table}"))?;
        let stored = stmt
            .query_map([], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        Ok(KeptRows {
            stored,
            seen: HashSet::new(),
        })
    }

    /// Records that the cache showed row `id`; false when it already had (a repeated key).
    fn see(&mut self, id: i64) -> bool {
        self.seen.insert(id)
    }

    /// The stored rows the cache did not show.
    fn unseen(self) -> impl Iterator<Item = i64> {
        let seen = self.seen;
        self.stored.into_iter().filter(move |id| !seen.contains(id))
    }
}

/// The source files a delta found stored ([`Tables::keep_source_files`]), each by key with its
/// row id and a fingerprint of its columns (a hash seeded at random for each delta), so that an
/// entry of the new cache is compared in memory rather than looked up by index.
struct KeptSourceFiles {
    rows: KeptRows,
    by_key: foldhash::HashMap<String, (i64, u64)>,
    fingerprints: foldhash::quality::RandomState,
}

impl KeptSourceFiles {
    /// The stored source files, read in one pass.
    fn load(conn: &Connection) -> Result<KeptSourceFiles> {
        let fingerprints = foldhash::quality::RandomState::default();
        let mut stmt = conn.prepare("SELECT id, key, path, mtime, value_json FROM source_files")?;
        let mut rows = stmt.query([])?;
        let (mut stored, mut by_key) = (Vec::new(), foldhash::HashMap::default());
        while let Some(row) = rows.next()? {
            let id: i64 = row.get(0)?;
            let columns = (
                row.get_ref(2)?.as_str_or_null()?,
                row.get_ref(3)?.as_str_or_null()?,
                row.get_ref(4)?.as_str_or_null()?,
            );
            stored.push(id);
            by_key.insert(row.get(1)?, (id, fingerprints.hash_one(columns)));
        }
        Ok(KeptSourceFiles {
            rows: KeptRows {
                stored,
                seen: HashSet::new(),
            },
            by_key,
            fingerprints,
        })
    }

    /// The fingerprint of a source file's columns.
    fn fingerprint(&self, path: &str, mtime: Option<&str>, raw: Option<&str>) -> u64 {
        self.fingerprints.hash_one((Some(path), mtime, raw))
    }
}

/// The domains a delta found stored ([`Tables::keep_domains`]).
struct KeptDomains {
    rows: KeptRows,
    /// Names whose `domain_files` (from domains) and `domain_symbols` rows are rebuilt.
    names: BTreeSet<String>,
}

/// The prepared inserts of the index tables and what both writers share while they write.
pub(super) struct Tables<'c> {
    pub(super) conn: &'c Connection,
    pub(super) insert_file: Statement<'c>,
    pub(super) insert_symbol: Statement<'c>,
    insert_source_file: Statement<'c>,
    insert_domain: Statement<'c>,
    insert_domain_file: Statement<'c>,
    insert_domain_symbol: Statement<'c>,
    insert_inline: Statement<'c>,
    insert_constraint: Statement<'c>,
    pub(super) insert_graph_list: Statement<'c>,
    insert_var: Statement<'c>,
    insert_warning: Statement<'c>,
    /// Hashes of the keys inserted so far, per section, to spot duplicates; `None` while keys
    /// are trusted to be unique (the first attempt of a full import: the unique key indexes
    /// built after the load find any duplicate, and the import then runs again with the set).
    pub(super) seen_keys: Option<SeenKeys>,
    /// In a delta, the domains stored before it ([`Tables::keep_domains`]); `None` in a full
    /// import, which writes every domain.
    kept_domains: Option<KeptDomains>,
    /// In a delta, the source files stored before it ([`Tables::keep_source_files`]).
    kept_source_files: Option<KeptSourceFiles>,
    /// `project.root`, which canonical paths are computed with.
    pub(super) root: Option<String>,
    root_ord: i64,
    graph_ord: i64,
    constraints_ord: i64,
    vars_ord: i64,
    hack_ord: i64,
    debug_ord: i64,
    saw_files: bool,
    saw_symbols: bool,
    pub(super) counts: Counts,
}

impl<'c> Tables<'c> {
    /// Prepares the inserts of every table on `conn`.
    pub(super) fn new(conn: &'c Connection) -> Result<Tables<'c>> {
        // The modelled columns come from `cache::fields`, in the order records hold their cells.
        let file_cols = file_columns();
        let symbol_cols = symbol_columns();
        let domain_cols = format!("key, {}", fields::select_list(fields::DOMAIN_FIELDS));
        let var_cols = format!("name, {}", fields::select_list(fields::VAR_FIELDS));
        Ok(Tables {
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
            seen_keys: Some(SeenKeys::default()),
            kept_domains: None,
            kept_source_files: None,
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
        })
    }

    /// An entry of a small section (all but files, symbols and call-graph lists).
    pub(super) fn entry(&mut self, section: Section, key: String, value: Value) -> Result<()> {
        match section {
            Section::Files | Section::Symbols => {
                unreachable!("the reader sends file and symbol entries as records")
            }
            Section::GraphForward | Section::GraphReverse => {
                unreachable!("the loader hands call-graph lists to the writer")
            }
            Section::SourceFiles => {
                let path = self.canonical(&key);
                let (mtime, raw) = match value {
                    Value::String(s) => (Some(s), None),
                    other => (None, Some(other.to_string())),
                };
                if self.kept_source_files.is_some() {
                    return self.kept_source_file(&key, &path, mtime.as_deref(), raw.as_deref());
                }
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
                self.conn
                    .prepare_cached(
                        "INSERT OR IGNORE INTO lock_level_lists(key, lock_level, items_json) VALUES (?1, ?2, ?3)",
                    )?
                    .execute(params![key, level, value.to_string()])?;
                Ok(())
            }
            Section::Variables => self.variable(key, value),
        }
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
                    member_path(scope.path(), &key),
                    format!(
                        "expected an object, found {}; kept verbatim, no entries imported from it",
                        json_type(value)
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
        let name = cells[fields::DOMAIN_NAME_CELL]
            .as_str()
            .unwrap_or(&key)
            .to_string();
        if self.kept_domains.is_some() {
            return self.kept_domain(&key, &name, &cells, &extra_text);
        }
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
        self.domain_rows(
            &name,
            cells[fields::DOMAIN_FILES_CELL].as_str(),
            cells[fields::DOMAIN_SYMBOLS_CELL].as_str(),
        )
    }

    /// The `domain_files` (from the domain) and `domain_symbols` rows of a domain called
    /// `name` with these `files` and `symbols` lists (JSON text).
    fn domain_rows(
        &mut self,
        name: &str,
        files: Option<&str>,
        symbols: Option<&str>,
    ) -> Result<()> {
        if let Some(Ok(Value::Array(files))) = files.map(serde_json::from_str::<Value>) {
            for file in files.iter().filter_map(Value::as_str) {
                let path = self.canonical(file);
                self.insert_domain_file
                    .execute(params![name, path, "domain"])?;
            }
        }
        if let Some(Ok(Value::Array(symbols))) = symbols.map(serde_json::from_str::<Value>) {
            for symbol in symbols.iter().filter_map(Value::as_str) {
                self.insert_domain_symbol.execute(params![name, symbol])?;
            }
        }
        Ok(())
    }

    /// Makes [`Tables::domain`] compare each domain with the row stored under its key and write
    /// only one that differs, in place (a delta, before the cache is read; ends with
    /// [`Tables::finish_domains`]). A domain's file list can be thousands of paths: rewriting
    /// every domain cost a delta 0.4 s and 5,000 pages at a million symbols.
    pub(super) fn keep_domains(&mut self) -> Result<()> {
        self.kept_domains = Some(KeptDomains {
            rows: KeptRows::load(self.conn, "domains")?,
            names: BTreeSet::new(),
        });
        Ok(())
    }

    /// Makes the `source_files` entries compared with the row stored under their key and
    /// written only when they differ (a delta, before the cache is read; ends with
    /// [`Tables::finish_source_files`]): rewriting them all cost 3,400 pages at 100,000 files.
    pub(super) fn keep_source_files(&mut self) -> Result<()> {
        self.kept_source_files = Some(KeptSourceFiles::load(self.conn)?);
        Ok(())
    }

    /// A `source_files` entry in a delta.
    fn kept_source_file(
        &mut self,
        key: &str,
        path: &str,
        mtime: Option<&str>,
        raw: Option<&str>,
    ) -> Result<()> {
        let kept = self.kept_source_files.as_mut().expect("kept source files");
        let fingerprint = kept.fingerprint(path, mtime, raw);
        match kept.by_key.get(key).copied() {
            None => {
                self.insert_source_file
                    .execute(params![key, path, mtime, raw])?;
                let id = self.conn.last_insert_rowid();
                kept.rows.see(id);
                kept.by_key.insert(key.to_string(), (id, fingerprint));
            }
            Some((id, _)) if !kept.rows.see(id) => {
                self.warn(format!("source_files[{key:?}]"), DUPLICATE_KEY)?;
            }
            Some((_, stored)) if stored == fingerprint => {}
            Some((id, _)) => {
                self.conn
                    .prepare_cached(
                        "UPDATE source_files SET path = ?2, mtime = ?3, value_json = ?4 WHERE id = ?1",
                    )?
                    .execute(params![id, path, mtime, raw])?;
            }
        }
        Ok(())
    }

    /// Ends a delta's source files: removes the stored ones the cache no longer has.
    pub(super) fn finish_source_files(&mut self) -> Result<()> {
        let Some(kept) = self.kept_source_files.take() else {
            return Ok(());
        };
        let mut delete = self
            .conn
            .prepare_cached("DELETE FROM source_files WHERE id = ?1")?;
        for id in kept.rows.unseen() {
            delete.execute([id])?;
        }
        Ok(())
    }

    /// [`Tables::domain`] in a delta.
    fn kept_domain(&mut self, key: &str, name: &str, cells: &[Cell], extra: &str) -> Result<()> {
        let new: Vec<ValueRef<'_>> = cells
            .iter()
            .map(cell_value)
            .chain([ValueRef::Text(extra.as_bytes())])
            .collect();
        let columns = fields::select_list(fields::DOMAIN_FIELDS);
        let stored: Option<(i64, bool, String)> = self
            .conn
            .prepare_cached(&format!(
                "SELECT id, {DOMAIN_NAME_SQL}, {columns} FROM domains WHERE key = ?1"
            ))?
            .query_row([key], |r| {
                let same = (0..new.len()).all(|i| matches!(r.get_ref(i + 2), Ok(v) if v == new[i]));
                Ok((r.get(0)?, same, r.get(1)?))
            })
            .optional()?;
        let Some((id, same, stored_name)) = stored else {
            self.insert_domain.execute(sql_params(
                std::iter::once(ValueRef::Text(key.as_bytes())).chain(new),
            ))?;
            let kept = self.kept_domains.as_mut().expect("kept domains");
            kept.rows.see(self.conn.last_insert_rowid());
            kept.names.insert(name.to_string());
            self.counts.domains += 1;
            return Ok(());
        };
        let kept = self.kept_domains.as_mut().expect("kept domains");
        if !kept.rows.see(id) {
            return self.warn(format!("domains[{key:?}]"), DUPLICATE_KEY);
        }
        if !same {
            kept.names.insert(stored_name);
            kept.names.insert(name.to_string());
            let sql = update_columns_sql("domains", columns.split(", "));
            self.conn
                .prepare_cached(&sql)?
                .execute(sql_params(new.into_iter().chain([ValueRef::Integer(id)])))?;
        }
        self.counts.domains += 1;
        Ok(())
    }

    /// Ends a delta's domains: removes the stored ones the cache no longer has, and rebuilds
    /// the `domain_files` (from domains) and `domain_symbols` rows of every name whose domains
    /// changed, from all the domains of that name.
    pub(super) fn finish_domains(&mut self) -> Result<()> {
        let Some(KeptDomains { rows, mut names }) = self.kept_domains.take() else {
            return Ok(());
        };
        let mut delete = self.conn.prepare_cached(&format!(
            "DELETE FROM domains WHERE id = ?1 RETURNING {DOMAIN_NAME_SQL}"
        ))?;
        for id in rows.unseen() {
            names.insert(delete.query_row([id], |r| r.get(0))?);
        }
        drop(delete);
        for name in &names {
            self.conn
                .prepare_cached("DELETE FROM domain_files WHERE domain = ?1 AND source = 'domain'")?
                .execute([name])?;
            self.conn
                .prepare_cached("DELETE FROM domain_symbols WHERE domain = ?1")?
                .execute([name])?;
            let lists: Vec<(Option<String>, Option<String>)> = self
                .conn
                .prepare_cached(&format!(
                    "SELECT CASE WHEN typeof(files_json) = 'text' THEN files_json END,
                            CASE WHEN typeof(symbols_json) = 'text' THEN symbols_json END
                     FROM domains WHERE {DOMAIN_NAME_SQL} = ?1 ORDER BY id"
                ))?
                .query_map([name], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<rusqlite::Result<_>>()?;
            for (files, symbols) in lists {
                self.domain_rows(name, files.as_deref(), symbols.as_deref())?;
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
}
