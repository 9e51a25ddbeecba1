//! `acp_query` search: symbols and files by word, substring or glob, ranked and paged.
//!
//! Every pattern becomes FTS5 queries whose user text is always quoted, so FTS syntax in a
//! pattern (`"`, `(`, `:`, `-`, `NEAR`, `AND`, `*` inside words) is matched literally and never
//! reaches the FTS parser as syntax. Matching, case-insensitive:
//!
//! * **substring** (no `*` or `?`, at least 3 characters): symbols whose name or qualified name
//!   contains the pattern (trigram index) or whose signature, purpose or summary contains its
//!   words as a phrase; files whose path contains it or whose module, summary or purpose
//!   contains its words;
//! * **short** (1–2 characters, too short for trigrams): words starting with the pattern in any
//!   indexed symbol or file column;
//! * **glob** (`*` any run, `?` one character): the whole simple name or qualified name of a
//!   symbol, or the whole path or file name of a file, matches the glob. A glob needs a literal
//!   prefix (`validate*`) or 3 consecutive literal characters (`*Session`), which select the
//!   candidates through an index; other globs are refused as too broad.
//!
//! Regular expressions are not interpreted (their characters match literally). Ranking: exact
//! simple name (same case, then any case), name prefix, name substring, qualified-name
//! substring, text matches, then files (exact file name, file-name substring, path, text);
//! within a tier shorter names (or paths) first for substrings, bm25 for words, alphabetically
//! for globs, then by row id, so pages are stable. Sources are disjoint by tier and read best
//! tier first; collection stops after [`TOTAL_CAP`] + 1 hits (per source for 1–2 character
//! patterns, whose sources overlap), so `total` stops at the cap, `total_capped` is set and the
//! pages cover the first [`TOTAL_CAP`] hits in rank order.

use rusqlite::types::{ToSql, Value as SqlValue};
use rusqlite::Connection;
use serde::Serialize;

use super::cursor::{page_info, Page};
use super::fts_text::{fts_quote, trigram_query, trigram_query_ending};
use super::{QueryError, QueryResult};

/// Longest pattern accepted, in characters.
pub const MAX_PATTERN_CHARS: usize = 256;

/// Largest `total` reported exactly.
pub const TOTAL_CAP: u64 = 1_000;

/// One search hit: a preview with enough to ask for details (`acp_query` symbol or file).
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum SearchMatch {
    /// A symbol.
    Symbol {
        /// Simple name.
        name: String,
        /// Qualified name (pass it as `name` to the symbol query).
        qualified_name: String,
        /// Canonical file path.
        #[serde(skip_serializing_if = "Option::is_none")]
        file: Option<String>,
        /// Symbol type (`function`, `class`, ...).
        #[serde(skip_serializing_if = "Option::is_none")]
        symbol_type: Option<String>,
        /// `[start, end]` lines.
        #[serde(skip_serializing_if = "Option::is_none")]
        lines: Option<[i64; 2]>,
    },
    /// A file.
    File {
        /// File name (last path segment).
        name: String,
        /// Canonical path.
        path: String,
    },
}

/// The matches of one page and the facts about all of them.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct SearchResult {
    /// This page of matches, best first.
    pub matches: Vec<SearchMatch>,
    /// Number of matches (at most [`TOTAL_CAP`]).
    pub total: u64,
    /// Set when more than [`TOTAL_CAP`] candidates matched and `total` stopped at the cap.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub total_capped: bool,
    /// More matches follow this page.
    pub truncated: bool,
    /// Cursor of the next page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// Answer of `acp_query` type `search`.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct SearchResponse {
    /// Always `search`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The pattern searched.
    pub pattern: String,
    /// Matches and counts.
    pub result: SearchResult,
}

/// How a pattern is matched.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Plan {
    /// Substring / phrase search (3 or more characters).
    Substring(String),
    /// Word-prefix search (1 or 2 characters).
    Short(String),
    /// Glob over whole names and paths. `glob` is lower-cased with `[` escaped for SQLite's
    /// GLOB; candidates come from `prefix` (the literal text before the first wildcard) or
    /// from `runs` (every literal run of 3+ characters, all required of a trigram match), and
    /// `end` (the literal text after the last wildcard, 2+ characters and no NUL), which a
    /// matching name ends with.
    Glob {
        glob: String,
        runs: Vec<String>,
        prefix: Option<String>,
        end: Option<String>,
    },
}

