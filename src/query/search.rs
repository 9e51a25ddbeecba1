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
//! within a tier by bm25, then by name and row id, so pages are stable. Each index source
//! contributes at most [`TOTAL_CAP`] + 1 candidates: beyond that `total` stops at the cap,
//! `total_capped` is set and ranking covers the candidates collected.

use rusqlite::types::{ToSql, Value as SqlValue};
use rusqlite::Connection;
use serde::Serialize;

use super::cursor::{page_info, Page};
use super::names::fts_quote;
use super::{QueryError, QueryResult};

/// Longest pattern accepted, in characters.
pub const MAX_PATTERN_CHARS: usize = 256;

/// Largest `total` reported exactly.
pub const TOTAL_CAP: u64 = 10_000;

/// One search hit: a preview with enough to ask for details (`acp_query` symbol or file).
#[derive(Debug, Clone, PartialEq, Serialize)]
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
#[derive(Debug, Clone, Serialize)]
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
#[derive(Debug, Clone, Serialize)]
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
    /// GLOB; candidates come from `run` (3+ literal characters, trigram) or else `prefix`.
    Glob {
        glob: String,
        run: Option<String>,
        prefix: Option<String>,
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
    let run = pattern
        .split(['*', '?'])
        .filter(|r| r.chars().count() >= 3)
        .max_by_key(|r| r.chars().count())
        .map(str::to_string);
    let prefix = pattern
        .split(['*', '?'])
        .next()
        .filter(|p| !p.is_empty())
        .map(str::to_string);
    if run.is_none() && prefix.is_none() {
        return Err(QueryError::invalid_with(
            format!(
                "Pattern too broad: {pattern}. A glob needs a literal prefix (validate*) or 3 consecutive literal characters (*Session)."
            ),
            serde_json::json!({"field": "pattern"}),
        ));
    }
    Ok(Plan::Glob {
        glob: pattern.to_ascii_lowercase().replace('[', "[[]"),
        run,
        prefix,
    })
}

const BASENAME: &str = "replace(f.path, rtrim(f.path, replace(f.path, '/', '')), '')";

