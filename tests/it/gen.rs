//! `acpdb gen-fixture`: the real binary writes a deterministic, schema-valid synthetic cache and
//! vars file whose parts agree with each other.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    stderr: String,
}

impl Fixture {
    fn cache_path(&self) -> PathBuf {
        self.root.join(".acp/acp.cache.json")
    }

    fn vars_path(&self) -> PathBuf {
        self.root.join(".acp/acp.vars.json")
    }

    fn cache_bytes(&self) -> Vec<u8> {
        std::fs::read(self.cache_path()).expect("cache written")
    }

    fn vars_bytes(&self) -> Vec<u8> {
        std::fs::read(self.vars_path()).expect("vars written")
    }

    fn cache(&self) -> Value {
        serde_json::from_slice(&self.cache_bytes()).expect("cache is valid JSON")
    }

    fn vars(&self) -> Value {
        serde_json::from_slice(&self.vars_bytes()).expect("vars file is valid JSON")
    }
}

/// Runs `acpdb gen-fixture` into a fresh temporary project directory.
fn generate(files: u32, symbols_per_file: u32, edges_per_symbol: f64, seed: u64) -> Fixture {
    generate_with(files, symbols_per_file, edges_per_symbol, seed, &[])
}

/// [`generate`] with more arguments (a revision).
fn generate_with(
    files: u32,
    symbols_per_file: u32,
    edges_per_symbol: f64,
    seed: u64,
    more: &[&str],
) -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("project");
    let output = Command::new(env!("CARGO_BIN_EXE_acpdb"))
        .arg("gen-fixture")
        .args(["--files", &files.to_string()])
        .args(["--symbols-per-file", &symbols_per_file.to_string()])
        .args(["--edges-per-symbol", &edges_per_symbol.to_string()])
        .args(["--seed", &seed.to_string()])
        .args(more)
        .arg("--out")
        .arg(&root)
        .output()
        .expect("run acpdb");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "gen-fixture failed: {stderr}");
    Fixture {
        _dir: dir,
        root,
        stderr,
    }
}

fn object(value: &Value) -> &serde_json::Map<String, Value> {
    value.as_object().expect("object")
}

fn strings(value: &Value) -> Vec<&str> {
    value
        .as_array()
        .expect("array")
        .iter()
        .map(|v| v.as_str().expect("string"))
        .collect()
}

fn spec_file(name: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/schemas")
        .join(name);
    assert!(path.exists(), "schema {} not found", path.display());
    path
}

fn assert_schema_valid(schema_file: &str, instance: &Value) {
    let text = std::fs::read_to_string(spec_file(schema_file)).expect("read schema");
    let schema: Value = serde_json::from_str(&text).expect("schema is JSON");
    let validator = jsonschema::options()
        .with_draft(jsonschema::Draft::Draft7)
        .should_validate_formats(true)
        .build(&schema)
        .expect("schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(instance)
        .take(10)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{schema_file} violations:\n{}",
        errors.join("\n")
    );
}

/// All (caller, callee) pairs of one graph direction, checking that lists hold no duplicates.
fn edges(graph: &Value, direction: &str) -> BTreeSet<(String, String)> {
    let mut pairs = BTreeSet::new();
    for (key, list) in object(&graph[direction]) {
        let items = strings(list);
        let distinct: HashSet<&str> = items.iter().copied().collect();
        assert_eq!(
            distinct.len(),
            items.len(),
            "duplicates in {direction}[{key}]"
        );
        for item in items {
            let pair = if direction == "forward" {
                (key.clone(), item.to_string())
            } else {
                (item.to_string(), key.clone())
            };
            pairs.insert(pair);
        }
    }
    pairs
}

