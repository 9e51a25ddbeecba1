//! Workloads: the tool calls `acpdb bench` replays, read from a JSON file or sampled from the
//! index database (the default mix).
//!
//! The file format is documented in `docs/benchmarks.md`: `{"version": 1, "calls": [{"tool",
//! "arguments", "label"?}]}`. Calls are grouped in the report by label; without an explicit
//! label a call is grouped by tool name, `acp_query` by query type (and depth when above 1) and
//! `acp_context` by operation.
//!
//! The default mix samples real names with a fixed seed, so the same database always yields the
//! same workload. It addresses symbols by their cache map key, files by their file key and
//! constraints by their exact `constraints.by_file` key where the reference server (acp-mcp) is
//! exact, so one workload is meaningful for both servers.

use std::fs;
use std::path::Path;

use anyhow::{bail, Context, Result};
use rusqlite::{Connection, OptionalExtension};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::report::Outcome;
use crate::gen::rng::Rng;

/// Version of the workload file format.
pub const FORMAT_VERSION: u32 = 1;

/// A list of tool calls, replayed in order once per pass.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Workload {
    /// Format version; must be [`FORMAT_VERSION`].
    pub version: u32,
    /// Free text shown in reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The calls of one pass.
    pub calls: Vec<Call>,
}

/// One tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Call {
    /// Tool name, e.g. `acp_query`.
    pub tool: String,
    /// Tool arguments (a JSON object).
    #[serde(default = "empty_object")]
    pub arguments: Value,
    /// Report group; see [`Call::group`] for the default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The call names something that does not exist: a "not found" tool error is its
    /// expected answer, not counted among the errors (any other error still is).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub miss: bool,
}

fn empty_object() -> Value {
    Value::Object(Map::new())
}

impl Call {
    /// A call with the given arguments and no explicit label.
    pub fn new(tool: &str, arguments: Value) -> Call {
        Call {
            tool: tool.to_string(),
            arguments,
            label: None,
            miss: false,
        }
    }

    /// The same call as a miss ([`Call::miss`]) in the report group `label`.
    pub fn missing(mut self, label: impl Into<String>) -> Call {
        self.miss = true;
        self.labelled(label)
    }

    /// What a call's `outcome` counts as: a "not found" error of a miss is its expected
    /// answer; a time-out or any other error stays an error.
    pub fn judge(&self, outcome: Outcome) -> Outcome {
        match outcome {
            Outcome::Error(message)
                if self.miss && message.to_ascii_lowercase().contains("not found") =>
            {
                Outcome::Answer
            }
            outcome => outcome,
        }
    }

    /// The same call with an explicit label.
    pub fn labelled(mut self, label: impl Into<String>) -> Call {
        self.label = Some(label.into());
        self
    }

    /// The report group of this call: the label if set, else `acp_query:<type>` (with
    /// `(depth=N)` for depths above 1), `acp_context:<operation>`, or the tool name.
    pub fn group(&self) -> String {
        if let Some(label) = &self.label {
            return label.clone();
        }
        let text = |key: &str| self.arguments.get(key).and_then(Value::as_str);
        match self.tool.as_str() {
            "acp_query" => {
                let kind = text("type").unwrap_or("?");
                match self.arguments.get("depth").and_then(Value::as_i64) {
                    Some(depth) if depth > 1 => format!("acp_query:{kind}(depth={depth})"),
                    _ => format!("acp_query:{kind}"),
                }
            }
            "acp_context" => format!("acp_context:{}", text("operation").unwrap_or("?")),
            tool => tool.to_string(),
        }
    }
}

impl Workload {
    /// Reads and validates a workload file.
    pub fn load(path: &Path) -> Result<Workload> {
        let text =
            fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let workload: Workload = serde_json::from_str(&text)
            .with_context(|| format!("{} is not a workload file", path.display()))?;
        workload
            .validate()
            .with_context(|| format!("invalid workload {}", path.display()))?;
        Ok(workload)
    }

