//! The code map of ARCHITECTURE.md, enforced: which top-level modules each module may use (the
//! table below, in the map's order, each using only modules before it), that no two files of
//! `src/` import each other through any chain of imports, and that only the protocol layer (and
//! the benchmark's MCP clients) speaks rmcp.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Each top-level module of `src/` and the modules it may use (`crate::<name>`), in the order of
/// the code map of ARCHITECTURE.md: a module may use only modules listed before it.
const ALLOWED: &[(&str, &[&str])] = &[
    ("hex", &[]),
    ("regular_file", &[]),
    ("cache", &["hex", "regular_file"]),
    ("sqlite_locks", &["regular_file"]),
    ("statement_audit", &[]),
    ("db", &["sqlite_locks"]),
    ("replace", &["regular_file"]),
    ("config", &["hex", "regular_file"]),
    ("project", &["config"]),
    ("args", &[]),
    ("schemas", &[]),
    ("logging", &[]),
    ("priority", &[]),
    ("gen", &["cache"]),
    (
        "freshness",
        &["cache", "config", "db", "hex", "project", "regular_file"],
    ),
    ("query", &["cache", "db", "hex", "regular_file"]),
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
    ("client_config", &["project", "regular_file", "replace"]),
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

/// A source text without its comments and without its unit tests (a `mod tests` block, which
/// ends every file that has one, uses its own file through `super::`).
fn code_of(text: &str) -> String {
    let mut code = String::new();
    for line in text.lines() {
        if line.starts_with("mod tests") {
            break;
        }
        let line = match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        };
        code.push_str(line);
        code.push('\n');
    }
    code
}

/// Expands a `use` tree (`a::{b, c::{d, e}}`, whitespace removed) into its paths.
fn expand_use_tree(tree: &str) -> Vec<String> {
    let Some(open) = tree.find('{') else {
        return vec![tree.to_string()];
    };
    let prefix = &tree[..open];
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
        .into_iter()
        .filter(|part| !part.is_empty())
        .flat_map(|part| expand_use_tree(&format!("{prefix}{part}")))
        .collect()
}