fn has_word_chars(text: &str) -> bool {
    text.chars().any(|c| c.is_alphanumeric() || c == '_')
}

fn plan(pattern: &str) -> QueryResult<Plan> {
    let length = pattern.chars().count();
    if length > MAX_PATTERN_CHARS {
        return Err(QueryError::invalid_with(
            format!(
                "Pattern too long: {length} characters (max {MAX_PATTERN_CHARS}). Search for a distinctive part of the name instead."
            ),
            serde_json::json!({"field": "pattern"}),
        ));
    }
    if !pattern.contains(['*', '?']) {
        return Ok(if length >= 3 {
            Plan::Substring(pattern.to_string())
        } else {
            Plan::Short(pattern.to_string())
        });
    }
    let runs: Vec<String> = pattern
        .split(['*', '?'])
        .filter(|r| r.chars().count() >= 3)
        .map(str::to_string)
        .collect();
    let prefix = pattern
        .split(['*', '?'])
        .next()
        .filter(|p| !p.is_empty())
        .map(str::to_string);
    if runs.is_empty() && prefix.is_none() {
        return Err(QueryError::invalid_with(
            format!(
                "Pattern too broad: {pattern}. A glob needs a literal prefix (validate*) or 3 consecutive literal characters (*Session)."
            ),
            serde_json::json!({"field": "pattern"}),
        ));
    }
    let end = pattern
        .rsplit(['*', '?'])
        .next()
        .filter(|end| end.chars().count() >= 2 && !end.contains('\0'))
        .map(str::to_string);
    Ok(Plan::Glob {
        glob: pattern.to_ascii_lowercase().replace('[', "[[]"),
        runs,
        prefix,
        end,
    })
}

const BASENAME: &str = "replace(f.path, rtrim(f.path, replace(f.path, '/', '')), '')";

/// SQL and parameters of one search.
struct Query {
    /// Index sources, each a `SELECT` of [`HIT_COLUMNS`], best tiers first.
    sources: Vec<String>,
    params: Vec<(String, String)>,
    /// Whether sources may yield the same row (else they are disjoint and rows need no
    /// deduplication, so collection stops as soon as [`TOTAL_CAP`] + 1 hits are found).
    overlapping: bool,
}

/// Columns of a hit: kind (0 symbol, 1 file), row id, score and sort key (what orders a tier,
/// lowest first), tier. What a match shows is read for the rows of the page only.
const HIT_COLUMNS: &str = "kind, id, score, tier, sort_key";
const SYMBOL_SORT_KEY: &str = "coalesce(s.qualified_name, s.key)";
const FILE_SORT_KEY: &str = "f.path";
const QNAME: &str = "lower(coalesce(s.qualified_name, s.key))";
/// The qualified name as its case-insensitive index (`symbols_qualified_name`) holds it: a
/// range of it is a range of [`QNAME`].
const QNAME_NOCASE: &str = "coalesce(s.qualified_name, s.key) COLLATE NOCASE";
/// The simple name as its case-insensitive index (`symbols_name`) holds it.
const NAME_NOCASE: &str = "s.name COLLATE NOCASE";
/// Whether the simple name contains the pattern (case folded over all of Unicode), the check of
/// a trigram index's candidates; NULL without a name.
const NAME_CONTAINS: &str = "instr(acpdb_fold(s.name), acpdb_fold(:p)) > 0";
/// Whether the qualified name contains the pattern, likewise.
const QUALIFIED_NAME_CONTAINS: &str = "instr(acpdb_fold(s.qualified_name), acpdb_fold(:p)) > 0";
/// Whether the qualified name is the file path, a colon and the simple name (acp-cli's shape):
/// then `symbols_qname_trigram` holds only the characters around that colon, and the path and
/// the name are found through their own indexes (migration V18, whose view
/// `symbols_qname_terms` tests the same).
const JOINED_QUALIFIED_NAME: &str = "s.qualified_name = s.file_path || ':' || s.name";

