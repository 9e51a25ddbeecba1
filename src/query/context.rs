//! `acp_context` (RFC-0015): operation-specific briefings — create, modify, debug, explore.
//!
//! Answers are JSON objects with alphabetically sorted keys, as acp-mcp builds them with
//! `serde_json::json!`. `modify` and `debug` targets resolve as every other tool's names do (any
//! spelling of a path; a symbol's key, qualified name or unique simple name), and an unknown
//! target is an invalid-params error with suggestions, where acp-mcp answers an empty briefing or
//! an `error` member; exact keys resolve first, so the reference's answers are unchanged for
//! them. `create` and `explore` match directory strings and domain substrings as the reference. Lists the reference leaves in hash order are sorted here: similar files by
//! path, domains by name, debug hotpaths by caller count then name, key files by importer count
//! then path; the most frequent language of a directory breaks ties alphabetically.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use rusqlite::{params, Connection, OptionalExtension};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::hotpaths::debug_name;
use super::names::{
    find_file, find_symbol, not_found, resolve_file, suggest_files, symbol_suggestions, user_path,
    SymbolMatch, MAX_SUGGESTIONS,
};
use super::{QueryError, QueryResult};
use crate::cache::normalize_lock_level;
use crate::cache::paths::split_qualified_name;

/// RFC-0015: Context operation for acp_context tool
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct GetContextParams {
    /// Operation type: "create", "modify", "debug", or "explore"
    pub operation: String,
    /// For create: directory path. For modify/debug: file path. For explore: optional domain.
    pub target: Option<String>,
    /// For modify: whether to find files that use this file
    #[serde(default)]
    pub find_usages: bool,
}

/// Most similar files listed for `create`.
const SIMILAR_FILES: usize = 5;
/// Most hotpaths listed for `debug`.
const DEBUG_HOTPATHS: usize = 5;
/// Callers a `graph.reverse` key needs to be a `debug` hotpath.
const DEBUG_HOTPATH_CALLERS: i64 = 3;
/// Most key files listed for `explore`.
const KEY_FILES: usize = 10;

/// Runs one context operation. The answer is a JSON object with sorted keys.
pub fn context(conn: &Connection, params: &GetContextParams) -> QueryResult<Value> {
    let target = params.target.as_deref();
    match params.operation.as_str() {
        "create" => create(
            conn,
            target.ok_or_else(|| {
                QueryError::invalid("'target' (directory path) required for create operation")
            })?,
        ),
        "modify" => modify(
            conn,
            target.ok_or_else(|| {
                QueryError::invalid("'target' (file path) required for modify operation")
            })?,
        ),
        "debug" => debug(
            conn,
            target.ok_or_else(|| {
                QueryError::invalid("'target' (file or symbol) required for debug operation")
            })?,
        ),
        "explore" => explore(conn, target),
        other => Err(QueryError::invalid(format!(
            "Unknown operation: {other}. Use: create, modify, debug, or explore"
        ))),
    }
}

