//! The code map of ARCHITECTURE.md, enforced: which top-level modules each module may use, that
//! those edges form no cycle, and that only the protocol layer (and the stdio benchmark, an MCP
//! client) speaks rmcp.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Each top-level module of `src/` and the modules it may use (`crate::<name>`).
const ALLOWED: &[(&str, &[&str])] = &[
    ("args", &[]),
    ("hex", &[]),
    ("cache", &["hex", "regular_file"]),
    ("config", &["hex", "regular_file"]),
    ("sqlite_locks", &[]),
    ("statement_audit", &[]),
    ("db", &["sqlite_locks"]),
    ("logging", &[]),
    ("priority", &[]),
    ("regular_file", &[]),
    ("project", &["config"]),
    ("replace", &[]),
    ("schemas", &[]),
    ("gen", &["cache"]),
    (
        "freshness",
        &["config", "db", "hex", "project", "regular_file"],
    ),
    ("query", &["cache", "db", "hex"]),
    (
        "journal",
        &[
            "config",
            "db",
            "hex",
            "project",
            "regular_file",
            "replace",
            "schemas",
            "sqlite_locks",
        ],
    ),
    (
        "import",
        &[
            "cache",
            "config",
            "db",
            "freshness",
            "priority",
            "project",
            "regular_file",
            "replace",
            "sqlite_locks",
        ],
    ),
    ("export", &["db", "project", "query"]),
    ("console", &["db", "freshness", "hex", "project"]),
    (
        "tools",
        &[
            "args",
            "db",
            "freshness",
            "project",
            "query",
            "regular_file",
            "schemas",
        ],
    ),
    (
        "mcp",
        &[
            "args",
            "cache",
            "db",
            "freshness",
            "import",
            "journal",
            "logging",
            "priority",
            "project",
            "query",
            "regular_file",
            "replace",
            "schemas",
            "sqlite_locks",
            "tools",
        ],
    ),
    ("bench", &["db", "gen", "mcp", "project", "query", "tools"]),
];

/// Narrower rules inside an allowed edge: (module, path it may use of the other).
const ONLY: &[(&str, &str, &[&str])] = &[(
    "bench",
    "mcp",
    &["crate::mcp::errors", "crate::mcp::http::read_token"],
)];

/// Files that may use rmcp.
fn may_use_rmcp(relative: &str) -> bool {
    relative.starts_with("mcp/") || relative == "bench/stdio.rs" || relative == "bench/http.rs"
}

fn sources() -> Vec<(String, String)> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    walk(&root, &mut files);
    files
        .into_iter()
        .map(|path| {
            let relative = path
                .strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            (relative, std::fs::read_to_string(&path).unwrap())
        })
        .collect()
}

/// The names following `crate::` in a source text.
fn crate_paths(text: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("crate::") {
        let after = &rest[at..];
        let path: String = after
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
            .collect();
        let module = path["crate::".len()..]
            .split("::")
            .next()
            .unwrap_or_default()
            .to_string();
        found.push((module, path));
        rest = &rest[at + "crate::".len()..];
    }
    found
}

fn top_module(relative: &str) -> &str {
    relative.split('/').next().unwrap().trim_end_matches(".rs")
}

#[test]
fn modules_use_only_what_the_map_allows() {
    let allowed: BTreeMap<&str, &[&str]> = ALLOWED.iter().copied().collect();
    let mut violations = Vec::new();
    for (relative, text) in sources() {
        let module = top_module(&relative);
        if module == "main" || module == "lib" {
            continue;
        }
        let Some(may) = allowed.get(module) else {
            violations.push(format!("{relative}: module `{module}` is not in the map"));
            continue;
        };
        for (used, path) in crate_paths(&text) {
            if used == module || used.is_empty() {
                continue;
            }
            if !may.contains(&used.as_str()) {
                violations.push(format!("{relative}: `{module}` uses `{path}`"));
                continue;
            }
            for (from, to, prefixes) in ONLY {
                if *from == module && *to == used && !prefixes.iter().any(|p| path.starts_with(p)) {
                    violations.push(format!(
                        "{relative}: `{module}` may use only {prefixes:?}, not {path}"
                    ));
                }
            }
        }
    }
    assert!(violations.is_empty(), "{}", violations.join("\n"));
}

#[test]
fn the_module_map_has_no_cycle() {
    let mut left: BTreeMap<&str, BTreeSet<&str>> = ALLOWED
        .iter()
        .map(|(module, uses)| (*module, uses.iter().copied().collect()))
        .collect();
    while !left.is_empty() {
        let ready: Vec<&str> = left
            .iter()
            .filter(|(_, uses)| uses.iter().all(|u| !left.contains_key(u)))
            .map(|(module, _)| *module)
            .collect();
        assert!(!ready.is_empty(), "a cycle among {:?}", left.keys());
        for module in ready {
            left.remove(module);
        }
    }
}

#[test]
fn only_the_protocol_layer_speaks_rmcp() {
    let offenders: Vec<String> = sources()
        .into_iter()
        .filter(|(relative, text)| {
            !may_use_rmcp(relative) && (text.contains("rmcp::") || text.contains("use rmcp"))
        })
        .map(|(relative, _)| relative)
        .collect();
    assert!(offenders.is_empty(), "rmcp used in {offenders:?}");
}