    /// Checks the version, that there is at least one call, and that every call names a tool
    /// and passes an object of arguments.
    pub fn validate(&self) -> Result<()> {
        if self.version != FORMAT_VERSION {
            bail!(
                "unsupported workload version {} (expected {FORMAT_VERSION})",
                self.version
            );
        }
        if self.calls.is_empty() {
            bail!("the workload has no calls");
        }
        for (index, call) in self.calls.iter().enumerate() {
            if call.tool.trim().is_empty() {
                bail!("calls[{index}]: empty tool name");
            }
            if !call.arguments.is_object() {
                bail!(
                    "calls[{index}] ({}): arguments must be an object",
                    call.tool
                );
            }
        }
        Ok(())
    }

    /// Writes the workload as pretty JSON.
    pub fn save(&self, path: &Path) -> Result<()> {
        let text = serde_json::to_string_pretty(self)?;
        fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))
    }

    /// The report groups in order of first appearance.
    pub fn groups(&self) -> Vec<String> {
        let mut groups: Vec<String> = Vec::new();
        for call in &self.calls {
            let group = call.group();
            if !groups.contains(&group) {
                groups.push(group);
            }
        }
        groups
    }
}

/// How the default mix is sampled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MixOptions {
    /// Calls per group in one pass (distinct sampled names where the tool takes one).
    pub samples: usize,
    /// Seed of the sampler.
    pub seed: u64,
}

impl Default for MixOptions {
    fn default() -> Self {
        MixOptions {
            samples: 8,
            seed: 42,
        }
    }
}

/// A sampled symbol.
struct SymbolSample {
    key: String,
    qualified: String,
    name: String,
}

/// Draws rows of the index at random.
struct Sampler<'c> {
    conn: &'c Connection,
    rng: Rng,
    samples: usize,
}

impl Sampler<'_> {
    /// `samples` rows of a rowid table (`columns` as text), drawn uniformly over the rowid range.
    fn by_rowid(&mut self, table: &str, columns: &str) -> Result<Vec<Vec<String>>> {
        let range: Option<(i64, i64)> = self
            .conn
            .query_row(
                // Two subqueries, each one step of the table's b-tree: `min(rowid), max(rowid)`
                // in one query reads every row.
                &format!(
                    "SELECT (SELECT min(rowid) FROM {table}), (SELECT max(rowid) FROM {table})"
                ),
                [],
                |r| Ok((r.get::<_, Option<i64>>(0)?, r.get::<_, Option<i64>>(1)?)),
            )
            .map(|(lo, hi)| lo.zip(hi))?;
        let Some((lo, hi)) = range else {
            return Ok(Vec::new());
        };
        let sql = format!("SELECT {columns} FROM {table} WHERE rowid >= ?1 ORDER BY rowid LIMIT 1");
        let mut stmt = self.conn.prepare(&sql)?;
        let width = stmt.column_count();
        let mut rows = Vec::with_capacity(self.samples);
        for _ in 0..self.samples {
            let at = lo + self.rng.below((hi - lo + 1) as u64) as i64;
            let row = stmt
                .query_row([at], |r| {
                    (0..width)
                        .map(|i| r.get::<_, Option<String>>(i))
                        .collect::<rusqlite::Result<Vec<_>>>()
                })
                .optional()?;
            if let Some(row) = row {
                rows.push(row.into_iter().map(Option::unwrap_or_default).collect());
            }
        }
        Ok(rows)
    }

    /// `samples` values of one text column of a small table, drawn by offset in key order.
    fn by_offset(&mut self, table: &str, column: &str) -> Result<Vec<String>> {
        let count: i64 =
            self.conn
                .query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))?;
        if count == 0 {
            return Ok(Vec::new());
        }
        let sql = format!("SELECT {column} FROM {table} ORDER BY {column} LIMIT 1 OFFSET ?1");
        let mut stmt = self.conn.prepare(&sql)?;
        let mut values = Vec::with_capacity(self.samples);
        for _ in 0..self.samples {
            let at = self.rng.below(count as u64) as i64;
            values.push(stmt.query_row([at], |r| r.get::<_, String>(0))?);
        }
        Ok(values)
    }

    fn symbols(&mut self) -> Result<Vec<SymbolSample>> {
        let rows = self.by_rowid(
            "symbols",
            "key, coalesce(qualified_name, key), coalesce(name, key)",
        )?;
        Ok(rows
            .into_iter()
            .map(|mut row| SymbolSample {
                name: row.pop().unwrap_or_default(),
                qualified: row.pop().unwrap_or_default(),
                key: row.pop().unwrap_or_default(),
            })
            .collect())
    }

    fn column(&mut self, table: &str, column: &str) -> Result<Vec<String>> {
        Ok(self
            .by_rowid(table, column)?
            .into_iter()
            .filter_map(|mut row| row.pop())
            .collect())
    }
}

