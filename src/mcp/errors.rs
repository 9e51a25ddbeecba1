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

/// The longest error message sent (2 KiB): messages quote what the caller gave (a name, a
/// URI), which may be as long as a request.
const MAX_MESSAGE_BYTES: usize = 2048;

/// An error answer with `code`, its message cut to [`MAX_MESSAGE_BYTES`].
fn error(code: i32, message: impl Into<String>, data: Option<serde_json::Value>) -> ErrorData {
    ErrorData::new(ErrorCode(code), shorten(message.into()), data)
}

/// `text` if it fits in [`MAX_MESSAGE_BYTES`], else its start and how much was left out.
fn shorten(mut text: String) -> String {
    if text.len() <= MAX_MESSAGE_BYTES {
        return text;
    }
    let total = text.len();
    let mut cut = MAX_MESSAGE_BYTES;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    text.truncate(cut);
    text.push_str(&format!("… ({} of {total} bytes left out)", total - cut));
    text
}

/// Whether `error` is an answer of the index as much as a result is: the same arguments get
/// it again until the index changes (a name that does not exist, with its suggestions), so it
/// may be kept with the answers ([`super::answer_cache`]). Time limits and failures are not.
pub(crate) fn decided_by_the_index(error: &ErrorData) -> bool {
    error.code.0 == INVALID_PARAMS
}

/// A query-layer error.
pub(crate) fn query(err: QueryError) -> ErrorData {
    match err {
        QueryError::InvalidParams { message, data } => error(INVALID_PARAMS, message, data),
        QueryError::Internal(message) => error(INTERNAL_ERROR, message, None),
    }
}

/// A journal error.
pub(crate) fn journal(err: JournalError) -> ErrorData {
    let code = match err {
        JournalError::InvalidParams(_) => INVALID_PARAMS,
        JournalError::Internal(_) => INTERNAL_ERROR,
    };
    error(code, err.message().to_string(), None)
}

/// Why the index cannot answer.
pub(crate) fn unavailable(err: Unavailable) -> ErrorData {
    let code = match err.reason {
        UnavailableReason::NoCache => NO_CACHE,
        UnavailableReason::ImportFailed => IMPORT_FAILED,
        UnavailableReason::Building => INDEX_BUILDING,
    };
    error(code, err.message, err.data)
}

/// A resource that cannot be read.
pub(crate) fn resource(err: ResourceError) -> ErrorData {
    match err {
        ResourceError::NotFound { uri } => error(
            RESOURCE_NOT_FOUND,
            format!("Resource not found: {uri}"),
            Some(serde_json::json!({
                "uri": shorten(uri),
                "templates": resource_templates().into_iter().map(|t| t.uri_template).collect::<Vec<_>>(),
            })),
        ),
        ResourceError::Query(err) => query(err),
    }
}

/// A query interrupted by the time limit of `seconds`.
pub(crate) fn time_limit(seconds: f64) -> ErrorData {
    error(
        QUERY_TIME_LIMIT,
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
    error(INVALID_PARAMS, message.into(), None)
}

/// Arguments that name something unknown, with `data` saying what is known.
pub(crate) fn invalid_params_with(
    message: impl Into<String>,
    data: serde_json::Value,
) -> ErrorData {
    error(INVALID_PARAMS, message, Some(data))
}

/// A failure of the server itself.
pub(crate) fn internal(message: impl Into<String>) -> ErrorData {
    error(INTERNAL_ERROR, message.into(), None)
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
    error(
        JOURNAL_READ_ONLY,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_messages_are_cut_on_a_character_boundary_saying_how_much() {
        assert_eq!(shorten("short".into()), "short");
        let long = "é".repeat(MAX_MESSAGE_BYTES);
        let cut = shorten(long.clone());
        let kept = MAX_MESSAGE_BYTES / 2 * 2;
        assert_eq!(
            cut,
            format!(
                "{}… ({} of {} bytes left out)",
                &long[..kept],
                long.len() - kept,
                long.len()
            )
        );
    }
}
