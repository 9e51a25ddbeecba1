//! `acp_trace`: the shortest call paths from one symbol to another.
//!
//! A bidirectional breadth-first search over `call_edges`, between the same entities as the
//! callers and callees walks ([`super::graph`]): forward (callees) from `from`, backward
//! (callers) from `to`, always extending by one whole level the side whose next level costs
//! less to read (a lookup per frontier entity and a row per edge, the edges counted from the
//! nodes reached), so that a side ending at a hub, a symbol with thousands of callers, is read
//! last or not at all. Each level records every predecessor
//! at the shortest distance, so the paths found are *all* the shortest ones; they are listed in
//! name order, paged, and counted up to [`TOTAL_CAP`]. The work is bounded: a level that would
//! take the entities expanded past [`MAX_EXPANDED`] is not begun, and the search says it
//! stopped (`walk_capped`). "No path within the depth" is an answer, not an error.

use std::collections::{HashMap, HashSet};

use rusqlite::{Connection, OptionalExtension};
use serde::{Deserialize, Serialize};

use super::constraints::file_lock_level;
use super::cursor::{page_info, page_of, requested_page, within};
use super::graph::{degree, describe, resolve_endpoint, step_edges, Direction, TOTAL_CAP};
use super::QueryResult;

/// Depth searched when none is given.
pub const DEFAULT_MAX_DEPTH: u32 = 6;

/// Deepest search accepted.
pub const MAX_MAX_DEPTH: u32 = 10;

/// Paths per page when no limit is given.
pub const DEFAULT_LIMIT: u32 = 3;

/// Most paths per page.
pub const MAX_LIMIT: u32 = 50;

/// Most entities one search expands (both sides together) before it stops with
/// `walk_capped`: each expansion is one indexed read of the entity's edges.
pub const MAX_EXPANDED: usize = 20_000;

/// Arguments of `acp_trace`.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
pub struct TraceParams {
    /// Where the paths start: a symbol (map key, qualified name `path:name`, or a unique
    /// simple name) or a call-graph name that resolves to no symbol.
    pub from: String,
    /// Where the paths end, named the same ways.
    pub to: String,
    /// Most calls in a path (default 6, at most 10).
    #[serde(default)]
    pub max_depth: Option<u32>,
    /// Paths per page (default 3, at most 50).
    #[serde(default)]
    pub limit: Option<u32>,
    /// The `next_cursor` of a previous answer, for the next page.
    #[serde(default)]
    pub cursor: Option<String>,
}

/// One symbol (or unresolved call-graph name) of a path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct PathStep {
    /// Qualified name when resolved to a symbol, else the raw graph name.
    pub name: String,
    /// Whether the step is a symbol of the index (false for a name that resolves to nothing).
    pub resolved: bool,
    /// Canonical file of a resolved symbol.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// `[start, end]` lines of a resolved symbol.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lines: Option<[i64; 2]>,
    /// Lock level of the file (`normal` when it has no constraint).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lock_level: Option<String>,
}

/// Answer of `acp_trace`.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct TraceResponse {
    /// The start as resolved (qualified name of a symbol, else the name as given).
    pub from: String,
    /// The end as resolved.
    pub to: String,
    /// Depth searched.
    pub max_depth: u32,
    /// Whether a path was found within `max_depth`.
    pub found: bool,
    /// Calls in each shortest path (every path listed has this length).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub length: Option<u32>,
    /// This page of the shortest paths, each from `from` to `to`, in name order.
    pub paths: Vec<Vec<PathStep>>,
    /// Shortest paths in all (at most [`TOTAL_CAP`]).
    pub total: u64,
    /// Set when there are more than [`TOTAL_CAP`] shortest paths (only the first are listed).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub total_capped: bool,
    /// Set when the search stopped before a level that would expand more than
    /// [`MAX_EXPANDED`] symbols: a path may exist that was not found (ask a smaller
    /// `max_depth`, or trace to a nearer symbol).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub walk_capped: bool,
    /// Why there is no path, in words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// More paths follow this page.
    pub truncated: bool,
    /// Cursor of the next page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// One side of the search: the distance of every entity reached and, for each, the entities
/// one step nearer its start on a shortest path.
struct Side {
    direction: Direction,
    distance: HashMap<i64, u32>,
    nearer: HashMap<i64, Vec<i64>>,
    frontier: Vec<i64>,
    /// The edges extending the side reads: the counts, in its direction, of the nodes through
    /// which its frontier was reached (the start: all of its nodes).
    frontier_edges: i64,
    depth: u32,
}

impl Side {
    fn new(conn: &Connection, direction: Direction, start: i64) -> QueryResult<Side> {
        Ok(Side {
            direction,
            distance: HashMap::from([(start, 0)]),
            nearer: HashMap::new(),
            frontier: vec![start],
            frontier_edges: degree(conn, direction, start)?,
            depth: 0,
        })
    }

