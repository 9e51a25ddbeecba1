//! `acp_query` (RFC-0013 §5.1): one entry point for symbol, file, domain, callers, callees,
//! search and stats queries.
//!
//! Lists are paged: `limit` bounds each page, `truncated` says more follows and `next_cursor`,
//! passed back as `cursor`, fetches the next page. A cursor remembers its query (type, name or
//! pattern, depth), so a follow-up call needs only `type` and `cursor`; parameters given with a
//! cursor must match the ones it was issued for.

use rusqlite::Connection;
use serde::{Deserialize, Serialize};

use super::cursor::{depth_mismatch, Cursor, Page, MAX_DEPTH};
use super::graph::{relations, resolve_endpoint, walk_is_small, Direction, RelationsResponse};
use super::lookup::{domain, file, stats, symbol, EntryResponse, StatsResponse, SymbolResponse};
use super::search::{search, SearchResponse};
use super::{QueryError, QueryResult};

/// Default page size.
pub const DEFAULT_LIMIT: u32 = 20;

/// Largest page size.
pub const MAX_LIMIT: u32 = 100;

/// The query types.
pub const QUERY_TYPES: &[&str] = &[
    "symbol", "file", "domain", "callers", "callees", "search", "stats",
];

/// Parameters of `acp_query`.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
pub struct QueryParams {
    /// Query type: `symbol` (symbol details with direct callers/callees), `file` (file entry with
    /// its symbols), `domain` (domain with its files), `callers` / `callees` (call-graph
    /// neighbours up to `depth` hops), `search` (symbols and files matching `pattern`), `stats`
    /// (codebase overview).
    #[serde(rename = "type")]
    #[schemars(with = "String", extend("enum" = ["symbol", "file", "domain", "callers", "callees", "search", "stats"]))]
    pub query_type: Option<String>,
    /// Name for symbol/file/domain/callers/callees queries: a qualified name
    /// (`src/auth/session.ts:validateSession`), a cache key or a unique simple name for symbols;
    /// a path relative to the project root for files; the exact domain name.
    pub name: Option<String>,
    /// Search pattern: words or a substring (`session`), or a glob with `*` / `?`
    /// (`validate*`, `*Session`). Case-insensitive; regular expressions are not interpreted.
    pub pattern: Option<String>,
    /// Most results per page (1-100, default 20). With search, callers or callees, 0 returns
    /// the totals only (to check that a result is small before fetching it).
    #[schemars(extend("type" = "integer", "minimum" = 0, "maximum" = 100, "default" = 20))]
    pub limit: Option<i64>,
    /// Hops to follow for callers/callees (1-5, default 1): 2 adds callers of callers, etc.
    #[schemars(extend("type" = "integer", "minimum" = 1, "maximum" = 5, "default" = 1))]
    pub depth: Option<i64>,
    /// `next_cursor` of a previous answer, to fetch the next page of the same query.
    pub cursor: Option<String>,
}

/// Most call-graph edges a walk may read and still count as a point lookup.
pub const SMALL_WALK: i64 = 1_000;

impl QueryParams {
    /// Whether the query may walk the call graph or scan names (callers, callees, search):
    /// milliseconds to seconds, where the other types are point lookups.
    pub fn may_be_slow(&self) -> bool {
        matches!(
            self.query_type.as_deref(),
            Some("callers" | "callees" | "search")
        )
    }

    /// Whether the query is the first page of a callers or callees walk, which is a point
    /// lookup when the walk is small (see [`QueryParams::is_small_walk`]).
    pub fn is_first_page_walk(&self) -> bool {
        self.walk_direction().is_some() && self.cursor.is_none() && self.name.is_some()
    }

    /// The direction of a callers or callees query.
    fn walk_direction(&self) -> Option<Direction> {
        self.query_type
            .as_deref()
            .and_then(Direction::of_query_type)
    }

    /// Whether this first page of a walk reads at most [`SMALL_WALK`] edges in all (counted
    /// from the node counts, level by level, stopping as soon as the count passes it). A name
    /// that does not resolve, or a depth out of range, counts as small: answering its error
    /// costs no walk.
    pub fn is_small_walk(&self, conn: &Connection) -> QueryResult<bool> {
        let (Some(name), Some(direction), None) =
            (self.name.as_deref(), self.walk_direction(), &self.cursor)
        else {
            return Ok(false);
        };
        let Ok(depth) = bounded(self.depth, "depth", 1, MAX_DEPTH) else {
            return Ok(true);
        };
        match resolve_endpoint(conn, name) {
            Ok((start, _)) => walk_is_small(conn, start, direction, depth, SMALL_WALK),
            Err(QueryError::InvalidParams { .. }) => Ok(true),
            Err(err) => Err(err),
        }
    }
}

