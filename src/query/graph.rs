//! Call-graph queries: callers and callees of a symbol, one level or a bounded blast radius.
//!
//! The walk is breadth-first over `call_edges`, one level at a time. It moves between
//! *entities*: a resolved symbol (every `graph_nodes` row pointing at it counts as the same
//! endpoint) or, for names that match no symbol (`save`, `<module>`, ambiguous simple names),
//! the raw graph node. Each entity is reported once, at the smallest depth it was reached;
//! cycles end at the depth bound. Items are ordered by depth, then name, then entity. Every step
//! is an index lookup (`graph_nodes_symbol`, the `call_edges` primary key or
//! `call_edges_callee`).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, OptionalExtension};
use serde::Serialize;

use super::cursor::{import_stamp, page_info, Page};
use super::names::{find_symbol, resolve_symbol, NAME_IS};
use super::QueryResult;

/// Largest `total` of a walk reported exactly: counting stops past it, so a first page never
/// pays for the whole of a huge walk.
pub const TOTAL_CAP: u64 = 10_000;

/// Which way to walk the call graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Who calls the start (reverse edges).
    Callers,
    /// What the start calls (forward edges).
    Callees,
}

impl Direction {
    /// The query type name (`callers` / `callees`), also the name of the `graph_nodes` column
    /// that counts a node's edges in this direction.
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Callers => "callers",
            Direction::Callees => "callees",
        }
    }

    /// The direction of a walk's query type (`callers` / `callees`), `None` for other types.
    pub fn of_query_type(query_type: &str) -> Option<Direction> {
        [Direction::Callers, Direction::Callees]
            .into_iter()
            .find(|d| d.as_str() == query_type)
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
    pub(crate) fn entity(self) -> i64 {
        match self {
            Endpoint::Symbol(id) => id,
            Endpoint::Node(id) => -id,
        }
    }
}

/// One caller or callee.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
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
    /// Distinct entities reached (at most [`TOTAL_CAP`]).
    pub total: u64,
    /// Set when more than [`TOTAL_CAP`] entities are reached and `total` stopped at the cap.
    pub total_capped: bool,
    /// More items follow this page.
    pub more: bool,
}

/// Answer of `acp_query` types `callers` and `callees`.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
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
    /// Distinct callers or callees within `depth` (at most [`TOTAL_CAP`]).
    pub total: u64,
    /// Set when more than [`TOTAL_CAP`] were reached and `total` stopped at the cap (the pages
    /// still go on to the last one).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub total_capped: bool,
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
        .prepare_cached(&format!(
            "SELECT count(*) FROM (SELECT 1 FROM symbols WHERE {NAME_IS} LIMIT 2)"
        ))?
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

/// Whether the walk of `depth` hops from `start` reads at most `budget` call-graph edges in
/// all. Each entity's edges are counted from the node counts before its step is read, so the
/// check itself reads at most `budget` edges (plus one count per entity it visits).
pub fn walk_is_small(
    conn: &Connection,
    start: Endpoint,
    direction: Direction,
    depth: u32,
    budget: i64,
) -> QueryResult<bool> {
    // As in the walk itself, the start is not marked seen: a cycle back to it reads its edges
    // again.
    let mut seen = HashSet::new();
    let mut frontier = vec![start.entity()];
    let mut edges = 0;
    for _ in 0..depth {
        let mut next = Vec::new();
        for entity in frontier {
            edges += degree(conn, direction, entity)?;
            if edges > budget {
                return Ok(false);
            }
            for reached in step(conn, direction, entity)? {
                if seen.insert(reached) {
                    next.push(reached);
                }
            }
        }
        frontier = next;
    }
    Ok(true)
}

/// The SQL of one step of a walk (parameter: the entity), from a symbol (`from_symbol`) or from
/// an unresolved graph node, exposed for query-plan checks. It returns, for every edge, the
/// entity at its other end, that end's node and the node's edges in the same direction (what a
/// step from the entity reads through that node; a symbol named several ways has other nodes).
pub fn step_sql(direction: Direction, from_symbol: bool) -> String {
    let (from, to) = match direction {
        Direction::Callers => ("callee_id", "caller_id"),
        Direction::Callees => ("caller_id", "callee_id"),
    };
    let start = if from_symbol {
        "n.symbol_id = ?1"
    } else {
        "n.id = -?1"
    };
    let degree = direction.as_str();
    format!(
        "SELECT coalesce(c.symbol_id, -c.id), c.id, c.{degree} FROM graph_nodes n
         JOIN call_edges e ON e.{from} = n.id
         JOIN graph_nodes c ON c.id = e.{to}
         WHERE {start}"
    )
}