#[test]
fn counts_match_the_arguments() {
    let fixture = generate(200, 5, 4.0, 7);
    let cache = fixture.cache();
    assert_eq!(object(&cache["files"]).len(), 200);
    assert_eq!(object(&cache["source_files"]).len(), 200);
    assert_eq!(object(&cache["symbols"]).len(), 1000);
    assert_eq!(cache["stats"]["files"], 200);
    assert_eq!(cache["stats"]["symbols"], 1000);
    let lines: u64 = object(&cache["files"])
        .values()
        .map(|f| f["lines"].as_u64().expect("lines"))
        .sum();
    assert_eq!(cache["stats"]["lines"], lines);

    let edge_count: usize = object(&cache["graph"]["forward"])
        .values()
        .map(|l| l.as_array().expect("array").len())
        .sum();
    assert!(
        (3200..=4800).contains(&edge_count),
        "expected about 4000 edges, got {edge_count}"
    );
    assert!(
        fixture
            .stderr
            .contains(&format!("200 files, 1000 symbols, {edge_count} edges")),
        "summary line: {}",
        fixture.stderr
    );
}

#[test]
fn forward_and_reverse_are_inverse() {
    let cache = generate(150, 6, 5.0, 11).cache();
    let forward = edges(&cache["graph"], "forward");
    let reverse = edges(&cache["graph"], "reverse");
    assert!(!forward.is_empty());
    assert_eq!(forward, reverse);
    let symbols = object(&cache["symbols"]);
    let mut unresolved = 0;
    for (caller, callee) in &forward {
        assert!(symbols.contains_key(caller), "unknown caller {caller}");
        let ends = if symbols.contains_key(callee) {
            vec![caller, callee]
        } else {
            unresolved += 1;
            vec![caller]
        };
        for end in ends {
            let kind = symbols[end.as_str()]["type"].as_str().expect("type");
            assert!(matches!(kind, "function" | "method"), "{end} is a {kind}");
        }
    }
    assert!(unresolved > 0, "every callee is a symbol");
}

/// A revision with `--moved-percent` moves that share of the files it edits into a `moved/`
/// directory of their domain, as `acp index` writes a moved file: the entry under a new key, its symbols under new
/// qualified names, and the call graph naming them by the new names only.
#[test]
fn a_revision_moves_some_of_the_files_it_edits() {
    let base = generate(400, 5, 4.0, 7).cache();
    let edit = [
        "--revision",
        "1",
        "--changed-percent",
        "25",
        "--moved-percent",
        "10",
    ];
    let revision = generate_with(400, 5, 4.0, 7, &edit).cache();
    let unmoved = generate_with(400, 5, 4.0, 7, &edit[..4]).cache();
    assert_eq!(
        object(&unmoved["files"]).keys().collect::<Vec<_>>(),
        object(&base["files"]).keys().collect::<Vec<_>>(),
        "files moved without --moved-percent"
    );
    let keys =
        |cache: &Value| -> BTreeSet<String> { object(&cache["files"]).keys().cloned().collect() };
    let (before, after) = (keys(&base), keys(&revision));
    let gone: Vec<&String> = before.difference(&after).collect();
    let moved: BTreeSet<&String> = after.difference(&before).collect();
    assert!(!gone.is_empty(), "no file moved");
    assert!(
        gone.len() < 40,
        "{} of about 100 edited files moved",
        gone.len()
    );
    assert_eq!(gone.len(), moved.len());
    for key in &gone {
        let (domain, rest) = key
            .strip_prefix("./src/")
            .and_then(|k| k.split_once('/'))
            .expect("./src/<domain>/...");
        let new_key = format!("./src/{domain}/moved/{rest}");
        assert!(moved.contains(&new_key), "{key} not moved to {new_key}");
    }
    let old_paths: Vec<String> = gone
        .iter()
        .map(|k| format!("{}:", k.trim_start_matches("./")))
        .collect();
    let names_old = |name: &str| old_paths.iter().any(|p| name.starts_with(p.as_str()));
    let files: HashSet<&str> = after.iter().map(|k| k.trim_start_matches("./")).collect();
    let mut in_moved = 0;
    for (key, symbol) in object(&revision["symbols"]) {
        assert!(!names_old(key), "{key} kept its old path");
        let file = symbol["file"].as_str().expect("file");
        assert!(files.contains(file), "{key} points at {file}");
        in_moved += usize::from(file.contains("/moved/"));
    }
    assert!(in_moved > 0);
    let forward = edges(&revision["graph"], "forward");
    assert_eq!(forward, edges(&revision["graph"], "reverse"));
    let symbols = object(&revision["symbols"]);
    for (caller, callee) in &forward {
        assert!(symbols.contains_key(caller), "unknown caller {caller}");
        assert!(!names_old(caller), "{caller} kept its old path");
        // A call to a moved symbol names it by its new path; an old name left dangling would
        // be a removed symbol's, which a move is not.
        assert!(!names_old(callee), "a call names {callee} by its old path");
    }
}