/// A source of symbol rows from full-text index `table` matched by `param`, ordered within
/// their tier by `score` (lowest first).
fn symbol_source(table: &str, param: &str, score: &str, tier: &str, filter: &str) -> String {
    format!(
        "SELECT * FROM (SELECT 0, s.id, {score}, {tier}, {SYMBOL_SORT_KEY}
         FROM {table} JOIN symbols s ON s.id = {table}.rowid
         WHERE {table} MATCH {param} AND {filter} LIMIT :cap)"
    )
}

/// A source of symbol rows from the symbols of the paths that `symbol_files_trigram` matches by
/// `param`, read through the index `symbols_file_path`.
fn symbol_path_source(param: &str, score: &str, tier: &str, filter: &str) -> String {
    format!(
        "SELECT * FROM (SELECT 0, s.id, {score}, {tier}, {SYMBOL_SORT_KEY}
         FROM symbol_files_trigram JOIN symbol_files sf ON sf.id = symbol_files_trigram.rowid
         JOIN symbols s ON s.file_path = sf.path
         WHERE symbol_files_trigram MATCH {param} AND {filter} LIMIT :cap)"
    )
}

/// How a search matches the literal runs of its pattern in qualified names.
#[derive(Clone, Copy, PartialEq, Eq)]
enum RunMatch {
    /// A substring, case folded over all of Unicode (`acpdb_fold`); the simple names holding it
    /// are in the name tiers already.
    Substring,
    /// A glob's runs, ASCII case folded as SQL's `GLOB` on `lower()` compares them; the simple
    /// names holding the last run are read here too.
    Glob,
    /// A glob `*L` whose literal `L` holds no `:`, folded as [`RunMatch::Glob`]: a `path:name`
    /// qualified name ends with `L` only when its simple name does (the name tier's match) or
    /// its path holds a NUL (where `GLOB` stops reading), so only qualified names of other
    /// shapes and those paths are read here.
    GlobSuffix,
}

impl RunMatch {
    /// The SQL function that folds case as this match does.
    fn fold(self) -> &'static str {
        match self {
            RunMatch::Substring => "acpdb_fold",
            RunMatch::Glob | RunMatch::GlobSuffix => "lower",
        }
    }
}

