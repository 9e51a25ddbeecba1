//! Deterministic synthetic ACP caches for tests and benchmarks (`acpdb gen-fixture`).
//!
//! [`generate`] writes an `acp.cache.json` shaped like acp-cli 0.7 output (see
//! `cache-format.md` §4–§13) and a matching `acp.vars.json`, streaming compact JSON so that a
//! cache of a million symbols needs only a few tens of MB of memory. Every value is a pure
//! function of the [`GenSpec`]: the same spec always yields byte-identical output.
//!
//! Shape of the output:
//! * file keys carry acp-cli's `./` prefix (`./src/<domain>/<stem>.<ext>`); `source_files` keys,
//!   symbol `file` values and qualified-name prefixes do not;
//! * symbols are keyed by qualified name (`src/auth/sessionStore.ts:validateSession`), unique per
//!   cache, while simple names repeat across files;
//! * `graph.forward` and `graph.reverse` use qualified names and are exact inverses without
//!   duplicates; callee popularity mixes local calls, uniform calls and a Zipf (s = 1) tail;
//! * constraints use acp-cli's nested `mutation` shape with every lock level, and
//!   `by_lock_level` uses the hyphen-less keys acp-cli derives from its enum (`testsrequired`);
//! * the vars file holds `SYM_`/`FILE_`/`DOM_`/`LAYER_` entries named as acp-cli names them, for a
//!   sample of exported symbols and annotated files and for every domain and layer.
//!
//! Names, paths and texts are rebuilt from indices whenever they are written; the only data kept
//! per symbol are the in-degree counters and the inverted edge list needed for `graph.reverse`.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;

use anyhow::{Context, Result};
use chrono::{DateTime, SecondsFormat};

/// Options of `acpdb gen-fixture`.
#[derive(Debug, Clone, clap::Args)]
pub struct GenArgs {
    /// Number of source files.
    #[arg(long, default_value_t = 1000)]
    pub files: u32,
    /// Average number of symbols per file (the total is exactly files × this).
    #[arg(long, default_value_t = 10)]
    pub symbols_per_file: u32,
    /// Average number of call-graph edges per symbol.
    #[arg(long, default_value_t = 5.0)]
    pub edges_per_symbol: f64,
    /// Seed of the pseudo-random generator.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Project directory; `.acp/acp.cache.json` and `.acp/acp.vars.json` are written below it.
    #[arg(long)]
    pub out: PathBuf,
}

/// Size and seed of a synthetic cache.
#[derive(Debug, Clone, PartialEq)]
pub struct GenSpec {
    /// Number of source files.
    pub files: u32,
    /// Average number of symbols per file; the cache holds exactly `files * symbols_per_file`.
    pub symbols_per_file: u32,
    /// Average number of call edges per symbol.
    pub edges_per_symbol: f64,
    /// Seed of the pseudo-random generator.
    pub seed: u64,
}

impl Default for GenSpec {
    fn default() -> Self {
        Self {
            files: 1000,
            symbols_per_file: 10,
            edges_per_symbol: 5.0,
            seed: 42,
        }
    }
}

impl From<&GenArgs> for GenSpec {
    fn from(args: &GenArgs) -> Self {
        Self {
            files: args.files,
            symbols_per_file: args.symbols_per_file,
            edges_per_symbol: args.edges_per_symbol,
            seed: args.seed,
        }
    }
}

/// What [`generate`] wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GenSummary {
    /// Entries in `files`.
    pub files: u32,
    /// Entries in `symbols`.
    pub symbols: u32,
    /// Call edges (entries summed over `graph.forward`, equal to those of `graph.reverse`).
    pub edges: u64,
    /// Entries in the vars file's `variables`.
    pub variables: u64,
    /// Bytes written to the cache output.
    pub cache_bytes: u64,
    /// Bytes written to the vars output.
    pub vars_bytes: u64,
}

/// Runs `acpdb gen-fixture`: writes the cache and vars file below `args.out` and prints a
/// one-line summary to stderr.
pub fn run(args: &GenArgs) -> Result<()> {
    let dir = args.out.join(".acp");
    fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let cache_path = dir.join("acp.cache.json");
    let vars_path = dir.join("acp.vars.json");
    let mut cache =
        File::create(&cache_path).with_context(|| format!("creating {}", cache_path.display()))?;
    let mut vars =
        File::create(&vars_path).with_context(|| format!("creating {}", vars_path.display()))?;
    let summary = generate(&GenSpec::from(args), &mut cache, &mut vars)
        .with_context(|| format!("writing the fixture to {}", dir.display()))?;
    eprintln!(
        "gen-fixture: {} files, {} symbols, {} edges, {} variables; {} bytes cache + {} bytes vars in {}",
        summary.files,
        summary.symbols,
        summary.edges,
        summary.variables,
        summary.cache_bytes,
        summary.vars_bytes,
        dir.display()
    );
    Ok(())
}

/// Streams a synthetic cache to `cache_out` and its vars file to `vars_out`.
///
/// Both outputs are buffered internally. Fails with `InvalidInput` when the spec asks for more
/// than `u32::MAX` symbols or edges, or for a negative or non-finite edge ratio.
pub fn generate(
    spec: &GenSpec,
    cache_out: &mut impl Write,
    vars_out: &mut impl Write,
) -> io::Result<GenSummary> {
    let plan = Plan::new(spec)?;
    let totals = plan.totals();

    let mut json = Json::new(cache_out);
    let edges = write_cache(&plan, &totals, &mut json)?;
    let cache_bytes = json.finish()?;

    let mut json = Json::new(vars_out);
    let variables = write_vars(&plan, &totals, &mut json)?;
    let vars_bytes = json.finish()?;

    Ok(GenSummary {
        files: spec.files,
        symbols: plan.symbols,
        edges,
        variables,
        cache_bytes,
        vars_bytes,
    })
}

// ---------------------------------------------------------------------------------------------
// Vocabulary. Nouns, file suffixes, type suffixes and constant tails are pairwise disjoint and
// every word is a single lower-case token, so a symbol name's words (and thus its noun) can be
// recovered from the name: two symbols of one file with different nouns never share a name.

const VERBS: &[(&str, &str)] = &[
    ("get", "Returns"),
    ("set", "Sets"),
    ("validate", "Validates"),
    ("parse", "Parses"),
    ("build", "Builds"),
    ("create", "Creates"),
    ("update", "Updates"),
    ("delete", "Deletes"),
    ("load", "Loads"),
    ("save", "Saves"),
    ("fetch", "Fetches"),
    ("handle", "Handles"),
    ("resolve", "Resolves"),
    ("compute", "Computes"),
    ("render", "Renders"),
    ("format", "Formats"),
    ("normalize", "Normalizes"),
    ("register", "Registers"),
    ("find", "Finds"),
    ("check", "Checks"),
    ("apply", "Applies"),
    ("encode", "Encodes"),
    ("decode", "Decodes"),
    ("sync", "Synchronizes"),
    ("merge", "Merges"),
    ("refresh", "Refreshes"),
    ("verify", "Verifies"),
    ("emit", "Emits"),
    ("dispatch", "Dispatches"),
    ("schedule", "Schedules"),
    ("cancel", "Cancels"),
    ("list", "Lists"),
    ("init", "Initializes"),
    ("reset", "Resets"),
    ("serialize", "Serializes"),
    ("process", "Processes"),
    ("track", "Tracks"),
    ("ensure", "Ensures"),
    ("transform", "Transforms"),
    ("collect", "Collects"),
    ("publish", "Publishes"),
    ("notify", "Notifies"),
    ("authorize", "Authorizes"),
    ("sign", "Signs"),
];

#[rustfmt::skip]
const ADJECTIVES: &[&str] = &[
    "active", "cached", "current", "default", "pending", "remote", "local", "raw", "batch",
    "primary", "stale", "shared", "expired", "global", "internal", "legacy", "next", "partial",
    "secure", "temp", "dirty", "initial", "max", "last", "signed", "encrypted", "unread",
    "archived", "draft", "nested",
];

#[rustfmt::skip]
const NOUNS: &[&str] = &[
    "session", "token", "user", "account", "order", "invoice", "payment", "cart", "config",
    "request", "response", "header", "cookie", "query", "record", "entry", "event", "message",
    "queue", "job", "task", "worker", "report", "metric", "counter", "cache", "buffer",
    "stream", "file", "path", "route", "node", "edge", "graph", "tree", "index", "key", "value",
    "item", "product", "price", "tax", "discount", "coupon", "address", "customer", "profile",
    "role", "permission", "policy", "rule", "template", "layout", "page", "widget", "form",
    "field", "column", "table", "row", "shipment", "carrier", "warehouse", "stock", "supplier",
    "vendor", "ledger", "balance", "transfer", "refund", "charge", "subscription", "plan",
    "tier", "quota", "credential", "secret", "certificate", "signature", "nonce", "digest",
    "hash", "checksum", "snapshot", "migration", "schema", "document", "attachment", "upload",
    "thumbnail", "channel", "topic", "webhook", "notification", "email", "device", "locale",
    "currency", "timezone", "calendar", "slot", "booking", "review", "rating", "comment", "tag",
    "label", "category",
];

