//! Every JSON-RPC error code acpdb answers, and the mapping of each layer's errors to them.
//! The query layer, the journal and the index state say *what* went wrong; only this module
//! says which code that is.

use rmcp::model::ErrorCode;
use rmcp::ErrorData;

use super::state::{Unavailable, UnavailableReason};
use crate::journal::JournalError;
use crate::project::Project;
use crate::query::resources::{resource_templates, ResourceError};
use crate::query::QueryError;

/// JSON-RPC 2.0: the line is not JSON (or too long or deep to read).
pub(crate) const PARSE_ERROR: i32 = -32700;
/// JSON-RPC 2.0: the JSON is not a valid request.
pub(crate) const INVALID_REQUEST: i32 = -32600;
/// JSON-RPC 2.0: invalid arguments, or a name that does not exist.
pub(crate) const INVALID_PARAMS: i32 = -32602;
/// JSON-RPC 2.0: the server failed (database or file system trouble).
pub(crate) const INTERNAL_ERROR: i32 = -32603;
/// There is no ACP cache to serve: run `acp index`.
pub const NO_CACHE: i32 = -32000;
/// The cache could not be imported and no earlier import can answer.
pub const IMPORT_FAILED: i32 = -32001;
/// MCP: no resource at this URI.
pub const RESOURCE_NOT_FOUND: i32 = -32002;
/// The first import is running; retry shortly.
pub const INDEX_BUILDING: i32 = -32003;
/// The query ran past the server's time limit.
pub const QUERY_TIME_LIMIT: i32 = -32004;

/// The server is read-only: the journal tools are not served here.
pub const JOURNAL_READ_ONLY: i32 = -32005;

/// A query-layer error.
pub(crate) fn query(err: QueryError) -> ErrorData {
    match err {
        QueryError::InvalidParams { message, data } => {
            ErrorData::new(ErrorCode(INVALID_PARAMS), message, data)
        }
        QueryError::Internal(message) => ErrorData::new(ErrorCode(INTERNAL_ERROR), message, None),
    }
}

/// A journal error.
pub(crate) fn journal(err: JournalError) -> ErrorData {
    let code = match err {
        JournalError::InvalidParams(_) => INVALID_PARAMS,
        JournalError::Internal(_) => INTERNAL_ERROR,
    };
    ErrorData::new(ErrorCode(code), err.message().to_string(), None)
}

/// Why the index cannot answer.
pub(crate) fn unavailable(err: Unavailable) -> ErrorData {
    let code = match err.reason {
        UnavailableReason::NoCache => NO_CACHE,
        UnavailableReason::ImportFailed => IMPORT_FAILED,
        UnavailableReason::Building => INDEX_BUILDING,
    };
    ErrorData::new(ErrorCode(code), err.message, err.data)
}

/// A resource that cannot be read.
pub(crate) fn resource(err: ResourceError) -> ErrorData {
    match err {
        ResourceError::NotFound { uri } => ErrorData::new(
            ErrorCode(RESOURCE_NOT_FOUND),
            format!("Resource not found: {uri}"),
            Some(serde_json::json!({
                "uri": uri,
                "templates": resource_templates().into_iter().map(|t| t.uri_template).collect::<Vec<_>>(),
            })),
        ),
        ResourceError::Query(err) => query(err),
    }
}

/// A query interrupted by the time limit of `seconds`.
pub(crate) fn time_limit(seconds: f64) -> ErrorData {
    ErrorData::new(
        ErrorCode(QUERY_TIME_LIMIT),
        format!(
            "Query interrupted after {seconds} s, the server's time limit: ask for less (a \
             smaller depth or limit, a longer pattern), or raise the limit with acpdb serve \
             --query-timeout SECONDS"
        ),
        Some(serde_json::json!({"time_limit_seconds": seconds})),
    )
}

/// Arguments that do not fit a tool's input schema.
pub(crate) fn invalid_params(message: impl Into<String>) -> ErrorData {
    ErrorData::new(ErrorCode(INVALID_PARAMS), message.into(), None)
}

/// A failure of the server itself.
pub(crate) fn internal(message: impl Into<String>) -> ErrorData {
    ErrorData::new(ErrorCode(INTERNAL_ERROR), message.into(), None)
}

/// A journal tool called on a read-only server: names where the journal lives instead.
pub(crate) fn journal_read_only(project: &Project) -> ErrorData {
    let journal = project
        .journal_db
        .strip_prefix(&project.root)
        .unwrap_or(&project.journal_db);
    let attempts = project
        .attempts
        .strip_prefix(&project.root)
        .unwrap_or(&project.attempts);
    ErrorData::new(
        ErrorCode(JOURNAL_READ_ONLY),
        format!(
            "This server is read-only (acpdb serve --read-only) and does not keep a journal: \
             acp_debug and acp_hack record into the journal in your own checkout, \
             {} (exported to {}). Run `acpdb serve` (stdio) in your checkout for them.",
            journal.display(),
            attempts.display()
        ),
        Some(serde_json::json!({"journal": journal, "attempts": attempts})),
    )
}