/// The sources of tier 4: symbols whose qualified name holds every one of `runs` (3+
/// characters each) in order and passes `check`, each read once, ordered by `score`.
/// Qualified names of the `path:name` shape ([`JOINED_QUALIFIED_NAME`]) are found through
/// their parts: a match holds its last run in its name, or else in its path after every other
/// run, or spanning the colon. A span whose path side has 3+ characters and more than the name
/// side (`session.go:`) is looked up as that text in the path, any other through the characters
/// around the colon (`symbols_qname_trigram`, which holds every other qualified name whole).
/// The part is decided with the case folding of `matching`, so that the text matched is always
/// one the trigram indexes hold (FTS5 leaves a few letters, such as `İ`, unfolded, which
/// `acpdb_fold` folds). For a substring, `check` must leave out the names holding it.
fn qualified_name_sources(
    q: &mut Query,
    runs: &[String],
    end: Option<&str>,
    score: &str,
    check: &str,
    matching: RunMatch,
) {
    let Some((last, earlier)) = runs.split_last() else {
        return;
    };
    let fold = matching.fold();
    let last_param = q.param(":qr", last.as_str());
    let in_name = format!("instr({fold}(s.name), {fold}({last_param})) > 0");
    // Where in the path a match may hold the last run (whole, or its part before a colon).
    let chars: Vec<char> = last.chars().collect();
    let mut path_texts = vec![last.clone()];
    let mut spans = Vec::new();
    for (k, _) in chars.iter().enumerate().filter(|&(_, &c)| c == ':') {
        if k >= 3 && k > chars.len() - k - 1 {
            path_texts.push(chars[..k].iter().collect());
        } else {
            spans.push(
                chars[k.saturating_sub(2)..(k + 3).min(chars.len())]
                    .iter()
                    .collect::<String>(),
            );
        }
    }
    let earlier_params: Vec<String> = (earlier.iter().enumerate())
        .map(|(i, run)| q.param(format!(":qe{i}"), run.as_str()))
        .collect();
    let alternative_params: Vec<String> = (path_texts.iter().enumerate())
        .map(|(i, text)| q.param(format!(":qa{i}"), text.as_str()))
        .collect();
    // Whether the path (`column`) holds every earlier run and the last run or its part before a
    // colon.
    let in_paths = |column: &str| -> String {
        let holds = |p: &String| format!("instr({fold}({column}), {fold}({p})) > 0");
        let alternatives: Vec<String> = alternative_params.iter().map(holds).collect();
        (earlier_params.iter().map(holds))
            .chain([format!("({})", alternatives.join(" OR "))])
            .collect::<Vec<_>>()
            .join(" AND ")
    };
    let group = |text: &str| format!("({})", trigram_query([text]));
    let alternatives = path_texts
        .iter()
        .map(|text| group(text))
        .collect::<Vec<_>>()
        .join(" OR ");
    let path_query = match earlier {
        [] => format!("({alternatives})"),
        _ => format!(
            "({}) AND ({alternatives})",
            trigram_query(earlier.iter().map(String::as_str))
        ),
    };
    // Only a suffix glob reads no `path:name` name here, whose terms do not end as it does.
    let whole_end = end.filter(|_| matching == RunMatch::GlobSuffix);
    let whole_query = std::iter::once(format!(
        "({})",
        trigram_query_ending(runs.iter().map(String::as_str), whole_end)
    ))
    .chain(spans.iter().map(|span| group(span)))
    .collect::<Vec<_>>()
    .join(" OR ");
    // A substring's `check` already leaves out the names holding it.
    let (not_in_name, in_name_or) = match matching {
        RunMatch::Glob | RunMatch::GlobSuffix => {
            if matching == RunMatch::Glob {
                // No ending here: `GLOB` reads a text up to its first NUL, so a path holding one
                // can end a `path:name` name's text where its simple name does not.
                let query = q.param(":qn", trigram_query([last.as_str()]));
                q.sources.push(symbol_source(
                    "symbols_name_trigram",
                    &query,
                    score,
                    "4",
                    &format!("{check} AND coalesce({JOINED_QUALIFIED_NAME}, 0) AND {in_name}"),
                ));
            }
            (
                format!(" AND NOT coalesce({in_name}, 0)"),
                format!("{in_name} OR "),
            )
        }
        RunMatch::Substring => (String::new(), String::new()),
    };
    // A suffix glob reads here only the paths holding a NUL, where `GLOB` stops reading a
    // `path:name` name, which may then end with the glob's text where its simple name does not.
    let nul_path = match matching {
        RunMatch::GlobSuffix => "instr(sf.path, char(0)) > 0 AND ",
        RunMatch::Glob | RunMatch::Substring => "",
    };
    let query = q.param(":qp", path_query);
    q.sources.push(symbol_path_source(
        &query,
        score,
        "4",
        // The path is checked once per path (`sf.path`), not once per symbol.
        &format!(
            "{nul_path}{JOINED_QUALIFIED_NAME} AND {} AND {check}{not_in_name}",
            in_paths("sf.path")
        ),
    ));
    let query = q.param(":qt", whole_query);
    q.sources.push(symbol_source(
        "symbols_qname_trigram",
        &query,
        score,
        "4",
        &format!(
            "{check} AND NOT coalesce({JOINED_QUALIFIED_NAME} AND ({in_name_or}({})), 0)",
            in_paths("s.file_path")
        ),
    ));
}

/// A source of file rows from full-text index `table` matched by `param`, ordered within their
/// tier by `score` (lowest first).
fn file_source(table: &str, param: &str, score: &str, tier: &str, filter: &str) -> String {
    format!(
        "SELECT * FROM (SELECT 1, f.id, {score}, {tier}, {FILE_SORT_KEY}
         FROM {table} JOIN files f ON f.id = {table}.rowid
         WHERE {table} MATCH {param} AND {filter} LIMIT :cap)"
    )
}

/// A source of symbol rows whose `range` (an expression a case-insensitive index holds)
/// starts with `:lo` (lower-cased).
///
/// Rows are ordered within their tier by `key`, the lower-cased `range`, so a simple-name range
/// is read from the index alone.
fn symbol_prefix_source(range: &str, key: &str, tier: u8, filter: &str) -> String {
    format!(
        "SELECT * FROM (SELECT 0, s.id, 0.0, {tier}, {key} FROM symbols s
         WHERE {range} >= :lo AND {range} < :lo || char(1114111) AND {filter} LIMIT :cap)"
    )
}