/// Lower-case words of an identifier: split at `_`, `-`, `.`, spaces and lower→upper changes.
pub fn words(identifier: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut previous_lower = false;
    for c in identifier.chars() {
        if !c.is_alphanumeric() {
            if !current.is_empty() {
                words.push(std::mem::take(&mut current));
            }
            previous_lower = false;
            continue;
        }
        if c.is_uppercase() && previous_lower && !current.is_empty() {
            words.push(std::mem::take(&mut current));
        }
        previous_lower = c.is_lowercase() || c.is_ascii_digit();
        current.extend(c.to_lowercase());
    }
    if !current.is_empty() {
        words.push(current);
    }
    words
}

/// Collects the calls of the default mix, one group after the other.
struct Mix {
    calls: Vec<Call>,
    samples: usize,
}

impl Mix {
    /// One call per sampled name.
    fn each(&mut self, names: &[String], make: impl Fn(&str) -> Call) {
        self.calls.extend(names.iter().map(|name| make(name)));
    }

    /// The same call `samples` times.
    fn fixed(&mut self, call: Call) {
        self.calls.extend(std::iter::repeat_n(call, self.samples));
    }

    /// Names an agent gets wrong, about one call in twenty, each kind a group of its own
    /// (labelled `…(miss)` or `…(typo)`): names that exist in no form, names one transposition
    /// away from a sampled one (answered "not found" with suggestions), unknown files.
    fn misses(&mut self, symbols: &[SymbolSample], paths: &[String]) {
        let per_group = self.samples.div_ceil(4);
        let symbols = &symbols[..per_group.min(symbols.len())];
        let paths = &paths[..per_group.min(paths.len())];
        for (k, symbol) in symbols.iter().enumerate() {
            let missing = format!("__acp_bench_missing_symbol_{k}");
            self.calls.push(
                Call::new("acp_get_symbol_context", json!({ "name": &missing }))
                    .missing("acp_get_symbol_context(miss)"),
            );
            self.calls.push(
                Call::new(
                    "acp_get_symbol_context",
                    json!({ "name": typo(&symbol.name) }),
                )
                .missing("acp_get_symbol_context(typo)"),
            );
            self.calls.push(
                Call::new(
                    "acp_context",
                    json!({ "operation": "debug", "target": typo(&symbol.qualified) }),
                )
                .missing("acp_context:debug(typo)"),
            );
            self.calls.push(
                Call::new("acp_query", json!({ "type": "symbol", "name": missing }))
                    .missing("acp_query:symbol(miss)"),
            );
        }
        for (k, path) in paths.iter().enumerate() {
            let missing = format!(
                "{}/__missing_{k}.rs",
                path.rsplit_once('/').map_or("", |p| p.0)
            );
            self.calls.push(
                Call::new("acp_get_file_context", json!({ "path": missing }))
                    .missing("acp_get_file_context(miss)"),
            );
        }
    }
}