/// Answer of `acp_query`, shaped by its type.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum QueryResponse {
    /// `symbol`.
    Symbol(SymbolResponse),
    /// `file` and `domain`.
    Entry(EntryResponse),
    /// `callers` and `callees`.
    Relations(RelationsResponse),
    /// `search`.
    Search(SearchResponse),
    /// `stats`.
    Stats(StatsResponse),
}

fn bounded(value: Option<i64>, field: &str, default: u32, max: u32) -> QueryResult<u32> {
    match value {
        None => Ok(default),
        Some(n) if n >= 1 && n <= i64::from(max) => Ok(n as u32),
        Some(n) => Err(QueryError::invalid_with(
            format!(
                "Invalid {field}: {n} (must be 1-{max}){}",
                if field == "limit" {
                    "; 0 gives the totals only, with search, callers or callees"
                } else {
                    ""
                }
            ),
            serde_json::json!({"field": field, "minimum": 1, "maximum": max}),
        )),
    }
}

/// The name or pattern a query needs: the argument, else the one its cursor recorded.
fn required_key(
    given: Option<&str>,
    cursor: Option<&Cursor>,
    field: &str,
    query_type: &str,
) -> QueryResult<String> {
    let given = given.filter(|g| !g.trim().is_empty());
    match (given, cursor) {
        (Some(given), Some(cursor)) if given != cursor.query => Err(QueryError::invalid_with(
            format!(
                "Cursor does not match this query: it was issued for {field} '{}'. Repeat the query without cursor, or pass the cursor with the same {field}.",
                cursor.query
            ),
            serde_json::json!({"field": "cursor"}),
        )),
        (Some(given), _) => Ok(given.to_string()),
        (None, Some(cursor)) => Ok(cursor.query.clone()),
        (None, None) => Err(QueryError::invalid_with(
            format!("'{field}' required for {query_type} query"),
            serde_json::json!({"field": field}),
        )),
    }
}

/// `acp_query`: dispatches on `type`.
pub fn acp_query(conn: &Connection, params: &QueryParams) -> QueryResult<QueryResponse> {
    let query_type = params.query_type.as_deref().ok_or_else(|| {
        QueryError::invalid_with(
            "Missing required parameter: type",
            serde_json::json!({"field": "type"}),
        )
    })?;
    if !QUERY_TYPES.contains(&query_type) {
        return Err(QueryError::invalid_with(
            format!(
                "Invalid query type: {query_type}. Use one of: {}",
                QUERY_TYPES.join(", ")
            ),
            serde_json::json!({"field": "type", "allowed": QUERY_TYPES}),
        ));
    }
    // `limit: 0` asks a list for its totals only: one item is computed, none is returned.
    let totals_only =
        params.limit == Some(0) && matches!(query_type, "search" | "callers" | "callees");
    let limit = if totals_only {
        1
    } else {
        bounded(params.limit, "limit", DEFAULT_LIMIT, MAX_LIMIT)?
    };
    if query_type == "stats" {
        return Ok(QueryResponse::Stats(stats(conn)?));
    }
    let cursor = match params.cursor.as_deref().filter(|c| !c.is_empty()) {
        Some(token) => Some(Cursor::decode(conn, token, query_type)?),
        None => None,
    };
    let page = Page {
        offset: cursor.as_ref().map_or(0, |c| c.offset),
        limit,
    };
    match (query_type, Direction::of_query_type(query_type)) {
        ("search", _) => {
            let pattern = required_key(
                params.pattern.as_deref(),
                cursor.as_ref(),
                "pattern",
                query_type,
            )?;
            let mut found = search(conn, &pattern, page)?;
            if totals_only {
                found.result.matches.clear();
                found.result.truncated = false;
                found.result.next_cursor = None;
            }
            Ok(QueryResponse::Search(found))
        }
        (_, Some(direction)) => {
            let name = required_key(params.name.as_deref(), cursor.as_ref(), "name", query_type)?;
            let depth = bounded(params.depth, "depth", 1, MAX_DEPTH)?;
            let depth = match (&cursor, params.depth) {
                (Some(c), Some(_)) if c.depth != Some(depth) => {
                    return Err(depth_mismatch(c.depth))
                }
                (Some(c), None) => c.depth.unwrap_or(1),
                _ => depth,
            };
            let mut found = relations(conn, direction, &name, depth, page)?;
            if totals_only {
                found.result.clear();
                found.truncated = false;
                found.next_cursor = None;
            }
            Ok(QueryResponse::Relations(found))
        }
        (other, None) => {
            let name = required_key(params.name.as_deref(), cursor.as_ref(), "name", other)?;
            Ok(match other {
                "symbol" => QueryResponse::Symbol(symbol(conn, &name, limit)?),
                "file" => QueryResponse::Entry(file(conn, &name, page)?),
                _ => QueryResponse::Entry(domain(conn, &name, page)?),
            })
        }
    }
}
