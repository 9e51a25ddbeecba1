//! The floor of a delta import: reading the stored entry digests, then scanning a cache whose
//! every entry is unchanged (each recognised from its bytes, nothing parsed), set against the
//! target of about a second for each 1.1 GB of cache (`acpdb::import::floor::scan_unchanged`).
//!
//! ```text
//! cargo bench --bench scan -- [DIR ...]
//! ```
//!
//! Each DIR is a project with a cache (`.acp/acp.cache.json`, as `benches/import.sh` and
//! `benches/delta.sh` leave them); without one, the real caches of `fixtures/real/`. A project
//! without `.acp/acp.db` is imported first into a temporary directory. Each scan runs three
//! times; the table shows each run, so that the spread is seen.

use std::path::{Path, PathBuf};

use acpdb::import::floor::{scan_unchanged, FloorStep, UnchangedScan};
use acpdb::project::{Project, ProjectArgs};

/// Cache bytes a second the scan targets: 1.1 GB in about a second.
const TARGET_BYTES_PER_SECOND: f64 = 1.1e9;

/// Scans of each cache.
const RUNS: usize = 3;

fn main() {
    let mut dirs: Vec<PathBuf> = std::env::args()
        .skip(1)
        .filter(|arg| !arg.starts_with("--"))
        .map(PathBuf::from)
        .collect();
    if dirs.is_empty() {
        let real = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/real");
        let mut found: Vec<PathBuf> = std::fs::read_dir(&real)
            .expect("fixtures/real")
            .map(|entry| entry.expect("fixtures/real entry").path())
            .collect();
        found.sort();
        dirs = found;
    }
    println!("| cache | MB | entries known / other | digests s (best) | scan s (each run) | GB/s (best) | target |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for dir in dirs {
        let project = Project::from_args(&ProjectArgs {
            project: dir.clone(),
            cache: None,
            db: None,
        })
        .expect("project paths");
        let cache = project.require_cache().expect("a cache").to_path_buf();
        let scratch = tempfile::tempdir().expect("scratch directory");
        let db = if project.db.exists() {
            project.db.clone()
        } else {
            import_into(&dir, &scratch.path().join("acp.db"))
        };
        let scans: Vec<UnchangedScan> = (0..RUNS)
            .map(|_| {
                scan_unchanged(&cache, &db)
                    .unwrap_or_else(|err| panic!("{}: {err:#}", dir.display()))
            })
            .collect();
        print_row(&dir, &scans);
    }
}

/// Imports the project at `dir` fully into `db`.
fn import_into(dir: &Path, db: &Path) -> PathBuf {
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_acpdb"))
        .arg("-C")
        .arg(dir)
        .args([
            "import",
            "--full",
            "--no-progress",
            "--log-level",
            "warn",
            "--db",
        ])
        .arg(db)
        .stdout(std::process::Stdio::null())
        .status()
        .expect("acpdb import");
    assert!(status.success(), "acpdb import of {} failed", dir.display());
    db.to_path_buf()
}

/// One Markdown row: the cache, what its scans found and took.
fn print_row(dir: &Path, scans: &[UnchangedScan]) {
    let best = |step: fn(&UnchangedScan) -> &FloorStep| {
        scans
            .iter()
            .map(|scan| step(scan).wall.as_secs_f64())
            .fold(f64::INFINITY, f64::min)
    };
    let best_scan = best(|scan| &scan.scan);
    let first = &scans[0];
    let each: Vec<String> = scans
        .iter()
        .map(|scan| format!("{:.3}", scan.scan.wall.as_secs_f64()))
        .collect();
    let rate = first.bytes as f64 / best_scan;
    println!(
        "| {} | {:.1} | {} / {} | {:.3} | {} | {:.2} | {:.0} % |",
        dir.display(),
        first.bytes as f64 / 1e6,
        first.unchanged,
        first.parsed,
        best(|scan| &scan.digests),
        each.join(", "),
        rate / 1e9,
        rate / TARGET_BYTES_PER_SECOND * 100.0
    );
}