/// SQL and parameters of one search.
struct Query {
    sources: Vec<String>,
    symbol_tier: String,
    file_tier: String,
    params: Vec<(&'static str, String)>,
}

fn build(plan: &Plan, pattern: &str) -> Query {
    let mut q = Query {
        sources: Vec::new(),
        symbol_tier: String::new(),
        file_tier: String::new(),
        params: vec![(":p", pattern.to_string())],
    };
    let fts = |table: &str, kind: u8, param: &str| {
        format!(
            "SELECT * FROM (SELECT {kind}, rowid, bm25({table}) FROM {table} WHERE {table} MATCH {param} LIMIT :cap)"
        )
    };
    match plan {
        Plan::Substring(text) | Plan::Short(text) => {
            q.sources
                .push("SELECT 0, id, 0.0 FROM symbols WHERE name = :p".into());
            if let Plan::Substring(_) = plan {
                q.sources.push(fts("symbols_trigram", 0, ":sq"));
                q.sources.push(fts("files_trigram", 1, ":fq"));
                q.params.push((":sq", fts_quote(text)));
                q.params.push((":fq", fts_quote(text)));
                if has_word_chars(text) {
                    q.sources.push(fts("symbols_fts", 0, ":sw"));
                    q.sources.push(fts("files_fts", 1, ":fw"));
                    q.params.push((
                        ":sw",
                        format!("{{signature purpose summary}} : {}", fts_quote(text)),
                    ));
                    q.params.push((
                        ":fw",
                        format!("{{module summary purpose}} : {}", fts_quote(text)),
                    ));
                }
            } else if has_word_chars(text) {
                q.sources.push(fts("symbols_fts", 0, ":sw"));
                q.sources.push(fts("files_fts", 1, ":fw"));
                q.params.push((":sw", format!("{} *", fts_quote(text))));
                q.params.push((":fw", format!("{} *", fts_quote(text))));
            }
            q.symbol_tier = "CASE WHEN s.name = :p THEN 0
                  WHEN lower(s.name) = lower(:p) THEN 1
                  WHEN substr(lower(s.name), 1, length(:p)) = lower(:p) THEN 2
                  WHEN instr(lower(s.name), lower(:p)) > 0 THEN 3
                  WHEN instr(lower(coalesce(s.qualified_name, s.key)), lower(:p)) > 0 THEN 4
                  ELSE 5 END"
                .into();
            q.file_tier = format!(
                "CASE WHEN lower({BASENAME}) = lower(:p) THEN 6
                  WHEN instr(lower({BASENAME}), lower(:p)) > 0 THEN 7
                  WHEN instr(lower(f.path), lower(:p)) > 0 THEN 8
                  ELSE 9 END"
            );
        }
        Plan::Glob { glob, run, prefix } => {
            let symbol_filter =
                "(lower(s.name) GLOB :g OR lower(coalesce(s.qualified_name, s.key)) GLOB :g)";
            let file_filter = format!("(lower(f.path) GLOB :g OR lower({BASENAME}) GLOB :g)");
            let joined = |table: &str, kind: u8, rows: &str, alias: &str, filter: &str| {
                format!(
                    "SELECT * FROM (SELECT {kind}, {table}.rowid, bm25({table}) FROM {table} JOIN {rows} {alias} ON {alias}.id = {table}.rowid
                     WHERE {table} MATCH :{alias}q AND {filter} LIMIT :cap)"
                )
            };
            q.params.push((":g", glob.clone()));
            match (run, prefix) {
                (Some(run), _) => {
                    q.sources
                        .push(joined("symbols_trigram", 0, "symbols", "s", symbol_filter));
                    q.sources
                        .push(joined("files_trigram", 1, "files", "f", &file_filter));
                    q.params.push((":sq", fts_quote(run)));
                    q.params.push((":fq", fts_quote(run)));
                }
                (None, Some(prefix)) if has_word_chars(prefix) => {
                    q.sources
                        .push(joined("symbols_fts", 0, "symbols", "s", symbol_filter));
                    q.sources
                        .push(joined("files_fts", 1, "files", "f", &file_filter));
                    q.params.push((
                        ":sq",
                        format!("{{name qualified_name}} : {} *", fts_quote(prefix)),
                    ));
                    q.params
                        .push((":fq", format!("path : {} *", fts_quote(prefix))));
                }
                _ => {}
            }
            q.symbol_tier = "CASE WHEN lower(s.name) GLOB :g THEN 2 ELSE 4 END".into();
            q.file_tier = format!("CASE WHEN lower({BASENAME}) GLOB :g THEN 7 ELSE 8 END");
        }
    }
    q
}

impl Query {
    fn with_tail(&self, tail: &str) -> String {
        format!(
            "WITH hits(kind, id, score) AS ({}),
             best(kind, id, score) AS (SELECT kind, id, min(score) FROM hits GROUP BY kind, id)
             {tail}",
            self.sources.join(" UNION ALL ")
        )
    }

    fn page_sql(&self) -> String {
        self.with_tail(&format!(
            ", ranked AS (
                 SELECT b.kind, b.id, b.score,
                        CASE WHEN b.kind = 0 THEN {} ELSE {} END AS tier,
                        CASE WHEN b.kind = 0 THEN coalesce(s.qualified_name, s.key) ELSE f.path END AS sort_key,
                        coalesce(s.name, s.key) AS name, coalesce(s.qualified_name, s.key) AS qname,
                        s.file_path, s.type, s.line_start, s.line_end, f.path AS path
                 FROM best b
                 LEFT JOIN symbols s ON b.kind = 0 AND s.id = b.id
                 LEFT JOIN files f ON b.kind = 1 AND f.id = b.id)
             SELECT kind, name, qname, file_path, type, line_start, line_end, path, count(*) OVER ()
             FROM ranked ORDER BY tier, score, sort_key, kind, id LIMIT :limit OFFSET :offset",
            self.symbol_tier, self.file_tier
        ))
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
    let query = build(&plan, pattern);
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
    let query = build(&plan, pattern);
    let mut matches = Vec::new();
    let mut count: Option<u64> = None;
    if !query.sources.is_empty() {
        let numbers = [
            (":cap", TOTAL_CAP as i64 + 1),
            (":limit", i64::from(page.limit)),
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
    let info = page_info(conn, "search", pattern, None, next, next < count)?;
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
                run: Some("Validate".into()),
                prefix: Some("Validate".into())
            }
        );
        assert_eq!(
            plan("v?[x]*").unwrap(),
            Plan::Glob {
                glob: "v?[[]x]*".into(),
                run: Some("[x]".into()),
                prefix: Some("v".into())
            }
        );
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
