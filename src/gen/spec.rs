//! What a synthetic cache is made from: the options of `acpdb gen-fixture` and the spec
//! every generated value is a pure function of.

use std::path::PathBuf;

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
    /// Revision of the cache: revision N > 0 is revision 0 after an edit of
    /// `--changed-percent` of the files, as `acp index` would write it after that edit: their
    /// summaries, their symbols' summaries and callees (so the call graph changes with them),
    /// and in each their last symbol removed and one added under a new name, which calls the
    /// most called symbol and builtin (their reverse lists grow) while calls to the removed
    /// one stay, resolving to nothing (and `--moved-percent` of the edited files moved).
    #[arg(long, default_value_t = 0)]
    pub revision: u32,
    /// Share of the files a revision after 0 changes, in percent.
    #[arg(long, default_value_t = 1.0)]
    pub changed_percent: f64,
    /// Share of the files a revision changes that it also moves, in percent: into a `moved/`
    /// directory of their domain, as `acp index` writes a moved file (its entry under a new
    /// key, its symbols under new qualified names wherever they are named).
    #[arg(long, default_value_t = 0.0)]
    pub moved_percent: f64,
    /// Share of the call graph's distinct names that resolve to no symbol, in percent, as in
    /// real code: library calls and builtins (simple names, some of them called from
    /// everywhere) and symbols since removed (qualified names).
    #[arg(long, default_value_t = 15.0)]
    pub unresolved_percent: f64,
    /// The order of the entries of the cache's maps (`files`, `symbols`, `source_files` and the
    /// call graph's lists).
    #[arg(long, value_enum, default_value_t = KeyOrder::default())]
    pub key_order: KeyOrder,
    /// Instead of generating a cache, edit `--changed-percent` of the files of this project's
    /// cache (at least one) the way a revision edits them, and write the result with the
    /// project's vars file below `--out`: for delta benchmarks on real caches.
    #[arg(long, value_name = "PROJECT", conflicts_with_all = ["revision", "moved_percent"])]
    pub edit_of: Option<PathBuf>,
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
    /// Revision (0: the base cache; see `GenArgs::revision`).
    pub revision: u32,
    /// Share of the files a revision after 0 changes, in percent.
    pub changed_percent: f64,
    /// Share of the changed files a revision also moves, in percent.
    pub moved_percent: f64,
    /// Share of the call graph's distinct names that resolve to no symbol, in percent.
    pub unresolved_percent: f64,
    /// The order of the entries of the cache's maps.
    pub key_order: KeyOrder,
}

/// The order in which a generated cache lists the entries of its maps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum KeyOrder {
    /// Scattered, as acp-cli writes its hash maps: a file's symbols anywhere in `symbols`, so
    /// that the rows of one file are as spread through an imported database as a real cache's.
    #[default]
    Hash,
    /// File by file, each file's symbols in line order.
    File,
}

impl Default for GenSpec {
    fn default() -> Self {
        Self {
            files: 1000,
            symbols_per_file: 10,
            edges_per_symbol: 5.0,
            seed: 42,
            revision: 0,
            changed_percent: 1.0,
            moved_percent: 0.0,
            unresolved_percent: 15.0,
            key_order: KeyOrder::default(),
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
            revision: args.revision,
            changed_percent: args.changed_percent,
            moved_percent: args.moved_percent,
            unresolved_percent: args.unresolved_percent,
            key_order: args.key_order,
        }
    }
}
