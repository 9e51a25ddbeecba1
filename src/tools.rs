//! Tool dispatch by name: the same query functions the MCP tools call, reachable from the CLI
//! (`acpdb query`) and the in-process benchmark without the protocol.

use rusqlite::Connection;
use serde_json::Value;

use crate::query::{QueryError, QueryResult};

/// Names of the read-only tools answered from the index.
pub const INDEX_TOOLS: &[&str] = &[];

/// Calls the read-only tool `name` with JSON `args`; returns the answer's JSON text exactly as
/// the MCP tool returns it.
pub fn call(_conn: &Connection, name: &str, _args: &Value) -> QueryResult<String> {
    Err(QueryError::invalid(format!("Unknown tool: {name}. Valid tools: {}", INDEX_TOOLS.join(", "))))
}
