//! `acpdb import`: streams an ACP cache (and its vars file) into a fresh SQLite database and
//! swaps it in atomically.
//!
//! Invariants: the importer is the only writer of the index tables; it builds into a temporary
//! file next to the target and renames it over the target only after everything committed, so a
//! reader never sees a half-import and a failure leaves the previous database as it was. Memory
//! is bounded by the largest entry, a fixed call-graph edge buffer (sorted runs spill to
//! temporary files) and a fixed-size record per call-graph node name (see `graph.rs`).

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::mpsc::sync_channel;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rusqlite::{params, Connection};

use crate::cache::paths::canonical_path;
use crate::cache::reader::{self, DocumentKind, Event, Limits, Progress, ReadOutcome};
use crate::db;
use crate::freshness::mtime_text;
use crate::project::Project;
use fts::FtsBuilder;

mod fts;
mod graph;
mod loader;
mod progress;

use loader::{resolve_graph_nodes, Loader};
pub use progress::{percent_read, progress_text};
use progress::{Phase, Reporter};

/// Options of `acpdb import`.
#[derive(Debug, Clone, clap::Args)]
pub struct ImportArgs {
    /// Largest single cache entry accepted, in MiB.
    #[arg(long, default_value_t = 256)]
    pub max_entry_mb: u64,
    /// Show no progress: neither the bar on a terminal nor the progress lines otherwise.
    #[arg(long)]
    pub no_progress: bool,
    /// Seconds between progress lines when stderr is not a terminal.
    #[arg(long, value_name = "SECONDS", default_value_t = 2.0, hide = true)]
    pub progress_interval: f64,
}

impl Default for ImportArgs {
    fn default() -> Self {
        ImportArgs {
            max_entry_mb: 256,
            no_progress: true,
            progress_interval: 2.0,
        }
    }
}

/// What an import did.
#[derive(Debug, Clone)]
pub struct ImportSummary {
    /// The database written.
    pub db: PathBuf,
    /// File entries imported.
    pub files: u64,
    /// Symbol entries imported.
    pub symbols: u64,
    /// Distinct call-graph edges.
    pub edges: u64,
    /// Domain entries imported.
    pub domains: u64,
    /// Warnings recorded in `import_warnings`.
    pub warnings: u64,
    /// Bytes of JSON read (cache and vars).
    pub bytes: u64,
    /// Size of the database written, in bytes.
    pub db_bytes: u64,
    /// Wall-clock time of the whole import.
    pub elapsed: Duration,
}

impl ImportSummary {
    /// The one-line summary printed after every import.
    pub fn line(&self) -> String {
        let mb = self.bytes as f64 / 1e6;
        let secs = self.elapsed.as_secs_f64().max(1e-6);
        format!(
            "imported {} files, {} symbols, {} call edges, {} domains ({} warnings) from {:.1} MB in {:.2} s ({:.1} MB/s) into {} ({:.1} MB, {:.2}x the JSON)",
            self.files,
            self.symbols,
            self.edges,
            self.domains,
            self.warnings,
            mb,
            secs,
            mb / secs,
            self.db.display(),
            self.db_bytes as f64 / 1e6,
            self.db_bytes as f64 / self.bytes.max(1) as f64
        )
    }
}

/// Runs `acpdb import` and prints the summary line on stderr (and, before it, a progress bar
/// on a terminal or progress lines otherwise).
pub fn run(project: &Project, args: &ImportArgs) -> Result<ImportSummary> {
    let summary = import(project, args)?;
    eprintln!("{}", summary.line());
    Ok(summary)
}

/// Imports the project's cache and vars into `project.db`, atomically replacing it.
pub fn import(project: &Project, args: &ImportArgs) -> Result<ImportSummary> {
    import_with_progress(project, args, Arc::new(Progress::default()))
}

