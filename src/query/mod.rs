//! Query functions: every tool answer is computed here, from a SQLite connection, as typed
//! structs that serialize to the tool's JSON.
//!
//! Invariants: query functions take a `&rusqlite::Connection` (read-only) and plain arguments,
//! return `Result<T, QueryError>` with `T: Serialize`, and know nothing about MCP or rmcp. The
//! CLI, the MCP tools and the benchmarks all call these same functions. SQL lives beside the
//! function that runs it; every lookup on a tool's hot path uses an index.

pub mod acp_query;
pub mod architecture;
pub mod check_constraints;
pub mod cli_shape;
pub mod constraints;
pub mod context;
pub mod cursor;
pub mod domain_files;
pub mod entries;
pub mod expand;
pub mod file_context;
pub mod fts_text;
pub mod graph;
pub mod hotpaths;
pub mod impact;
pub mod lookup;
pub mod names;
pub mod ordered;
pub mod primer;
pub mod resources;
pub mod search;
pub mod similar;
pub mod staleness;
pub mod symbol_context;
pub mod trace;
pub mod unused;

use std::fmt;

/// A query failure, mapped by the protocol layer to a JSON-RPC error.
#[derive(Debug)]
pub enum QueryError {
    /// Missing or invalid arguments, or a name that does not exist (JSON-RPC -32602). The message
    /// is shown to the agent as is and should say what it can do next.
    InvalidParams {
        /// Human-readable message.
        message: String,
        /// Optional structured detail (e.g. `{"suggestions": [...]}` or `{"candidates": [...]}`).
        data: Option<serde_json::Value>,
    },
    /// A database or serialization failure (JSON-RPC -32603).
    Internal(String),
}

impl QueryError {
    /// An invalid-params error without data.
    pub fn invalid(message: impl Into<String>) -> QueryError {
        QueryError::InvalidParams {
            message: message.into(),
            data: None,
        }
    }

    /// An invalid-params error with structured data.
    pub fn invalid_with(message: impl Into<String>, data: serde_json::Value) -> QueryError {
        QueryError::InvalidParams {
            message: message.into(),
            data: Some(data),
        }
    }
}

impl fmt::Display for QueryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QueryError::InvalidParams { message, .. } => f.write_str(message),
            QueryError::Internal(message) => write!(f, "internal error: {message}"),
        }
    }
}

impl std::error::Error for QueryError {}

impl From<rusqlite::Error> for QueryError {
    fn from(err: rusqlite::Error) -> Self {
        QueryError::Internal(format!("SQLite error: {err}"))
    }
}

impl From<serde_json::Error> for QueryError {
    fn from(err: serde_json::Error) -> Self {
        QueryError::Internal(format!("JSON error: {err}"))
    }
}

/// Result type of every query function.
pub type QueryResult<T> = Result<T, QueryError>;

/// Drops a parameter struct's own description from its input schema, so the schema equals the
/// reference server's (whose parameter structs carry no doc comment).
pub(crate) fn without_description(schema: &mut schemars::Schema) {
    schema.remove("description");
}