/// Qualified names in a glob's prefix range beyond which the range is not worth reading
/// (`src*Report` would scan every `src/…` name): the literal runs go through trigrams.
const QNAME_RANGE_LIMIT: i64 = 5_000;

/// Whether few enough qualified names start with the glob's literal prefix to read them all
/// from the index (counts at most [`QNAME_RANGE_LIMIT`] index entries, and only when trigrams
/// are the alternative).
fn narrow_qname_prefix(conn: &Connection, plan: &Plan) -> QueryResult<bool> {
    // Without a literal run the range is read anyway: nothing to decide.
    let Plan::Glob {
        prefix: Some(prefix),
        runs,
        ..
    } = plan
    else {
        return Ok(false);
    };
    if runs.is_empty() {
        return Ok(true);
    }
    let n: i64 = conn
        .prepare_cached(&format!(
            "SELECT count(*) FROM (SELECT 1 FROM symbols s
             WHERE {QNAME_NOCASE} >= ?1 AND {QNAME_NOCASE} < ?1 || char(1114111) LIMIT ?2)"
        ))?
        .query_row(
            rusqlite::params![prefix.to_ascii_lowercase(), QNAME_RANGE_LIMIT],
            |r| r.get(0),
        )?;
    Ok(n < QNAME_RANGE_LIMIT)
}

