//! Call-graph queries: callers and callees of a symbol, one level or a bounded blast radius.
//!
//! The walk is a recursive CTE over `call_edges`. It moves between *entities*: a resolved
//! symbol (every `graph_nodes` row pointing at it counts as the same endpoint) or, for names
//! that match no symbol (`save`, `<module>`, ambiguous simple names), the raw graph node. Each
//! entity is reported once, at the smallest depth it was reached; cycles end at the depth
//! bound. Every step is an index lookup (`graph_nodes_symbol`, the `call_edges` primary key or
//! `call_edges_callee`).

use rusqlite::{params, Connection, OptionalExtension};
use serde::Serialize;

use super::cursor::{page_info, Page};
use super::names::{find_symbol, resolve_symbol};
use super::QueryResult;

/// Deepest walk accepted for `depth`.
pub const MAX_DEPTH: u32 = 5;

/// Which way to walk the call graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Who calls the start (reverse edges).
    Callers,
    /// What the start calls (forward edges).
    Callees,
}

impl Direction {
    /// The query type name (`callers` / `callees`).
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Callers => "callers",
            Direction::Callees => "callees",
        }
    }
}

/// Where a walk starts: a symbol row or an unresolved graph node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `symbols.id`.
    Symbol(i64),
    /// `graph_nodes.id` of a name that resolves to no symbol.
    Node(i64),
}

impl Endpoint {
    /// The walk's entity number: symbol ids positive, node ids negated.
    fn entity(self) -> i64 {
        match self {
            Endpoint::Symbol(id) => id,
            Endpoint::Node(id) => -id,
        }
    }
}

/// One caller or callee.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Relation {
    /// Qualified name when resolved to a symbol, else the raw graph name.
    pub name: String,
    /// Hops from the start (1 = direct).
    pub depth: u32,
    /// Whether the endpoint is a symbol of the index (false for dangling names).
    pub resolved: bool,
    /// Canonical file of a resolved symbol.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
}

/// One page of a walk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelationPage {
    /// The page, ordered by depth, then name.
    pub items: Vec<Relation>,
    /// Distinct entities reached in the whole walk.
    pub total: u64,
}