/// The entities one step from `entity` (repeated when several edges lead to one).
pub(crate) fn step(conn: &Connection, direction: Direction, entity: i64) -> QueryResult<Vec<i64>> {
    Ok(step_edges(conn, direction, entity)?
        .into_iter()
        .map(|edge| edge.entity)
        .collect())
}

/// An edge of a step ([`step_edges`]): the entity reached, its node, and the node's edges in
/// the step's direction.
pub(crate) struct Reached {
    pub(crate) entity: i64,
    pub(crate) node: i64,
    pub(crate) degree: i64,
}

/// The edges one step from `entity`, with what a step from each end would read.
pub(crate) fn step_edges(
    conn: &Connection,
    direction: Direction,
    entity: i64,
) -> QueryResult<Vec<Reached>> {
    let mut stmt = conn.prepare_cached(&step_sql(direction, entity > 0))?;
    let rows = stmt.query_map([entity], |r| {
        Ok(Reached {
            entity: r.get(0)?,
            node: r.get(1)?,
            degree: r.get::<_, i64>(2)?.max(0),
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// The edges a step from `entity` reads in `direction`: its nodes' counts summed.
pub(crate) fn degree(conn: &Connection, direction: Direction, entity: i64) -> QueryResult<i64> {
    let column = direction.as_str();
    let sql = if entity > 0 {
        format!("SELECT coalesce(sum({column}), 0) FROM graph_nodes WHERE symbol_id = ?1")
    } else {
        format!("SELECT coalesce(sum({column}), 0) FROM graph_nodes WHERE id = -?1")
    };
    let sum: i64 = conn
        .prepare_cached(&sql)?
        .query_row([entity], |r| r.get(0))?;
    Ok(sum.max(0))
}

/// The name of an entity (qualified name of a symbol, else the raw graph name) and the file of
/// a symbol.
pub(crate) fn describe(
    conn: &Connection,
    entity: i64,
) -> QueryResult<(Option<String>, Option<String>)> {
    Ok(if entity > 0 {
        conn.prepare_cached(
            "SELECT coalesce(qualified_name, key), file_path FROM symbols WHERE id = ?1",
        )?
        .query_row([entity], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?
        .unwrap_or_default()
    } else {
        let name = conn
            .prepare_cached("SELECT name FROM graph_nodes WHERE id = ?1")?
            .query_row([-entity], |r| r.get(0))
            .optional()?;
        (name, None)
    })
}

/// The levels of a walk computed so far: `levels[d - 1]` holds the entities first reached at
/// depth `d`, sorted by name, then entity. Levels are computed one at a time, each one whole;
/// `reached` is the number of entities in the walk, counted up to [`TOTAL_CAP`] + 1.
#[derive(Debug, Clone, Default)]
struct Traversal {
    levels: Vec<Vec<i64>>,
    reached: Option<u64>,
}

impl Traversal {
    fn len(&self) -> u64 {
        self.levels.iter().map(|l| l.len() as u64).sum()
    }

    /// Whether every level up to `depth` is computed (or the last one is empty).
    fn complete(&self, depth: u32) -> bool {
        self.levels.len() as u32 >= depth || self.levels.last().is_some_and(Vec::is_empty)
    }

    /// Whether a page ending before entity `wanted` needs another level.
    fn needs_level(&self, depth: u32, wanted: u64) -> bool {
        !self.complete(depth) && self.len() < wanted
    }

    /// Sets `reached`: the levels computed, then the levels beyond them, unnamed and unsorted,
    /// until the count passes [`TOTAL_CAP`].
    fn count(&mut self, conn: &Connection, walk: &WalkKey) -> QueryResult<()> {
        if self.complete(walk.depth) {
            self.reached = Some(self.len());
        }
        if self.reached.is_some() {
            return Ok(());
        }
        let mut seen: HashSet<i64> = self.levels.iter().flatten().copied().collect();
        let mut frontier: Vec<i64> = match self.levels.last() {
            Some(level) => level.clone(),
            None => vec![walk.start],
        };
        let mut level = self.levels.len() as u32;
        'walk: while !frontier.is_empty() && level < walk.depth && seen.len() as u64 <= TOTAL_CAP {
            level += 1;
            let mut next = Vec::new();
            for entity in frontier {
                for reached in step(conn, walk.direction, entity)? {
                    if seen.insert(reached) {
                        next.push(reached);
                        if seen.len() as u64 > TOTAL_CAP {
                            break 'walk;
                        }
                    }
                }
            }
            frontier = next;
        }
        self.reached = Some(seen.len() as u64);
        Ok(())
    }

    /// Computes the next level: the entities one step from the last level (or the start) that
    /// no earlier level holds.
    fn push_level(&mut self, conn: &Connection, walk: &WalkKey) -> QueryResult<()> {
        // Rows are read in entity order, which is index order: neighbouring lookups share pages.
        let mut frontier = self.levels.last().cloned().unwrap_or(vec![walk.start]);
        frontier.sort_unstable();
        let seen: HashSet<i64> = self.levels.iter().flatten().copied().collect();
        let mut next = HashSet::new();
        for entity in frontier {
            for reached in step(conn, walk.direction, entity)? {
                if !seen.contains(&reached) {
                    next.insert(reached);
                }
            }
        }
        let mut next: Vec<i64> = next.into_iter().collect();
        next.sort_unstable();
        let mut named = Vec::with_capacity(next.len());
        for entity in next {
            named.push((describe(conn, entity)?.0, entity));
        }
        named.sort_unstable();
        self.levels
            .push(named.into_iter().map(|(_, entity)| entity).collect());
        Ok(())
    }

    /// The entities of `page`, with their depths.
    fn slice(&self, page: Page) -> Vec<(u32, i64)> {
        self.levels
            .iter()
            .enumerate()
            .flat_map(|(i, level)| level.iter().map(move |&e| (i as u32 + 1, e)))
            .skip(page.offset as usize)
            .take(page.limit as usize)
            .collect()
    }
}

/// What identifies a walk: the database and import, the start, the direction and the depth.
#[derive(Debug, Clone, PartialEq, Eq)]
struct WalkKey {
    database: String,
    start: i64,
    direction: Direction,
    depth: u32,
}

/// Walks kept for their next pages.
const CACHED_WALKS: usize = 16;

/// Most entities kept in all cached walks together (8 bytes each).
const CACHED_ENTITIES: u64 = 1_000_000;

/// Walks whose pages were not all delivered, most recently used last, so later pages resume
/// from the levels already computed instead of walking again.
static WALKS: Mutex<Vec<(WalkKey, Arc<Traversal>)>> = Mutex::new(Vec::new());

fn cached(key: &WalkKey) -> Option<Arc<Traversal>> {
    let mut walks = WALKS.lock().unwrap_or_else(|e| e.into_inner());
    let i = walks.iter().position(|(k, _)| k == key)?;
    let entry = walks.remove(i);
    let traversal = Arc::clone(&entry.1);
    walks.push(entry);
    Some(traversal)
}

fn keep(key: WalkKey, traversal: Arc<Traversal>) {
    if traversal.len() > CACHED_ENTITIES {
        return;
    }
    let mut walks = WALKS.lock().unwrap_or_else(|e| e.into_inner());
    walks.retain(|(k, _)| *k != key);
    walks.push((key, traversal));
    while walks.len() > CACHED_WALKS
        || walks.iter().map(|(_, t)| t.len()).sum::<u64>() > CACHED_ENTITIES
    {
        walks.remove(0);
    }
}

/// Walks the call graph from `start` up to `depth` hops and returns the requested page.
///
/// Levels are computed whole, nearest first, only as far as the page and the count need; a walk
/// with more pages is kept in a small in-process cache (bounded in walks and entities, keyed by
/// database file and import) so its next pages resume where this one stopped.
pub fn walk(
    conn: &Connection,
    start: Endpoint,
    direction: Direction,
    depth: u32,
    page: Page,
) -> QueryResult<RelationPage> {
    let key = WalkKey {
        database: format!("{}\0{}", conn.path().unwrap_or(""), import_stamp(conn)?),
        start: start.entity(),
        direction,
        depth,
    };
    let wanted = page.offset + u64::from(page.limit) + 1;
    let traversal = match cached(&key) {
        Some(known) if !known.needs_level(depth, wanted) => known,
        known => {
            let mut traversal = known.as_deref().cloned().unwrap_or_default();
            while traversal.needs_level(depth, wanted) {
                traversal.push_level(conn, &key)?;
            }
            traversal.count(conn, &key)?;
            let traversal = Arc::new(traversal);
            if traversal.len() >= wanted {
                keep(key, Arc::clone(&traversal));
            }
            traversal
        }
    };
    let mut items = Vec::new();
    for (depth, entity) in traversal.slice(page) {
        let (name, file) = describe(conn, entity)?;
        items.push(Relation {
            name: name.unwrap_or_default(),
            depth,
            resolved: entity > 0,
            file,
        });
    }
    let reached = traversal.reached.unwrap_or_default();
    Ok(RelationPage {
        total: reached.min(TOTAL_CAP),
        total_capped: reached > TOTAL_CAP,
        more: page.next_offset(items.len()) < traversal.len(),
        items,
    })
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
        found.more,
    )?;
    Ok(RelationsResponse {
        kind: direction.as_str(),
        name: display,
        depth,
        result: found.items,
        total: found.total,
        total_capped: found.total_capped,
        truncated: info.truncated,
        next_cursor: info.next_cursor,
    })
}