/// File-name suffixes with the layer they suggest (index into [`LAYERS`]).
const FILE_SUFFIXES: &[(&str, Option<usize>)] = &[
    ("", None),
    ("service", Some(1)),
    ("store", Some(2)),
    ("handler", Some(0)),
    ("controller", Some(0)),
    ("client", Some(5)),
    ("manager", Some(1)),
    ("repository", Some(2)),
    ("factory", Some(6)),
    ("utils", Some(6)),
    ("types", Some(3)),
    ("model", Some(3)),
    ("view", Some(4)),
    ("router", Some(0)),
    ("adapter", Some(5)),
    ("provider", Some(5)),
    ("validator", Some(6)),
    ("parser", Some(6)),
    ("middleware", Some(0)),
    ("helpers", Some(6)),
];

#[rustfmt::skip]
const TYPE_SUFFIXES: &[&str] = &[
    "service", "store", "manager", "client", "builder", "factory", "handler", "registry",
    "context", "state", "error", "options", "provider", "adapter", "kind", "status", "result",
    "spec",
];

#[rustfmt::skip]
const CONST_TAILS: &[&str] = &[
    "timeout", "limit", "size", "ttl", "count", "prefix", "version", "interval", "threshold",
    "retries", "window", "capacity",
];

const SUMMARY_TAILS: &[&str] = &[
    "",
    " for the current request",
    " and caches the result",
    " using the configured backend",
    " before it is persisted",
    " from the upstream service",
    " in a single transaction",
    " with retry and backoff",
    " for the background worker",
    " and records an audit event",
];

#[rustfmt::skip]
const DOMAINS: &[&str] = &[
    "auth", "billing", "orders", "users", "search", "payments", "notifications", "inventory",
    "reporting", "analytics", "storage", "messaging", "scheduler", "shipping", "catalog",
    "admin", "audit", "identity", "pricing", "gateway",
];

#[rustfmt::skip]
const LAYERS: &[&str] = &[
    "api", "service", "data", "domain", "ui", "infrastructure", "util",
];

const AUTHORS: &[&str] = &[
    "Dana Whitfield",
    "Lee Park",
    "Priya Natarajan",
    "Tomás Ruiz",
    "Mei Chen",
    "Ola Nordmann",
    "Sam Okafor",
    "Jules Martin",
];

/// Lock levels: spec spelling, acp-cli `by_lock_level` key, acp-cli default directive.
const LOCK_LEVELS: &[(&str, &str, &str)] = &[
    (
        "frozen",
        "frozen",
        "MUST NOT modify this code under any circumstances",
    ),
    (
        "restricted",
        "restricted",
        "Explain proposed changes and wait for explicit approval",
    ),
    (
        "approval-required",
        "approvalrequired",
        "Propose changes and request confirmation before applying",
    ),
    (
        "tests-required",
        "testsrequired",
        "All changes must include corresponding tests",
    ),
    (
        "docs-required",
        "docsrequired",
        "All changes must update documentation",
    ),
    (
        "review-required",
        "reviewrequired",
        "Changes require code review before merging",
    ),
    (
        "normal",
        "normal",
        "Safe to modify following project conventions",
    ),
    (
        "experimental",
        "experimental",
        "Experimental code - changes welcome but may be unstable",
    ),
];

/// Index of `normal` in [`LOCK_LEVELS`].
const NORMAL_LEVEL: usize = 6;

/// Inline annotation types with acp-cli's default directive and a relative weight.
const INLINE_KINDS: &[(&str, &str, u32)] = &[
    ("todo", "Pending work item - address before release", 40),
    (
        "fixme",
        "Known issue requiring fix - prioritize resolution",
        20,
    ),
    (
        "critical",
        "Critical section - changes require extra review",
        15,
    ),
    (
        "perf",
        "Performance-sensitive code - benchmark any changes",
        15,
    ),
    (
        "hack",
        "Temporary workaround - check expiry before modifying",
        10,
    ),
];

const CACHE_SCHEMA: &str = "https://acp-protocol.dev/schemas/v1/cache.schema.json";
const VARS_SCHEMA: &str = "https://acp-protocol.dev/schemas/v1/vars.schema.json";
const GENERATOR_VERSION: &str = "0.7.0";

/// Index time of every generated cache: 2026-01-05T09:30:12.481516Z.
const BASE_SECS: i64 = 1_767_605_412;
const BASE_NANOS: u32 = 481_516_000;

/// Share of symbols that are functions or methods (the only callers and callees).
const CALLABLE_SHARE: f64 = 0.75;

// Salts separating the pseudo-random streams.
const SALT_COUNT: u64 = 1;
const SALT_FILE: u64 = 2;
const SALT_SYMBOL: u64 = 3;
const SALT_LAYOUT: u64 = 4;
const SALT_EDGES: u64 = 5;
const SALT_INLINE: u64 = 6;
const SALT_GIT: u64 = 7;
const SALT_VARS: u64 = 8;
const SALT_VARS_FILE: u64 = 9;

// ---------------------------------------------------------------------------------------------
// Pseudo-random numbers.

/// splitmix64: tiny, fast and good enough for synthetic data.
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform `usize` in `0..n`.
    fn index(&mut self, n: usize) -> usize {
        self.below(n as u64) as usize
    }

    /// Uniform in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// Index chosen with probability proportional to `weight(item)`.
    fn weighted<T>(&mut self, items: &[T], weight: impl Fn(&T) -> u32) -> usize {
        let total: u64 = items.iter().map(|i| u64::from(weight(i))).sum();
        let mut roll = self.below(total);
        for (k, item) in items.iter().enumerate() {
            let w = u64::from(weight(item));
            if roll < w {
                return k;
            }
            roll -= w;
        }
        items.len() - 1
    }
}

fn mix(a: u64, b: u64) -> u64 {
    Rng(a ^ b.wrapping_mul(0xD6E8_FEB8_6659_FD93)).next_u64()
}

/// The stream for one (salt, index) pair of a seed.
fn stream(seed: u64, salt: u64, index: u64) -> Rng {
    Rng(mix(mix(seed, salt), index))
}

// ---------------------------------------------------------------------------------------------
// The model: files and symbols derived from indices.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lang {
    TypeScript,
    Rust,
    Python,
    Go,
}