    /// What extending the side reads: a lookup per frontier entity and a row per edge.
    fn cost(&self) -> i64 {
        self.frontier.len() as i64 + self.frontier_edges
    }

    /// Extends the side by one level; returns the entities expanded.
    fn extend(&mut self, conn: &Connection) -> QueryResult<usize> {
        let depth = self.depth + 1;
        let mut next = Vec::new();
        let mut next_nodes = HashSet::new();
        self.frontier_edges = 0;
        let mut frontier = std::mem::take(&mut self.frontier);
        // Entity order is index order: neighbouring lookups share pages.
        frontier.sort_unstable();
        for &entity in &frontier {
            for edge in step_edges(conn, self.direction, entity)? {
                let reached = edge.entity;
                match self.distance.get(&reached) {
                    None => {
                        self.distance.insert(reached, depth);
                        self.nearer.insert(reached, vec![entity]);
                        next.push(reached);
                    }
                    Some(&d) if d == depth => {
                        let nearer = self.nearer.entry(reached).or_default();
                        if !nearer.contains(&entity) {
                            nearer.push(entity);
                        }
                    }
                    Some(_) => continue,
                }
                // Reached at this level: the next one reads this node's edges (a symbol named
                // several ways may be reached through more than one node).
                if next_nodes.insert(edge.node) {
                    self.frontier_edges += edge.degree;
                }
            }
        }
        self.frontier = next;
        self.depth = depth;
        Ok(frontier.len())
    }

    /// The number of shortest paths from the side's start to `entity`, saturating past
    /// [`TOTAL_CAP`].
    fn paths_to(&self, entity: i64, memo: &mut HashMap<i64, u64>) -> u64 {
        if let Some(&n) = memo.get(&entity) {
            return n;
        }
        let n = match self.nearer.get(&entity) {
            None => 1,
            Some(nearer) => nearer
                .iter()
                .map(|&e| self.paths_to(e, memo))
                .fold(0u64, |a, b| a.saturating_add(b).min(TOTAL_CAP + 1)),
        };
        memo.insert(entity, n);
        n
    }
}

/// Names entities for a stable order, each read once.
struct Names<'c> {
    conn: &'c Connection,
    known: HashMap<i64, String>,
}

impl Names<'_> {
    fn of(&mut self, entity: i64) -> QueryResult<String> {
        if let Some(name) = self.known.get(&entity) {
            return Ok(name.clone());
        }
        let name = describe(self.conn, entity)?.0.unwrap_or_default();
        self.known.insert(entity, name.clone());
        Ok(name)
    }

    /// `entities` sorted by name, then entity.
    fn sorted(&mut self, entities: &[i64]) -> QueryResult<Vec<i64>> {
        let mut named = entities
            .iter()
            .map(|&e| Ok((self.of(e)?, e)))
            .collect::<QueryResult<Vec<_>>>()?;
        named.sort();
        Ok(named.into_iter().map(|(_, e)| e).collect())
    }
}

/// Appends to `out` the shortest paths from the side's start to `entity` (each ending with
/// `entity`), in name order, until `out` holds `want`.
fn prefixes(
    side: &Side,
    names: &mut Names,
    entity: i64,
    want: usize,
    out: &mut Vec<Vec<i64>>,
) -> QueryResult<()> {
    match side.nearer.get(&entity) {
        None => out.push(vec![entity]),
        Some(nearer) => {
            for e in names.sorted(nearer)? {
                if out.len() >= want {
                    break;
                }
                let start = out.len();
                prefixes(side, names, e, want, out)?;
                for path in &mut out[start..] {
                    path.push(entity);
                }
            }
        }
    }
    Ok(())
}

/// The details of one step of a path.
fn path_step(conn: &Connection, entity: i64) -> QueryResult<PathStep> {
    let (name, file) = describe(conn, entity)?;
    let lines = if entity > 0 {
        conn.prepare_cached("SELECT line_start, line_end FROM symbols WHERE id = ?1")?
            .query_row([entity], |r| {
                let start: Option<i64> = r.get(0)?;
                let end: Option<i64> = r.get(1)?;
                Ok(start.map(|s| [s, end.unwrap_or(s)]))
            })
            .optional()?
            .flatten()
    } else {
        None
    };
    let lock_level = match &file {
        Some(path) => Some(file_lock_level(conn, path)?),
        None => None,
    };
    Ok(PathStep {
        name: name.unwrap_or_default(),
        resolved: entity > 0,
        file,
        lines,
        lock_level,
    })
}

