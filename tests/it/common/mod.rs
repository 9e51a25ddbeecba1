//! Helpers shared by the integration tests: temporary projects and running the real binary.

pub(crate) mod mcp;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// The `acpdb` binary under test.
pub(crate) fn acpdb() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_acpdb"));
    cmd.env("ACPDB_LOG", "warn");
    cmd
}

/// Path of a file under `tests/data/`.
pub(crate) fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// Path of a file under `fixtures/`.
pub(crate) fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name)
}

/// A project directory in a temporary folder.
pub(crate) struct TempProject {
    pub(crate) dir: tempfile::TempDir,
}

impl TempProject {
    /// A project whose `.acp/acp.cache.json` holds `cache` (and `acp.vars.json` holds `vars`).
    pub(crate) fn with_cache(cache: &str, vars: Option<&str>) -> TempProject {
        let dir = tempfile::tempdir().expect("temp dir");
        fs::create_dir_all(dir.path().join(".acp")).unwrap();
        fs::write(dir.path().join(".acp/acp.cache.json"), cache).unwrap();
        if let Some(vars) = vars {
            fs::write(dir.path().join(".acp/acp.vars.json"), vars).unwrap();
        }
        TempProject { dir }
    }

    /// A copy of an existing project directory (e.g. a fixture).
    pub(crate) fn copy_of(source: &Path) -> TempProject {
        let dir = tempfile::tempdir().expect("temp dir");
        copy_dir(source, dir.path());
        let _ = fs::remove_file(dir.path().join(".acp/acp.db"));
        let _ = fs::remove_file(dir.path().join(".acp/acp.journal.db"));
        TempProject { dir }
    }

    pub(crate) fn root(&self) -> &Path {
        self.dir.path()
    }

    pub(crate) fn db(&self) -> PathBuf {
        self.dir.path().join(".acp/acp.db")
    }

    pub(crate) fn cache_path(&self) -> PathBuf {
        self.dir.path().join(".acp/acp.cache.json")
    }

    /// Runs `acpdb -C <root> <args>`.
    pub(crate) fn run(&self, args: &[&str]) -> Output {
        acpdb()
            .arg("-C")
            .arg(self.root())
            .args(args)
            .output()
            .expect("run acpdb")
    }

    /// Runs `acpdb import` and panics with its stderr when it fails.
    pub(crate) fn import(&self) -> Output {
        let out = self.run(&["import"]);
        assert!(
            out.status.success(),
            "import failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// Exports the cache back out and parses it.
    pub(crate) fn export(&self) -> Value {
        let out = self.run(&["export-cache"]);
        assert!(
            out.status.success(),
            "export failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("export is JSON")
    }
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// stderr as text.
pub(crate) fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// stdout as text.
pub(crate) fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}
