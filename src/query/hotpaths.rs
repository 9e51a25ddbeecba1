//! `acp_get_hotpaths`: the most called names of the call graph, acp-mcp's way.
//!
//! acp-mcp counts the raw length of every `graph.reverse` list (duplicates included), takes the
//! 20 longest and keeps those whose name is a key of `symbols`. The counts come from the
//! `hot_nodes` summary table, filled at import from `graph_nodes.reverse_len`; ties, which
//! acp-mcp leaves in hash order, are broken by name.

use rusqlite::{params, Connection, OptionalExtension};
use serde::Serialize;

use super::QueryResult;
use crate::db::HOTPATH_SLOTS;

/// One hot symbol.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Hotpath {
    /// The `graph.reverse` key (the symbol's map key).
    pub name: String,
    /// Length of its raw `graph.reverse` list.
    pub caller_count: i64,
    /// The symbol's `file` value.
    pub file: String,
    /// The symbol type as a Rust debug name (`Function`, `Method`, …).
    pub symbol_type: String,
}

/// The top [`HOTPATH_SLOTS`] `graph.reverse` keys by list length, kept when they are symbol keys.
pub fn hotpaths(conn: &Connection) -> QueryResult<Vec<Hotpath>> {
    let mut slots: Vec<(String, i64)> = conn
        .prepare_cached("SELECT name, reverse_len FROM hot_nodes ORDER BY rank LIMIT ?1")?
        .query_map([HOTPATH_SLOTS as i64], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    if slots.len() < HOTPATH_SLOTS {
        let empty: Vec<String> = conn
            .prepare_cached(
                "SELECT n.name FROM graph_lists l JOIN graph_nodes n ON n.id = l.node_id
                 WHERE l.reverse = 1 AND l.items = x'' ORDER BY n.name LIMIT ?1",
            )?
            .query_map([(HOTPATH_SLOTS - slots.len()) as i64], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        slots.extend(empty.into_iter().map(|key| (key, 0)));
    }
    let mut symbol = conn.prepare_cached("SELECT file, type FROM symbols WHERE key = ?1")?;
    let mut out = Vec::new();
    for (name, caller_count) in slots {
        let found: Option<(Option<String>, Option<String>)> = symbol
            .query_row(params![name], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        if let Some((file, kind)) = found {
            out.push(Hotpath {
                name,
                caller_count,
                file: file.unwrap_or_default(),
                symbol_type: debug_name(kind.as_deref().unwrap_or("function")),
            });
        }
    }
    Ok(out)
}

/// The Rust debug name of an ACP enum value: `function` → `Function`, `c-sharp` → `CSharp`.
/// Unknown values get their first letter upper-cased.
pub(crate) fn debug_name(id: &str) -> String {
    match id {
        "c-sharp" => "CSharp".into(),
        _ => {
            let mut chars = id.chars();
            match chars.next() {
                Some(first) => first.to_uppercase().chain(chars).collect(),
                None => String::new(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_names() {
        assert_eq!(debug_name("function"), "Function");
        assert_eq!(debug_name("typescript"), "Typescript");
        assert_eq!(debug_name("c-sharp"), "CSharp");
        assert_eq!(debug_name("cpp"), "Cpp");
        assert_eq!(debug_name("zig"), "Zig");
    }
}
