//! `acp_impact`: what a change touches and whether it may be made. From changed files, symbols
//! or a unified diff, the symbols changed, the symbols that call them (transitively, with one
//! shortest call path each), every touched or impacted file with its lock level and what
//! `acp_constraints` says of it, the domains and layers affected and the likely tests.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use rusqlite::{Connection, OptionalExtension};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::constraints::{can_modify, file_constraint, CanModify};
use super::cursor::{page_info, requested_page};
use super::names::{resolve_file, resolve_symbol, SymbolRef};
use super::{QueryError, QueryResult};
use crate::cache::paths::canonical_path;
pub use crate::cache::LOCK_LEVELS;

/// Default and largest caller depth.
pub const DEFAULT_DEPTH: u32 = 2;
/// Largest caller depth.
pub const MAX_DEPTH: u32 = 5;
/// Impacted symbols listed per page by default, and at most.
pub const DEFAULT_LIMIT: u32 = 100;
/// Most impacted symbols on one page.
pub const MAX_LIMIT: u32 = 500;
/// Call-graph nodes a walk visits at most; beyond, the totals say the walk was cut.
pub const MAX_VISITED: usize = 10_000;
/// Largest diff accepted, in bytes.
pub const MAX_DIFF_BYTES: usize = 16 << 20;

/// Arguments of `acp_impact`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub struct ImpactParams {
    /// Changed files: paths relative to the project root, in any spelling (`./src/a.ts`).
    #[serde(default)]
    pub files: Option<Vec<String>>,
    /// Changed symbols: qualified names, cache keys or unique simple names.
    #[serde(default)]
    pub symbols: Option<Vec<String>>,
    /// A unified diff (`git diff`): its hunks select the symbols whose lines they touch; new and
    /// deleted files count as touched.
    #[serde(default)]
    pub diff: Option<String>,
    /// Levels of callers to follow (default 2, at most 5).
    #[serde(default)]
    pub depth: Option<u32>,
    /// Impacted symbols per page (default 100, at most 500); 0 returns the totals only.
    #[serde(default)]
    pub limit: Option<u32>,
    /// The `next_cursor` of a previous answer, with the same other arguments.
    #[serde(default)]
    pub cursor: Option<String>,
}

/// A symbol the change touches directly.
#[derive(Debug, Clone, Serialize, PartialEq, JsonSchema)]
pub struct ChangedSymbol {
    /// Qualified name.
    pub name: String,
    /// Canonical file path.
    pub file: Option<String>,
    /// `[start, end]` lines.
    pub lines: Option<[i64; 2]>,
}

/// A symbol that calls a changed one, directly or through others.
#[derive(Debug, Clone, Serialize, PartialEq, JsonSchema)]
pub struct ImpactedSymbol {
    /// Qualified name (the call-graph name when it is not a known symbol).
    pub name: String,
    /// Calls between it and the nearest changed symbol (1: calls it directly).
    pub distance: u32,
    /// One shortest path of calls, from this symbol to the changed one.
    pub path: Vec<String>,
}

/// The impacted symbols of one file.
#[derive(Debug, Clone, Serialize, PartialEq, JsonSchema)]
pub struct ImpactedFile {
    /// Canonical path (`null` for call-graph names no file declares).
    pub file: Option<String>,
    /// Its impacted symbols on this page, nearest first.
    pub symbols: Vec<ImpactedSymbol>,
}

/// What the constraints say of one touched or impacted file.
#[derive(Debug, Clone, Serialize, PartialEq, JsonSchema)]
pub struct FileImpact {
    /// Canonical path.
    pub file: String,
    /// `touched` (the change is in it) or `impacted` (it calls into the change).
    pub role: &'static str,
    /// Strictest lock level declared for it (`normal` when none).
    pub lock_level: String,
    /// Whether and how it may be modified.
    pub can_modify: CanModify,
    /// Why it is locked, when the cache says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lock_reason: Option<String>,
    /// Its layer, when the cache says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub layer: Option<String>,
    /// Its domains.
    pub domains: Vec<String>,
    /// It is in the index (a new file of a diff is not).
    pub indexed: bool,
}