impl Lang {
    fn id(self) -> &'static str {
        match self {
            Lang::TypeScript => "typescript",
            Lang::Rust => "rust",
            Lang::Python => "python",
            Lang::Go => "go",
        }
    }

    /// Names that recur across files (name, kind, private).
    fn common_names(self) -> &'static [(&'static str, Kind, bool)] {
        match self {
            Lang::TypeScript => &[
                ("constructor", Kind::Method, false),
                ("render", Kind::Method, false),
                ("toString", Kind::Method, false),
                ("handle", Kind::Function, false),
                ("main", Kind::Function, false),
            ],
            Lang::Rust => &[
                ("new", Kind::Method, false),
                ("default", Kind::Method, false),
                ("from", Kind::Method, false),
                ("main", Kind::Function, true),
                ("run", Kind::Function, false),
            ],
            Lang::Python => &[
                ("__init__", Kind::Method, false),
                ("__repr__", Kind::Method, false),
                ("main", Kind::Function, false),
                ("run", Kind::Function, false),
                ("setup", Kind::Function, false),
            ],
            Lang::Go => &[
                ("main", Kind::Function, true),
                ("init", Kind::Function, true),
                ("New", Kind::Function, false),
                ("String", Kind::Method, false),
                ("Run", Kind::Function, false),
            ],
        }
    }

    /// Kinds of non-callable symbols with relative weights.
    fn type_kinds(self) -> &'static [(Kind, u32)] {
        match self {
            Lang::TypeScript => &[
                (Kind::Class, 40),
                (Kind::Interface, 25),
                (Kind::Type, 10),
                (Kind::Enum, 5),
                (Kind::Const, 20),
            ],
            Lang::Rust => &[
                (Kind::Struct, 40),
                (Kind::Enum, 15),
                (Kind::Trait, 10),
                (Kind::Class, 10),
                (Kind::Const, 20),
                (Kind::Type, 5),
            ],
            Lang::Python => &[(Kind::Class, 75), (Kind::Const, 25)],
            Lang::Go => &[
                (Kind::Struct, 45),
                (Kind::Interface, 20),
                (Kind::Type, 15),
                (Kind::Const, 20),
            ],
        }
    }

    /// Primitive parameter types.
    fn primitives(self) -> [&'static str; 3] {
        match self {
            Lang::TypeScript => ["string", "number", "boolean"],
            Lang::Rust => ["&str", "u64", "bool"],
            Lang::Python => ["str", "int", "bool"],
            Lang::Go => ["string", "int", "bool"],
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Function,
    Method,
    Class,
    Interface,
    Type,
    Enum,
    Struct,
    Trait,
    Const,
}

impl Kind {
    fn id(self) -> &'static str {
        match self {
            Kind::Function => "function",
            Kind::Method => "method",
            Kind::Class => "class",
            Kind::Interface => "interface",
            Kind::Type => "type",
            Kind::Enum => "enum",
            Kind::Struct => "struct",
            Kind::Trait => "trait",
            Kind::Const => "const",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Visibility {
    Public,
    Private,
    Protected,
}

/// Everything about one file that does not need its symbols.
#[derive(Debug, Clone, Copy)]
struct FileInfo {
    index: u32,
    dir: usize,
    lang: Lang,
    tsx: bool,
    stem_noun: usize,
    stem_suffix: usize,
    stem_round: usize,
    first_symbol: u32,
    symbol_count: u32,
    /// Noun of the file's first symbol; symbol `j` uses noun `noun_offset + j`.
    noun_offset: usize,
    /// The first symbol takes a recurring name from [`Lang::common_names`].
    common: Option<usize>,
    mtime: (i64, u32),
    domain: bool,
    layer: Option<usize>,
    module: bool,
    summary: bool,
    purpose: bool,
    owner: bool,
    inline: bool,
    lock: Option<usize>,
    custom_directive: bool,
    ai_hint: bool,
    git: bool,
    exports: bool,
}

/// Everything about one symbol; `start`/`end` are filled by [`Plan::layout`].
#[derive(Debug, Clone, Copy)]
struct Sym {
    kind: Kind,
    common: Option<&'static str>,
    verb: usize,
    adjective: Option<usize>,
    noun: usize,
    round: usize,
    suffix: usize,
    tail: usize,
    upper_const: bool,
    visibility: Visibility,
    is_async: bool,
    summary: Option<usize>,
    summary_note: bool,
    params: usize,
    param_types: [usize; 3],
    returns: usize,
    start: u32,
    end: u32,
}

impl Sym {
    fn exported(&self) -> bool {
        self.visibility == Visibility::Public
    }

    fn callable(&self) -> bool {
        matches!(self.kind, Kind::Function | Kind::Method)
    }
}

/// One inline annotation of a file.
#[derive(Debug, Clone)]
struct Inline {
    line: u32,
    kind: usize,
    value: Option<String>,
    directive: String,
    auto_generated: bool,
    ticket: Option<String>,
    reason: String,
}

/// Aggregates computed by a first pass over all files.
#[derive(Debug, Clone, Default)]
struct Totals {
    lines: u64,
    summaries: u64,
    domain_files: Vec<u32>,
    layer_files: Vec<u32>,
    provenance: u64,
    constrained: bool,
}

/// Global layout of a spec: directory boundaries, per-file symbol ranges, graph parameters.
#[derive(Debug)]
struct Plan {
    seed: u64,
    files: u32,
    symbols: u32,
    /// `dir_bounds[d]..dir_bounds[d + 1]` are the files of domain directory `d`.
    dir_bounds: Vec<u32>,
    /// `file_starts[f]..file_starts[f + 1]` are the symbols of file `f`.
    file_starts: Vec<u32>,
    /// Mean out-degree of a callable symbol.
    mean_degree: f64,
    /// `ln(symbols + 1)`, the scale of the Zipf sampler.
    zipf_scale: f64,
    /// Multiplier of the rank → symbol permutation (coprime with `symbols`).
    perm_mul: u64,
    perm_add: u64,
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

impl Plan {
    fn new(spec: &GenSpec) -> io::Result<Plan> {
        let total = u64::from(spec.files) * u64::from(spec.symbols_per_file);
        if total >= u64::from(u32::MAX) {
            return Err(invalid(format!(
                "{total} symbols requested; at most {} are supported",
                u32::MAX - 1
            )));
        }
        if !spec.edges_per_symbol.is_finite() || spec.edges_per_symbol < 0.0 {
            return Err(invalid(format!(
                "edges per symbol must be a non-negative number, got {}",
                spec.edges_per_symbol
            )));
        }
        if total as f64 * spec.edges_per_symbol > f64::from(u32::MAX) * 0.8 {
            return Err(invalid(format!(
                "about {:.0} edges requested; at most {} are supported",
                total as f64 * spec.edges_per_symbol,
                u32::MAX
            )));
        }
        let symbols = total as u32;
        let seed = spec.seed;

        // Domain directories get Zipf-like shares of the files.
        let weights: Vec<f64> = (0..DOMAINS.len())
            .map(|d| 1.0 / (d as f64 + 3.0).powf(0.8))
            .collect();
        let weight_sum: f64 = weights.iter().sum();
        let mut dir_bounds = vec![0u32];
        let mut acc = 0.0;
        for w in &weights {
            acc += w;
            let bound = (f64::from(spec.files) * acc / weight_sum).round() as u32;
            dir_bounds.push(bound.min(spec.files));
        }
        *dir_bounds.last_mut().expect("non-empty") = spec.files;

        // Symbols per file vary in 1..2K around the mean K, then are nudged to hit the total.
        let k = spec.symbols_per_file;
        let mut counts: Vec<u32> = (0..spec.files)
            .map(|f| {
                if k == 0 {
                    0
                } else {
                    1 + stream(seed, SALT_COUNT, u64::from(f)).below(u64::from(2 * k - 1)) as u32
                }
            })
            .collect();
        let mut diff = i64::from(symbols) - counts.iter().map(|&c| i64::from(c)).sum::<i64>();
        let mut f = 0usize;
        while diff != 0 {
            if diff > 0 {
                counts[f] += 1;
                diff -= 1;
            } else if counts[f] > 1 {
                counts[f] -= 1;
                diff += 1;
            }
            f = (f + 1) % counts.len();
        }
        let mut file_starts = Vec::with_capacity(counts.len() + 1);
        let mut start = 0u32;
        file_starts.push(0);
        for c in counts {
            start += c;
            file_starts.push(start);
        }

        let mut plan = Plan {
            seed,
            files: spec.files,
            symbols,
            dir_bounds,
            file_starts,
            mean_degree: 0.0,
            zipf_scale: (f64::from(symbols) + 1.0).ln(),
            perm_mul: 1,
            perm_add: 0,
        };
        let callable = (0..symbols).filter(|&i| plan.is_callable(i)).count();
        if callable > 0 {
            plan.mean_degree = spec.edges_per_symbol * f64::from(symbols) / callable as f64;
        }
        if symbols > 0 {
            let n = u64::from(symbols);
            let mut mul = 0x9E37_79B1 % n;
            while gcd(mul.max(1), n) != 1 {
                mul += 1;
            }
            plan.perm_mul = mul.max(1);
            plan.perm_add = mix(seed, 0xA5A5) % n;
        }
        Ok(plan)
    }

    fn file_of(&self, symbol: u32) -> u32 {
        (self.file_starts.partition_point(|&s| s <= symbol) - 1) as u32
    }

    fn file(&self, f: u32) -> FileInfo {
        let dir = self.dir_bounds.partition_point(|&b| b <= f) - 1;
        let local = (f - self.dir_bounds[dir]) as usize;
        let stem_noun = (local + dir * 13) % NOUNS.len();
        let q = local / NOUNS.len();
        let stem_suffix = q % FILE_SUFFIXES.len();
        let stem_round = q / FILE_SUFFIXES.len();

        let mut rng = stream(self.seed, SALT_FILE, u64::from(f));
        let lang = match rng.below(100) {
            0..=44 => Lang::TypeScript,
            45..=64 => Lang::Rust,
            65..=86 => Lang::Python,
            _ => Lang::Go,
        };
        let tsx = lang == Lang::TypeScript && rng.chance(0.1);
        let noun_offset = rng.index(NOUNS.len());
        let common = rng
            .chance(0.25)
            .then(|| rng.index(lang.common_names().len()));
        let age = 60 + rng.below(400 * 86_400) as i64;
        let nanos = match rng.below(3) {
            0 => 0,
            1 => rng.below(1000) as u32 * 1_000_000,
            _ => rng.below(1_000_000_000) as u32,
        };
        let domain = rng.chance(0.85);
        let layer = if rng.chance(0.6) {
            Some(
                FILE_SUFFIXES[stem_suffix]
                    .1
                    .unwrap_or_else(|| rng.index(LAYERS.len())),
            )
        } else {
            None
        };
        let module = rng.chance(0.3);
        let summary = rng.chance(0.25);
        let purpose = rng.chance(0.15);
        let owner = rng.chance(0.1);
        let inline = rng.chance(0.08);
        let lock = rng.chance(0.05).then(|| rng.index(LOCK_LEVELS.len()));
        let custom_directive = rng.chance(0.3);
        let ai_hint = rng.chance(0.01);
        let git = rng.chance(0.9);
        let exports = rng.chance(0.05);
        FileInfo {
            index: f,
            dir,
            lang,
            tsx,
            stem_noun,
            stem_suffix,
            stem_round,
            first_symbol: self.file_starts[f as usize],
            symbol_count: self.file_starts[f as usize + 1] - self.file_starts[f as usize],
            noun_offset,
            common,
            mtime: (BASE_SECS - age, nanos),
            domain,
            layer,
            module,
            summary,
            purpose,
            owner,
            inline,
            lock,
            custom_directive,
            ai_hint,
            git,
            exports,
        }
    }

    /// Whether symbol `i` is a function or method; the first draw of its stream.
    fn is_callable(&self, i: u32) -> bool {
        stream(self.seed, SALT_SYMBOL, u64::from(i)).unit() < CALLABLE_SHARE
    }

    fn symbol(&self, file: &FileInfo, i: u32) -> Sym {
        let mut rng = stream(self.seed, SALT_SYMBOL, u64::from(i));
        let callable = rng.unit() < CALLABLE_SHARE;
        let lang = file.lang;
        let method_share = match lang {
            Lang::TypeScript | Lang::Rust => 0.45,
            Lang::Python => 0.5,
            Lang::Go => 0.4,
        };
        let mut kind = if callable {
            if rng.chance(method_share) {
                Kind::Method
            } else {
                Kind::Function
            }
        } else {
            let kinds = lang.type_kinds();
            kinds[rng.weighted(kinds, |k| k.1)].0
        };
        let pos = (i - file.first_symbol) as usize;
        let noun = (file.noun_offset + pos) % NOUNS.len();
        let round = pos / NOUNS.len();
        let verb = rng.index(VERBS.len());
        let adjective = rng.chance(0.4).then(|| rng.index(ADJECTIVES.len()));
        let suffix = rng.index(TYPE_SUFFIXES.len());
        let tail = rng.index(CONST_TAILS.len());
        let upper_const = rng.chance(0.5);
        let roll = rng.unit();
        let mut visibility = match lang {
            Lang::TypeScript if kind == Kind::Method && roll < 0.05 => Visibility::Protected,
            Lang::TypeScript if roll < 0.17 => Visibility::Private,
            Lang::Rust if roll < 0.3 => Visibility::Private,
            Lang::Python if roll < 0.15 => Visibility::Private,
            Lang::Go if roll < 0.4 => Visibility::Private,
            _ => Visibility::Public,
        };
        let mut common = None;
        if pos == 0 && callable {
            if let Some(c) = file.common {
                let (name, common_kind, private) = lang.common_names()[c];
                common = Some(name);
                kind = common_kind;
                visibility = if private {
                    Visibility::Private
                } else {
                    Visibility::Public
                };
            }
        }
        let async_share = match lang {
            Lang::TypeScript => 0.25,
            Lang::Rust | Lang::Python => 0.15,
            Lang::Go => 0.0,
        };
        let is_async = rng.chance(async_share) && callable;
        let summary = rng.chance(0.4).then(|| rng.index(SUMMARY_TAILS.len()));
        let summary_note = rng.chance(0.05);
        let params = rng.index(4);
        let param_types = [rng.index(4), rng.index(4), rng.index(4)];
        let returns = rng.index(4);
        Sym {
            kind,
            common,
            verb,
            adjective,
            noun,
            round,
            suffix,
            tail,
            upper_const,
            visibility,
            is_async,
            summary,
            summary_note,
            params,
            param_types,
            returns,
            start: 0,
            end: 0,
        }
    }

    /// Fills `syms` with the file's symbols and their line ranges; returns the file's line count.
    fn layout(&self, file: &FileInfo, syms: &mut Vec<Sym>) -> u32 {
        syms.clear();
        let mut rng = stream(self.seed, SALT_LAYOUT, u64::from(file.index));
        if file.symbol_count == 0 {
            return 5 + rng.below(200) as u32;
        }
        let mut line = 1 + rng.below(20) as u32;
        for i in file.first_symbol..file.first_symbol + file.symbol_count {
            let mut sym = self.symbol(file, i);
            let len = match sym.kind {
                Kind::Function | Kind::Method => {
                    let long = if rng.chance(0.1) { rng.below(150) } else { 0 };
                    3 + rng.below(40) + long
                }
                Kind::Const | Kind::Type => 1 + rng.below(3),
                _ => 5 + rng.below(60),
            } as u32;
            sym.start = line;
            sym.end = line + len - 1;
            line = sym.end + 1 + rng.below(4) as u32;
            syms.push(sym);
        }
        line + rng.below(10) as u32
    }

    /// Callees of caller `i`, sorted and distinct: a mix of nearby symbols, uniformly chosen
    /// symbols and Zipf-popular ones, all callable.
    fn callees(&self, i: u32, out: &mut Vec<u32>) {
        out.clear();
        let mut rng = stream(self.seed, SALT_EDGES, u64::from(i));
        let degree = (self.mean_degree * -(1.0 - rng.unit()).ln()).round() as usize;
        let n = u64::from(self.symbols);
        let mut attempts = degree * 8 + 16;
        while out.len() < degree && attempts > 0 {
            attempts -= 1;
            let roll = rng.unit();
            let target = if roll < 0.35 {
                let offset = rng.below(64) as i64 - 32;
                (i64::from(i) + offset).clamp(0, n as i64 - 1) as u64
            } else if roll < 0.7 {
                rng.below(n)
            } else {
                let rank = ((rng.unit() * self.zipf_scale).exp() as u64).saturating_sub(1);
                (rank.min(n - 1) * self.perm_mul + self.perm_add) % n
            } as u32;
            if self.is_callable(target) && !out.contains(&target) {
                out.push(target);
            }
        }
        out.sort_unstable();
    }

    fn totals(&self) -> Totals {
        let mut totals = Totals {
            domain_files: vec![0; DOMAINS.len()],
            layer_files: vec![0; LAYERS.len()],
            ..Totals::default()
        };
        let mut syms = Vec::new();
        for f in 0..self.files {
            let file = self.file(f);
            let lines = self.layout(&file, &mut syms);
            totals.lines += u64::from(lines);
            totals.summaries += syms.iter().filter(|s| s.summary.is_some()).count() as u64;
            if file.domain {
                totals.domain_files[file.dir] += 1;
            }
            if let Some(l) = file.layer {
                totals.layer_files[l] += 1;
            }
            totals.provenance += annotation_count(&file);
            totals.constrained |= file.lock.is_some()
                || file.ai_hint
                || self
                    .inline_marks(&file, lines)
                    .iter()
                    .any(|m| INLINE_KINDS[m.kind].0 == "hack");
        }
        totals
    }

    /// Inline annotations of a file with `lines` lines.
    fn inline_marks(&self, file: &FileInfo, lines: u32) -> Vec<Inline> {
        if !file.inline {
            return Vec::new();
        }
        let mut rng = stream(self.seed, SALT_INLINE, u64::from(file.index));
        let count = 1 + rng.below(3);
        let noun = NOUNS[file.stem_noun];
        let mut marks: Vec<Inline> = (0..count)
            .map(|_| {
                let kind = rng.weighted(INLINE_KINDS, |k| k.2);
                let line = 1 + rng.below(u64::from(lines.max(1))) as u32;
                let adjective = ADJECTIVES[rng.index(ADJECTIVES.len())];
                let auto_generated = rng.chance(0.7);
                let directive = if auto_generated {
                    INLINE_KINDS[kind].1.to_string()
                } else {
                    format!("Keep the {noun} contract stable for {}", DOMAINS[file.dir])
                };
                let ticket_no = 100 + rng.below(9900);
                let reason = format!("Vendor SDK mishandles the {adjective} {noun}");
                let (value, ticket) = match INLINE_KINDS[kind].0 {
                    "hack" => {
                        let ticket =
                            format!("{}{ticket_no}", DOMAINS[file.dir][..3].to_ascii_uppercase());
                        (Some(format!("ticket={ticket} \"{reason}\"")), Some(ticket))
                    }
                    "todo" => (Some(format!("Handle the {adjective} {noun} case")), None),
                    "fixme" => (Some(format!("Race on {adjective} {noun} updates")), None),
                    _ => (None, None),
                };
                Inline {
                    line,
                    kind,
                    value,
                    directive,
                    auto_generated,
                    ticket,
                    reason,
                }
            })
            .collect();
        marks.sort_by_key(|m| m.line);
        marks
    }

    /// Appends the qualified name of symbol `i`.
    fn push_qualified(&self, buf: &mut String, i: u32) {
        let file = self.file(self.file_of(i));
        let sym = self.symbol(&file, i);
        push_path(buf, &file);
        buf.push(':');
        push_name(buf, &file, &sym);
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Number of `files[*].annotations` entries of a file.
fn annotation_count(file: &FileInfo) -> u64 {
    [
        file.module,
        file.summary,
        file.purpose,
        file.owner,
        file.domain,
        file.layer.is_some(),
        file.lock.is_some(),
        file.ai_hint,
    ]
    .iter()
    .filter(|&&b| b)
    .count() as u64
}

// ---------------------------------------------------------------------------------------------
// Text: identifiers, paths, signatures and descriptions.

#[derive(Clone, Copy)]
enum Case {
    Camel,
    Pascal,
    Snake,
    UpperSnake,
}

fn push_capitalized(buf: &mut String, word: &str) {
    let mut chars = word.chars();
    if let Some(c) = chars.next() {
        buf.push(c.to_ascii_uppercase());
        buf.push_str(chars.as_str());
    }
}

fn push_ident(buf: &mut String, words: &[&str], case: Case) {
    for (k, word) in words.iter().enumerate() {
        match case {
            Case::Camel if k == 0 => buf.push_str(word),
            Case::Camel | Case::Pascal => push_capitalized(buf, word),
            Case::Snake | Case::UpperSnake => {
                if k > 0 {
                    buf.push('_');
                }
                if matches!(case, Case::UpperSnake) {
                    buf.extend(word.chars().map(|c| c.to_ascii_uppercase()));
                } else {
                    buf.push_str(word);
                }
            }
        }
    }
}

/// Words of a symbol name without case: `[verb, adj?, noun]`, `[adj?, noun, tail]` or
/// `[adj?, noun, suffix]`.
fn name_words(sym: &Sym) -> ([&'static str; 3], usize) {
    let mut words = [""; 3];
    let mut n = 0;
    let mut push = |w: &'static str| {
        words[n] = w;
        n += 1;
    };
    if sym.callable() {
        push(VERBS[sym.verb].0);
    }
    if let Some(a) = sym.adjective {
        push(ADJECTIVES[a]);
    }
    push(NOUNS[sym.noun]);
    match sym.kind {
        Kind::Function | Kind::Method => {}
        Kind::Const => push(CONST_TAILS[sym.tail]),
        _ => push(TYPE_SUFFIXES[sym.suffix]),
    }
    (words, n)
}

fn push_name(buf: &mut String, file: &FileInfo, sym: &Sym) {
    if let Some(name) = sym.common {
        buf.push_str(name);
        return;
    }
    let (words, n) = name_words(sym);
    let words = &words[..n];
    let private = sym.visibility == Visibility::Private;
    let case = match (file.lang, sym.kind) {
        (Lang::Go, _) if private => Case::Camel,
        (Lang::Go, _) => Case::Pascal,
        (Lang::TypeScript, Kind::Const) if sym.upper_const => Case::UpperSnake,
        (Lang::TypeScript, Kind::Function | Kind::Method | Kind::Const) => Case::Camel,
        (Lang::Rust | Lang::Python, Kind::Const) => Case::UpperSnake,
        (Lang::Rust | Lang::Python, Kind::Function | Kind::Method) => Case::Snake,
        _ => Case::Pascal,
    };
    if file.lang == Lang::Python && private {
        buf.push('_');
    }
    push_ident(buf, words, case);
    if sym.round > 0 {
        let _ = write!(buf, "{}", sym.round);
    }
}

/// Appends `src/<domain>/<stem>.<ext>` (no `./`).
fn push_path(buf: &mut String, file: &FileInfo) {
    buf.push_str("src/");
    buf.push_str(DOMAINS[file.dir]);
    buf.push('/');
    let noun = NOUNS[file.stem_noun];
    let suffix = FILE_SUFFIXES[file.stem_suffix].0;
    let words: &[&str] = if suffix.is_empty() {
        &[noun]
    } else {
        &[noun, suffix]
    };
    let case = if file.lang == Lang::TypeScript {
        Case::Camel
    } else {
        Case::Snake
    };
    push_ident(buf, words, case);
    if file.stem_round > 0 {
        let _ = write!(buf, "{}", file.stem_round);
    }
    buf.push_str(match file.lang {
        Lang::TypeScript if file.tsx => ".tsx",
        Lang::TypeScript => ".ts",
        Lang::Rust => ".rs",
        Lang::Python => ".py",
        Lang::Go => ".go",
    });
}

/// Title-cased words of a file stem (`Session Store`).
fn push_module(buf: &mut String, file: &FileInfo) {
    push_capitalized(buf, NOUNS[file.stem_noun]);
    let suffix = FILE_SUFFIXES[file.stem_suffix].0;
    if !suffix.is_empty() {
        buf.push(' ');
        push_capitalized(buf, suffix);
    }
}

fn file_role(file: &FileInfo) -> &'static str {
    match FILE_SUFFIXES[file.stem_suffix].0 {
        "" => "module",
        s => s,
    }
}

fn push_file_summary(buf: &mut String, file: &FileInfo) {
    push_capitalized(buf, NOUNS[file.stem_noun]);
    let _ = write!(
        buf,
        " {} for the {} domain",
        file_role(file),
        DOMAINS[file.dir]
    );
}

fn push_file_purpose(buf: &mut String, file: &FileInfo) {
    let _ = write!(
        buf,
        "Owns {} {} logic shared by the {} handlers",
        NOUNS[file.stem_noun],
        file_role(file),
        DOMAINS[file.dir]
    );
}

fn push_summary(buf: &mut String, file: &FileInfo, sym: &Sym, tail: usize) {
    let noun = NOUNS[sym.noun];
    let adjective = sym.adjective.map(|a| ADJECTIVES[a]);
    match sym.kind {
        Kind::Function | Kind::Method => {
            buf.push_str(VERBS[sym.verb].1);
            buf.push_str(" the ");
            if let Some(a) = adjective {
                buf.push_str(a);
                buf.push(' ');
            }
            buf.push_str(noun);
            buf.push_str(SUMMARY_TAILS[tail]);
            buf.push('.');
        }
        Kind::Const => {
            let _ = write!(
                buf,
                "Default {} {} used by the {} module.",
                noun, CONST_TAILS[sym.tail], DOMAINS[file.dir]
            );
        }
        _ => {
            push_capitalized(buf, adjective.unwrap_or(noun));
            if adjective.is_some() {
                buf.push(' ');
                buf.push_str(noun);
            }
            let _ = write!(
                buf,
                " {} for the {} domain.",
                TYPE_SUFFIXES[sym.suffix], DOMAINS[file.dir]
            );
        }
    }
    if sym.summary_note {
        let _ = write!(
            buf,
            "\n@acp:perf Hot path - keep allocations out of the {noun} loop"
        );
    }
}

fn push_type_name(buf: &mut String, lang: Lang, noun: usize, kind: usize) {
    if kind < 3 {
        buf.push_str(lang.primitives()[kind]);
    } else {
        push_capitalized(buf, NOUNS[noun]);
    }
}

/// Appends a declaration line in the file's language; returns false for symbols without one.
fn push_signature(buf: &mut String, file: &FileInfo, sym: &Sym, name: &str) -> bool {
    let lang = file.lang;
    let public = sym.visibility == Visibility::Public;
    if !sym.callable() {
        let keyword = match (lang, sym.kind) {
            (_, Kind::Const) => return false,
            (Lang::Go, Kind::Struct) => {
                let _ = write!(buf, "type {name} struct");
                return true;
            }
            (Lang::Go, Kind::Interface) => {
                let _ = write!(buf, "type {name} interface");
                return true;
            }
            (Lang::Go, _) => {
                let _ = write!(buf, "type {name} string");
                return true;
            }
            (Lang::Rust, Kind::Class) => {
                let _ = write!(buf, "impl {name}");
                return true;
            }
            (_, kind) => kind.id(),
        };
        if lang == Lang::Rust && public {
            buf.push_str("pub ");
        } else if lang == Lang::TypeScript && public {
            buf.push_str("export ");
        }
        buf.push_str(keyword);
        buf.push(' ');
        buf.push_str(name);
        if sym.kind == Kind::Type && lang == Lang::TypeScript {
            buf.push_str(" = ");
            push_capitalized(buf, NOUNS[sym.noun]);
            buf.push_str(" | null");
        }
        return true;
    }

    let method = sym.kind == Kind::Method;
    match lang {
        Lang::TypeScript => {
            match sym.visibility {
                Visibility::Private if method => buf.push_str("private "),
                Visibility::Protected => buf.push_str("protected "),
                _ => {}
            }
            if sym.is_async {
                buf.push_str("async ");
            }
            if !method {
                buf.push_str("function ");
            }
        }
        Lang::Rust => {
            if public {
                buf.push_str("pub ");
            }
            if sym.is_async {
                buf.push_str("async ");
            }
            buf.push_str("fn ");
        }
        Lang::Python => {
            if sym.is_async {
                buf.push_str("async ");
            }
            buf.push_str("def ");
        }
        Lang::Go => {
            buf.push_str("func ");
            if method {
                buf.push_str("(r *");
                push_capitalized(buf, NOUNS[file.stem_noun]);
                let suffix = FILE_SUFFIXES[file.stem_suffix].0;
                if !suffix.is_empty() {
                    push_capitalized(buf, suffix);
                }
                buf.push_str(") ");
            }
        }
    }
    buf.push_str(name);
    buf.push('(');
    let mut first = true;
    if method {
        match lang {
            Lang::Rust => {
                buf.push_str("&self");
                first = false;
            }
            Lang::Python => {
                buf.push_str("self");
                first = false;
            }
            _ => {}
        }
    }
    for k in 0..sym.params {
        if !first {
            buf.push_str(", ");
        }
        first = false;
        let noun = (sym.noun + 1 + k * 7) % NOUNS.len();
        let ty = sym.param_types[k];
        buf.push_str(NOUNS[noun]);
        match lang {
            Lang::TypeScript | Lang::Rust | Lang::Python => buf.push_str(": "),
            Lang::Go => buf.push(' '),
        }
        if ty == 3 {
            match lang {
                Lang::Rust => buf.push('&'),
                Lang::Go => buf.push('*'),
                _ => {}
            }
        }
        push_type_name(buf, lang, noun, ty);
    }
    buf.push(')');
    let ret = sym.returns;
    match lang {
        Lang::TypeScript => {
            buf.push_str(": ");
            if sym.is_async {
                buf.push_str("Promise<");
            }
            match ret {
                0 => buf.push_str("void"),
                1 => buf.push_str("boolean"),
                _ => push_capitalized(buf, NOUNS[sym.noun]),
            }
            if sym.is_async {
                buf.push('>');
            }
        }
        Lang::Rust => match ret {
            0 => {}
            1 => buf.push_str(" -> bool"),
            _ => {
                buf.push_str(" -> Result<");
                push_capitalized(buf, NOUNS[sym.noun]);
                buf.push('>');
            }
        },
        Lang::Python => {
            buf.push_str(" -> ");
            match ret {
                0 => buf.push_str("None"),
                1 => buf.push_str("bool"),
                _ => push_capitalized(buf, NOUNS[sym.noun]),
            }
        }
        Lang::Go => match ret {
            0 => buf.push_str(" error"),
            1 => buf.push_str(" bool"),
            _ => {
                buf.push_str(" (*");
                push_capitalized(buf, NOUNS[sym.noun]);
                buf.push_str(", error)");
            }
        },
    }
    true
}

fn rfc3339(secs: i64, nanos: u32) -> String {
    DateTime::from_timestamp(secs, nanos)
        .expect("timestamps stay within chrono's range")
        .to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

fn push_hex_sha(buf: &mut String, rng: &mut Rng) {
    let _ = write!(
        buf,
        "{:016x}{:016x}{:08x}",
        rng.next_u64(),
        rng.next_u64(),
        rng.next_u64() as u32
    );
}

/// `PREFIX_` + the upper-cased text with every character outside `[A-Za-z0-9]` turned into `_`.
fn var_name(prefix: &str, text: &str) -> String {
    let mut name = String::with_capacity(prefix.len() + text.len());
    name.push_str(prefix);
    name.extend(text.chars().map(|c| {
        if c.is_ascii_alphanumeric() {
            c.to_ascii_uppercase()
        } else {
            '_'
        }
    }));
    name
}

// ---------------------------------------------------------------------------------------------
// Streaming compact JSON.

/// A `Write` adapter counting the bytes that pass through it.
struct Counting<W> {
    inner: W,
    bytes: u64,
}

impl<W: Write> Write for Counting<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Minimal streaming JSON writer: tracks commas per nesting level, writes nothing else.
struct Json<W: Write> {
    out: BufWriter<Counting<W>>,
    /// Per open container: whether a value has been written (a comma is due).
    levels: Vec<bool>,
    after_key: bool,
}

impl<W: Write> Json<W> {
    fn new(inner: W) -> Self {
        Self {
            out: BufWriter::with_capacity(1 << 20, Counting { inner, bytes: 0 }),
            levels: Vec::new(),
            after_key: false,
        }
    }

    /// Flushes and returns the number of bytes written.
    fn finish(self) -> io::Result<u64> {
        let mut counting = self.out.into_inner().map_err(|e| e.into_error())?;
        counting.flush()?;
        Ok(counting.bytes)
    }

    fn separate(&mut self) -> io::Result<()> {
        if self.after_key {
            self.after_key = false;
        } else if let Some(due) = self.levels.last_mut() {
            if *due {
                self.out.write_all(b",")?;
            }
            *due = true;
        }
        Ok(())
    }

    fn write_str(&mut self, s: &str) -> io::Result<()> {
        if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
            self.out.write_all(b"\"")?;
            self.out.write_all(s.as_bytes())?;
            self.out.write_all(b"\"")
        } else {
            serde_json::to_writer(&mut self.out, s).map_err(io::Error::from)
        }
    }

    fn begin_object(&mut self) -> io::Result<()> {
        self.separate()?;
        self.levels.push(false);
        self.out.write_all(b"{")
    }

    fn end_object(&mut self) -> io::Result<()> {
        self.levels.pop();
        self.out.write_all(b"}")
    }

    fn begin_array(&mut self) -> io::Result<()> {
        self.separate()?;
        self.levels.push(false);
        self.out.write_all(b"[")
    }

    fn end_array(&mut self) -> io::Result<()> {
        self.levels.pop();
        self.out.write_all(b"]")
    }

    fn key(&mut self, key: &str) -> io::Result<()> {
        self.separate()?;
        self.write_str(key)?;
        self.out.write_all(b":")?;
        self.after_key = true;
        Ok(())
    }

    fn string(&mut self, s: &str) -> io::Result<()> {
        self.separate()?;
        self.write_str(s)
    }

    /// Writes `"./" + path` as a string.
    fn file_key(&mut self, path: &str) -> io::Result<()> {
        self.separate()?;
        self.out.write_all(b"\"./")?;
        self.out.write_all(path.as_bytes())?;
        self.out.write_all(b"\"")
    }

    /// Writes `"./" + path` as an object key.
    fn file_key_field(&mut self, path: &str) -> io::Result<()> {
        self.file_key(path)?;
        self.out.write_all(b":")?;
        self.after_key = true;
        Ok(())
    }

    fn uint(&mut self, n: u64) -> io::Result<()> {
        self.separate()?;
        let mut digits = [0u8; 20];
        let mut at = digits.len();
        let mut n = n;
        loop {
            at -= 1;
            digits[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        self.out.write_all(&digits[at..])
    }

    fn float(&mut self, x: f64) -> io::Result<()> {
        self.separate()?;
        serde_json::to_writer(&mut self.out, &x).map_err(io::Error::from)
    }

    fn boolean(&mut self, b: bool) -> io::Result<()> {
        self.separate()?;
        self.out
            .write_all(if b { b"true" as &[u8] } else { b"false" })
    }

    fn field_str(&mut self, key: &str, value: &str) -> io::Result<()> {
        self.key(key)?;
        self.string(value)
    }

    fn field_uint(&mut self, key: &str, value: u64) -> io::Result<()> {
        self.key(key)?;
        self.uint(value)
    }

    fn field_bool(&mut self, key: &str, value: bool) -> io::Result<()> {
        self.key(key)?;
        self.boolean(value)
    }

    fn field_lines(&mut self, start: u32, end: u32) -> io::Result<()> {
        self.key("lines")?;
        self.begin_array()?;
        self.uint(u64::from(start))?;
        self.uint(u64::from(end))?;
        self.end_array()
    }
}

// ---------------------------------------------------------------------------------------------
// The cache document, section by section in acp-cli's field order.

fn write_cache<W: Write>(plan: &Plan, totals: &Totals, json: &mut Json<W>) -> io::Result<u64> {
    let generated_at = rfc3339(BASE_SECS, BASE_NANOS);
    json.begin_object()?;
    json.field_str("$schema", CACHE_SCHEMA)?;
    json.field_str("version", GENERATOR_VERSION)?;
    json.field_str("generated_at", &generated_at)?;
    let mut sha = String::new();
    push_hex_sha(&mut sha, &mut stream(plan.seed, SALT_GIT, u64::MAX));
    json.field_str("git_commit", &sha)?;

    json.key("project")?;
    json.begin_object()?;
    json.field_str("name", "project")?;
    json.field_str("root", ".")?;
    json.end_object()?;

    json.key("stats")?;
    json.begin_object()?;
    json.field_uint("files", u64::from(plan.files))?;
    json.field_uint("symbols", u64::from(plan.symbols))?;
    json.field_uint("lines", totals.lines)?;
    json.key("annotationCoverage")?;
    let coverage = if plan.symbols == 0 {
        0.0
    } else {
        totals.summaries as f64 * 100.0 / f64::from(plan.symbols)
    };
    json.float(coverage)?;
    json.end_object()?;

    write_source_files(plan, json)?;
    write_files(plan, json)?;
    write_symbols(plan, json)?;
    let edges = write_graph(plan, json)?;
    write_domains(plan, totals, json)?;
    if totals.constrained {
        write_constraints(plan, &generated_at, json)?;
    }
    if totals.provenance > 0 {
        write_provenance(totals.provenance, json)?;
    }
    json.end_object()?;
    Ok(edges)
}

fn write_source_files<W: Write>(plan: &Plan, json: &mut Json<W>) -> io::Result<()> {
    let mut path = String::new();
    json.key("source_files")?;
    json.begin_object()?;
    for f in 0..plan.files {
        let file = plan.file(f);
        path.clear();
        push_path(&mut path, &file);
        json.key(&path)?;
        json.string(&rfc3339(file.mtime.0, file.mtime.1))?;
    }
    json.end_object()
}

fn write_files<W: Write>(plan: &Plan, json: &mut Json<W>) -> io::Result<()> {
    let mut path = String::new();
    let mut text = String::new();
    let mut syms = Vec::new();
    json.key("files")?;
    json.begin_object()?;
    for f in 0..plan.files {
        let file = plan.file(f);
        let lines = plan.layout(&file, &mut syms);
        path.clear();
        push_path(&mut path, &file);
        json.file_key_field(&path)?;
        json.begin_object()?;
        json.key("path")?;
        json.file_key(&path)?;
        json.field_uint("lines", u64::from(lines))?;
        json.field_str("language", file.lang.id())?;
        json.key("exports")?;
        json.begin_array()?;
        if file.exports {
            for sym in syms.iter().filter(|s| s.exported()).take(3) {
                text.clear();
                push_name(&mut text, &file, sym);
                json.string(&text)?;
            }
        }
        json.end_array()?;
        json.key("imports")?;
        json.begin_array()?;
        json.end_array()?;
        if file.module {
            text.clear();
            push_module(&mut text, &file);
            json.field_str("module", &text)?;
        }
        if file.summary {
            text.clear();
            push_file_summary(&mut text, &file);
            json.field_str("summary", &text)?;
        }
        if file.purpose {
            text.clear();
            push_file_purpose(&mut text, &file);
            json.field_str("purpose", &text)?;
        }
        if file.owner {
            text.clear();
            let _ = write!(text, "team-{}", DOMAINS[file.dir]);
            json.field_str("owner", &text)?;
        }
        let marks = plan.inline_marks(&file, lines);
        if !marks.is_empty() {
            json.key("inline")?;
            json.begin_array()?;
            for mark in &marks {
                json.begin_object()?;
                json.field_uint("line", u64::from(mark.line))?;
                json.field_str("type", INLINE_KINDS[mark.kind].0)?;
                if let Some(value) = &mark.value {
                    json.field_str("value", value)?;
                }
                json.field_str("directive", &mark.directive)?;
                if let Some(ticket) = &mark.ticket {
                    json.field_str("ticket", ticket)?;
                }
                if mark.auto_generated {
                    json.field_bool("auto_generated", true)?;
                }
                json.end_object()?;
            }
            json.end_array()?;
        }
        if file.domain {
            json.key("domains")?;
            json.begin_array()?;
            json.string(DOMAINS[file.dir])?;
            json.end_array()?;
        }
        if let Some(layer) = file.layer {
            json.field_str("layer", LAYERS[layer])?;
        }
        if file.ai_hint {
            json.key("ai_hints")?;
            json.begin_array()?;
            text.clear();
            let _ = write!(
                text,
                "ai-careful: {} parsing is brittle",
                NOUNS[file.stem_noun]
            );
            json.string(&text)?;
            json.end_array()?;
        }
        if file.git {
            write_file_git(plan, &file, json, &mut text)?;
        }
        if annotation_count(&file) > 0 {
            write_file_annotations(&file, json, &mut text)?;
        }
        json.end_object()?;
    }
    json.end_object()
}

fn write_file_git<W: Write>(
    plan: &Plan,
    file: &FileInfo,
    json: &mut Json<W>,
    text: &mut String,
) -> io::Result<()> {
    let mut rng = stream(plan.seed, SALT_GIT, u64::from(file.index));
    json.key("git")?;
    json.begin_object()?;
    text.clear();
    push_hex_sha(text, &mut rng);
    json.field_str("last_commit", text)?;
    let author = rng.index(AUTHORS.len());
    json.field_str("last_author", AUTHORS[author])?;
    let committed = file.mtime.0 - rng.below(3600) as i64;
    json.field_str("last_modified", &rfc3339(committed, 0))?;
    json.field_uint("commit_count", 1 + rng.below(200))?;
    json.key("contributors")?;
    json.begin_array()?;
    let extra = rng.index(4);
    json.string(AUTHORS[author])?;
    for k in 1..=extra {
        json.string(AUTHORS[(author + k * 3) % AUTHORS.len()])?;
    }
    json.end_array()?;
    json.end_object()
}

fn write_file_annotations<W: Write>(
    file: &FileInfo,
    json: &mut Json<W>,
    text: &mut String,
) -> io::Result<()> {
    json.key("annotations")?;
    json.begin_object()?;
    let entry = |json: &mut Json<W>, name: &str, value: &str| -> io::Result<()> {
        json.key(name)?;
        json.begin_object()?;
        json.field_str("value", value)?;
        json.field_bool("reviewed", true)?;
        json.end_object()
    };
    if file.module {
        text.clear();
        text.push('"');
        push_module(text, file);
        text.push('"');
        entry(json, "@acp:module", text)?;
    }
    if file.summary {
        text.clear();
        text.push('"');
        push_file_summary(text, file);
        text.push('"');
        entry(json, "@acp:summary", text)?;
    }
    if file.purpose {
        text.clear();
        text.push('"');
        push_file_purpose(text, file);
        text.push('"');
        entry(json, "@acp:purpose", text)?;
    }
    if file.owner {
        text.clear();
        let _ = write!(text, "team-{}", DOMAINS[file.dir]);
        entry(json, "@acp:owner", text)?;
    }
    if file.domain {
        entry(json, "@acp:domain", DOMAINS[file.dir])?;
    }
    if let Some(layer) = file.layer {
        entry(json, "@acp:layer", LAYERS[layer])?;
    }
    if let Some(level) = file.lock {
        entry(json, "@acp:lock", LOCK_LEVELS[level].0)?;
    }
    if file.ai_hint {
        entry(json, "@acp:ai-careful", "parsing is brittle")?;
    }
    json.end_object()
}

fn write_symbols<W: Write>(plan: &Plan, json: &mut Json<W>) -> io::Result<()> {
    let mut path = String::new();
    let mut name = String::new();
    let mut qualified = String::new();
    let mut text = String::new();
    let mut syms = Vec::new();
    json.key("symbols")?;
    json.begin_object()?;
    for f in 0..plan.files {
        let file = plan.file(f);
        plan.layout(&file, &mut syms);
        path.clear();
        push_path(&mut path, &file);
        for sym in &syms {
            name.clear();
            push_name(&mut name, &file, sym);
            qualified.clear();
            qualified.push_str(&path);
            qualified.push(':');
            qualified.push_str(&name);
            json.key(&qualified)?;
            json.begin_object()?;
            json.field_str("name", &name)?;
            json.field_str("qualified_name", &qualified)?;
            json.field_str("type", sym.kind.id())?;
            json.field_str("file", &path)?;
            json.field_lines(sym.start, sym.end)?;
            json.field_bool("exported", sym.exported())?;
            text.clear();
            if push_signature(&mut text, &file, sym, &name) {
                json.field_str("signature", &text)?;
            }
            if let Some(tail) = sym.summary {
                text.clear();
                push_summary(&mut text, &file, sym, tail);
                json.field_str("summary", &text)?;
            }
            if sym.is_async {
                json.field_bool("async", true)?;
            }
            match sym.visibility {
                Visibility::Public => {}
                Visibility::Private => json.field_str("visibility", "private")?,
                Visibility::Protected => json.field_str("visibility", "protected")?,
            }
            json.end_object()?;
        }
    }
    json.end_object()
}

/// Writes `graph`; returns the number of edges.
///
/// `forward` is streamed caller by caller while in-degrees are counted; `reverse` then comes
/// from a second generation pass that scatters callers into per-callee buckets (a counting sort,
/// so each bucket lists its callers in index order).
fn write_graph<W: Write>(plan: &Plan, json: &mut Json<W>) -> io::Result<u64> {
    let n = plan.symbols as usize;
    let mut name = String::new();
    let mut callees = Vec::new();
    let mut indegree = vec![0u32; n];
    let mut edges: u64 = 0;

    json.key("graph")?;
    json.begin_object()?;
    json.key("forward")?;
    json.begin_object()?;
    for i in 0..plan.symbols {
        if !plan.is_callable(i) {
            continue;
        }
        plan.callees(i, &mut callees);
        if callees.is_empty() {
            continue;
        }
        name.clear();
        plan.push_qualified(&mut name, i);
        json.key(&name)?;
        json.begin_array()?;
        for &c in &callees {
            indegree[c as usize] += 1;
            name.clear();
            plan.push_qualified(&mut name, c);
            json.string(&name)?;
        }
        json.end_array()?;
        edges += callees.len() as u64;
    }
    json.end_object()?;

    let edge_count = u32::try_from(edges).map_err(|_| {
        invalid(format!(
            "{edges} edges generated; at most {} are supported",
            u32::MAX
        ))
    })?;
    // bucket_start[c]..bucket_start[c + 1] will hold the callers of c; `indegree` becomes the
    // fill cursor of each bucket.
    let mut bucket_start = Vec::with_capacity(n + 1);
    let mut acc = 0u32;
    bucket_start.push(0);
    for cursor in indegree.iter_mut() {
        let count = *cursor;
        *cursor = acc;
        acc += count;
        bucket_start.push(acc);
    }
    let mut callers = vec![0u32; edge_count as usize];
    for i in 0..plan.symbols {
        if !plan.is_callable(i) {
            continue;
        }
        plan.callees(i, &mut callees);
        for &c in &callees {
            let cursor = &mut indegree[c as usize];
            callers[*cursor as usize] = i;
            *cursor += 1;
        }
    }
    drop(indegree);

    json.key("reverse")?;
    json.begin_object()?;
    for c in 0..n {
        let bucket = &callers[bucket_start[c] as usize..bucket_start[c + 1] as usize];
        if bucket.is_empty() {
            continue;
        }
        name.clear();
        plan.push_qualified(&mut name, c as u32);
        json.key(&name)?;
        json.begin_array()?;
        for &caller in bucket {
            name.clear();
            plan.push_qualified(&mut name, caller);
            json.string(&name)?;
        }
        json.end_array()?;
    }
    json.end_object()?;
    json.end_object()?;
    Ok(edges)
}

fn write_domains<W: Write>(plan: &Plan, totals: &Totals, json: &mut Json<W>) -> io::Result<()> {
    if totals.domain_files.iter().all(|&c| c == 0) {
        return Ok(());
    }
    let mut path = String::new();
    json.key("domains")?;
    json.begin_object()?;
    for (d, domain) in DOMAINS.iter().enumerate() {
        if totals.domain_files[d] == 0 {
            continue;
        }
        json.key(domain)?;
        json.begin_object()?;
        json.field_str("name", domain)?;
        json.key("files")?;
        json.begin_array()?;
        for f in plan.dir_bounds[d]..plan.dir_bounds[d + 1] {
            let file = plan.file(f);
            if file.domain {
                path.clear();
                push_path(&mut path, &file);
                json.file_key(&path)?;
            }
        }
        json.end_array()?;
        json.key("symbols")?;
        json.begin_array()?;
        json.end_array()?;
        json.end_object()?;
    }
    json.end_object()
}

fn write_constraints<W: Write>(
    plan: &Plan,
    generated_at: &str,
    json: &mut Json<W>,
) -> io::Result<()> {
    let mut path = String::new();
    let mut syms = Vec::new();
    let mut by_level: Vec<Vec<u32>> = vec![Vec::new(); LOCK_LEVELS.len()];
    let mut hacks: Vec<(u32, Inline)> = Vec::new();

    json.key("constraints")?;
    json.begin_object()?;
    json.key("by_file")?;
    json.begin_object()?;
    for f in 0..plan.files {
        let file = plan.file(f);
        if file.inline {
            let lines = plan.layout(&file, &mut syms);
            hacks.extend(
                plan.inline_marks(&file, lines)
                    .into_iter()
                    .filter(|m| INLINE_KINDS[m.kind].0 == "hack")
                    .map(|m| (f, m)),
            );
        }
        if file.lock.is_none() && !file.ai_hint {
            continue;
        }
        let level = file.lock.unwrap_or(NORMAL_LEVEL);
        by_level[level].push(f);
        path.clear();
        push_path(&mut path, &file);
        json.file_key_field(&path)?;
        json.begin_object()?;
        json.key("mutation")?;
        json.begin_object()?;
        let (level_name, _, default_directive) = LOCK_LEVELS[level];
        json.field_str("level", level_name)?;
        json.field_bool("requires_approval", level_name == "approval-required")?;
        json.field_bool("requires_tests", level_name == "tests-required")?;
        json.field_bool("requires_docs", level_name == "docs-required")?;
        json.end_object()?;
        if file.lock.is_some() {
            if file.custom_directive {
                let directive = format!(
                    "Coordinate with team-{} before changing {} handling",
                    DOMAINS[file.dir], NOUNS[file.stem_noun]
                );
                json.field_str("directive", &directive)?;
            } else {
                json.field_str("directive", default_directive)?;
            }
        } else {
            json.field_bool("auto_generated", true)?;
        }
        json.end_object()?;
    }
    json.end_object()?;

    json.key("hacks")?;
    json.begin_array()?;
    for (f, mark) in &hacks {
        let file = plan.file(*f);
        path.clear();
        path.push_str("./");
        push_path(&mut path, &file);
        json.begin_object()?;
        json.field_str("id", &format!("{path}:{}", mark.line))?;
        json.field_str("type", "workaround")?;
        json.field_str("file", &path)?;
        json.field_uint("line", u64::from(mark.line))?;
        json.field_str("created_at", generated_at)?;
        json.field_str("reason", &mark.reason)?;
        if let Some(ticket) = &mark.ticket {
            json.field_str("ticket", ticket)?;
        }
        json.end_object()?;
    }
    json.end_array()?;

    json.key("debug_sessions")?;
    json.begin_array()?;
    json.end_array()?;

    json.key("by_lock_level")?;
    json.begin_object()?;
    for (level, files) in by_level.iter().enumerate() {
        if files.is_empty() {
            continue;
        }
        json.key(LOCK_LEVELS[level].1)?;
        json.begin_array()?;
        for &f in files {
            path.clear();
            push_path(&mut path, &plan.file(f));
            json.file_key(&path)?;
        }
        json.end_array()?;
    }
    json.end_object()?;
    json.end_object()
}

fn write_provenance<W: Write>(total: u64, json: &mut Json<W>) -> io::Result<()> {
    json.key("provenance")?;
    json.begin_object()?;
    json.key("summary")?;
    json.begin_object()?;
    json.field_uint("total", total)?;
    json.key("bySource")?;
    json.begin_object()?;
    json.field_uint("explicit", total)?;
    for source in ["converted", "heuristic", "refined", "inferred"] {
        json.field_uint(source, 0)?;
    }
    json.end_object()?;
    json.field_uint("needsReview", 0)?;
    json.field_uint("reviewed", total)?;
    json.end_object()?;
    json.end_object()
}

// ---------------------------------------------------------------------------------------------
// The vars file.

/// Writes the vars document; returns the number of variables.
fn write_vars<W: Write>(plan: &Plan, totals: &Totals, json: &mut Json<W>) -> io::Result<u64> {
    let mut seen: HashSet<String> = HashSet::new();
    let mut count = 0u64;
    let mut path = String::new();
    let mut name = String::new();
    let mut text = String::new();
    let mut syms = Vec::new();
    let mut sampled = Vec::new();

    json.begin_object()?;
    json.field_str("$schema", VARS_SCHEMA)?;
    json.field_str("version", GENERATOR_VERSION)?;
    json.key("variables")?;
    json.begin_object()?;

    let symbol_share = (2000.0 / f64::from(plan.symbols.max(1))).clamp(0.01, 0.25);
    let file_share = (500.0 / f64::from(plan.files.max(1))).clamp(0.02, 0.5);
    for f in 0..plan.files {
        let file = plan.file(f);
        sampled.clear();
        sampled.extend(
            (file.first_symbol..file.first_symbol + file.symbol_count)
                .filter(|&i| stream(plan.seed, SALT_VARS, u64::from(i)).chance(symbol_share)),
        );
        if sampled.is_empty() {
            continue;
        }
        plan.layout(&file, &mut syms);
        path.clear();
        push_path(&mut path, &file);
        for &i in &sampled {
            let sym = &syms[(i - file.first_symbol) as usize];
            if !sym.exported() {
                continue;
            }
            name.clear();
            push_name(&mut name, &file, sym);
            let var = var_name("SYM_", &name);
            if !seen.insert(var.clone()) {
                continue;
            }
            json.key(&var)?;
            json.begin_object()?;
            json.field_str("type", "symbol")?;
            text.clear();
            let _ = write!(text, "{path}:{name}");
            json.field_str("value", &text)?;
            if let Some(tail) = sym.summary {
                text.clear();
                push_summary(&mut text, &file, sym, tail);
                json.field_str("description", &text)?;
            }
            json.field_str("source", &path)?;
            json.field_lines(sym.start, sym.end)?;
            json.end_object()?;
            count += 1;
        }
    }

    for f in 0..plan.files {
        let file = plan.file(f);
        if !(file.module || file.summary)
            || !stream(plan.seed, SALT_VARS_FILE, u64::from(f)).chance(file_share)
        {
            continue;
        }
        path.clear();
        path.push_str("./");
        push_path(&mut path, &file);
        let var = var_name("FILE_", &path);
        if !seen.insert(var.clone()) {
            continue;
        }
        json.key(&var)?;
        json.begin_object()?;
        json.field_str("type", "file")?;
        json.field_str("value", &path)?;
        text.clear();
        if file.summary {
            push_file_summary(&mut text, &file);
        } else {
            push_module(&mut text, &file);
        }
        json.field_str("description", &text)?;
        json.end_object()?;
        count += 1;
    }

    for (d, domain) in DOMAINS.iter().enumerate() {
        let files = totals.domain_files[d];
        if files == 0 {
            continue;
        }
        json.key(&var_name("DOM_", domain))?;
        json.begin_object()?;
        json.field_str("type", "domain")?;
        json.field_str("value", domain)?;
        json.field_str("description", &format!("Domain: {domain} ({files} files)"))?;
        json.end_object()?;
        count += 1;
    }

    for (l, layer) in LAYERS.iter().enumerate() {
        let files = totals.layer_files[l];
        if files == 0 {
            continue;
        }
        json.key(&var_name("LAYER_", layer))?;
        json.begin_object()?;
        json.field_str("type", "layer")?;
        json.field_str("value", layer)?;
        json.field_str("description", &format!("Layer: {layer} ({files} files)"))?;
        json.end_object()?;
        count += 1;
    }

    json.end_object()?;
    json.end_object()?;
    Ok(count)
}
