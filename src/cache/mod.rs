//! The ACP cache model: how entries map to columns, path canonicalisation, lock levels, and the
//! streaming reader.
//!
//! Invariant: nothing here knows SQLite; the reader yields plain JSON entries and the mapping
//! functions split an entry into modelled values and the verbatim `extra` remainder.

pub mod digest;
pub mod event;
pub mod fields;
pub mod names;
pub mod paths;
pub mod reader;
pub mod scanner;
mod structure;

/// Lock levels from most to least restrictive (spec ch.6 §7.1, with `review-required` placed
/// between `docs-required` and `normal`).
pub const LOCK_LEVELS: [&str; 8] = [
    "frozen",
    "restricted",
    "approval-required",
    "tests-required",
    "docs-required",
    "review-required",
    "normal",
    "experimental",
];

/// Normalises a lock level spelling: acp-cli writes `testsrequired` for `tests-required` in
/// `by_lock_level` keys; case is folded. Unknown values are returned unchanged.
pub fn normalize_lock_level(level: &str) -> String {
    let folded = level.trim().to_ascii_lowercase();
    match folded.as_str() {
        "approvalrequired" | "approval_required" => "approval-required".into(),
        "testsrequired" | "tests_required" => "tests-required".into(),
        "docsrequired" | "docs_required" => "docs-required".into(),
        "reviewrequired" | "review_required" => "review-required".into(),
        _ => folded,
    }
}

/// Rank of a lock level in [`LOCK_LEVELS`] (0 = most restrictive); unknown levels rank as
/// `normal`.
pub fn lock_level_rank(level: &str) -> usize {
    LOCK_LEVELS.iter().position(|l| *l == level).unwrap_or(6)
}
