//! Set-up shared by the criterion benches: synthetic projects written with `acpdb::gen` at the
//! benchmark scales (10 symbols and 5 call edges per symbol per file, like `acpdb gen-fixture`).
//!
//! The 10K-symbol scale always runs; the 1M-symbol scale only with `ACPDB_BENCH_LARGE=1`,
//! so a plain `cargo bench` stays quick.

use std::fs::{self, File};
use std::path::Path;

use acpdb::gen::{generate, GenSpec, GenSummary};
use acpdb::project::{Project, ProjectArgs};

/// One benchmark size.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scale {
    /// Label used in benchmark ids (`10k`, `1m`).
    pub(crate) name: &'static str,
    /// Source files; the cache holds ten symbols per file.
    pub(crate) files: u32,
}

impl Scale {
    /// Whether this is the opt-in large scale.
    pub(crate) fn is_large(&self) -> bool {
        self.files >= 100_000
    }
}

/// The scales to run: 10K symbols, plus 1M symbols when `ACPDB_BENCH_LARGE=1`.
pub(crate) fn scales() -> Vec<Scale> {
    let mut scales = vec![Scale {
        name: "10k",
        files: 1_000,
    }];
    if std::env::var("ACPDB_BENCH_LARGE").is_ok_and(|v| v == "1") {
        scales.push(Scale {
            name: "1m",
            files: 100_000,
        });
    }
    scales
}

/// Writes the scale's cache and vars file below `root/.acp/`.
pub(crate) fn generate_project(root: &Path, scale: Scale) -> GenSummary {
    let dir = root.join(".acp");
    fs::create_dir_all(&dir).expect("create .acp");
    let spec = GenSpec {
        files: scale.files,
        symbols_per_file: 10,
        edges_per_symbol: 5.0,
        ..GenSpec::default()
    };
    let mut cache = File::create(dir.join("acp.cache.json")).expect("create cache");
    let mut vars = File::create(dir.join("acp.vars.json")).expect("create vars");
    generate(&spec, &mut cache, &mut vars).expect("generate cache")
}

/// The project rooted at `root`, with its default cache and database paths.
pub(crate) fn project(root: &Path) -> Project {
    Project::from_args(&ProjectArgs {
        project: root.to_path_buf(),
        cache: None,
        db: None,
    })
    .expect("project paths")
}