/// `name` with two adjacent, different characters of its last segment swapped, one edit away:
/// the pair nearest the middle (the name itself when the segment is shorter than 4 characters
/// or has no such pair).
fn typo(name: &str) -> String {
    let start = name.rfind([':', '/']).map_or(0, |i| i + 1);
    let mut chars: Vec<char> = name[start..].chars().collect();
    if chars.len() >= 4 {
        let middle = chars.len() / 2;
        let at = (0..chars.len())
            .flat_map(|offset| [middle + offset, middle.wrapping_sub(offset)])
            .find(|&at| (1..chars.len()).contains(&at) && chars[at - 1] != chars[at]);
        if let Some(at) = at {
            chars.swap(at - 1, at);
        }
    }
    format!(
        "{}{}",
        &name[..start],
        chars.into_iter().collect::<String>()
    )
}

/// Builds the default mix from the database: every read-only tool, `samples` calls per group,
/// names drawn with `seed`. Groups whose table is empty (no domains, constraints or vars) are
/// left out.
pub fn default_mix(conn: &Connection, options: MixOptions) -> Result<Workload> {
    let samples = options.samples.max(1);
    let mut sampler = Sampler {
        conn,
        rng: Rng(options.seed),
        samples,
    };
    let symbols = sampler.symbols()?;
    let files = sampler.column("files", "key")?;
    let paths = sampler.column("files", "path")?;
    let constraints = sampler.column("constraints", "key")?;
    let domains = sampler.by_offset("domains", "key")?;
    let vars = sampler.by_offset("vars", "name")?;
    let searched = sampler.symbols()?;
    let keys: Vec<String> = symbols.iter().map(|s| s.key.clone()).collect();
    let qualified: Vec<String> = symbols.iter().map(|s| s.qualified.clone()).collect();

    let mut mix = Mix {
        calls: Vec::new(),
        samples,
    };
    // The reference server's tools.
    mix.fixed(Call::new("acp_get_architecture", json!({})));
    mix.each(&files, |p| {
        Call::new("acp_get_file_context", json!({ "path": p }))
    });
    mix.each(&keys, |k| {
        Call::new("acp_get_symbol_context", json!({ "name": k }))
    });
    mix.each(&domains, |d| {
        Call::new("acp_get_domain_files", json!({ "name": d }))
    });
    mix.each(&constraints, |c| {
        Call::new("acp_check_constraints", json!({ "path": c }))
    });
    mix.fixed(Call::new("acp_get_hotpaths", json!({})));
    mix.each(&vars, |v| {
        Call::new("acp_expand_variable", json!({ "name": v }))
    });
    mix.fixed(Call::new(
        "acp_generate_primer",
        json!({ "token_budget": 4000 }),
    ));
    mix.each(&files, |f| {
        Call::new("acp_context", json!({ "operation": "modify", "target": f }))
    });
    mix.each(&keys, |k| {
        Call::new("acp_context", json!({ "operation": "debug", "target": k }))
    });
    mix.fixed(Call::new("acp_context", json!({ "operation": "explore" })));

    // acpdb's own tools.
    mix.each(&qualified, |q| {
        Call::new("acp_query", json!({ "type": "symbol", "name": q }))
    });
    mix.each(&paths, |p| {
        Call::new("acp_query", json!({ "type": "file", "name": p }))
    });
    mix.each(&domains, |d| {
        Call::new("acp_query", json!({ "type": "domain", "name": d }))
    });
    for kind in ["callers", "callees"] {
        for depth in [1, 3] {
            mix.each(&qualified, |q| {
                Call::new(
                    "acp_query",
                    json!({ "type": kind, "name": q, "depth": depth }),
                )
            });
        }
    }
    let search = |label: &str, pattern: String| {
        Call::new("acp_query", json!({ "type": "search", "pattern": pattern }))
            .labelled(format!("acp_query:search({label})"))
    };
    for symbol in &searched {
        let words = words(&symbol.name);
        let phrase = match words.as_slice() {
            [] => symbol.name.clone(),
            [only] => only.clone(),
            [first, second, ..] => format!("{first} {second}"),
        };
        mix.calls.push(search("words", phrase));
    }
    for (index, symbol) in searched.iter().enumerate() {
        let words = words(&symbol.name);
        // A glob without a literal prefix needs 3 literal characters (`*v2` is refused).
        let glob = match (words.first(), words.last()) {
            (_, Some(last)) if index % 2 == 1 && last.chars().count() >= 3 => format!("*{last}"),
            (Some(first), _) => format!("{first}*"),
            _ => format!("{}*", symbol.name),
        };
        mix.calls.push(search("glob", glob));
    }
    for symbol in &searched {
        mix.calls
            .push(search("substring", infix(&symbol.qualified)));
    }
    mix.fixed(Call::new("acp_query", json!({ "type": "stats" })));
    let texts: Vec<String> = vars
        .iter()
        .zip(vars.iter().rev())
        .map(|(a, b)| format!("Check ${a} before changing ${b}."))
        .collect();
    mix.each(&texts, |t| Call::new("acp_expand", json!({ "text": t })));
    let constrained = if constraints.is_empty() {
        &paths
    } else {
        &constraints
    };
    mix.each(constrained, |f| {
        Call::new("acp_constraints", json!({ "file": f }))
    });

    // acp_impact of a 10-file diff at depth 2: each file's hunk replaces the first line of its
    // first symbol.
    let mut changed = Vec::new();
    while changed.len() < 10 * samples {
        let more = sampler.column("files", "path")?;
        if more.is_empty() {
            break;
        }
        changed.extend(more);
    }
    let mut first_line =
        conn.prepare("SELECT min(line_start) FROM symbols WHERE file_path = ?1")?;
    for chunk in changed.chunks(10).take(samples) {
        let mut diff = String::new();
        for path in chunk {
            let line: Option<i64> = first_line.query_row([path], |r| r.get(0))?;
            let line = line.unwrap_or(1).max(1);
            diff.push_str(&format!(
                "--- a/{path}\n+++ b/{path}\n@@ -{line},1 +{line},1 @@\n-before\n+after\n"
            ));
        }
        mix.calls.push(
            Call::new("acp_impact", json!({ "diff": diff, "depth": 2 }))
                .labelled("acp_impact:diff(10 files)"),
        );
    }

    // acp_trace from each sampled symbol to the symbol three calls down its smallest callees
    // (a path exists), and back (as a static call graph goes, mostly none: the whole search).
    for from in &qualified {
        if let Some(to) = three_calls_down(conn, from)? {
            mix.calls
                .push(Call::new("acp_trace", json!({ "from": from, "to": to })));
            mix.calls.push(
                Call::new("acp_trace", json!({ "from": to, "to": from }))
                    .labelled("acp_trace(backwards)"),
            );
        }
    }
    mix.fixed(Call::new("acp_unused", json!({})));
    mix.each(&domains, |d| {
        Call::new("acp_unused", json!({ "domain": d })).labelled("acp_unused(domain)")
    });

    mix.misses(&symbols, &paths);

    Ok(Workload {
        version: FORMAT_VERSION,
        description: Some(format!(
            "default mix ({samples} samples per group, seed {})",
            options.seed
        )),
        calls: mix.calls,
    })
}

