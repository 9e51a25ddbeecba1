//! `acp_get_symbol_context`: a symbol entry with its raw callers and callees.
//!
//! Callers and callees are `graph.reverse[key]` and `graph.forward[key]` exactly as the cache
//! stores them (order and duplicates kept), as acp-mcp returns them. Lists longer than the page
//! size are cut; the answer then says so with `truncated` and `next_cursor`. This module also
//! holds the paging helpers shared with the domain tool.

use rusqlite::{params, Connection, OptionalExtension};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::file_context::{cli_symbol_entry, symbol_entry, OrderedObject};
use super::names::{not_found, resolve_symbol};
use super::{QueryError, QueryResult};

/// Page size used when the caller gives no `limit`.
pub const DEFAULT_PAGE_SIZE: u32 = 200;

/// Arguments of `acp_get_symbol_context`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct GetSymbolContextParams {
    /// Name of the symbol to look up
    pub name: String,
    /// Most callers and callees to return (default 200). Longer lists are cut and the answer
    /// carries `"truncated": true` and a `next_cursor`.
    #[serde(default)]
    pub limit: Option<u32>,
    /// The `next_cursor` of a previous answer (an opaque string such as `o:200`), to get the
    /// next page of callers and callees.
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
    let page = Page::from_params(params.limit, params.cursor.as_deref())?;
    let (symbol, _) = resolve_symbol(conn, &params.name)?;
    let entry = symbol_entry(conn, symbol.id)?
        .ok_or_else(|| not_found("Symbol", &params.name, Vec::new()))?;
    let mut graph_keys = vec![symbol.key.as_str()];
    if symbol.qualified_name != symbol.key {
        graph_keys.push(symbol.qualified_name.as_str());
    }
    let callers = graph_list(conn, "reverse", &graph_keys)?;
    let callees = graph_list(conn, "forward", &graph_keys)?;
    let more = page.has_more(callers.len()) || page.has_more(callees.len());
    Ok(SymbolContext {
        symbol: cli_symbol_entry(entry),
        callers: page.slice(callers),
        callees: page.slice(callees),
        truncated: more.then_some(true),
        next_cursor: more.then(|| page.next_cursor()),
    })
}

/// The stored `graph.<direction>` list under the first of `keys` that has one (`[]` if none).
fn graph_list(conn: &Connection, direction: &str, keys: &[&str]) -> QueryResult<Vec<Value>> {
    let mut stmt = conn
        .prepare_cached("SELECT items_json FROM graph_lists WHERE direction = ?1 AND key = ?2")?;
    for key in keys {
        let items: Option<String> = stmt
            .query_row(params![direction, key], |r| r.get(0))
            .optional()?;
        if let Some(items) = items {
            return Ok(match serde_json::from_str(&items)? {
                Value::Array(items) => items,
                _ => Vec::new(),
            });
        }
    }
    Ok(Vec::new())
}

/// One page of a long list: an offset and a size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Page {
    offset: usize,
    limit: usize,
}

impl Page {
    /// The page that `limit` (default [`DEFAULT_PAGE_SIZE`]) and `cursor` (`o:<offset>`) select.
    pub(crate) fn from_params(limit: Option<u32>, cursor: Option<&str>) -> QueryResult<Page> {
        let limit = limit.unwrap_or(DEFAULT_PAGE_SIZE);
        if limit == 0 {
            return Err(QueryError::invalid("Invalid limit: 0 (must be at least 1)"));
        }
        let offset = match cursor {
            None | Some("") => 0,
            Some(cursor) => cursor
                .strip_prefix("o:")
                .and_then(|n| n.parse::<usize>().ok())
                .ok_or_else(|| {
                    QueryError::invalid(format!(
                        "Invalid cursor: {cursor}. Pass the next_cursor of a previous answer."
                    ))
                })?,
        };
        Ok(Page {
            offset,
            limit: limit as usize,
        })
    }

    /// Whether a list of `len` items continues past this page.
    pub(crate) fn has_more(&self, len: usize) -> bool {
        len > self.offset.saturating_add(self.limit)
    }

    /// The items of this page.
    pub(crate) fn slice<T>(&self, items: Vec<T>) -> Vec<T> {
        items
            .into_iter()
            .skip(self.offset)
            .take(self.limit)
            .collect()
    }

    /// The cursor of the following page.
    pub(crate) fn next_cursor(&self) -> String {
        format!("o:{}", self.offset.saturating_add(self.limit))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_cut_long_lists() {
        let page = Page::from_params(Some(2), None).unwrap();
        assert!(page.has_more(3));
        assert!(!page.has_more(2));
        assert_eq!(page.slice(vec![1, 2, 3]), [1, 2]);
        assert_eq!(page.next_cursor(), "o:2");
        let next = Page::from_params(Some(2), Some("o:2")).unwrap();
        assert_eq!(next.slice(vec![1, 2, 3]), [3]);
        assert!(!next.has_more(3));
    }

    #[test]
    fn bad_pages_are_invalid_params() {
        assert!(Page::from_params(Some(0), None).is_err());
        assert!(Page::from_params(None, Some("x")).is_err());
        assert_eq!(
            Page::from_params(None, None).unwrap(),
            Page {
                offset: 0,
                limit: 200
            }
        );
    }
}
