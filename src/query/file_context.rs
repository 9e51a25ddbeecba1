//! `acp_get_file_context`: one file entry, re-serialised the way acp-cli writes it
//! ([`super::cli_shape`]).

use rusqlite::Connection;
use schemars::JsonSchema;
use serde::Deserialize;

use super::cli_shape::cli_file_entry;
use super::entries::FILES;
use super::names::{find_file, not_found, suggest_files};
use super::ordered::Entry;
use super::{without_description, QueryResult};

/// Arguments of `acp_get_file_context`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[schemars(transform = without_description)]
pub struct GetFileContextParams {
    /// Path to the file (relative to project root)
    pub path: String,
}

/// Finds a file like acp-mcp's `Cache::get_file` does (exact key, then normalised forms) and
/// returns its entry in acp-cli's shape. Also accepts paths whose canonical form names an
/// indexed file (absolute paths under the project root, Windows separators in keys).
pub fn file_context(conn: &Connection, params: &GetFileContextParams) -> QueryResult<Entry> {
    let found = match find_file(conn, &params.path)? {
        Some(file) => Some(file),
        None => {
            let normalized = acp_cli_normalize_path(&params.path);
            if normalized == params.path {
                None
            } else {
                find_file(conn, &normalized)?
            }
        }
    };
    let Some(file) = found else {
        return Err(not_found(
            "File",
            &params.path,
            suggest_files(conn, &params.path)?,
        ));
    };
    let entry = FILES
        .load(conn, "id", &file.id)?
        .ok_or_else(|| not_found("File", &params.path, Vec::new()))?;
    Ok(cli_file_entry(entry))
}

/// acp-cli's `normalize_path`: `\` → `/`, empty and `.` segments dropped, `..` pops (and is
/// dropped at the start), no leading `/`.
pub(crate) fn acp_cli_normalize_path(path: &str) -> String {
    let slashed = path.replace('\\', "/");
    let mut parts: Vec<&str> = Vec::new();
    for part in slashed.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            other => parts.push(other),
        }
    }
    parts.join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalises_like_acp_cli() {
        assert_eq!(acp_cli_normalize_path("../src/a.ts"), "src/a.ts");
        assert_eq!(acp_cli_normalize_path("/src/a.ts"), "src/a.ts");
        assert_eq!(acp_cli_normalize_path(".\\src\\a.ts"), "src/a.ts");
        assert_eq!(acp_cli_normalize_path("src//b/./../a.ts/"), "src/a.ts");
    }
}
