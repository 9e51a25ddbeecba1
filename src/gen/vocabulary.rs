//! Vocabulary: the words names, paths and texts are made of.

// Vocabulary. Nouns, file suffixes, type suffixes and constant tails are pairwise disjoint and
// every word is a single lower-case token, so a symbol name's words (and thus its noun) can be
// recovered from the name: two symbols of one file with different nouns never share a name.

pub(super) const VERBS: &[(&str, &str)] = &[
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
/// Builtins and standard-library calls every codebase makes without defining them, most
/// popular first.
pub(super) const BUILTINS: &[&str] = &[
    "len", "push", "print", "append", "format", "JSON.stringify", "Object.keys", "isinstance",
    "slice", "join", "split", "unwrap", "clone", "to_string", "Errorf", "Sprintf", "parseInt",
    "setTimeout", "Promise.all", "console.log", "Some", "Ok", "Err", "assert", "getattr",
    "forEach", "startsWith", "toLowerCase", "Math.max", "Array.isArray",
];

/// Suffix of the names of symbols since removed (`validateSessionLegacy`).
pub(super) const REMOVED_SUFFIX: &str = "Legacy";

pub(super) const ADJECTIVES: &[&str] = &[
    "active",
    "cached",
    "current",
    "default",
    "pending",
    "remote",
    "local",
    "raw",
    "batch",
    "primary",
    "stale",
    "shared",
    "expired",
    "global",
    "internal",
    "legacy",
    "next",
    "partial",
    "secure",
    "temp",
    "dirty",
    "initial",
    "max",
    "last",
    "signed",
    "encrypted",
    "unread",
    "archived",
    "draft",
    "nested",
];

#[rustfmt::skip]
pub(super) const NOUNS: &[&str] = &[
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
pub(super) const FILE_SUFFIXES: &[(&str, Option<usize>)] = &[
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
pub(super) const TYPE_SUFFIXES: &[&str] = &[
    "service", "store", "manager", "client", "builder", "factory", "handler", "registry",
    "context", "state", "error", "options", "provider", "adapter", "kind", "status", "result",
    "spec",
];

#[rustfmt::skip]
pub(super) const CONST_TAILS: &[&str] = &[
    "timeout", "limit", "size", "ttl", "count", "prefix", "version", "interval", "threshold",
    "retries", "window", "capacity",
];

pub(super) const SUMMARY_TAILS: &[&str] = &[
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
pub(super) const DOMAINS: &[&str] = &[
    "auth", "billing", "orders", "users", "search", "payments", "notifications", "inventory",
    "reporting", "analytics", "storage", "messaging", "scheduler", "shipping", "catalog",
    "admin", "audit", "identity", "pricing", "gateway",
];

#[rustfmt::skip]
pub(super) const LAYERS: &[&str] = &[
    "api", "service", "data", "domain", "ui", "infrastructure", "util",
];

pub(super) const AUTHORS: &[&str] = &[
    "Dana Whitfield",
    "Lee Park",
    "Priya Natarajan",
    "Tomás Ruiz",
    "Mei Chen",
    "Ola Nordmann",
    "Sam Okafor",
    "Jules Martin",
];

/// acp-cli's default directive for a lock level (of [`crate::cache::LOCK_LEVELS`]).
pub(super) fn default_directive(level: &str) -> &'static str {
    match level {
        "frozen" => "MUST NOT modify this code under any circumstances",
        "restricted" => "Explain proposed changes and wait for explicit approval",
        "approval-required" => "Propose changes and request confirmation before applying",
        "tests-required" => "All changes must include corresponding tests",
        "docs-required" => "All changes must update documentation",
        "review-required" => "Changes require code review before merging",
        "experimental" => "Experimental code - changes welcome but may be unstable",
        _ => "Safe to modify following project conventions",
    }
}

/// The `by_lock_level` key acp-cli derives from its enum: the level without hyphens.
pub(super) fn cli_level_key(level: &str) -> String {
    level.replace('-', "")
}

/// Inline annotation types with acp-cli's default directive and a relative weight.
pub(super) const INLINE_KINDS: &[(&str, &str, u32)] = &[
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

pub(super) const CACHE_SCHEMA: &str = "https://acp-protocol.dev/schemas/v1/cache.schema.json";
pub(super) const VARS_SCHEMA: &str = "https://acp-protocol.dev/schemas/v1/vars.schema.json";
pub(super) const GENERATOR_VERSION: &str = "0.7.0";

/// Index time of every generated cache: 2026-01-05T09:30:12.481516Z.
pub(super) const BASE_SECS: i64 = 1_767_605_412;
pub(super) const BASE_NANOS: u32 = 481_516_000;

/// Share of symbols that are functions or methods (the only callers and callees).
pub(super) const CALLABLE_SHARE: f64 = 0.75;

// Salts separating the pseudo-random streams.
pub(super) const SALT_COUNT: u64 = 1;
pub(super) const SALT_FILE: u64 = 2;
pub(super) const SALT_SYMBOL: u64 = 3;
pub(super) const SALT_LAYOUT: u64 = 4;
pub(super) const SALT_EDGES: u64 = 5;
pub(super) const SALT_INLINE: u64 = 6;
pub(super) const SALT_GIT: u64 = 7;
pub(super) const SALT_VARS: u64 = 8;
pub(super) const SALT_VARS_FILE: u64 = 9;
pub(super) const SALT_REVISION: u64 = 10;
pub(super) const SALT_MOVE: u64 = 11;
pub(super) const SALT_EDIT: u64 = 12;