/// The sources of `plan`; `narrow_qname_prefix` says whether a glob's qualified-name matches
/// are read from the prefix range (else through the trigram index).
fn build(plan: &Plan, pattern: &str, narrow_qname_prefix: bool) -> Query {
    let mut q = Query {
        sources: Vec::new(),
        params: vec![(":p".into(), pattern.to_string())],
        overlapping: false,
    };
    match plan {
        Plan::Substring(text) => {
            // Disjoint sources by tier: exact name; name contains; qualified name contains
            // (and the name does not); words of signature, purpose or summary (and neither name
            // contains the pattern); then files likewise. The trigram indexes give candidates and
            // containment is checked on the row (case folded over all of Unicode), so each
            // row lands in exactly one source. The word sources are read only when the trigram sources held fewer hits than the cap,
            // so the sets they exclude are small.
            let name_tier = "CASE WHEN lower(s.name) = lower(:p) THEN 1
                  WHEN substr(lower(s.name), 1, length(:p)) = lower(:p) THEN 2 ELSE 3 END";
            let quoted = fts_quote(text);
            q.sources.push(format!(
                "SELECT * FROM (SELECT 0, s.id, 0.0, 0, {SYMBOL_SORT_KEY}
                 FROM symbols s WHERE s.name = :p COLLATE NOCASE AND s.name = :p LIMIT :cap)"
            ));
            q.sources.push(symbol_source(
                "symbols_name_trigram",
                ":st",
                "length(s.name)",
                name_tier,
                &format!("{NAME_CONTAINS} AND s.name IS NOT :p"),
            ));
            q.param(":st", trigram_query([text.as_str()]));
            qualified_name_sources(
                &mut q,
                std::slice::from_ref(text),
                None,
                "length(coalesce(s.qualified_name, s.key))",
                &format!("{QUALIFIED_NAME_CONTAINS} AND NOT coalesce({NAME_CONTAINS}, 0)"),
                RunMatch::Substring,
            );
            if has_word_chars(text) {
                q.sources.push(symbol_source(
                    "symbols_fts",
                    ":sw",
                    "bm25(symbols_fts)",
                    "5",
                    &format!(
                        "NOT coalesce({NAME_CONTAINS}, 0) AND NOT coalesce({QUALIFIED_NAME_CONTAINS}, 0)"
                    ),
                ));
                q.param(":sw", format!("{{signature purpose summary}} : {quoted}"));
            }
            let file_tier = format!(
                "CASE WHEN lower({BASENAME}) = lower(:p) THEN 6
                  WHEN instr(lower({BASENAME}), lower(:p)) > 0 THEN 7 ELSE 8 END"
            );
            q.sources.push(file_source(
                "files_trigram",
                ":fq",
                "length(f.path)",
                &file_tier,
                "1",
            ));
            q.param(":fq", quoted.clone());
            if has_word_chars(text) {
                q.sources.push(file_source(
                    "files_fts",
                    ":fw",
                    "bm25(files_fts)",
                    "9",
                    "f.id NOT IN (SELECT rowid FROM files_trigram WHERE files_trigram MATCH :fq)",
                ));
                q.param(":fw", format!("{{module summary purpose}} : {quoted}"));
            }
        }
        Plan::Short(text) => {
            q.overlapping = true;
            let symbol_tier = format!(
                "CASE WHEN s.name = :p THEN 0
                  WHEN lower(s.name) = lower(:p) THEN 1
                  WHEN substr(lower(s.name), 1, length(:p)) = lower(:p) THEN 2
                  WHEN instr(lower(s.name), lower(:p)) > 0 THEN 3
                  WHEN instr({QNAME}, lower(:p)) > 0 THEN 4
                  ELSE 5 END"
            );
            let file_tier = format!(
                "CASE WHEN lower({BASENAME}) = lower(:p) THEN 6
                  WHEN instr(lower({BASENAME}), lower(:p)) > 0 THEN 7
                  WHEN instr(lower(f.path), lower(:p)) > 0 THEN 8
                  ELSE 9 END"
            );
            q.sources.push(format!(
                "SELECT * FROM (SELECT 0, s.id, 0.0, {symbol_tier}, {SYMBOL_SORT_KEY}
                 FROM symbols s WHERE s.name = :p COLLATE NOCASE AND s.name = :p LIMIT :cap)"
            ));
            if has_word_chars(text) {
                q.sources.push(symbol_source(
                    "symbols_fts",
                    ":sw",
                    "bm25(symbols_fts)",
                    &symbol_tier,
                    "1",
                ));
                q.sources.push(file_source(
                    "files_fts",
                    ":fw",
                    "bm25(files_fts)",
                    &file_tier,
                    "1",
                ));
                q.param(":sw", format!("{} *", fts_quote(text)));
                q.param(":fw", format!("{} *", fts_quote(text)));
            }
        }
        Plan::Glob {
            glob,
            runs,
            prefix,
            end,
        } => {
            // Disjoint sources by tier: simple name matches; qualified name matches (and the
            // simple name does not); file name matches; path matches.
            q.param(":g", glob.clone());
            let name_glob = "lower(s.name) GLOB :g";
            let qname_glob = format!("{QNAME} GLOB :g AND NOT coalesce({name_glob}, 0)");
            // Every literal run of 3+ characters, and the ending, required of a trigram index's
            // candidates.
            q.param(
                ":st",
                trigram_query_ending(runs.iter().map(String::as_str), end.as_deref()),
            );
            let all_runs = || {
                runs.iter()
                    .map(|r| fts_quote(r))
                    .collect::<Vec<_>>()
                    .join(" AND ")
            };
            // Simple names: a literal prefix selects a range of the lower-cased name index,
            // read from the index alone; without one, the literal runs go through trigrams.
            // Qualified names: the prefix range when it is narrow (`src/auth/*`), else the
            // trigrams of every literal run (`src*Report` by `report`, not by all of `src`).
            if let Some(prefix) = prefix {
                q.param(":lo", prefix.to_ascii_lowercase());
                // A glob that is its prefix and a final `*` matches exactly the names in the
                // range (both fold ASCII case only), so the range needs no glob check per row.
                let only_prefix = pattern.strip_suffix('*') == Some(prefix.as_str());
                q.sources.push(symbol_prefix_source(
                    NAME_NOCASE,
                    "lower(s.name)",
                    2,
                    if only_prefix { "1" } else { name_glob },
                ));
            } else if !runs.is_empty() {
                q.sources.push(symbol_source(
                    "symbols_name_trigram",
                    ":st",
                    "0.0",
                    "2",
                    name_glob,
                ));
            }
            if prefix.is_some() && (narrow_qname_prefix || runs.is_empty()) {
                q.sources
                    .push(symbol_prefix_source(QNAME_NOCASE, QNAME, 4, &qname_glob));
            } else {
                let suffix = pattern.strip_prefix('*').is_some_and(|rest| {
                    matches!(runs.as_slice(), [run] if run == rest) && !rest.contains(':')
                });
                let matching = if suffix {
                    RunMatch::GlobSuffix
                } else {
                    RunMatch::Glob
                };
                qualified_name_sources(&mut q, runs, end.as_deref(), "0.0", &qname_glob, matching);
            }
            let base_glob = format!("lower({BASENAME}) GLOB :g");
            let path_glob = format!("lower(f.path) GLOB :g AND NOT {base_glob}");
            let file_index = match (runs.is_empty(), prefix) {
                (false, _) => Some(("files_trigram", all_runs())),
                (true, Some(prefix)) if has_word_chars(prefix) => {
                    Some(("files_fts", format!("path : {} *", fts_quote(prefix))))
                }
                _ => None,
            };
            if let Some((table, query)) = file_index {
                q.sources
                    .push(file_source(table, ":fq", "0.0", "7", &base_glob));
                q.sources
                    .push(file_source(table, ":fq", "0.0", "8", &path_glob));
                q.param(":fq", query);
            }
        }
    }
    q
}

