//! The debug/hack journal behind the RFC-0013 tools `acp_debug` (debug sessions and their
//! attempts) and `acp_hack` (temporary-code markers).
//!
//! The journal lives in its own SQLite database (the project uses `.acp/acp.journal.db`),
//! which index imports never touch. Every action runs in one `BEGIN IMMEDIATE` transaction on a
//! WAL database with `synchronous=FULL`, so an acknowledged entry survives a crash, concurrent
//! writers (threads or processes) are serialised, and ids are allocated inside the transaction
//! that stores them.
//!
//! After every debug write (and on demand) the journal rewrites `.acp/acp.attempts.json`
//! atomically in the format of the ACP attempts schema (mapping in `docs/attempts-mapping.md`).
//! Records others wrote into that file (acp-cli's `acp attempt`, people) are imported the first
//! time the journal sees them and re-emitted by every export; their transitions of journal
//! attempts (`acp attempt verify/fail/revert`) are applied to the journal.
//!
//! Module map: `debug` and `hack` implement the actions, `attempts` the file format, `paths`
//! the confinement of paths to the project root, `files` bounded reads of regular files, `cli`
//! the command-line mirrors.

mod action;
mod attempts;
mod cli;
mod debug;
mod files;
mod hack;
mod md5;
mod paths;
mod store;

use std::sync::Arc;

pub use action::{JournalError, FILE_LIMIT, TEXT_LIMIT};

pub use attempts::{ExportReport, ATTEMPTS_SCHEMA};
pub use cli::{
    run_debug, run_export_attempts, run_hack, DebugArgs, DebugCommand, ExportAttemptsArgs,
    HackArgs, HackCommand,
};
pub use debug::{DebugData, DebugRequest};
pub use hack::{HackData, HackRequest};
pub use index::{CacheHack, ProjectIndex};
pub use store::{Clock, Journal, Response};

pub mod index;

/// The JSON Schema of `acp_debug`'s answers (its MCP `outputSchema`).
pub fn debug_answer_schema() -> Arc<crate::schemas::Schema> {
    debug::answer_schema()
}

/// The JSON Schema of `acp_hack`'s answers (its MCP `outputSchema`).
pub fn hack_answer_schema() -> Arc<crate::schemas::Schema> {
    hack::answer_schema()
}

impl Journal {
    /// Runs an `acp_debug` action.
    pub fn debug(&self, request: DebugRequest) -> Result<Response, JournalError> {
        debug::run(self, request)
    }

    /// Runs an `acp_hack` action.
    pub fn hack(&self, request: HackRequest) -> Result<Response, JournalError> {
        hack::run(self, request)
    }
}