/// The qualified name of the symbol three calls down from `from`, always taking the callee
/// symbol of smallest id; `None` when the calls end sooner.
fn three_calls_down(conn: &Connection, from: &str) -> Result<Option<String>> {
    use crate::query::graph::{describe, resolve_endpoint, step, Direction};
    let Ok((start, _)) = resolve_endpoint(conn, from) else {
        return Ok(None);
    };
    let mut at = start.entity();
    for _ in 0..3 {
        let callees = step(conn, Direction::Callees, at).map_err(|e| anyhow::anyhow!("{e}"))?;
        match callees.into_iter().filter(|&e| e > 0 && e != at).min() {
            Some(next) => at = next,
            None => return Ok(None),
        }
    }
    if at == start.entity() {
        return Ok(None);
    }
    Ok(describe(conn, at).map_err(|e| anyhow::anyhow!("{e}"))?.0)
}

/// Six characters from the middle of a name's last segment (all of it when shorter), for
/// substring search.
fn infix(name: &str) -> String {
    let tail = name.rsplit([':', '/']).next().unwrap_or(name);
    let chars: Vec<char> = tail.chars().collect();
    if chars.len() <= 6 {
        return tail.to_string();
    }
    let start = (chars.len() - 6) / 2;
    chars[start..start + 6].iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifier_words() {
        assert_eq!(words("validateSession"), ["validate", "session"]);
        assert_eq!(words("InitBatchLocale"), ["init", "batch", "locale"]);
        assert_eq!(words("parse_http_header2"), ["parse", "http", "header2"]);
        assert_eq!(words("HTTPServer"), ["httpserver"]);
        assert!(words("::").is_empty());
    }

    #[test]
    fn default_groups() {
        let call = |tool: &str, arguments: Value| Call::new(tool, arguments);
        assert_eq!(
            call("acp_get_hotpaths", json!({})).group(),
            "acp_get_hotpaths"
        );
        assert_eq!(
            call("acp_query", json!({"type": "callers", "depth": 3})).group(),
            "acp_query:callers(depth=3)"
        );
        assert_eq!(
            call("acp_query", json!({"type": "callers", "depth": 1})).group(),
            "acp_query:callers"
        );
        assert_eq!(
            call("acp_context", json!({"operation": "explore"})).group(),
            "acp_context:explore"
        );
        assert_eq!(
            call("acp_query", json!({"type": "stats"}))
                .labelled("mine")
                .group(),
            "mine"
        );
    }

    #[test]
    fn a_miss_expects_its_error_and_nothing_else() {
        let error = || Outcome::Error("Symbol not found: x".into());
        let miss = Call::new("acp_get_symbol_context", json!({"name": "x"})).missing("m");
        assert_eq!(miss.judge(error()), Outcome::Answer);
        assert_eq!(miss.judge(Outcome::Unsupported), Outcome::Unsupported);
        assert_eq!(miss.group(), "m");
        let late = Outcome::Error("Query interrupted after 2 s".into());
        assert_eq!(miss.judge(late.clone()), late);
        let hit = Call::new("acp_get_symbol_context", json!({"name": "x"}));
        assert_eq!(hit.judge(error()), error());
        let saved = serde_json::to_value(&miss).unwrap();
        assert_eq!(saved["miss"], true);
        assert!(serde_json::to_value(&hit).unwrap().get("miss").is_none());
        assert_eq!(serde_json::from_value::<Call>(saved).unwrap(), miss);
    }

    #[test]
    fn a_typo_swaps_two_characters_of_the_last_segment() {
        assert_eq!(
            typo("src/auth/token.ts:verifyToken"),
            "src/auth/token.ts:veriyfToken"
        );
        assert_eq!(typo("validateSession"), "validaetSession");
        assert_eq!(typo("src/a.ts:get"), "src/a.ts:get");
        assert_eq!(typo("PendingCommentClient"), "PendingComemntClient");
        assert_eq!(typo("aaaa"), "aaaa");
    }

    #[test]
    fn infix_takes_the_middle_of_the_last_segment() {
        assert_eq!(infix("src/auth/token.ts:verifyTimezone"), "fyTime");
        assert_eq!(infix("src/a.ts:get"), "get");
    }

    #[test]
    fn validation() {
        let ok: Workload =
            serde_json::from_value(json!({"version": 1, "calls": [{"tool": "acp_get_hotpaths"}]}))
                .unwrap();
        assert!(ok.validate().is_ok());
        assert_eq!(ok.calls[0].arguments, json!({}));
        let bad = Workload {
            calls: vec![Call::new("acp_query", json!([]))],
            ..ok.clone()
        };
        assert!(bad.validate().is_err());
        let empty = Workload {
            calls: Vec::new(),
            ..ok
        };
        assert!(empty.validate().is_err());
    }
}