impl Query {
    /// Adds parameter `name` with `value`; returns the name, for the SQL.
    fn param(&mut self, name: impl Into<String>, value: impl Into<String>) -> String {
        let name = name.into();
        self.params.push((name.clone(), value.into()));
        name
    }

    /// `tail` after the hits of every source as `best`: at most [`TOTAL_CAP`] + 1 rows per
    /// source when sources overlap (a row found twice keeps its best score), else at most
    /// [`TOTAL_CAP`] + 1 in all, taken from the best tiers first.
    fn with_tail(&self, tail: &str) -> String {
        let union = self.sources.join(" UNION ALL ");
        if self.overlapping {
            format!(
                "WITH hits({HIT_COLUMNS}) AS ({union}),
                 best AS (SELECT kind, id, min(score) AS score, tier, sort_key
                          FROM hits GROUP BY kind, id)
                 {tail}"
            )
        } else {
            format!(
                "WITH best({HIT_COLUMNS}) AS (SELECT * FROM ({union}) LIMIT :cap)
                 {tail}"
            )
        }
    }

    fn page_sql(&self) -> String {
        self.with_tail(
            "SELECT b.kind, coalesce(s.name, s.key), coalesce(s.qualified_name, s.key), s.file_path,
                    s.type, s.line_start, s.line_end, f.path, b.total
             FROM (SELECT *, count(*) OVER () AS total FROM best
                   ORDER BY tier, score, sort_key, kind, id LIMIT :limit OFFSET :offset) b
             LEFT JOIN symbols s ON b.kind = 0 AND s.id = b.id
             LEFT JOIN files f ON b.kind = 1 AND f.id = b.id
             ORDER BY b.tier, b.score, b.sort_key, b.kind, b.id",
        )
    }

    /// Binds the parameters that `sql` uses.
    fn bind<'a>(
        &'a self,
        sql: &str,
        numbers: &'a [(&'static str, i64)],
    ) -> Vec<(&'a str, &'a dyn ToSql)> {
        let mut out: Vec<(&str, &dyn ToSql)> = Vec::new();
        for (name, value) in &self.params {
            if contains_param(sql, name) {
                out.push((name, value as &dyn ToSql));
            }
        }
        for (name, value) in numbers {
            if contains_param(sql, name) {
                out.push((name, value as &dyn ToSql));
            }
        }
        out
    }
}