/// Answer of `acp_query` types `callers` and `callees`.
#[derive(Debug, Clone, Serialize)]
pub struct RelationsResponse {
    /// `callers` or `callees`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The start: its qualified name when it is a symbol, else the name as given.
    pub name: String,
    /// Walk depth used.
    pub depth: u32,
    /// Callers or callees, nearest first, then by name.
    pub result: Vec<Relation>,
    /// Distinct callers or callees within `depth`.
    pub total: u64,
    /// More items follow this page.
    pub truncated: bool,
    /// Cursor of the next page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// Resolves the start of a walk: a symbol (map key, qualified name or unique simple name), else
/// a raw graph endpoint name. A simple name shared by several symbols is an error listing them.
/// Returns the endpoint and its display name.
pub fn resolve_endpoint(conn: &Connection, name: &str) -> QueryResult<(Endpoint, String)> {
    if let Some((symbol, _)) = find_symbol(conn, name)? {
        return Ok((Endpoint::Symbol(symbol.id), symbol.qualified_name));
    }
    let same_name: i64 = conn
        .prepare_cached("SELECT count(*) FROM (SELECT 1 FROM symbols WHERE name = ?1 LIMIT 2)")?
        .query_row([name], |r| r.get(0))?;
    if same_name < 2 {
        let node: Option<(i64, Option<i64>, Option<String>)> = conn
            .prepare_cached(
                "SELECT n.id, n.symbol_id, coalesce(s.qualified_name, s.key)
                 FROM graph_nodes n LEFT JOIN symbols s ON s.id = n.symbol_id WHERE n.name = ?1",
            )?
            .query_row([name], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .optional()?;
        match node {
            Some((_, Some(symbol_id), display)) => {
                return Ok((
                    Endpoint::Symbol(symbol_id),
                    display.unwrap_or_else(|| name.to_string()),
                ))
            }
            Some((id, None, _)) => return Ok((Endpoint::Node(id), name.to_string())),
            None => {}
        }
    }
    resolve_symbol(conn, name).map(|(s, _)| (Endpoint::Symbol(s.id), s.qualified_name))
}

fn walk_sql(direction: Direction, tail: &str) -> String {
    let (from, to) = match direction {
        Direction::Callers => ("callee_id", "caller_id"),
        Direction::Callees => ("caller_id", "callee_id"),
    };
    format!(
        "WITH RECURSIVE
         walk(ent, depth) AS (
             SELECT ?1, 0
             UNION
             SELECT coalesce(c.symbol_id, -c.id), w.depth + 1
             FROM walk w
             JOIN graph_nodes n ON (n.symbol_id = w.ent OR n.id = -w.ent)
             JOIN call_edges e ON e.{from} = n.id
             JOIN graph_nodes c ON c.id = e.{to}
             WHERE w.depth < ?2
         ),
         reached(ent, depth) AS (SELECT ent, min(depth) FROM walk WHERE depth > 0 GROUP BY ent)
         {tail}"
    )
}

/// The SQL of one page of a walk (parameters: start entity, depth, limit, offset), exposed for
/// query-plan checks.
pub fn page_sql(direction: Direction) -> String {
    walk_sql(
        direction,
        "SELECT r.depth, CASE WHEN r.ent > 0 THEN coalesce(s.qualified_name, s.key) ELSE g.name END AS label,
                r.ent > 0, s.file_path, count(*) OVER ()
         FROM reached r
         LEFT JOIN symbols s ON s.id = r.ent
         LEFT JOIN graph_nodes g ON g.id = -r.ent
         ORDER BY r.depth, label, r.ent
         LIMIT ?3 OFFSET ?4",
    )
}

/// Walks the call graph from `start` up to `depth` hops and returns the requested page.
pub fn walk(
    conn: &Connection,
    start: Endpoint,
    direction: Direction,
    depth: u32,
    page: Page,
) -> QueryResult<RelationPage> {
    let mut stmt = conn.prepare_cached(&page_sql(direction))?;
    let mut total = None;
    let rows = stmt.query_map(
        params![start.entity(), depth, page.limit, page.offset as i64],
        |r| {
            Ok((
                Relation {
                    depth: r.get(0)?,
                    name: r.get(1)?,
                    resolved: r.get(2)?,
                    file: r.get(3)?,
                },
                r.get::<_, i64>(4)?,
            ))
        },
    )?;
    let mut items = Vec::new();
    for row in rows {
        let (relation, count) = row?;
        total = Some(count as u64);
        items.push(relation);
    }
    let total = match total {
        Some(total) => total,
        None if page.offset == 0 => 0,
        None => conn
            .prepare_cached(&walk_sql(direction, "SELECT count(*) FROM reached"))?
            .query_row(params![start.entity(), depth], |r| r.get::<_, i64>(0))?
            as u64,
    };
    Ok(RelationPage { items, total })
}

/// `acp_query` callers/callees: resolves `name`, walks `depth` hops and pages the result.
pub fn relations(
    conn: &Connection,
    direction: Direction,
    name: &str,
    depth: u32,
    page: Page,
) -> QueryResult<RelationsResponse> {
    let (start, display) = resolve_endpoint(conn, name)?;
    let found = walk(conn, start, direction, depth, page)?;
    let next = page.next_offset(found.items.len());
    let info = page_info(
        conn,
        direction.as_str(),
        name,
        Some(depth),
        next,
        next < found.total,
    )?;
    Ok(RelationsResponse {
        kind: direction.as_str(),
        name: display,
        depth,
        result: found.items,
        total: found.total,
        truncated: info.truncated,
        next_cursor: info.next_cursor,
    })
}