/// Like [`import`], reporting the bytes of the cache read so far through `progress`.
pub fn import_with_progress(
    project: &Project,
    args: &ImportArgs,
    progress: Arc<Progress>,
) -> Result<ImportSummary> {
    let started = Instant::now();
    let cache_path = project.require_cache()?.to_path_buf();
    let cache_meta = fs::metadata(&cache_path)
        .with_context(|| format!("cannot read {}", cache_path.display()))?;
    if let Some(dir) = project.db.parent() {
        fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    crate::replace::sweep(&project.db);
    crate::replace::sweep(&fts::fts_target(&project.db));
    let tmp = crate::replace::temp_path(&project.db);
    let result = build(
        project,
        args,
        &cache_path,
        &cache_meta,
        &tmp,
        started,
        progress,
    );
    match result {
        Ok(mut summary) => {
            crate::replace::replace(&tmp, &project.db).with_context(|| {
                format!(
                    "cannot move the new database into place at {}",
                    project.db.display()
                )
            })?;
            summary.elapsed = started.elapsed();
            Ok(summary)
        }
        Err(err) => {
            let _ = fs::remove_file(&tmp);
            Err(err)
        }
    }
}

fn build(
    project: &Project,
    args: &ImportArgs,
    cache_path: &Path,
    cache_meta: &fs::Metadata,
    tmp: &Path,
    started: Instant,
    progress: Arc<Progress>,
) -> Result<ImportSummary> {
    let _ = fs::remove_file(tmp);
    let mut conn =
        Connection::open(tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
    conn.execute_batch(
        "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; PRAGMA locking_mode = EXCLUSIVE;
         PRAGMA cache_size = -65536; PRAGMA temp_store = FILE; PRAGMA threads = 2;",
    )?;
    db::migrate(&mut conn, Some(db::LOAD_SCHEMA_VERSION))?;
    register_functions(&conn)?;

    let limits = Limits {
        max_entry_bytes: args.max_entry_mb.saturating_mul(1 << 20),
    };
    let reporter = Reporter::start(args, cache_path, cache_meta.len(), &progress, started)?;

    conn.execute_batch("BEGIN")?;
    let spill_dir = tmp.parent().unwrap_or(Path::new("."));
    let fts = FtsBuilder::start(fts::temp_path(&project.db))?;
    let mut loader = Loader::new(&conn, spill_dir, fts)?;
    let cache_outcome = stream(
        cache_path,
        DocumentKind::Cache,
        limits,
        &mut loader,
        Some(&reporter),
        progress,
    )?;
    let mut vars_outcome = None;
    if let Some(vars_path) = &project.vars {
        vars_outcome = Some((
            vars_path.clone(),
            stream(
                vars_path,
                DocumentKind::Vars,
                limits,
                &mut loader,
                None,
                Arc::new(Progress::default()),
            )?,
        ));
    }
    reporter.phase(Phase::Linking);
    tracing::debug!("loaded entries in {:.2} s", started.elapsed().as_secs_f64());
    let (counts, fts) = loader.finish()?;
    tracing::debug!(
        "built the call graph at {:.2} s",
        started.elapsed().as_secs_f64()
    );
    conn.execute_batch("COMMIT")?;

    reporter.phase(Phase::Indexing);
    db::migrate(&mut conn, None)?;
    tracing::debug!(
        "built indexes and the files' full-text search at {:.2} s",
        started.elapsed().as_secs_f64()
    );
    fts.finish(&conn)?;
    tracing::debug!(
        "added the symbols' full-text search at {:.2} s",
        started.elapsed().as_secs_f64()
    );
    resolve_graph_nodes(&conn)?;
    tracing::debug!(
        "resolved graph nodes at {:.2} s",
        started.elapsed().as_secs_f64()
    );
    drop(reporter);

    let mut bytes = cache_outcome.bytes;
    let mut meta: Vec<(&str, String)> = vec![
        ("acpdb_version", env!("CARGO_PKG_VERSION").to_string()),
        ("source_path", cache_path.display().to_string()),
        ("source_size", cache_meta.len().to_string()),
        ("source_mtime", mtime_text(cache_meta)),
        ("source_sha256", cache_outcome.sha256.clone()),
        (
            "imported_at",
            chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        ),
        (db::CURSOR_SECRET_KEY, db::new_secret(&conn)?),
    ];
    if let Some((vars_path, outcome)) = &vars_outcome {
        let vars_meta = fs::metadata(vars_path)?;
        meta.push(("vars_path", vars_path.display().to_string()));
        meta.push(("vars_size", vars_meta.len().to_string()));
        meta.push(("vars_mtime", mtime_text(&vars_meta)));
        meta.push(("vars_sha256", outcome.sha256.clone()));
        bytes += outcome.bytes;
    }
    meta.push(("import_ms", started.elapsed().as_millis().to_string()));
    {
        let mut insert = conn.prepare("INSERT OR REPLACE INTO meta(key, value) VALUES (?1, ?2)")?;
        for (key, value) in &meta {
            insert.execute(params![key, value])?;
        }
    }
    conn.execute_batch("PRAGMA analysis_limit = 1000; ANALYZE; PRAGMA journal_mode = DELETE;")?;
    drop(conn);
    let db_bytes = fs::metadata(tmp)
        .with_context(|| format!("cannot read {}", tmp.display()))?
        .len();

    let warnings = counts.warnings;
    if warnings > 0 {
        tracing::warn!(
            "{warnings} import warnings; see `acpdb sql \"SELECT * FROM import_warnings\"`"
        );
    }
    Ok(ImportSummary {
        db: project.db.clone(),
        files: counts.files,
        symbols: counts.symbols,
        edges: counts.edges,
        domains: counts.domains,
        warnings,
        bytes,
        db_bytes,
        elapsed: started.elapsed(),
    })
}

/// Reads one document on a separate thread while this thread writes its events.
fn stream(
    path: &Path,
    kind: DocumentKind,
    limits: Limits,
    loader: &mut Loader<'_>,
    reporter: Option<&Reporter>,
    progress: Arc<Progress>,
) -> Result<ReadOutcome> {
    let (tx, rx) = sync_channel::<Vec<Event>>(16);
    let owned_path = path.to_path_buf();
    let handle = std::thread::Builder::new()
        .name("acpdb-reader".into())
        .spawn(move || reader::read_document(&owned_path, kind, limits, progress, tx))?;
    let mut write_error = None;
    for batch in rx.iter() {
        for event in batch {
            if let Err(err) = loader.event(kind, event) {
                write_error = Some(err);
                break;
            }
        }
        if write_error.is_some() {
            break;
        }
        if let Some(reporter) = reporter {
            reporter.tick();
        }
    }
    drop(rx);
    let read_result = handle
        .join()
        .map_err(|_| anyhow::anyhow!("the reader thread panicked"))?;
    if let Some(err) = write_error {
        return Err(err);
    }
    let outcome = read_result?;
    if kind == DocumentKind::Cache {
        loader.check_cache_shape(path)?;
    }
    Ok(outcome)
}

/// Registers SQL helper functions used during import.
fn register_functions(conn: &Connection) -> Result<()> {
    use rusqlite::functions::FunctionFlags;
    conn.create_scalar_function(
        "acpdb_canonical_path",
        2,
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
        |ctx| {
            let raw: String = ctx.get(0)?;
            let root: Option<String> = ctx.get(1)?;
            Ok(canonical_path(&raw, root.as_deref()))
        },
    )?;
    Ok(())
}