/// Counts, and what was cut.
#[derive(Debug, Clone, Serialize, PartialEq, JsonSchema)]
pub struct ImpactTotals {
    /// Files the change touches.
    pub touched_files: usize,
    /// Symbols the change touches.
    pub changed_symbols: usize,
    /// Impacted symbols found (all pages).
    pub impacted_symbols: usize,
    /// Files of the impacted symbols.
    pub impacted_files: usize,
    /// The walk stopped at the node limit (10,000) before reaching `depth`.
    pub walk_capped: bool,
    /// Depth walked.
    pub depth: u32,
}

/// Answer of `acp_impact`.
#[derive(Debug, Clone, Serialize, PartialEq, JsonSchema)]
pub struct ImpactResponse {
    /// The changed symbols.
    pub changed: Vec<ChangedSymbol>,
    /// One page of impacted symbols, grouped by file (empty with `limit: 0`).
    pub impacted: Vec<ImpactedFile>,
    /// Every touched file, then every impacted one, with its lock level and constraints.
    pub files: Vec<FileImpact>,
    /// Domains of touched and impacted files.
    pub domains: Vec<String>,
    /// Layers of touched and impacted files.
    pub layers: Vec<String>,
    /// Touched or impacted files that look like tests (`test`/`tests`/`spec`/`__tests__`
    /// directories, `*.test.*`, `*.spec.*`, `*_test.*`, `test_*.py`).
    pub likely_tests: Vec<String>,
    /// The strictest lock level among touched files.
    pub strictest_touched_lock: String,
    /// Counts and cuts.
    pub totals: ImpactTotals,
    /// More impacted symbols follow.
    pub truncated: bool,
    /// Cursor of the next page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// Rank of a lock level, 0 the strictest; unknown levels rank as `normal`.
pub fn lock_rank(level: &str) -> usize {
    LOCK_LEVELS
        .iter()
        .position(|l| *l == level)
        .unwrap_or_else(|| LOCK_LEVELS.iter().position(|l| *l == "normal").unwrap_or(0))
}

/// Whether a path looks like a test by the usual conventions.
pub fn looks_like_test(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    let mut parts = lower.split('/');
    let file = parts.next_back().unwrap_or_default();
    let in_test_dir = lower
        .split('/')
        .rev()
        .skip(1)
        .any(|d| matches!(d, "test" | "tests" | "spec" | "specs" | "__tests__"));
    in_test_dir
        || file.contains(".test.")
        || file.contains(".spec.")
        || file.contains("_test.")
        || (file.starts_with("test_") && file.ends_with(".py"))
}

/// A file section of a unified diff: the old and new paths and the old file's changed lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffFile {
    /// Path before the change (`None` for a new file).
    pub old_path: Option<String>,
    /// Path after the change (`None` for a deleted file).
    pub new_path: Option<String>,
    /// Line ranges `[start, end]` of the old file the hunks touch (for a pure insertion, the
    /// line it follows).
    pub old_ranges: Vec<[i64; 2]>,
}

fn diff_path(raw: &str) -> Option<String> {
    let raw = raw.split('\t').next().unwrap_or_default().trim();
    if raw == "/dev/null" {
        return None;
    }
    let raw = raw.trim_matches('"');
    Some(
        raw.strip_prefix("a/")
            .or_else(|| raw.strip_prefix("b/"))
            .unwrap_or(raw)
            .to_string(),
    )
}