/// The parent directory of a file key, as `std::path::Path::parent` gives it.
fn parent_of(key: &str) -> String {
    Path::new(key)
        .parent()
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn create(conn: &Connection, directory: &str) -> QueryResult<Value> {
    let (naming, pattern) = match naming_convention(conn, directory)? {
        Some(rule) => {
            let pattern = rule.get("pattern").cloned().unwrap_or(Value::Null);
            let naming = json!({
                "pattern": pattern,
                "confidence": rule.get("confidence").and_then(Value::as_f64).unwrap_or(0.0),
                "examples": rule.get("examples").filter(|v| v.is_array()).cloned().unwrap_or_else(|| json!([])),
            });
            (naming, pattern)
        }
        None => (Value::Null, Value::Null),
    };
    let mut languages: BTreeMap<String, u64> = BTreeMap::new();
    let mut similar: Vec<String> = Vec::new();
    for (key, language) in files_under(conn, directory)? {
        let parent = parent_of(&key);
        if parent == directory || parent.starts_with(&format!("{directory}/")) {
            let language = debug_name(language.as_deref().unwrap_or_default()).to_lowercase();
            *languages.entry(language).or_default() += 1;
        }
        if parent == directory {
            similar.push(key);
        }
    }
    similar.sort();
    similar.truncate(SIMILAR_FILES);
    let language = languages
        .iter()
        .fold(None::<(&String, u64)>, |best, (lang, &n)| match best {
            Some((_, m)) if m >= n => best,
            _ => Some((lang, n)),
        })
        .map(|(lang, _)| lang.clone());
    Ok(json!({
        "operation": "create",
        "directory": directory,
        "language": language,
        "naming_convention": naming,
        "import_style": import_style(conn)?,
        "similar_files": similar,
        "recommended_pattern": pattern,
    }))
}

/// File keys (with languages) that can lie under `directory`: a key range scan when the
/// directory is a plain prefix, every file otherwise.
fn files_under(conn: &Connection, directory: &str) -> QueryResult<Vec<(String, Option<String>)>> {
    let map = |r: &rusqlite::Row| Ok((r.get(0)?, r.get(1)?));
    let rows = if directory.is_empty() || directory.ends_with('/') {
        conn.prepare_cached("SELECT key, language FROM files ORDER BY key")?
            .query_map([], map)?
            .collect::<rusqlite::Result<_>>()?
    } else {
        conn.prepare_cached(
            "SELECT key, language FROM files WHERE key >= ?1 || '/' AND key < ?1 || '0' ORDER BY key",
        )?
        .query_map([directory], map)?
        .collect::<rusqlite::Result<_>>()?
    };
    Ok(rows)
}

/// The `file_naming` rule for `directory`: an exact match, else the longest rule directory the
/// target starts with (the last one of equal length, as `max_by_key` picks).
fn naming_convention(
    conn: &Connection,
    directory: &str,
) -> QueryResult<Option<Map<String, Value>>> {
    let mut stmt = conn.prepare_cached(
        "SELECT directory, value_json FROM conventions WHERE kind = 'file_naming' ORDER BY id",
    )?;
    let rules: Vec<(Option<String>, String)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    let mut exact = None;
    let mut longest: Option<(usize, &String)> = None;
    for (dir, raw) in &rules {
        let Some(dir) = dir else { continue };
        if dir == directory && exact.is_none() {
            exact = Some(raw);
        }
        if directory.starts_with(dir.as_str()) && longest.is_none_or(|(len, _)| dir.len() >= len) {
            longest = Some((dir.len(), raw));
        }
    }
    let Some(raw) = exact.or(longest.map(|(_, raw)| raw)) else {
        return Ok(None);
    };
    match serde_json::from_str(raw)? {
        Value::Object(rule) => Ok(Some(rule)),
        _ => Ok(None),
    }
}

fn import_style(conn: &Connection) -> QueryResult<Value> {
    let raw: Option<String> = conn
        .prepare_cached(
            "SELECT value_json FROM conventions WHERE kind = 'imports' ORDER BY id LIMIT 1",
        )?
        .query_row([], |r| r.get(0))
        .optional()?;
    let Some(raw) = raw else {
        return Ok(Value::Null);
    };
    let imports: Value = serde_json::from_str(&raw)?;
    let member = |camel: &str, snake: &str| {
        imports
            .get(camel)
            .filter(|v| !v.is_null())
            .or_else(|| imports.get(snake).filter(|v| !v.is_null()))
            .cloned()
    };
    Ok(json!({
        "module_system": member("moduleSystem", "module_system")
            .and_then(|v| v.as_str().map(str::to_lowercase))
            .unwrap_or_else(|| "esm".into()),
        "path_style": member("pathStyle", "path_style")
            .and_then(|v| v.as_str().map(str::to_lowercase))
            .unwrap_or_else(|| "relative".into()),
        "index_exports": member("indexExports", "index_exports")
            .and_then(|v| v.as_bool())
            .unwrap_or(false),
    }))
}

/// A file entry's list member (`exports`, `imports`, `imported_by`) by exact key.
fn file_list(conn: &Connection, key: &str, column: &str) -> QueryResult<Option<Vec<Value>>> {
    let sql = format!("SELECT {column} FROM files WHERE key = ?1");
    let found: Option<Option<String>> = conn
        .prepare_cached(&sql)?
        .query_row([key], |r| r.get(0))
        .optional()?;
    Ok(
        found.map(|raw| match raw.map(|raw| serde_json::from_str(&raw)) {
            Some(Ok(Value::Array(items))) => items,
            _ => Vec::new(),
        }),
    )
}

fn modify(conn: &Connection, target: &str) -> QueryResult<Value> {
    let file = resolve_file(conn, target)?.key;
    let file = file.as_str();
    let importers = file_list(conn, file, "imported_by_json")?.unwrap_or_default();
    let symbols = file_list(conn, file, "exports_json")?.unwrap_or_default();
    let constraints: Option<(Option<String>, Option<String>)> = conn
        .prepare_cached(
            "SELECT CAST(json_extract(raw_json, '$.mutation.level') AS TEXT),
                    CAST(json_extract(raw_json, '$.mutation.reason') AS TEXT)
             FROM constraints WHERE key = ?1 AND json_type(raw_json, '$.mutation') = 'object'",
        )?
        .query_row([file], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    let constraints = match constraints {
        Some((level, reason)) => json!({
            "level": normalize_lock_level(level.as_deref().unwrap_or("normal")).replace('-', ""),
            "reason": reason,
        }),
        None => Value::Null,
    };
    Ok(json!({
        "operation": "modify",
        "file": file,
        "importer_count": importers.len(),
        "importers": importers,
        "constraints": constraints,
        "symbols": symbols,
        "domain": domain_listing(conn, file)?,
    }))
}

/// The first domain (by name) whose `files` list contains `file` exactly.
fn domain_listing(conn: &Connection, file: &str) -> QueryResult<Option<String>> {
    Ok(conn
        .prepare_cached(
            "SELECT d.key FROM domains d
             WHERE d.key IN (SELECT domain FROM domain_files WHERE path = ?2 AND source = 'domain')
               AND EXISTS (SELECT 1 FROM json_each(d.files_json) WHERE value = ?1)
             ORDER BY d.key LIMIT 1",
        )?
        .query_row(params![file, user_path(conn, file)?], |r| r.get(0))
        .optional()?)
}

/// `{name, purpose, type}` of the symbol with map key `key`, and its `file`.
fn debug_symbol(conn: &Connection, key: &str) -> QueryResult<Option<(Value, Option<String>)>> {
    Ok(conn
        .prepare_cached("SELECT name, purpose, type, file FROM symbols WHERE key = ?1")?
        .query_row([key], |r| {
            let summary = json!({
                "name": r.get::<_, Option<String>>(0)?,
                "purpose": r.get::<_, Option<String>>(1)?,
                "type": r.get::<_, Option<String>>(2)?.map(|k| k.to_lowercase()),
            });
            Ok((summary, r.get::<_, Option<String>>(3)?))
        })
        .optional()?)
}

/// What a `debug` target names: a file (by key or any spelling of its path) or a symbol (by
/// key, qualified name or unique simple name).
enum DebugTarget {
    File(String),
    Symbol(String),
}

/// Resolves a `debug` target. Exact keys win (files first, as in acp-mcp), then path
/// spellings, then symbol names; an ambiguous simple name lists its candidates, and an unknown
/// target is an error with the closest files and symbols.
fn debug_target(conn: &Connection, target: &str) -> QueryResult<DebugTarget> {
    let file = find_file(conn, target)?;
    if let Some(file) = file.as_ref().filter(|f| f.key == target) {
        return Ok(DebugTarget::File(file.key.clone()));
    }
    let symbol = find_symbol(conn, target)?;
    if let Some((symbol, SymbolMatch::Key)) = &symbol {
        return Ok(DebugTarget::Symbol(symbol.key.clone()));
    }
    if let Some(file) = file {
        return Ok(DebugTarget::File(file.key));
    }
    if let Some((symbol, _)) = symbol {
        return Ok(DebugTarget::Symbol(symbol.key));
    }
    // Nothing by any name: an ambiguous simple name lists its candidates, anything else gets
    // the closest files and symbols.
    let symbols = symbol_suggestions(conn, target)?;
    // A qualified name in a file that exists names a symbol of it: that file is the one to
    // suggest, not paths close to the whole name.
    let file_of_member = match split_qualified_name(target, None) {
        Some((path, _)) => find_file(conn, path)?,
        None => None,
    };
    let mut suggestions = match file_of_member {
        Some(file) => vec![file.path],
        None => suggest_files(conn, target)?,
    };
    for name in symbols {
        if suggestions.len() < MAX_SUGGESTIONS && !suggestions.contains(&name) {
            suggestions.push(name);
        }
    }
    Err(not_found(
        "Target (a file path or symbol name)",
        target,
        suggestions,
    ))
}

fn debug(conn: &Connection, target: &str) -> QueryResult<Value> {
    let (key, file, symbols) = match debug_target(conn, target)? {
        DebugTarget::File(file) => {
            let exports = file_list(conn, &file, "exports_json")?.unwrap_or_default();
            let mut symbols = Vec::new();
            for name in exports.iter().filter_map(Value::as_str) {
                if let Some((summary, _)) = debug_symbol(conn, name)? {
                    symbols.push(summary);
                }
            }
            (file.clone(), file, symbols)
        }
        DebugTarget::Symbol(key) => {
            let (summary, file) = debug_symbol(conn, &key)?
                .ok_or_else(|| QueryError::Internal(format!("symbol {key} vanished")))?;
            (key, file.unwrap_or_default(), vec![summary])
        }
    };
    let related = file_list(conn, &file, "imports_json")?.unwrap_or_default();
    Ok(json!({
        "operation": "debug",
        "target": target,
        "file": file,
        "related_files": related,
        "symbols": symbols,
        "hotpaths": debug_hotpaths(conn, &key, &file)?,
    }))
}

/// `graph.reverse` keys with at least 3 raw callers that equal `target` (a file or symbol key)
/// or occur in `file`. Candidates are the target and every substring of the path, probed
/// through the name index.
fn debug_hotpaths(conn: &Connection, target: &str, file: &str) -> QueryResult<Vec<String>> {
    let mut candidates: BTreeSet<&str> = BTreeSet::new();
    candidates.insert(target);
    let bounds: Vec<usize> = file
        .char_indices()
        .map(|(i, _)| i)
        .chain([file.len()])
        .collect();
    for (n, &start) in bounds.iter().enumerate() {
        for &end in &bounds[n..] {
            candidates.insert(&file[start..end]);
        }
    }
    let names = serde_json::to_string(&candidates)?;
    let found = conn
        .prepare_cached(
            "SELECT name FROM graph_nodes
             WHERE name IN (SELECT value FROM json_each(?1)) AND reverse_len >= ?2
             ORDER BY reverse_len DESC, name LIMIT ?3",
        )?
        .query_map(
            params![names, DEBUG_HOTPATH_CALLERS, DEBUG_HOTPATHS as i64],
            |r| r.get(0),
        )?
        .collect::<rusqlite::Result<_>>()?;
    Ok(found)
}

/// Explore's key files: the most-imported files first (index `files_imported_by_count`).
pub const KEY_FILES_SQL: &str = "SELECT key FROM files
     ORDER BY coalesce(json_array_length(imported_by_json), 0) DESC, key LIMIT ?1";

fn explore(conn: &Connection, filter: Option<&str>) -> QueryResult<Value> {
    let stats: Value = conn
        .prepare_cached("SELECT value_json FROM cache_root WHERE key = 'stats'")?
        .query_row([], |r| r.get::<_, Option<String>>(0))
        .optional()?
        .flatten()
        .map(|raw| serde_json::from_str(&raw))
        .transpose()?
        .unwrap_or(Value::Null);
    let stat = |camel: &str, snake: &str| {
        stats
            .get(camel)
            .filter(|v| !v.is_null())
            .or_else(|| stats.get(snake).filter(|v| !v.is_null()))
    };
    let count = |key: &str| stats.get(key).and_then(Value::as_u64).unwrap_or(0);
    let stats = json!({
        "files": count("files"),
        "symbols": count("symbols"),
        "lines": count("lines"),
        "primary_language": stat("primaryLanguage", "primary_language"),
        "annotation_coverage": stat("annotationCoverage", "annotation_coverage")
            .and_then(Value::as_f64)
            .unwrap_or(0.0),
    });
    let domains: Vec<Value> = conn
        .prepare_cached(
            "SELECT key, description, file_count, symbol_count
             FROM domains WHERE ?1 IS NULL OR instr(key, ?1) > 0 ORDER BY key",
        )?
        .query_map([filter], |r| {
            Ok(json!({
                "name": r.get::<_, String>(0)?,
                "description": r.get::<_, Option<String>>(1)?,
                "file_count": r.get::<_, i64>(2)?,
                "symbol_count": r.get::<_, i64>(3)?,
            }))
        })?
        .collect::<rusqlite::Result<_>>()?;
    let key_files: Vec<String> = conn
        .prepare_cached(KEY_FILES_SQL)?
        .query_map([KEY_FILES as i64], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    Ok(json!({
        "operation": "explore",
        "domain_filter": filter,
        "stats": stats,
        "domains": domains,
        "key_files": key_files,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parents_like_std_path() {
        assert_eq!(parent_of("./src/orders/tax.ts"), "./src/orders");
        assert_eq!(parent_of("tax.ts"), "");
        assert_eq!(parent_of("/tax.ts"), "/");
    }
}