/// The share of call-graph nodes the import resolves to no symbol, and the name of the node
/// with the longest reverse list.
fn unresolved_share(percent: &str) -> (f64, Vec<String>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = |args: &[&str]| {
        let output = Command::new(env!("CARGO_BIN_EXE_acpdb"))
            .args(args)
            .arg(dir.path())
            .output()
            .expect("run acpdb");
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    };
    run(&[
        "gen-fixture",
        "--files",
        "300",
        "--unresolved-percent",
        percent,
        "--out",
    ]);
    run(&["import", "--no-progress", "-C"]);
    let conn = rusqlite::Connection::open(dir.path().join(".acp/acp.db")).expect("database");
    let share = conn
        .query_row("SELECT avg(symbol_id IS NULL) FROM graph_nodes", [], |r| {
            r.get(0)
        })
        .expect("share");
    let hot = conn
        .prepare("SELECT name FROM hot_nodes ORDER BY rank")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    (share, hot)
}

#[test]
fn a_share_of_the_graph_names_resolve_to_nothing_and_builtins_are_hubs() {
    let (share, hot) = unresolved_share("15");
    assert!(
        (0.11..=0.19).contains(&share),
        "{:.1} % of the nodes resolve to nothing, 15 % asked",
        share * 100.0
    );
    assert!(
        hot.iter().take(5).any(|name| !name.contains(':')),
        "no builtin among the five longest reverse lists: {hot:?}"
    );
    let (share, _) = unresolved_share("0");
    assert_eq!(share, 0.0, "every name resolves when none is asked to fail");
}

#[test]
fn symbols_point_at_their_files() {
    let cache = generate(120, 8, 3.0, 3).cache();
    let files = object(&cache["files"]);
    let source_files = object(&cache["source_files"]);
    for (key, file) in files {
        assert!(key.starts_with("./src/"), "file key {key}");
        assert_eq!(file["path"], key.as_str());
        let ext = key.rsplit('.').next().expect("extension");
        let language = file["language"].as_str().expect("language");
        let expected = match ext {
            "ts" | "tsx" => "typescript",
            "rs" => "rust",
            "py" => "python",
            "go" => "go",
            other => panic!("unexpected extension {other}"),
        };
        assert_eq!(language, expected, "{key}");
        assert!(
            source_files.contains_key(&key[2..]),
            "{key} not in source_files"
        );
    }
    let mut languages = HashSet::new();
    for (key, symbol) in object(&cache["symbols"]) {
        let file = symbol["file"].as_str().expect("file");
        let name = symbol["name"].as_str().expect("name");
        assert_eq!(symbol["qualified_name"], key.as_str());
        assert_eq!(key, &format!("{file}:{name}"));
        let entry = &files[&format!("./{file}")];
        languages.insert(entry["language"].as_str().expect("language"));
        let range: Vec<u64> = symbol["lines"]
            .as_array()
            .expect("lines")
            .iter()
            .map(|v| v.as_u64().expect("line"))
            .collect();
        assert_eq!(range.len(), 2);
        assert!(
            1 <= range[0] && range[0] <= range[1],
            "{key} lines {range:?}"
        );
        assert!(range[1] <= entry["lines"].as_u64().expect("file lines"));
        assert_eq!(
            symbol["exported"].as_bool().expect("exported"),
            symbol.get("visibility").is_none(),
            "{key}"
        );
    }
    assert_eq!(languages.len(), 4, "languages: {languages:?}");
}

