//! Deterministic synthetic ACP caches for tests and benchmarks (`acpdb gen-fixture`).
//!
//! [`generate`] writes an `acp.cache.json` shaped like acp-cli 0.7 output (see
//! `cache-format.md` §4–§13) and a matching `acp.vars.json`, streaming compact JSON so that a
//! cache of a million symbols needs only a few tens of MB of memory. Every value is a pure
//! function of the [`GenSpec`]: the same spec always yields byte-identical output.
//!
//! Shape of the output:
//! * the maps (`source_files`, `files`, `symbols`, `graph.forward`, `graph.reverse`) list their
//!   entries scattered, as acp-cli writes its hash maps, so that one file's symbols are far
//!   apart (`KeyOrder`; `--key-order file` writes them file by file);
//! * file keys carry acp-cli's `./` prefix (`./src/<domain>/<stem>.<ext>`); `source_files` keys,
//!   symbol `file` values and qualified-name prefixes do not;
//! * symbols are keyed by qualified name (`src/auth/sessionStore.ts:validateSession`), unique per
//!   cache, while simple names repeat across files;
//! * `graph.forward` and `graph.reverse` use qualified names and are exact inverses without
//!   duplicates; callee popularity mixes local calls, uniform calls and a Zipf (s = 1) tail;
//! * a share of the call graph's names (`unresolved_percent`) resolve to no symbol, as library
//!   calls do in real caches: builtins called from everywhere (`len`, `JSON.stringify`: the
//!   longest `graph.reverse` lists), library functions (`stream.readRaw`) and symbols since
//!   removed (`src/auth/session.ts:validateSessionLegacy`); a revision's edited files call other
//!   ones, so a delta sees such names appear and go, and each replaces its last symbol with
//!   one of a new name that calls the hubs, leaving the calls to the old one dangling; a share
//!   of them (`--moved-percent`) moves to `src/<domain>/moved/`, its symbols renamed with it;
//! * constraints use acp-cli's nested `mutation` shape with every lock level, and
//!   `by_lock_level` uses the hyphen-less keys acp-cli derives from its enum (`testsrequired`);
//! * the vars file holds `SYM_`/`FILE_`/`DOM_`/`LAYER_` entries named as acp-cli names them, for a
//!   sample of exported symbols and annotated files and for every domain and layer.
//!
//! Names, paths and texts are rebuilt from indices whenever they are written; the only data kept
//! per symbol are the in-degree counters and the inverted edge list needed for `graph.reverse`.

use std::fs::{self, File};
use std::io::{self, Write};

use anyhow::{Context, Result};

mod cache_doc;
mod edit;
mod json;
mod model;
pub(crate) mod rng;
mod spec;
mod text;
mod vars_doc;
mod vocabulary;

use cache_doc::*;
use json::*;
use model::*;
pub use spec::{GenArgs, GenSpec, KeyOrder};
use vars_doc::*;

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
    if let Some(project) = &args.edit_of {
        let summary = edit::edit_project(project, &args.out, args.changed_percent, args.seed)?;
        eprintln!(
            "gen-fixture: {} files edited, {} symbols changed, {} replaced, {} call-graph list edits; written below {}",
            summary.files,
            summary.symbols_changed,
            summary.symbols_replaced,
            summary.list_edits,
            args.out.display()
        );
        return Ok(());
    }
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
