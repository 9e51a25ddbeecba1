//! acpdb's integration tests, in one binary: the real `acpdb` binary over its CLI and over MCP
//! (rmcp's client on real stdio), and the library's query and journal APIs on imported
//! databases. `common` holds the shared fixtures and helpers.

mod common;

mod bench;
mod cli;
mod client_config;
mod config;
mod console;
mod datasette;
mod delta;
mod fleet;
mod gen;
mod graph_questions;
mod http;
mod impact;
mod import;
mod journal;
mod mcp;
mod prompts;
mod queries;
mod reference_parity;
mod scans;
mod staleness;
mod tidy;
mod typed;