#[test]
fn names_are_words_and_some_repeat_across_files() {
    let cache = generate(300, 6, 2.0, 5).cache();
    let mut files_by_name: HashMap<&str, HashSet<&str>> = HashMap::new();
    for symbol in object(&cache["symbols"]).values() {
        let name = symbol["name"].as_str().expect("name");
        assert!(
            name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "odd name {name}"
        );
        files_by_name
            .entry(name)
            .or_default()
            .insert(symbol["file"].as_str().expect("file"));
    }
    let ambiguous = files_by_name.values().filter(|f| f.len() > 1).count();
    assert!(
        ambiguous >= 20,
        "only {ambiguous} names repeat across files"
    );
    let names: Vec<&str> = files_by_name.keys().copied().collect();
    assert!(names
        .iter()
        .any(|n| n.contains('_') && n.starts_with(char::is_lowercase)));
    assert!(names
        .iter()
        .any(|n| n.starts_with(char::is_lowercase) && n.chars().any(|c| c.is_ascii_uppercase())));
    assert!(names.iter().any(|n| n.to_lowercase().contains("session")));
}

#[test]
fn output_is_deterministic_per_seed() {
    let first = generate(80, 7, 4.0, 99);
    let second = generate(80, 7, 4.0, 99);
    assert!(
        first.cache_bytes() == second.cache_bytes(),
        "cache differs between runs"
    );
    assert!(
        first.vars_bytes() == second.vars_bytes(),
        "vars differ between runs"
    );
    let other = generate(80, 7, 4.0, 100);
    assert!(
        first.cache_bytes() != other.cache_bytes(),
        "seed has no effect"
    );
}

/// An object's members in the order written (serde_json's `Map` sorts them).
struct Members(Vec<(String, Box<serde_json::value::RawValue>)>);

impl<'de> serde::Deserialize<'de> for Members {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Members, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Members;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Members, A::Error> {
                let mut members = Vec::new();
                while let Some(member) = map.next_entry()? {
                    members.push(member);
                }
                Ok(Members(members))
            }
        }
        deserializer.deserialize_map(Visitor)
    }
}

impl Members {
    fn of(json: &str) -> Members {
        serde_json::from_str(json).expect("a JSON object")
    }

    fn get(&self, name: &str) -> Members {
        let (_, value) = self.0.iter().find(|(key, _)| key == name).expect(name);
        Members::of(value.get())
    }

    fn names(&self) -> Vec<&str> {
        self.0.iter().map(|(key, _)| key.as_str()).collect()
    }
}

/// The member names of the cache's maps, in the order written.
fn member_order(fixture: &Fixture) -> Vec<Vec<String>> {
    let cache = Members::of(&String::from_utf8(fixture.cache_bytes()).unwrap());
    let graph = cache.get("graph");
    [
        cache.get("source_files"),
        cache.get("files"),
        cache.get("symbols"),
        graph.get("forward"),
        graph.get("reverse"),
    ]
    .iter()
    .map(|map| map.names().into_iter().map(String::from).collect())
    .collect()
}

/// In how many runs of consecutive entries of the same file the cache lists its symbols.
fn file_runs(fixture: &Fixture) -> usize {
    let cache = Members::of(&String::from_utf8(fixture.cache_bytes()).unwrap());
    let files: Vec<String> = cache
        .get("symbols")
        .0
        .iter()
        .map(|(_, symbol)| {
            let symbol: Value = serde_json::from_str(symbol.get()).unwrap();
            symbol["file"].as_str().unwrap().to_string()
        })
        .collect();
    1 + files.windows(2).filter(|pair| pair[0] != pair[1]).count()
}

