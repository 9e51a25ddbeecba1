//! acpdb: turns an ACP code index (`.acp/acp.cache.json`) into a SQLite database and serves it
//! to AI agents over MCP.
//!
//! The data path is `cache` (streaming reader) → `import` (bulk load into the schema of
//! `migrations/index`) → `query` (typed query functions) → `mcp` (the protocol layer).
//! See `ARCHITECTURE.md` for the code map and the invariants each module keeps.

pub mod args;
pub mod bench;
pub mod cache;
pub mod client_config;
pub mod config;
pub mod console;
pub mod db;
pub mod export;
pub mod freshness;
pub mod gen;
pub mod hex;
pub mod import;
pub mod journal;
pub mod logging;
pub mod mcp;
pub mod priority;
pub mod project;
pub mod query;
pub mod regular_file;
pub mod replace;
pub mod schemas;
pub mod sqlite_locks;
pub mod statement_audit;
pub mod tools;
