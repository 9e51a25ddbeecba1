//! `acp_get_symbol_context`: a symbol entry with its raw callers and callees.
//!
//! Callers and callees are `graph.reverse[key]` and `graph.forward[key]` exactly as the cache
//! stores them (order and duplicates kept), as acp-mcp returns them. Lists longer than the page
//! size are cut; the answer then says so with `truncated` and `next_cursor`. This module also
//! holds the paging helpers shared with the domain tool.

use rusqlite::Connection;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::cursor::{Cursor, Page};
use super::file_context::{cli_symbol_entry, symbol_entry, without_description, OrderedObject};
use super::names::{not_found, resolve_symbol};
use super::{QueryError, QueryResult};

/// Page size used when the caller gives no `limit`.
pub const DEFAULT_PAGE_SIZE: u32 = 200;

/// The list kind recorded in this tool's cursors.
const CURSOR_KIND: &str = "symbol_context";

/// Arguments of `acp_get_symbol_context`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[schemars(transform = without_description)]
pub struct GetSymbolContextParams {
    /// Name of the symbol to look up
    pub name: String,
    /// Most callers and callees to return (default 200). Longer lists are cut and the answer
    /// carries `"truncated": true` and a `next_cursor`.
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
    pub symbol: OrderedObject,
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
        params.limit,
        params.cursor.as_deref(),
    )?;
    let (symbol, _) = resolve_symbol(conn, &params.name)?;
    let entry = symbol_entry(conn, symbol.id)?
        .ok_or_else(|| not_found("Symbol", &params.name, Vec::new()))?;
    let mut graph_keys = vec![symbol.key.as_str()];
    if symbol.qualified_name != symbol.key {
        graph_keys.push(symbol.qualified_name.as_str());
    }
    let callers = graph_list(conn, true, &graph_keys)?;
    let callees = graph_list(conn, false, &graph_keys)?;
    let more = continues(page, callers.len()) || continues(page, callees.len());
    Ok(SymbolContext {
        symbol: cli_symbol_entry(entry),
        callers: page_of(page, callers),
        callees: page_of(page, callees),
        truncated: more.then_some(true),
        next_cursor: if more {
            Some(next_cursor(conn, CURSOR_KIND, &params.name, page)?)
        } else {
            None
        },
    })
}

/// The stored `graph.forward` (or `graph.reverse`) list under the first of `keys` that has one
/// (`[]` if none).
fn graph_list(conn: &Connection, reverse: bool, keys: &[&str]) -> QueryResult<Vec<Value>> {
    for key in keys {
        if let Some(items) = crate::db::graph_list(conn, reverse, key)? {
            return Ok(match items {
                Value::Array(items) => items,
                _ => Vec::new(),
            });
        }
    }
    Ok(Vec::new())
}

/// The page `limit` (default [`DEFAULT_PAGE_SIZE`]) and `cursor` select in list `kind` of
/// `name`. Cursors come from [`next_cursor`] and must belong to the same list, name and import.
pub(crate) fn requested_page(
    conn: &Connection,
    kind: &str,
    name: &str,
    limit: Option<u32>,
    cursor: Option<&str>,
) -> QueryResult<Page> {
    let limit = limit.unwrap_or(DEFAULT_PAGE_SIZE);
    if limit == 0 {
        return Err(QueryError::invalid_with(
            "Invalid limit: 0 (must be at least 1)",
            json!({"field": "limit", "minimum": 1}),
        ));
    }
    let offset = match cursor.map(str::trim).filter(|c| !c.is_empty()) {
        None => 0,
        Some(token) => {
            let cursor = Cursor::decode(conn, token, kind)?;
            if cursor.query != name {
                return Err(QueryError::invalid_with(
                    format!(
                        "Cursor does not match this query: it was issued for name '{}'. Repeat the query without cursor, or pass the cursor with the same name.",
                        cursor.query
                    ),
                    json!({"field": "cursor"}),
                ));
            }
            cursor.offset
        }
    };
    Ok(Page { offset, limit })
}

/// Whether a list of `len` items continues past `page`.
pub(crate) fn continues(page: Page, len: usize) -> bool {
    len as u64 > page.offset.saturating_add(u64::from(page.limit))
}

/// The items of `items` that `page` covers.
pub(crate) fn page_of<T>(page: Page, items: Vec<T>) -> Vec<T> {
    items
        .into_iter()
        .skip(usize::try_from(page.offset).unwrap_or(usize::MAX))
        .take(page.limit as usize)
        .collect()
}

/// The cursor of the page after `page` in list `kind` of `name`.
pub(crate) fn next_cursor(
    conn: &Connection,
    kind: &str,
    name: &str,
    page: Page,
) -> QueryResult<String> {
    let next = page.offset.saturating_add(u64::from(page.limit));
    Ok(Cursor::new(conn, kind, name, None, next)?.encode())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_cut_long_lists() {
        let page = Page {
            offset: 0,
            limit: 2,
        };
        assert!(continues(page, 3));
        assert!(!continues(page, 2));
        assert_eq!(page_of(page, vec![1, 2, 3]), [1, 2]);
        let next = Page {
            offset: 2,
            limit: 2,
        };
        assert_eq!(page_of(next, vec![1, 2, 3]), [3]);
        assert!(!continues(next, 3));
    }
}