#[test]
fn hash_order_scatters_each_files_symbols_and_changes_nothing_else() {
    let hashed = generate_with(120, 8, 4.0, 7, &["--key-order", "hash"]);
    let by_file = generate_with(120, 8, 4.0, 7, &["--key-order", "file"]);
    let (hashed_cache, by_file_cache) = (hashed.cache(), by_file.cache());
    assert_eq!(
        hashed_cache, by_file_cache,
        "the same entries, whatever their order"
    );
    assert_eq!(hashed.vars_bytes(), by_file.vars_bytes());
    assert_eq!(file_runs(&by_file), 120, "one run per file");
    // As in the real caches of fixtures/real/ (anyhow: 326 runs of 352 symbols in 31 files;
    // prometheus: 13,833 runs of 13,957).
    assert!(
        file_runs(&hashed) > 960 * 9 / 10,
        "{} runs of 960 symbols in 120 files",
        file_runs(&hashed)
    );
    for (hashed, by_file) in member_order(&hashed)
        .into_iter()
        .zip(member_order(&by_file))
    {
        assert_ne!(hashed, by_file, "a map kept its file order");
    }
    // The default is the real caches' order.
    let default = generate(120, 8, 4.0, 7);
    assert_eq!(default.cache_bytes(), hashed.cache_bytes());
}

#[test]
fn caller_counts_follow_a_power_law() {
    let cache = generate(400, 5, 5.0, 42).cache();
    let counts: Vec<usize> = object(&cache["graph"]["reverse"])
        .values()
        .map(|l| l.as_array().expect("array").len())
        .collect();
    let max = *counts.iter().max().expect("callees exist");
    let mean = counts.iter().sum::<usize>() as f64 / counts.len() as f64;
    assert!(
        max as f64 >= 20.0 * mean,
        "max callers {max} vs mean {mean:.1}"
    );
}

#[test]
fn vars_point_at_existing_entries() {
    let fixture = generate(250, 6, 2.0, 8);
    let cache = fixture.cache();
    let vars = fixture.vars();
    assert_schema_valid("vars.schema.json", &vars);
    assert_eq!(vars["version"], "0.7.0");
    let symbols = object(&cache["symbols"]);
    let files = object(&cache["files"]);
    let domains = object(&cache["domains"]);
    let mut per_type: HashMap<&str, usize> = HashMap::new();
    for (name, var) in object(&vars["variables"]) {
        assert!(
            name.starts_with(|c: char| c.is_ascii_uppercase())
                && name
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'),
            "variable name {name}"
        );
        let kind = var["type"].as_str().expect("type");
        let value = var["value"].as_str().expect("value");
        *per_type.entry(kind).or_default() += 1;
        match kind {
            "symbol" => {
                assert!(name.starts_with("SYM_"));
                let symbol = &symbols[value];
                assert_eq!(symbol["exported"], true, "{name}");
                assert_eq!(var["source"], symbol["file"], "{name}");
                assert_eq!(var["lines"], symbol["lines"], "{name}");
                assert_eq!(
                    name.as_str(),
                    format!(
                        "SYM_{}",
                        symbol["name"].as_str().expect("name").to_uppercase()
                    )
                );
                if let Some(description) = var.get("description") {
                    assert_eq!(description, &symbol["summary"], "{name}");
                }
            }
            "file" => {
                assert!(name.starts_with("FILE___SRC_"), "{name}");
                let file = &files[value];
                let expected = file.get("summary").or(file.get("module")).expect("text");
                assert_eq!(&var["description"], expected, "{name}");
            }
            "domain" => {
                assert_eq!(name.as_str(), format!("DOM_{}", value.to_uppercase()));
                let count = domains[value]["files"].as_array().expect("files").len();
                assert_eq!(
                    var["description"],
                    format!("Domain: {value} ({count} files)")
                );
            }
            "layer" => {
                assert_eq!(name.as_str(), format!("LAYER_{}", value.to_uppercase()));
                let count = files.values().filter(|f| f["layer"] == value).count();
                assert_eq!(
                    var["description"],
                    format!("Layer: {value} ({count} files)")
                );
            }
            other => panic!("unexpected variable type {other}"),
        }
    }
    let exported = symbols.values().filter(|s| s["exported"] == true).count();
    let sym_vars = per_type.get("symbol").copied().unwrap_or(0);
    assert!(
        sym_vars > 10 && sym_vars < exported,
        "{sym_vars} SYM_ of {exported}"
    );
    assert!(per_type.get("file").copied().unwrap_or(0) > 5);
    assert_eq!(per_type["domain"], domains.len());
    assert!(per_type["layer"] > 2);
}