/// The file sections of a unified diff (`git diff` or `diff -u`), with the old file's lines the
/// hunks change: removed lines, and for added lines the two lines they go between (context
/// lines are not changes). Lines outside file sections and hunks are skipped; a hunk header
/// that does not read `@@ -START[,COUNT] +START[,COUNT] @@` is an error naming its line.
pub fn parse_diff(text: &str) -> Result<Vec<DiffFile>, String> {
    let mut files: Vec<DiffFile> = Vec::new();
    let mut old_path: Option<Option<String>> = None;
    // Within a hunk: the next old line, and the old and new lines still to come.
    let mut old_line: i64 = 0;
    let mut remaining = (0i64, 0i64);
    // Added lines right after removed ones replace them; other added lines are insertions.
    let mut replacing = false;
    for (number, line) in text.lines().enumerate() {
        if remaining.0 > 0 || remaining.1 > 0 {
            let Some(file) = files.last_mut() else {
                break;
            };
            let mut mark = |range: [i64; 2]| match file.old_ranges.last_mut() {
                Some(last) if range[0] <= last[1] + 1 => last[1] = last[1].max(range[1]),
                _ => file.old_ranges.push(range),
            };
            match line.as_bytes().first() {
                Some(b'-') => {
                    mark([old_line, old_line]);
                    old_line += 1;
                    remaining.0 -= 1;
                    replacing = true;
                }
                Some(b'+') => {
                    if !replacing {
                        mark([(old_line - 1).max(1), old_line.max(1)]);
                    }
                    remaining.1 -= 1;
                }
                Some(b'\\') => {}
                _ => {
                    old_line += 1;
                    remaining.0 -= 1;
                    remaining.1 -= 1;
                    replacing = false;
                }
            }
            continue;
        }
        if let Some(rest) = line.strip_prefix("--- ") {
            old_path = Some(diff_path(rest));
        } else if let Some(rest) = line.strip_prefix("+++ ") {
            if let Some(old) = old_path.take() {
                files.push(DiffFile {
                    old_path: old,
                    new_path: diff_path(rest),
                    old_ranges: Vec::new(),
                });
            }
        } else if line.starts_with("@@ ") && !files.is_empty() {
            let ((old_start, old_count), (_, new_count)) =
                hunk_ranges(line).ok_or_else(|| {
                    format!(
                        "diff line {}: a malformed hunk header `{}` (expected `@@ -START[,COUNT] +START[,COUNT] @@`)",
                        number + 1,
                        line.chars().take(80).collect::<String>()
                    )
                })?;
            // `-l,0` is an insertion after line l.
            old_line = if old_count == 0 {
                old_start + 1
            } else {
                old_start
            };
            remaining = (old_count, new_count);
            replacing = false;
        }
    }
    Ok(files)
}

/// The old and new (start, count) of a hunk header `@@ -START[,COUNT] +START[,COUNT] @@ …`,
/// numbers without sign; `None` for anything else.
fn hunk_ranges(line: &str) -> Option<((i64, i64), (i64, i64))> {
    let mut parts = line.strip_prefix("@@ ")?.split(' ');
    let range = |part: &str, sign: char| -> Option<(i64, i64)> {
        let mut numbers = part.strip_prefix(sign)?.split(',');
        let number = |text: &str| -> Option<i64> {
            (!text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()))
                .then(|| text.parse().ok())
                .flatten()
        };
        let start = number(numbers.next()?)?;
        let count = match numbers.next() {
            Some(count) => number(count)?,
            None => 1,
        };
        numbers.next().is_none().then_some((start, count))
    };
    let old = range(parts.next()?, '-')?;
    let new = range(parts.next()?, '+')?;
    (parts.next()? == "@@").then_some((old, new))
}