/// Every path of a source text (`a::b`): those of its `use` declarations, grouped ones
/// expanded and `as` renamings cut off, and those written in the code.
fn module_paths(text: &str) -> Vec<String> {
    let code = code_of(text);
    let mut paths = Vec::new();
    let mut rest = code.as_str();
    let mut outside_uses = String::new();
    while let Some(at) = find_use(rest) {
        outside_uses.push_str(&rest[..at]);
        let after = &rest[at..];
        let end = after.find(';').unwrap_or(after.len());
        let words: Vec<&str> = after["use ".len()..end].split_whitespace().collect();
        // `a as b` becomes `a@b` before the spaces go, so that the renaming can be cut off.
        let tree = words.join(" ").replace(" as ", "@").replace(' ', "");
        paths.extend(
            expand_use_tree(&tree)
                .into_iter()
                .map(|p| p.split('@').next().unwrap_or_default().to_string()),
        );
        rest = &after[end..];
    }
    outside_uses.push_str(rest);
    let mut scan = outside_uses.as_str();
    while let Some(at) = scan.find("::") {
        let start = scan[..at]
            .rfind(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .map_or(0, |i| i + 1);
        let path: String = scan[start..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
            .collect();
        paths.push(path.trim_end_matches(':').to_string());
        scan = &scan[start + path.len().max(at - start + 2)..];
    }
    paths
}

/// The offset of the next `use` declaration in `code`.
fn find_use(code: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(at) = code[from..].find("use ") {
        let at = from + at;
        let line_start = code[..at].rfind('\n').map_or(0, |n| n + 1);
        let head = code[line_start..at].trim();
        if head.is_empty() || head == "pub" || (head.starts_with("pub(") && head.ends_with(')')) {
            return Some(at);
        }
        from = at + "use ".len();
    }
    None
}

/// The module path of a source file (`import/delta.rs` → `import::delta`, `import/mod.rs` →
/// `import`).
fn module_of(relative: &str) -> Vec<String> {
    let mut parts: Vec<String> = relative
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_string)
        .collect();
    if parts.last().is_some_and(|last| last == "mod") {
        parts.pop();
    }
    parts
}

/// The file of the module a path names (the deepest module along it), given the file that
/// writes it and every module's file; `None` for the crate root.
fn file_of_path(from: &str, path: &str, files: &BTreeMap<Vec<String>, String>) -> Option<String> {
    let mut segments = path.split("::").filter(|s| !s.is_empty()).peekable();
    let mut module = module_of(from);
    match segments.next()? {
        "crate" => module.clear(),
        "self" => {}
        "super" => {
            module.pop();
            while segments.peek() == Some(&"super") {
                segments.next();
                module.pop();
            }
        }
        // A path may start at a child module of the file's own (`use loader::Loader;`).
        child => {
            module.push(child.to_string());
            if !files.contains_key(&module) {
                return None;
            }
        }
    }
    for segment in segments {
        let mut deeper = module.clone();
        deeper.push(segment.to_string());
        if !files.contains_key(&deeper) {
            break;
        }
        module = deeper;
    }
    files.get(&module).cloned()
}

/// The loops of imports between the files of `sources` (relative path, text): each loop as the
/// files on it, every one using the next and the last the first.
fn import_loops(sources: &[(String, String)]) -> Vec<Vec<String>> {
    let files: BTreeMap<Vec<String>, String> = sources
        .iter()
        .filter(|(relative, _)| relative != "lib.rs" && relative != "main.rs")
        .map(|(relative, _)| (module_of(relative), relative.clone()))
        .collect();
    let mut uses: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for (relative, text) in sources {
        if !files.values().any(|f| f == relative) {
            continue;
        }
        let targets = module_paths(text)
            .iter()
            .filter_map(|path| file_of_path(relative, path, &files))
            .filter(|target| target != relative)
            .collect();
        uses.insert(relative.as_str(), targets);
    }
    // Files that reach each other are on one loop; each group is reported once, as its files
    // in order, followed by the uses between them.
    let reach = |start: &str| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![start.to_string()];
        while let Some(file) = stack.pop() {
            for next in uses.get(file.as_str()).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    stack.push(next.clone());
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&str, BTreeSet<String>> =
        uses.keys().map(|file| (*file, reach(file))).collect();
    let mut loops = BTreeSet::new();
    for (file, from_file) in &reached {
        let group: Vec<String> = from_file
            .iter()
            .filter(|other| {
                reached
                    .get(other.as_str())
                    .is_some_and(|r| r.contains(*file))
            })
            .cloned()
            .collect();
        if !group.is_empty() {
            loops.insert(group);
        }
    }
    loops
        .into_iter()
        .map(|group| {
            let mut described = group.clone();
            for file in &group {
                for next in uses[file.as_str()].iter().filter(|n| group.contains(n)) {
                    described.push(format!("  {file} uses {next}"));
                }
            }
            described
        })
        .collect()
}

/// The top-level modules that the paths of a source text name (`crate::<name>`).
fn crate_modules(text: &str) -> Vec<(String, String)> {
    module_paths(text)
        .into_iter()
        .filter_map(|path| {
            let module = path
                .strip_prefix("crate::")?
                .split("::")
                .next()?
                .to_string();
            Some((module, path))
        })
        .collect()
}

fn top_module(relative: &str) -> &str {
    relative.split('/').next().unwrap().trim_end_matches(".rs")
}

/// The modules of the code map of ARCHITECTURE.md, in its order (`src/main.rs` left out).
fn architecture_order(text: &str) -> Vec<String> {
    let map = text
        .split("## Code map")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .unwrap_or_default();
    map.lines()
        .filter_map(|line| line.strip_prefix("- `src/"))
        .filter_map(|line| line.split('`').next())
        .map(|name| {
            name.trim_end_matches('/')
                .trim_end_matches(".rs")
                .to_string()
        })
        .filter(|name| name != "main")
        .collect()
}

/// Where `ALLOWED`'s order and ARCHITECTURE.md's differ, and the modules `ALLOWED` lets use a
/// module listed after them.
fn order_mismatches(allowed: &[(&str, &[&str])], architecture: &[String]) -> Vec<String> {
    let table: Vec<String> = allowed.iter().map(|(m, _)| m.to_string()).collect();
    let mut found = Vec::new();
    if table != architecture {
        found.push(format!(
            "ARCHITECTURE.md lists the modules as\n  {architecture:?}\nthe table as\n  {table:?}"
        ));
    }
    for (at, (module, uses)) in allowed.iter().enumerate() {
        for used in *uses {
            if !allowed[..at].iter().any(|(m, _)| m == used) {
                found.push(format!("`{module}` may use `{used}`, listed after it"));
            }
        }
    }
    found
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
        for (used, path) in crate_modules(&text) {
            if used == module {
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

#[test]
fn no_file_imports_from_a_file_that_imports_it() {
    let loops = import_loops(&sources());
    let text: Vec<String> = loops.iter().map(|l| l.join("\n")).collect();
    assert!(loops.is_empty(), "loops of imports:\n{}", text.join("\n"));
}

#[test]
fn a_loop_of_imports_is_found() {
    let file = |path: &str, text: &str| (path.to_string(), text.to_string());
    let sources = [
        file("a/mod.rs", "mod x;\nmod y;\npub fn go() { x::run() }\n"),
        file("a/x.rs", "use super::y::{self, Helper};\npub fn run() {}\n"),
        file("a/z.rs", "use super::go;\n"),
        file("a/y.rs", "pub fn f() { crate::a::x::run() }\n"),
        file("b.rs", "use crate::{a::y, c};\n"),
        file(
            "c.rs",
            "// crate::b::f\nfn g() {}\n#[cfg(test)]\nmod tests {\n    use super::*;\n}\n",
        ),
    ];
    let loops = import_loops(&sources);
    assert_eq!(
        loops,
        [[
            "a/x.rs",
            "a/y.rs",
            "  a/x.rs uses a/y.rs",
            "  a/y.rs uses a/x.rs"
        ]]
    );
    assert_eq!(
        crate_modules(&sources[4].1),
        [
            ("a".to_string(), "crate::a::y".to_string()),
            ("c".to_string(), "crate::c".to_string())
        ]
    );
}

#[test]
fn the_code_map_lists_the_modules_in_the_tables_order() {
    let text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("ARCHITECTURE.md"))
            .unwrap();
    let mismatches = order_mismatches(ALLOWED, &architecture_order(&text));
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

#[test]
fn an_order_that_differs_from_the_table_is_found() {
    let allowed: &[(&str, &[&str])] = &[
        ("hex", &[]),
        ("cache", &["hex", "regular_file"]),
        ("regular_file", &[]),
    ];
    let text = "# A\n## Code map\n\n- `src/hex.rs`: x\n- `src/regular_file.rs`: y\n- `src/cache/`: z\n- `src/main.rs`: w\n\n## Other\n- `src/zzz.rs`\n";
    assert_eq!(architecture_order(text), ["hex", "regular_file", "cache"]);
    let found = order_mismatches(allowed, &architecture_order(text));
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(
        found[1].contains("`cache` may use `regular_file`"),
        "{found:?}"
    );
}