#[test]
fn cache_matches_the_schema() {
    let cache = generate(60, 5, 3.0, 21).cache();
    assert_schema_valid("cache.schema.json", &cache);
    assert_eq!(cache["version"], "0.7.0");
    assert_eq!(
        cache["$schema"],
        "https://acp-protocol.dev/schemas/v1/cache.schema.json"
    );
    assert_eq!(cache["project"]["root"], ".");
    assert!(cache["stats"]["annotationCoverage"].is_number());
    let commit = cache["git_commit"].as_str().expect("git_commit");
    assert_eq!(commit.len(), 40);
}

#[test]
fn domains_and_constraints_are_consistent() {
    let cache = generate(1000, 2, 1.0, 13).cache();
    let files = object(&cache["files"]);

    let domains = object(&cache["domains"]);
    assert!(domains.len() >= 15, "{} domains", domains.len());
    let mut in_domain = 0;
    for (name, domain) in domains {
        assert_eq!(domain["name"], name.as_str());
        assert_eq!(domain["symbols"], serde_json::json!([]));
        for key in strings(&domain["files"]) {
            assert!(strings(&files[key]["domains"]).contains(&name.as_str()));
            assert!(key.starts_with(&format!("./src/{name}/")));
            in_domain += 1;
        }
    }
    let annotated = files
        .values()
        .filter(|f| f.get("domains").is_some())
        .count();
    assert_eq!(in_domain, annotated);

    let constraints = &cache["constraints"];
    let by_file = object(&constraints["by_file"]);
    let mut expected: HashMap<String, BTreeSet<&str>> = HashMap::new();
    for (key, entry) in by_file {
        assert!(files.contains_key(key), "{key}");
        let mutation = &entry["mutation"];
        let level = mutation["level"].as_str().expect("level");
        assert_eq!(mutation["requires_approval"], level == "approval-required");
        assert_eq!(mutation["requires_tests"], level == "tests-required");
        assert_eq!(mutation["requires_docs"], level == "docs-required");
        expected
            .entry(level.replace('-', ""))
            .or_default()
            .insert(key.as_str());
    }
    let by_level = object(&constraints["by_lock_level"]);
    let actual: HashMap<String, BTreeSet<&str>> = by_level
        .iter()
        .map(|(k, v)| (k.clone(), strings(v).into_iter().collect()))
        .collect();
    assert_eq!(actual, expected);
    let mut levels: Vec<&str> = by_level.keys().map(String::as_str).collect();
    levels.sort_unstable();
    assert_eq!(
        levels,
        [
            "approvalrequired",
            "docsrequired",
            "experimental",
            "frozen",
            "normal",
            "restricted",
            "reviewrequired",
            "testsrequired"
        ]
    );

    let hacks = constraints["hacks"].as_array().expect("hacks");
    assert!(!hacks.is_empty());
    for hack in hacks {
        let file = hack["file"].as_str().expect("file");
        let line = hack["line"].as_u64().expect("line");
        assert_eq!(hack["id"], format!("{file}:{line}"));
        let marks = files[file]["inline"].as_array().expect("inline");
        assert!(marks
            .iter()
            .any(|m| m["type"] == "hack" && m["line"] == line && m["ticket"] == hack["ticket"]));
    }
    let inline_hacks: usize = files
        .values()
        .filter_map(|f| f.get("inline"))
        .flat_map(|i| i.as_array().expect("inline"))
        .filter(|m| m["type"] == "hack")
        .count();
    assert_eq!(inline_hacks, hacks.len());
    assert_eq!(constraints["debug_sessions"], serde_json::json!([]));
}

