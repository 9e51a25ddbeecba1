//! The floor of an import: what the JSON parser and SQLite alone spend on an imported cache's
//! content (`acpdb::import::floor`), step by step, set against the CPU that 100 MB/s of JSON
//! allows on this machine's cores.
//!
//! ```text
//! cargo bench --bench import_floor -- DIR [DIR ...]
//! ```
//!
//! Each DIR is a project whose cache was imported (`.acp/acp.cache.json` and `.acp/acp.db`, as
//! `benches/import.sh` leaves them); the scratch database goes to a temporary directory next to
//! the database and is removed afterwards. The cache is read into memory whole.

use std::path::PathBuf;
use std::time::Duration;

use acpdb::import::floor::{measure, FloorStep};
use acpdb::project::{Project, ProjectArgs};

/// JSON bytes a second the import targets.
const TARGET_BYTES_PER_SECOND: f64 = 100e6;

fn main() {
    // `cargo bench` passes `--bench`; every other argument is a project directory.
    let dirs: Vec<PathBuf> = std::env::args()
        .skip(1)
        .filter(|arg| !arg.starts_with("--"))
        .map(PathBuf::from)
        .collect();
    if dirs.is_empty() {
        // A plain `cargo bench` runs every bench: this one has nothing to measure then.
        eprintln!("import_floor: no project given (cargo bench --bench import_floor -- DIR ...)");
        return;
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    for dir in dirs {
        let project = Project::from_args(&ProjectArgs {
            project: dir.clone(),
            cache: None,
            db: None,
        })
        .expect("project paths");
        let cache = project.require_cache().expect("a cache").to_path_buf();
        let json_bytes = std::fs::metadata(&cache).expect("cache size").len();
        let scratch_dir = tempfile::tempdir_in(project.db.parent().expect("database directory"))
            .expect("scratch directory");
        let steps = measure(&cache, &project.db, &scratch_dir.path().join("floor.db"))
            .unwrap_or_else(|err| panic!("{}: {err:#}", dir.display()));
        print_table(&dir, json_bytes, cores, &steps);
    }
}

/// Prints the steps as Markdown, then their total against the CPU the target allows.
fn print_table(dir: &std::path::Path, json_bytes: u64, cores: usize, steps: &[FloorStep]) {
    let seconds = |d: Duration| format!("{:.2}", d.as_secs_f64());
    let cpu = |cpu: Option<Duration>| cpu.map_or("n/a".to_string(), seconds);
    println!(
        "\n{}: {:.1} MB of JSON, {cores} cores\n",
        dir.display(),
        json_bytes as f64 / 1e6
    );
    println!("| step | wall s | CPU s |\n|---|---:|---:|");
    for step in steps {
        println!(
            "| {} | {} | {} |",
            step.step,
            seconds(step.wall),
            cpu(step.cpu)
        );
    }
    let wall: Duration = steps.iter().map(|step| step.wall).sum();
    let total_cpu: Option<Duration> = steps.iter().map(|step| step.cpu).sum();
    println!(
        "| **all** | **{}** | **{}** |",
        seconds(wall),
        cpu(total_cpu)
    );
    let budget = json_bytes as f64 / TARGET_BYTES_PER_SECOND;
    println!(
        "\n100 MB/s is {budget:.2} s for this cache: {:.2} s of CPU on {cores} cores busy all the time.",
        budget * cores as f64
    );
    if let Some(total_cpu) = total_cpu {
        println!(
            "The floor takes {:.0} % of that CPU.",
            100.0 * total_cpu.as_secs_f64() / (budget * cores as f64)
        );
    }
}
