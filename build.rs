//! Build facts: the index and journal migrations are embedded at compile time
//! (`refinery::embed_migrations!`), so a migration added or changed must rebuild the crate; and
//! the commit acpdb is built from (`ACPDB_COMMIT`, "unknown" outside a git checkout) names the
//! build in benchmark charts.

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=migrations");
    // HEAD and the branch it names move with each commit; watched only where they exist (a
    // missing path would rerun this script, and rebuild the crate, at every build).
    for file in [".git/HEAD", ".git/packed-refs"] {
        if Path::new(file).exists() {
            println!("cargo:rerun-if-changed={file}");
        }
    }
    if let Ok(head) = std::fs::read_to_string(".git/HEAD") {
        if let Some(reference) = head.trim().strip_prefix("ref: ") {
            let file = format!(".git/{reference}");
            if Path::new(&file).exists() {
                println!("cargo:rerun-if-changed={file}");
            }
        }
    }
    let commit = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|out| out.status.success())
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .map(|hash| hash.trim().to_string())
        .filter(|hash| !hash.is_empty())
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=ACPDB_COMMIT={commit}");
}