/// The symbols of a file (by canonical path), with their lines.
fn file_symbols(conn: &Connection, path: &str) -> QueryResult<Vec<SymbolRef>> {
    let mut stmt = conn.prepare_cached(
        "SELECT id, key, name, coalesce(qualified_name, key), file_path, line_start, line_end, type
         FROM symbols WHERE file_path = ?1 ORDER BY line_start, name, id",
    )?;
    let rows = stmt.query_map([path], |r| {
        let start: Option<i64> = r.get(5)?;
        let end: Option<i64> = r.get(6)?;
        Ok(SymbolRef {
            id: r.get(0)?,
            key: r.get(1)?,
            name: r.get(2)?,
            qualified_name: r.get(3)?,
            file: r.get(4)?,
            lines: start.map(|s| [s, end.unwrap_or(s)]),
            kind: r.get(7)?,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// The changed symbols and touched files of a request.
fn changes(
    conn: &Connection,
    params: &ImpactParams,
) -> QueryResult<(Vec<SymbolRef>, BTreeMap<String, bool>)> {
    let mut symbols: Vec<SymbolRef> = Vec::new();
    // Touched files, canonical path → whether the index has them.
    let mut touched: BTreeMap<String, bool> = BTreeMap::new();
    for file in params.files.iter().flatten() {
        let found = resolve_file(conn, file)?;
        symbols.extend(file_symbols(conn, &found.path)?);
        touched.insert(found.path, true);
    }
    for name in params.symbols.iter().flatten() {
        let (symbol, _) = resolve_symbol(conn, name)?;
        if let Some(file) = &symbol.file {
            touched.entry(file.clone()).or_insert(true);
        }
        symbols.push(symbol);
    }
    if let Some(diff) = &params.diff {
        if diff.len() > MAX_DIFF_BYTES {
            return Err(QueryError::invalid(format!(
                "diff: {} bytes, more than the {} MiB accepted",
                diff.len(),
                MAX_DIFF_BYTES >> 20
            )));
        }
        let root = super::names::project_root(conn)?;
        let sections = parse_diff(diff).map_err(QueryError::invalid)?;
        if sections.is_empty() && !diff.trim().is_empty() {
            return Err(QueryError::invalid(
                "diff: no file section found (expected a unified diff, as `git diff` prints)",
            ));
        }
        for section in sections {
            let indexed_path = section
                .old_path
                .as_deref()
                .map(|p| canonical_path(p, root.as_deref()))
                .filter(|p| is_indexed(conn, p).unwrap_or(false));
            match (&indexed_path, &section.new_path) {
                (Some(path), Some(_)) => {
                    for symbol in file_symbols(conn, path)? {
                        let overlaps = symbol.lines.is_some_and(|[start, end]| {
                            section
                                .old_ranges
                                .iter()
                                .any(|[a, b]| *a <= end && start <= *b)
                        });
                        if overlaps {
                            symbols.push(symbol);
                        }
                    }
                    touched.insert(path.clone(), true);
                }
                // A deleted file: every symbol it had.
                (Some(path), None) => {
                    symbols.extend(file_symbols(conn, path)?);
                    touched.insert(path.clone(), true);
                }
                // A new file (or one the index does not have).
                (None, new) => {
                    if let Some(path) = new.as_deref().or(section.old_path.as_deref()) {
                        let path = canonical_path(path, root.as_deref());
                        let indexed = is_indexed(conn, &path)?;
                        if indexed {
                            symbols.extend(file_symbols(conn, &path)?);
                        }
                        touched.insert(path, indexed);
                    }
                }
            }
        }
    }
    if params.files.is_none() && params.symbols.is_none() && params.diff.is_none() {
        return Err(QueryError::invalid_with(
            "Give at least one of files, symbols or diff",
            serde_json::json!({"fields": ["files", "symbols", "diff"]}),
        ));
    }
    let mut seen = BTreeSet::new();
    symbols.retain(|s| seen.insert(s.id));
    Ok((symbols, touched))
}

fn is_indexed(conn: &Connection, path: &str) -> QueryResult<bool> {
    Ok(conn
        .prepare_cached("SELECT 1 FROM files WHERE path = ?1 LIMIT 1")?
        .query_row([path], |_| Ok(()))
        .optional()?
        .is_some())
}

/// One node reached by the walk.
struct Reached {
    distance: u32,
    /// The node it calls on a shortest path to a changed symbol (`None` for a start node).
    next: Option<i64>,
}

/// Breadth-first over callers from the nodes of the changed symbols, up to `depth` levels or
/// [`MAX_VISITED`] nodes. Returns every reached node and whether the walk was cut.
fn walk(
    conn: &Connection,
    starts: &[i64],
    depth: u32,
) -> QueryResult<(HashMap<i64, Reached>, bool)> {
    let mut reached: HashMap<i64, Reached> = HashMap::new();
    let mut queue = VecDeque::new();
    for &start in starts {
        reached.insert(
            start,
            Reached {
                distance: 0,
                next: None,
            },
        );
        queue.push_back(start);
    }
    let mut callers = conn.prepare_cached(
        "SELECT caller_id FROM call_edges WHERE callee_id = ?1 ORDER BY caller_id",
    )?;
    let mut capped = false;
    while let Some(node) = queue.pop_front() {
        let distance = reached[&node].distance;
        if distance >= depth {
            continue;
        }
        let ids: Vec<i64> = callers
            .query_map([node], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        for caller in ids {
            if reached.contains_key(&caller) {
                continue;
            }
            if reached.len() >= MAX_VISITED {
                capped = true;
                break;
            }
            reached.insert(
                caller,
                Reached {
                    distance: distance + 1,
                    next: Some(node),
                },
            );
            queue.push_back(caller);
        }
        if capped {
            break;
        }
    }
    Ok((reached, capped))
}

/// A call-graph node's display name and file: its symbol's qualified name and file when it
/// resolves to one, else its own name.
fn node_label(conn: &Connection, node: i64) -> QueryResult<(String, Option<String>)> {
    Ok(conn
        .prepare_cached(
            "SELECT coalesce(s.qualified_name, s.key, n.name), s.file_path
             FROM graph_nodes n LEFT JOIN symbols s ON s.id = n.symbol_id WHERE n.id = ?1",
        )?
        .query_row([node], |r| Ok((r.get(0)?, r.get(1)?)))?)
}

/// What the constraints, the files table and the domains say of one file.
fn file_impact(
    conn: &Connection,
    path: &str,
    role: &'static str,
    indexed: bool,
) -> QueryResult<FileImpact> {
    let key: Option<String> = conn
        .prepare_cached("SELECT key FROM files WHERE path = ?1 ORDER BY id LIMIT 1")?
        .query_row([path], |r| r.get(0))
        .optional()?;
    let constraint = file_constraint(conn, key.as_deref().unwrap_or(path), path)?;
    let lock_level = constraint
        .as_ref()
        .map(|c| c.lock_level.clone())
        .unwrap_or_else(|| "normal".to_string());
    let layer: Option<String> = conn
        .prepare_cached("SELECT layer FROM files WHERE path = ?1 AND layer IS NOT NULL LIMIT 1")?
        .query_row([path], |r| r.get(0))
        .optional()?;
    let domains = conn
        .prepare_cached("SELECT DISTINCT domain FROM domain_files WHERE path = ?1 ORDER BY domain")?
        .query_map([path], |r| r.get(0))?
        .collect::<rusqlite::Result<Vec<String>>>()?;
    Ok(FileImpact {
        file: path.to_string(),
        role,
        can_modify: can_modify(&lock_level),
        lock_reason: constraint.and_then(|c| c.lock_reason),
        lock_level,
        layer,
        domains,
        indexed,
    })
}

/// The cursor's query key: a digest of the arguments that select the change.
fn query_key(params: &ImpactParams) -> String {
    let mut hasher = Sha256::new();
    for part in [
        serde_json::to_string(&params.files).unwrap_or_default(),
        serde_json::to_string(&params.symbols).unwrap_or_default(),
        params.diff.clone().unwrap_or_default(),
    ] {
        hasher.update((part.len() as u64).to_le_bytes());
        hasher.update(part.as_bytes());
    }
    crate::hex::encode(&hasher.finalize()[..12])
}

/// Runs `acp_impact`.
pub fn acp_impact(conn: &Connection, params: &ImpactParams) -> QueryResult<ImpactResponse> {
    let depth = params.depth.unwrap_or(DEFAULT_DEPTH);
    if !(1..=MAX_DEPTH).contains(&depth) {
        return Err(QueryError::invalid_with(
            format!("depth: expected 1 to {MAX_DEPTH}, got {depth}"),
            serde_json::json!({"field": "depth", "minimum": 1, "maximum": MAX_DEPTH}),
        ));
    }
    if params.limit.is_some_and(|l| l > MAX_LIMIT) {
        return Err(QueryError::invalid_with(
            format!(
                "limit: expected 0 to {MAX_LIMIT}, got {}",
                params.limit.unwrap_or_default()
            ),
            serde_json::json!({"field": "limit", "minimum": 0, "maximum": MAX_LIMIT}),
        ));
    }
    let (changed, touched) = changes(conn, params)?;
    let mut starts: Vec<i64> = Vec::new();
    {
        let mut nodes = conn.prepare_cached("SELECT id FROM graph_nodes WHERE symbol_id = ?1")?;
        for symbol in &changed {
            for id in nodes.query_map([symbol.id], |r| r.get(0))? {
                starts.push(id?);
            }
        }
    }
    let (reached, capped) = walk(conn, &starts, depth)?;

    // Impacted: every reached node but the starts, nearest first, then by name.
    let mut labels: HashMap<i64, (String, Option<String>)> = HashMap::new();
    for &node in reached.keys() {
        labels.insert(node, node_label(conn, node)?);
    }
    let changed_names: BTreeSet<&str> = changed.iter().map(|s| s.qualified_name.as_str()).collect();
    let mut impacted: Vec<(u32, String, Option<String>, i64)> = reached
        .iter()
        .filter(|(_, r)| r.distance > 0)
        .map(|(&node, r)| {
            let (name, file) = labels[&node].clone();
            (r.distance, name, file, node)
        })
        .filter(|(_, name, _, _)| !changed_names.contains(name.as_str()))
        .collect();
    impacted.sort_by(|a, b| (a.0, &a.1, a.3).cmp(&(b.0, &b.1, b.3)));
    impacted.dedup_by(|a, b| a.1 == b.1 && a.2 == b.2);
    let impacted_files: BTreeSet<String> = impacted.iter().filter_map(|i| i.2.clone()).collect();

    // Files: touched first, then impacted, each with its constraints.
    let mut files = Vec::new();
    for (path, indexed) in &touched {
        files.push(file_impact(conn, path, "touched", *indexed)?);
    }
    for path in impacted_files.iter().filter(|p| !touched.contains_key(*p)) {
        files.push(file_impact(conn, path, "impacted", true)?);
    }
    let domains: BTreeSet<String> = files.iter().flat_map(|f| f.domains.clone()).collect();
    let layers: BTreeSet<String> = files.iter().filter_map(|f| f.layer.clone()).collect();
    let likely_tests: Vec<String> = files
        .iter()
        .map(|f| f.file.clone())
        .filter(|f| looks_like_test(f))
        .collect();
    let strictest_touched_lock = files
        .iter()
        .filter(|f| f.role == "touched")
        .map(|f| f.lock_level.clone())
        .min_by_key(|l| lock_rank(l))
        .unwrap_or_else(|| "normal".to_string());

    // One page of impacted symbols, with their paths, grouped by file in page order.
    let (page_items, truncated, next_cursor) = if params.limit == Some(0) {
        (Vec::new(), false, None)
    } else {
        let key = query_key(params);
        let page = requested_page(
            conn,
            "impact",
            &key,
            Some(depth),
            Some(params.limit.unwrap_or(DEFAULT_LIMIT)),
            params.cursor.as_deref(),
        )?;
        let start = usize::try_from(page.offset)
            .unwrap_or(usize::MAX)
            .min(impacted.len());
        let end = (start + page.limit as usize).min(impacted.len());
        let items = impacted[start..end].to_vec();
        let more = end < impacted.len();
        let info = page_info(
            conn,
            "impact",
            &key,
            Some(depth),
            page.next_offset(items.len()),
            more,
        )?;
        (items, info.truncated, info.next_cursor)
    };
    let mut grouped: Vec<ImpactedFile> = Vec::new();
    for (distance, name, file, node) in page_items {
        let mut path = vec![name.clone()];
        let mut at = reached[&node].next;
        while let Some(next) = at {
            path.push(labels[&next].0.clone());
            at = reached[&next].next;
        }
        let symbol = ImpactedSymbol {
            name,
            distance,
            path,
        };
        match grouped.iter_mut().find(|g| g.file == file) {
            Some(group) => group.symbols.push(symbol),
            None => grouped.push(ImpactedFile {
                file,
                symbols: vec![symbol],
            }),
        }
    }
    Ok(ImpactResponse {
        changed: changed
            .iter()
            .map(|s| ChangedSymbol {
                name: s.qualified_name.clone(),
                file: s.file.clone(),
                lines: s.lines,
            })
            .collect(),
        impacted: grouped,
        totals: ImpactTotals {
            touched_files: touched.len(),
            changed_symbols: changed.len(),
            impacted_symbols: impacted.len(),
            impacted_files: impacted_files.len(),
            walk_capped: capped,
            depth,
        },
        files,
        domains: domains.into_iter().collect(),
        layers: layers.into_iter().collect(),
        likely_tests,
        strictest_touched_lock,
        truncated,
        next_cursor,
    })
}

/// Whether `level` is at least as strict as `threshold` (both lock levels).
pub fn at_least_as_strict(level: &str, threshold: &str) -> bool {
    lock_rank(level) <= lock_rank(threshold)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diffs_give_old_line_ranges_new_and_deleted_files() {
        // Context lines 10 and 12 around an insertion after line 11; line 40 replaced; a removed
        // line that starts with "-- " (it reads like a file header but is inside a hunk).
        let diff = "diff --git a/src/a.ts b/src/a.ts\n--- a/src/a.ts\n+++ b/src/a.ts\n@@ -10,2 +10,3 @@ fn\n x\n+y\n z\n@@ -40,2 +41,1 @@\n-z\n--- sql comment\n+w\n--- /dev/null\n+++ b/src/new.ts\n@@ -0,0 +1,3 @@\n+a\n+b\n+c\n--- a/old.py\n+++ /dev/null\n@@ -1,5 +0,0 @@\n-1\n-2\n-3\n-4\n-5\n";
        let files = parse_diff(diff).unwrap();
        assert_eq!(files.len(), 3);
        assert_eq!(files[0].old_path.as_deref(), Some("src/a.ts"));
        assert_eq!(files[0].old_ranges, vec![[10, 11], [40, 41]]);
        assert_eq!(files[1].old_path, None);
        assert_eq!(files[1].new_path.as_deref(), Some("src/new.ts"));
        assert_eq!(files[2].new_path, None);
        assert_eq!(files[2].old_ranges, vec![[1, 5]]);
    }

    #[test]
    fn malformed_hunk_headers_are_errors_naming_their_line() {
        let header = |hunk: &str| format!("--- a/x.ts\n+++ b/x.ts\n{hunk}\n-a\n+b\n");
        for hunk in [
            "@@ -a,b +c,d @@",
            "@@ -1,-3 +1,2 @@",
            "@@ -1,3 @@",
            "@@ -1,3 +1,2",
            "@@ 1,3 +1,2 @@",
            "@@ -1,3,4 +1,2 @@",
        ] {
            let err = parse_diff(&header(hunk)).unwrap_err();
            assert!(
                err.starts_with("diff line 3: a malformed hunk header"),
                "{hunk}: {err}"
            );
        }
        for hunk in ["@@ -1,1 +1,1 @@", "@@ -1 +1 @@ fn main()"] {
            assert_eq!(parse_diff(&header(hunk)).unwrap().len(), 1, "{hunk}");
        }
    }

    #[test]
    fn test_paths_follow_the_usual_conventions() {
        for path in [
            "tests/a.rs",
            "src/__tests__/x.ts",
            "a/b.test.ts",
            "x.spec.js",
            "pkg/a_test.go",
            "test_x.py",
            "spec/models/user_spec.rb",
        ] {
            assert!(looks_like_test(path), "{path}");
        }
        for path in [
            "src/testing.rs",
            "src/contest.ts",
            "latest/a.py",
            "src/attest.py",
        ] {
            assert!(!looks_like_test(path), "{path}");
        }
    }

    #[test]
    fn lock_levels_rank_from_frozen() {
        assert!(at_least_as_strict("frozen", "approval-required"));
        assert!(at_least_as_strict("restricted", "approval-required"));
        assert!(!at_least_as_strict("normal", "approval-required"));
        assert!(!at_least_as_strict("whatever", "tests-required"));
    }
}