fn contains_param(sql: &str, name: &str) -> bool {
    sql.match_indices(name).any(|(i, _)| {
        !sql[i + name.len()..]
            .chars()
            .next()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

/// The SQL of one search page and its parameters, exposed for query-plan checks.
pub fn page_statement(pattern: &str) -> QueryResult<(String, Vec<(String, SqlValue)>)> {
    let plan = plan(pattern)?;
    let query = build(&plan, pattern, true);
    let sql = query.page_sql();
    let mut params: Vec<(String, SqlValue)> = query
        .params
        .iter()
        .filter(|(name, _)| contains_param(&sql, name))
        .map(|(n, v)| (n.to_string(), SqlValue::Text(v.clone())))
        .collect();
    for name in [":cap", ":limit", ":offset"] {
        params.push((name.to_string(), SqlValue::Integer(20)));
    }
    Ok((sql, params))
}

/// `acp_query` search: one page of matches for `pattern`.
pub fn search(conn: &Connection, pattern: &str, page: Page) -> QueryResult<SearchResponse> {
    let plan = plan(pattern)?;
    let narrow = narrow_qname_prefix(conn, &plan)?;
    let query = build(&plan, pattern, narrow);
    let mut matches = Vec::new();
    let mut count: Option<u64> = None;
    if !query.sources.is_empty() {
        // Pages end at the cap: the hit past it only says that `total` stopped there.
        let room = TOTAL_CAP.saturating_sub(page.offset);
        let numbers = [
            (":cap", TOTAL_CAP as i64 + 1),
            (":limit", i64::from(page.limit).min(room as i64)),
            (":offset", page.offset as i64),
        ];
        let sql = query.page_sql();
        let mut stmt = conn.prepare_cached(&sql)?;
        let mut rows = stmt.query(query.bind(&sql, &numbers).as_slice())?;
        while let Some(row) = rows.next()? {
            count = Some(row.get::<_, i64>(8)? as u64);
            let kind: i64 = row.get(0)?;
            if kind == 0 {
                let start: Option<i64> = row.get(5)?;
                let end: Option<i64> = row.get(6)?;
                matches.push(SearchMatch::Symbol {
                    name: row.get(1)?,
                    qualified_name: row.get(2)?,
                    file: row.get(3)?,
                    symbol_type: row.get(4)?,
                    lines: start.map(|s| [s, end.unwrap_or(s)]),
                });
            } else {
                let path: String = row.get(7)?;
                matches.push(SearchMatch::File {
                    name: path.rsplit('/').next().unwrap_or(&path).to_string(),
                    path,
                });
            }
        }
        if count.is_none() && page.offset > 0 {
            let sql = query.with_tail("SELECT count(*) FROM best");
            let n: i64 = conn
                .prepare_cached(&sql)?
                .query_row(query.bind(&sql, &numbers).as_slice(), |r| r.get(0))?;
            count = Some(n as u64);
        }
    }
    let count = count.unwrap_or(0);
    let next = page.next_offset(matches.len());
    let info = page_info(
        conn,
        "search",
        pattern,
        None,
        next,
        next < count.min(TOTAL_CAP),
    )?;
    Ok(SearchResponse {
        kind: "search",
        pattern: pattern.to_string(),
        result: SearchResult {
            matches,
            total: count.min(TOTAL_CAP),
            total_capped: count > TOTAL_CAP,
            truncated: info.truncated,
            next_cursor: info.next_cursor,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans() {
        assert_eq!(plan("session").unwrap(), Plan::Substring("session".into()));
        assert_eq!(plan("ab").unwrap(), Plan::Short("ab".into()));
        assert_eq!(
            plan("Validate*").unwrap(),
            Plan::Glob {
                glob: "validate*".into(),
                runs: vec!["Validate".into()],
                prefix: Some("Validate".into()),
                end: None,
            }
        );
        assert_eq!(
            plan("v?[x]*").unwrap(),
            Plan::Glob {
                glob: "v?[[]x]*".into(),
                runs: vec!["[x]".into()],
                prefix: Some("v".into()),
                end: None,
            }
        );
        assert_eq!(
            plan("*Valid?tor*Session").unwrap(),
            Plan::Glob {
                glob: "*valid?tor*session".into(),
                runs: vec!["Valid".into(), "tor".into(), "Session".into()],
                prefix: None,
                end: Some("Session".into()),
            }
        );
        let end = |glob: &str| match plan(glob).unwrap() {
            Plan::Glob { end, .. } => end,
            other => panic!("{glob}: {other:?}"),
        };
        assert_eq!(end("*Session*id").as_deref(), Some("id"));
        for no_end in ["*Session*d", "*Session?", "*Sess\0on"] {
            assert_eq!(end(no_end), None, "{no_end}");
        }
        assert!(plan("*").is_err());
        assert!(plan("*a?").is_err());
        assert!(plan(&"x".repeat(MAX_PATTERN_CHARS + 1)).is_err());
    }

    #[test]
    fn parameter_detection_respects_name_boundaries() {
        assert!(contains_param("a = :p AND", ":p"));
        assert!(!contains_param("a = :path", ":p"));
        assert!(contains_param("x(:p)", ":p"));
    }
}
