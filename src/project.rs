//! Finding a project's inputs and outputs: the cache, the vars file and the databases.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// Command-line options shared by every subcommand that works on a project.
#[derive(Debug, Clone, clap::Args)]
pub struct ProjectArgs {
    /// Project root (the directory holding `.acp/`).
    #[arg(short = 'C', long = "project", default_value = ".", global = true)]
    pub project: PathBuf,
    /// Cache file to read instead of `.acp/acp.cache.json` / `.acp.cache.json`.
    #[arg(long, global = true)]
    pub cache: Option<PathBuf>,
    /// Database file to use instead of `.acp/acp.db`.
    #[arg(long, global = true)]
    pub db: Option<PathBuf>,
}

/// Where a project's files live.
#[derive(Debug, Clone)]
pub struct Project {
    /// The project root, made absolute.
    pub root: PathBuf,
    /// The cache file, if one was given or found.
    pub cache: Option<PathBuf>,
    /// The vars file, if one was found.
    pub vars: Option<PathBuf>,
    /// The index database (rebuilt by every import).
    pub db: PathBuf,
    /// The debug/hack journal database (never touched by import).
    pub journal_db: PathBuf,
    /// The attempts file exported from the journal.
    pub attempts: PathBuf,
    /// The project config, `<root>/.acp.config.json` (it may not exist).
    pub config: PathBuf,
}

impl Project {
    /// The project root as an import records it (`meta.project_dir`) and freshness compares it.
    pub fn root_text(&self) -> String {
        self.root.display().to_string()
    }

    /// Resolves the project's paths from command-line options.
    pub fn from_args(args: &ProjectArgs) -> Result<Project> {
        let root = std::path::absolute(&args.project).with_context(|| {
            format!(
                "cannot resolve project directory {}",
                args.project.display()
            )
        })?;
        if !root.is_dir() {
            bail!("project directory {} does not exist", root.display());
        }
        let cache = match &args.cache {
            Some(path) => Some(std::path::absolute(path)?),
            None => find_cache(&root),
        };
        let vars = cache
            .as_deref()
            .and_then(Path::parent)
            .map(|dir| dir.join("acp.vars.json"))
            .filter(|p| p.exists())
            .or_else(|| {
                first_present(&[root.join(".acp/acp.vars.json"), root.join(".acp.vars.json")])
            });
        let acp_dir = root.join(".acp");
        let db = match &args.db {
            Some(path) => std::path::absolute(path)?,
            None => acp_dir.join("acp.db"),
        };
        let journal_db = db.with_file_name(format!(
            "{}.journal.db",
            db.file_stem().and_then(|s| s.to_str()).unwrap_or("acp")
        ));
        Ok(Project {
            config: root.join(crate::config::CONFIG_FILE),
            root,
            cache,
            vars,
            db,
            journal_db,
            attempts: acp_dir.join("acp.attempts.json"),
        })
    }

    /// The cache path, or an error that says how to make one.
    pub fn require_cache(&self) -> Result<&Path> {
        self.cache.as_deref().with_context(|| {
            format!(
                "no ACP cache found under {} (looked for .acp/acp.cache.json and .acp.cache.json); \
                 run `acp index` in the project or pass --cache FILE",
                self.root.display()
            )
        })
    }
}

/// `.acp/acp.cache.json`, else `.acp.cache.json`: the first that is there, whatever its kind
/// (reading refuses anything but a regular file, and says what it found).
pub fn find_cache(root: &Path) -> Option<PathBuf> {
    first_present(&[
        root.join(".acp/acp.cache.json"),
        root.join(".acp.cache.json"),
    ])
}

/// The first candidate that is there (a symbolic link counts when its target is).
fn first_present(candidates: &[PathBuf]) -> Option<PathBuf> {
    candidates.iter().find(|p| p.exists()).cloned()
}
