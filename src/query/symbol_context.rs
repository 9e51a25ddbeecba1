//! `acp_get_symbol_context`: a symbol entry with its raw callers and callees.
//!
//! Callers and callees are `graph.reverse[key]` and `graph.forward[key]` exactly as the cache
//! stores them (order and duplicates kept), as acp-mcp returns them. Lists longer than the page
//! size are cut; the answer then says so with `truncated` and `next_cursor`. This module also
//! holds the paging helpers shared with the domain tool.

use rusqlite::Connection;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::cli_shape::cli_symbol_entry;
use super::cursor::{continues, next_cursor, requested_page, Page};
use super::entries::SYMBOLS;
use super::names::{not_found, resolve_symbol};
use super::ordered::Entry;
use super::without_description;
use super::QueryResult;

/// The list kind recorded in this tool's cursors.
const CURSOR_KIND: &str = "symbol_context";

/// Arguments of `acp_get_symbol_context`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[schemars(transform = without_description)]
pub struct GetSymbolContextParams {
    /// Name of the symbol to look up
    pub name: String,
    /// Most callers and callees to return (default 200, at most 1000). Longer lists are cut
    /// and the answer carries `"truncated": true` and a `next_cursor`.
    #[serde(default)]
    pub limit: Option<u32>,
    /// The `next_cursor` of a previous answer, passed back unchanged with the same name, to get
    /// the next page of callers and callees.
    #[serde(default)]
    pub cursor: Option<String>,
}

/// Answer of `acp_get_symbol_context`.
#[derive(Debug, Clone, Serialize)]
pub struct SymbolContext {
    /// The symbol entry in acp-cli's shape.
    pub symbol: Entry,
    /// `graph.reverse[<symbol>]` as stored (this page).
    pub callers: Vec<Value>,
    /// `graph.forward[<symbol>]` as stored (this page).
    pub callees: Vec<Value>,
    /// Present (true) when either list continues past this page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub truncated: Option<bool>,
    /// Cursor for the next page, present with `truncated`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// Looks a symbol up (map key, then qualified name, then a unique simple name; an ambiguous
/// simple name is an error listing candidates) and returns it with its callers and callees.
pub fn symbol_context(
    conn: &Connection,
    params: &GetSymbolContextParams,
) -> QueryResult<SymbolContext> {
    let page = requested_page(
        conn,
        CURSOR_KIND,
        &params.name,
        None,
        params.limit,
        params.cursor.as_deref(),
    )?;
    let (symbol, _) = resolve_symbol(conn, &params.name)?;
    let entry = SYMBOLS
        .load(conn, "id", &symbol.id)?
        .ok_or_else(|| not_found("Symbol", &params.name, Vec::new()))?;
    let mut graph_keys = vec![symbol.key.as_str()];
    if symbol.qualified_name != symbol.key {
        graph_keys.push(symbol.qualified_name.as_str());
    }
    let (callers, all_callers) = graph_list(conn, true, &graph_keys, page)?;
    let (callees, all_callees) = graph_list(conn, false, &graph_keys, page)?;
    let more = continues(page, all_callers) || continues(page, all_callees);
    Ok(SymbolContext {
        symbol: cli_symbol_entry(entry),
        callers,
        callees,
        truncated: more.then_some(true),
        next_cursor: if more {
            Some(next_cursor(conn, CURSOR_KIND, &params.name, page)?)
        } else {
            None
        },
    })
}

/// The items `page` covers of the stored `graph.forward` (or `graph.reverse`) list under the
/// first of `keys` that has one, and that list's length (`[]` and 0 if none).
fn graph_list(
    conn: &Connection,
    reverse: bool,
    keys: &[&str],
    page: Page,
) -> QueryResult<(Vec<Value>, usize)> {
    let skip = usize::try_from(page.offset).unwrap_or(usize::MAX);
    for key in keys {
        if let Some(listed) =
            crate::db::graph_list_page(conn, reverse, key, skip, page.limit as usize)?
        {
            return Ok(listed);
        }
    }
    Ok((Vec::new(), 0))
}