#[test]
fn degenerate_sizes_produce_valid_caches() {
    for (files, symbols_per_file, edges) in [(0, 10, 5.0), (4, 0, 5.0), (30, 3, 0.0)] {
        let fixture = generate(files, symbols_per_file, edges, 1);
        let cache = fixture.cache();
        assert_schema_valid("cache.schema.json", &cache);
        assert_eq!(object(&cache["files"]).len(), files as usize);
        assert_eq!(
            object(&cache["symbols"]).len(),
            (files * symbols_per_file) as usize
        );
        if edges == 0.0 {
            assert!(object(&cache["graph"]["forward"]).is_empty());
            assert!(object(&cache["graph"]["reverse"]).is_empty());
        }
        fixture.vars();
    }
}

/// `--edit-of` edits a real cache the way a revision edits a generated one: the result imports
/// as a delta onto the original's database, which then exports exactly the edited cache, and
/// every entry it did not edit keeps its bytes.
#[test]
fn an_edit_of_a_real_cache_applies_as_a_delta_and_keeps_what_it_did_not_edit() {
    let project = crate::common::TempProject::copy_of(&crate::common::fixture("real/prometheus"));
    let out = tempfile::tempdir().unwrap();
    let edit_of = |option: [&str; 2]| {
        crate::common::acpdb()
            .arg("gen-fixture")
            .args(option)
            .arg("--edit-of")
            .arg(project.root())
            .arg("--out")
            .arg(out.path())
            .output()
            .unwrap()
    };
    let edit = edit_of(["--changed-percent", "1"]);
    assert!(edit.status.success(), "{}", crate::common::stderr(&edit));
    let original = std::fs::read_to_string(project.cache_path()).unwrap();
    let edited = std::fs::read_to_string(out.path().join(".acp/acp.cache.json")).unwrap();
    let (before, after): (Value, Value) = (
        serde_json::from_str(&original).unwrap(),
        serde_json::from_str(&edited).unwrap(),
    );
    let symbols = object(&before["symbols"]);
    let kept = symbols
        .iter()
        .filter(|(key, symbol)| after["symbols"].get(key.as_str()) == Some(symbol))
        .collect::<Vec<_>>();
    assert!(kept.len() > symbols.len() * 9 / 10 && kept.len() < symbols.len());
    for (key, _) in kept.iter().take(50) {
        // The entry as `acp index` wrote it: from its key to the brace closing it.
        let opening = format!("\n    {}: {{", serde_json::to_string(key).unwrap());
        let at = original
            .find(&opening)
            .expect("the entry is in the original");
        let length = original[at..].find("\n    }").unwrap() + "\n    }".len();
        let written = &original[at..at + length];
        assert!(edited.contains(written), "{written}");
    }

    project.import();
    std::fs::write(project.cache_path(), &edited).unwrap();
    let summary = crate::common::stderr(&project.import());
    assert!(
        summary.contains("delta: ~10 files +10 symbols"),
        "{summary}"
    );
    assert_eq!(project.export(), after);

    let both = edit_of(["--revision", "1"]);
    assert!(!both.status.success());
    let refusal = crate::common::stderr(&both);
    assert!(refusal.contains("cannot be used with"), "{refusal}");
}