/// `acp_trace`: resolves both ends, searches, and pages the shortest paths.
pub fn acp_trace(conn: &Connection, params: &TraceParams) -> QueryResult<TraceResponse> {
    let max_depth = within(
        params.max_depth,
        "max_depth",
        DEFAULT_MAX_DEPTH,
        MAX_MAX_DEPTH,
    )?;
    let limit = within(params.limit, "limit", DEFAULT_LIMIT, MAX_LIMIT)?;
    // A cursor belongs to one search: both ends and the depth.
    let key = format!("{}\n{}\n{max_depth}", params.from, params.to);
    let page = requested_page(
        conn,
        "trace",
        &key,
        None,
        Some(limit),
        params.cursor.as_deref(),
    )?;
    let (from, from_name) = resolve_endpoint(conn, &params.from)?;
    let (to, to_name) = resolve_endpoint(conn, &params.to)?;
    let (from, to) = (from.entity(), to.entity());

    let mut forward = Side::new(conn, Direction::Callees, from)?;
    let mut backward = Side::new(conn, Direction::Callers, to)?;
    let mut expanded = 0;
    let mut capped = false;
    let mut meeting: Vec<i64> = if from == to { vec![from] } else { Vec::new() };
    while meeting.is_empty()
        && forward.depth + backward.depth < max_depth
        && !forward.frontier.is_empty()
        && !backward.frontier.is_empty()
    {
        // The side whose next level costs less to read is extended.
        let (side, other) = if forward.cost() <= backward.cost() {
            (&mut forward, &backward)
        } else {
            (&mut backward, &forward)
        };
        // A level is searched whole or not at all (a part of one could miss a shortest path).
        if expanded + side.frontier.len() > MAX_EXPANDED {
            capped = true;
            break;
        }
        expanded += side.extend(conn)?;
        // No entity was reached from both sides before this level, so the first ones are the
        // middles of every shortest path.
        meeting = side
            .frontier
            .iter()
            .copied()
            .filter(|e| other.distance.contains_key(e))
            .collect();
    }

    let mut response = TraceResponse {
        from: from_name,
        to: to_name,
        max_depth,
        found: !meeting.is_empty(),
        length: None,
        paths: Vec::new(),
        total: 0,
        total_capped: false,
        walk_capped: capped,
        message: None,
        truncated: false,
        next_cursor: None,
    };
    if meeting.is_empty() {
        response.message = Some(if capped {
            format!(
                "The search stopped before a level that would expand more than {MAX_EXPANDED} symbols ({expanded} expanded), without finding a path: one may exist. Trace with a smaller max_depth or to a nearer symbol."
            )
        } else {
            format!(
                "No call path from {} to {} within {max_depth} calls (the call graph holds only the calls static indexing saw).",
                response.from, response.to
            )
        });
        return Ok(response);
    }
    let length = meeting
        .first()
        .map(|m| forward.distance[m] + backward.distance[m])
        .unwrap_or_default();
    let (mut forward_memo, mut backward_memo) = (HashMap::new(), HashMap::new());
    let mut names = Names {
        conn,
        known: HashMap::new(),
    };
    let meeting = names.sorted(&meeting)?;
    let mut total = 0u64;
    for &m in &meeting {
        let n = forward
            .paths_to(m, &mut forward_memo)
            .saturating_mul(backward.paths_to(m, &mut backward_memo));
        total = total.saturating_add(n).min(TOTAL_CAP + 1);
    }
    // The paths up to the end of the page (plus one, to know whether more follow), never past
    // the cap.
    let want = (page.offset.saturating_add(u64::from(page.limit)) + 1).min(TOTAL_CAP) as usize;
    let mut paths: Vec<Vec<i64>> = Vec::new();
    for &m in &meeting {
        if paths.len() >= want {
            break;
        }
        let mut heads = Vec::new();
        prefixes(&forward, &mut names, m, want, &mut heads)?;
        let mut tails = Vec::new();
        prefixes(&backward, &mut names, m, want, &mut tails)?;
        for head in &heads {
            for tail in &tails {
                if paths.len() >= want {
                    break;
                }
                let mut path = head.clone();
                path.extend(tail.iter().rev().skip(1));
                paths.push(path);
            }
        }
    }
    let more = paths.len() as u64 > page.offset.saturating_add(u64::from(page.limit));
    for path in page_of(page, paths) {
        response.paths.push(
            path.into_iter()
                .map(|e| path_step(conn, e))
                .collect::<QueryResult<_>>()?,
        );
    }
    let info = page_info(
        conn,
        "trace",
        &key,
        None,
        page.next_offset(response.paths.len()),
        more,
    )?;
    response.length = Some(length);
    response.total = total.min(TOTAL_CAP);
    response.total_capped = total > TOTAL_CAP;
    response.truncated = info.truncated;
    response.next_cursor = info.next_cursor;
    Ok(response)
}
