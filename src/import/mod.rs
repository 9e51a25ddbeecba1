//! `acpdb import`: streams an ACP cache (and its vars file) into a fresh SQLite database and
//! swaps it in atomically.
//!
//! Invariants: the importer is the only writer of the index tables; a full import builds into a
//! temporary file next to the target and renames it over the target only after everything
//! committed, and a delta writes in place in one transaction (WAL mode), so a reader never sees
//! a half-import and a failure leaves the previous database as it was. Memory
//! is bounded by the largest entry (a call-graph list comes in parts; its node ids are kept
//! until it ends), a fixed call-graph edge buffer (sorted runs spill to temporary files) and a
//! fixed-size record per call-graph node name (see `graph.rs`).

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rusqlite::{params, Connection, OptionalExtension};

use crate::cache::digest::KnownEntries;
use crate::cache::event::DocumentKind;
use crate::cache::paths::canonical_path;
use crate::cache::reader::{Limits, ReadOutcome};
use crate::cache::scanner::{Progress, ReadError};
use crate::config::{self, PathRules};
use crate::db;
use crate::freshness::mtime_text;
use crate::project::Project;

mod baseline;
mod delta;
mod edge_feed;
mod edges;
mod filter;
pub mod floor;
mod fts;
mod full;
mod graph;
mod hashes;
mod loader;
mod lock;
mod pipeline;
mod progress;
mod rows;
mod scratch;
mod summaries;
mod tables;

pub use delta::DeltaCounts;
use delta::{Delta, DeltaMeetsExcluded, Sample, TooManyChanges};
use filter::Filter;
use fts::FtsBuilder;
use full::FullWriter;
use graph::CallGraph;
use loader::{EntryWriter, Loader};
use pipeline::{Reading, READ_AHEAD};
use progress::{bytes_written, size_text, thread_bytes_written, written_since};
pub use progress::{percent_read, progress_text};
use progress::{Phase, Reporter};
use scratch::{
    open_temp_database, DELTA_CACHE_KIB, DELTA_PRAGMAS, INDEXING_PRAGMAS, WRITE_PRAGMAS,
};
use tables::Tables;

/// Options of `acpdb import`.
#[derive(Debug, Clone, clap::Args)]
pub struct ImportArgs {
    /// Largest single cache entry accepted, in MiB.
    #[arg(long, default_value_t = 256)]
    pub max_entry_mb: u64,
    /// Show no progress: neither the bar on a terminal nor the progress lines otherwise.
    #[arg(long)]
    pub no_progress: bool,
    /// Rebuild the database from the whole cache, even when only a few entries changed.
    #[arg(long)]
    pub full: bool,
    /// Seconds between progress lines when stderr is not a terminal.
    #[arg(long, value_name = "SECONDS", default_value_t = 2.0, hide = true)]
    pub progress_interval: f64,
    /// Import the whole cache, ignoring the `include` and `exclude` rules of
    /// `.acp.config.json` (recorded in the database, so the config's changes do not make it
    /// stale).
    #[arg(long)]
    pub ignore_config: bool,
}

impl Default for ImportArgs {
    fn default() -> Self {
        ImportArgs {
            max_entry_mb: 256,
            full: false,
            no_progress: true,
            progress_interval: 2.0,
            ignore_config: false,
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
    /// Entries and list items left out by the project config's rules (a delta leaves out
    /// none: it runs only when the rules leave out nothing).
    pub excluded: u64,
    /// Bytes of JSON read (cache and vars).
    pub bytes: u64,
    /// Size of the database written, in bytes.
    pub db_bytes: u64,
    /// Bytes the process wrote to storage during the import (Linux; `None` elsewhere).
    pub written: Option<u64>,
    /// Wall-clock time of the whole import.
    pub elapsed: Duration,
    /// What a delta import changed (`None` for a full import).
    pub delta: Option<DeltaCounts>,
    /// Why a full import ran where a delta was possible in principle (a database existed).
    pub full_because: Option<String>,
}

impl ImportSummary {
    /// The one-line summary printed after every import.
    pub fn line(&self) -> String {
        let mb = self.bytes as f64 / 1e6;
        let secs = self.elapsed.as_secs_f64().max(1e-6);
        if let Some(delta) = &self.delta {
            return format!(
                "delta: {} in {:.2} s (unchanged {} files and {} symbols skipped; {} read at {:.1} MB/s) into {} ({}, {:.2}x the JSON{})",
                delta.changes(),
                secs,
                delta.files_unchanged,
                delta.symbols_unchanged,
                size_text(self.bytes),
                mb / secs,
                self.db.display(),
                size_text(self.db_bytes),
                self.db_bytes as f64 / self.bytes.max(1) as f64,
                self.written_text()
            );
        }
        let because = self
            .full_because
            .as_deref()
            .map(|why| format!("full import ({why}): "))
            .unwrap_or_default();
        format!(
            "{because}imported {} files, {} symbols, {} call edges, {} domains ({} warnings{}) from {} in {:.2} s ({:.1} MB/s) into {} ({}, {:.2}x the JSON{})",
            self.files,
            self.symbols,
            self.edges,
            self.domains,
            self.warnings,
            match self.excluded {
                0 => String::new(),
                n => format!("; {n} entries and list items left out by {}", config::CONFIG_FILE),
            },
            size_text(self.bytes),
            secs,
            mb / secs,
            self.db.display(),
            size_text(self.db_bytes),
            self.db_bytes as f64 / self.bytes.max(1) as f64,
            self.written_text()
        )
    }

    /// `; 45.2 MB written`, when the bytes written are known.
    fn written_text(&self) -> String {
        self.written
            .map(|bytes| format!("; {} written", size_text(bytes)))
            .unwrap_or_default()
    }
}

/// Removes the temporary files that imports killed halfway left next to the database `db` (the
/// new database and the full-text builder's, with their SQLite files). Every import and every
/// server that may import does this when it starts.
pub fn sweep_temporary_files(db: &Path) {
    crate::replace::sweep(db);
    crate::replace::sweep(&fts::fts_target(db));
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
///
/// When a database of this schema, built from the same cache path, is already there (and
/// `--full` is not given), only what changed is written (see `delta/`), in place, in one
/// transaction. Otherwise, or when the delta fails, the database is rebuilt from the whole
/// cache into a new file renamed over it, and the summary says why.
pub fn import_with_progress(
    project: &Project,
    args: &ImportArgs,
    progress: Arc<Progress>,
) -> Result<ImportSummary> {
    let started = Instant::now();
    let written_before = bytes_written();
    let thread_written_before = thread_bytes_written();
    let cache_path = project.require_cache()?.to_path_buf();
    if let Some(dir) = project.db.parent() {
        fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let _lock = lock::ImportLock::acquire(&project.db)?;
    let cache_meta = fs::metadata(&cache_path)
        .with_context(|| format!("cannot read {}", cache_path.display()))?;
    sweep_temporary_files(&project.db);
    let tmp = crate::replace::temp_path(&project.db);
    let (rules, config_state) = if args.ignore_config {
        (PathRules::none(), config::IGNORED.to_string())
    } else {
        let rules = PathRules::load(&project.config)?;
        let state = rules.sha256().to_string();
        (rules, state)
    };
    let source = Source {
        project,
        args,
        cache_path: &cache_path,
        cache_meta: &cache_meta,
        tmp: &tmp,
        started,
        rules: &rules,
        config_state: &config_state,
    };
    let mut full_because = None;
    let mut result = match delta_refusal(project, &cache_path, args, &config_state) {
        Ok(()) => {
            let result = source.delta(progress.clone());
            if let Err(err) = &result {
                // A cache that cannot be read fails a full import the same way.
                if err.chain().any(|e| e.is::<ReadError>()) {
                    return result;
                }
                if let Some(why) = err.chain().find_map(|e| {
                    e.downcast_ref::<DeltaMeetsExcluded>()
                        .map(ToString::to_string)
                        .or_else(|| e.downcast_ref::<TooManyChanges>().map(ToString::to_string))
                }) {
                    tracing::debug!(
                        "gave up the delta at {:.2} s",
                        started.elapsed().as_secs_f64()
                    );
                    full_because = Some(why);
                } else {
                    tracing::warn!("delta import failed ({err:#}); importing the whole cache");
                    full_because = Some(format!("the delta import failed: {err:#}"));
                }
            }
            result
        }
        Err(why) => {
            full_because = why;
            Err(anyhow::anyhow!("no delta"))
        }
    };
    if result.is_err() {
        result = source
            .full(progress.clone(), KeyCheck::AfterLoad)
            .or_else(|err| {
                if !err.is::<RepeatedKeys>() {
                    return Err(err);
                }
                tracing::warn!("{err}; importing again, checking every key as it is read");
                source.full(progress, KeyCheck::WhileLoading)
            });
        result = result.map(|mut summary| {
            summary.full_because = full_because;
            summary
        });
    }
    match result {
        Ok(mut summary) if summary.delta.is_some() => {
            summary.elapsed = started.elapsed();
            // Pages written into the database in place, all on this thread.
            summary.written = written_since(thread_written_before, thread_bytes_written());
            Ok(summary)
        }
        Ok(mut summary) => {
            // The new database written whole, then, when served, copied into the old one's
            // pages on this thread.
            let built = written_since(written_before, bytes_written());
            let placing = thread_bytes_written();
            if let Err(err) = place(&tmp, &project.db) {
                let _ = crate::sqlite_locks::remove_database(&tmp);
                return Err(err.context(format!(
                    "cannot move the new database into place at {}",
                    project.db.display()
                )));
            }
            summary.elapsed = started.elapsed();
            let copied = written_since(placing, thread_bytes_written());
            summary.written = built.map(|built| built + copied.unwrap_or(0));
            Ok(summary)
        }
        Err(err) => {
            let _ = crate::sqlite_locks::remove_database(&tmp);
            Err(err)
        }
    }
}

/// Why a delta import cannot be tried: `Err(None)` when there is no database to compare with,
/// `Err(Some(reason))` when there is one that cannot serve as a base.
fn delta_refusal(
    project: &Project,
    cache_path: &Path,
    args: &ImportArgs,
    config_state: &str,
) -> std::result::Result<(), Option<String>> {
    if args.full || !project.db.is_file() {
        return Err(None);
    }
    let conn = db::open_read_only(&project.db)
        .map_err(|err| Some(format!("the database cannot be opened: {err:#}")))?;
    let damaged = |err: rusqlite::Error| Some(format!("the database cannot be read: {err}"));
    let version = db::schema_version(&conn).map_err(|err| Some(format!("{err:#}")))?;
    if version != Some(db::current_schema_version()) {
        return Err(Some(format!(
            "the database has schema version {}, this acpdb uses {}",
            version.map_or("none".into(), |v| v.to_string()),
            db::current_schema_version()
        )));
    }
    let meta = |key: &str| -> rusqlite::Result<Option<String>> {
        conn.query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
            .optional()
    };
    if meta("acpdb_version").map_err(damaged)?.as_deref() != Some(env!("CARGO_PKG_VERSION")) {
        return Err(Some(
            "the database was written by another acpdb version".into(),
        ));
    }
    if meta("source_path").map_err(damaged)?.as_deref() != Some(&*cache_path.display().to_string())
    {
        return Err(Some("the database was imported from another cache".into()));
    }
    let recorded = meta(config::SHA256_META_KEY).map_err(damaged)?;
    if recorded.as_deref().unwrap_or(config::NO_CONFIG) != config_state {
        return Err(Some(format!(
            "{} changed since the last import",
            config::CONFIG_FILE
        )));
    }
    if meta(config::DROPPED_META_KEY)
        .map_err(damaged)?
        .is_some_and(|n| n != "0")
    {
        return Err(Some(format!(
            "{} excludes part of the cache",
            config::CONFIG_FILE
        )));
    }
    Ok(())
}

/// What an import reads and where it writes.
struct Source<'a> {
    project: &'a Project,
    args: &'a ImportArgs,
    cache_path: &'a Path,
    cache_meta: &'a fs::Metadata,
    tmp: &'a Path,
    started: Instant,
    rules: &'a PathRules,
    config_state: &'a str,
}

/// When a full import checks that the keys of `files`, `symbols` and `source_files` are unique.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyCheck {
    /// Once, after the load, by building their unique indexes (V14): nothing is kept per key
    /// while loading. A cache that repeats a key is then imported again with
    /// [`KeyCheck::WhileLoading`].
    AfterLoad,
    /// Every key as it is read, against the hashes of those before it, so that the first entry
    /// of a repeated key is kept and the others are reported.
    WhileLoading,
}

/// A full import found a repeated key after the load (see [`KeyCheck::AfterLoad`]).
#[derive(Debug)]
struct RepeatedKeys;

impl std::fmt::Display for RepeatedKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the cache repeats a key of files, symbols or source_files")
    }
}

impl std::error::Error for RepeatedKeys {}

/// The tables whose unique key index (V14) finds a repeated key.
const KEYED_TABLES: [&str; 3] = ["files", "symbols", "source_files"];

/// Whether building the V14 indexes failed on a repeated key of a [`KEYED_TABLES`] table. Told
/// from SQLite's message alone: the failed migration was rolled back without a journal, so the
/// database is not read again (the next attempt starts a new one).
fn is_repeated_key(err: &anyhow::Error) -> bool {
    let message = format!("{err:#}");
    KEYED_TABLES
        .iter()
        .any(|table| message.contains(&format!("UNIQUE constraint failed: {table}.key")))
}

/// What reading the cache and the vars gave.
struct Read {
    cache: ReadOutcome,
    /// The vars file, what reading it gave, and its metadata taken before it was read.
    vars: Option<(PathBuf, ReadOutcome, fs::Metadata)>,
}

/// A vars file the database holds already ([`unchanged_vars`]).
struct KeptVars {
    outcome: ReadOutcome,
    /// Taken from the file before it was hashed: were it rewritten since, its recorded mtime
    /// differs and freshness compares its hash again.
    metadata: fs::Metadata,
}

impl Source<'_> {
    /// Builds a new database from the whole cache, checking that keys are unique as `check`
    /// says.
    fn full(&self, progress: Arc<Progress>, check: KeyCheck) -> Result<ImportSummary> {
        let (project, tmp, started) = (self.project, self.tmp, self.started);
        // Reading starts over (after a delta that failed, or a first attempt).
        progress
            .bytes
            .store(0, std::sync::atomic::Ordering::Relaxed);
        // Declared before the connection so that it stops after it is closed: closing another
        // descriptor of the file first would drop SQLite's lock on it.
        let mut _writeback = None;
        let mut conn = open_temp_database(tmp, &project.db)
            .with_context(|| format!("cannot create {}", tmp.display()))?;
        conn.execute_batch(WRITE_PRAGMAS)?;
        db::migrate(&mut conn, Some(db::LOAD_SCHEMA_VERSION))?;
        register_functions(&conn)?;
        let reporter = self.reporter(&progress)?;

        conn.execute_batch("BEGIN")?;
        let spill_dir = tmp.parent().unwrap_or(Path::new("."));
        let fts = FtsBuilder::start(&project.db, spill_dir)?;
        let (read, mut dropped, root, counts, fts, graph) = {
            let writer = FullWriter::new(CallGraph::new(&conn, spill_dir)?, fts);
            let mut tables = Tables::new(&conn)?;
            if check == KeyCheck::AfterLoad {
                tables.seen_keys = None;
            }
            let mut loader = Loader {
                tables,
                filter: Filter::new(self.rules.clone(), false),
                writer,
            };
            let cache = self.start_reading(None, progress, READ_AHEAD)?;
            let read = self.read(&mut loader, &reporter, cache, None)?;
            reporter.phase(Phase::Linking);
            tracing::debug!("loaded entries in {:.2} s", started.elapsed().as_secs_f64());
            let Loader {
                mut tables,
                filter,
                writer,
            } = loader;
            let root = tables.root.clone();
            let (fts, graph) = writer.finish(&mut tables)?;
            (read, filter.dropped, root, tables.counts, fts, graph)
        };
        tracing::debug!(
            "built the call graph at {:.2} s",
            started.elapsed().as_secs_f64()
        );
        conn.execute_batch("COMMIT")?;

        reporter.phase(Phase::Indexing);
        conn.execute_batch(INDEXING_PRAGMAS)?;
        if let Err(err) = db::migrate(&mut conn, Some(db::RESOLVE_SCHEMA_VERSION)) {
            if check == KeyCheck::AfterLoad && is_repeated_key(&err) {
                return Err(RepeatedKeys.into());
            }
            return Err(err);
        }
        tracing::debug!(
            "built the indexes at {:.2} s",
            started.elapsed().as_secs_f64()
        );
        _writeback = Some(crate::replace::Writeback::start(tmp));
        graph.write_nodes(&conn)?;
        db::migrate(&mut conn, None)?;
        tracing::debug!(
            "resolved graph nodes at {:.2} s",
            started.elapsed().as_secs_f64()
        );
        dropped += filter::scrub_excluded_names(&conn, self.rules, root.as_deref())?;
        summaries::fill(&conn)?;
        tracing::debug!(
            "filled the summaries at {:.2} s",
            started.elapsed().as_secs_f64()
        );
        fts.finish(&conn)?;
        fts::index_symbol_files(&conn)?;
        tracing::debug!(
            "added the full-text indexes at {:.2} s",
            started.elapsed().as_secs_f64()
        );
        drop(reporter);
        let bytes = self.write_meta(&conn, &read, dropped)?;
        // WAL mode, for the deltas written in place and the readers that keep their snapshot
        // meanwhile; one file once the connection closes.
        conn.execute_batch("PRAGMA analysis_limit = 1000; ANALYZE; PRAGMA journal_mode = WAL;")?;
        drop(conn);

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
            excluded: dropped,
            bytes,
            db_bytes: file_size(tmp)?,
            written: None,
            elapsed: started.elapsed(),
            delta: None,
            full_because: None,
        })
    }

    /// Writes only what changed into the served database, in place: one write transaction in
    /// WAL mode, so that readers keep the snapshot they started with and see the new state whole
    /// once it commits, and a kill at any moment leaves the old state or the new one.
    fn delta(&self, progress: Arc<Progress>) -> Result<ImportSummary> {
        let (project, started) = (self.project, self.started);
        let conn = open_in_place(&project.db)?;
        // The stored digests are read on connections of their own while this one judges the
        // first entries; the reader starts once the verdict allows a delta, each section's
        // entries recognised as soon as that section's digests are read, while this one begins
        // the write transaction and loads the node names, source files and domains. A verdict
        // to import fully stops the reading.
        let digests = delta::DigestReading::start(&project.db, started)?;
        let mut sample = Sample::new(&conn)?;
        self.start_reading(None, Arc::default(), READ_AHEAD)?
            .inspect(|event| sample.look(event))?;
        sample.verdict()?;
        drop(sample);
        tracing::debug!(
            "judged the first entries at {:.2} s",
            started.elapsed().as_secs_f64()
        );
        let known = digests.known();
        let reporter = self.reporter(&progress)?;
        let cache = self.start_reading(Some(known.clone()), progress, READ_AHEAD)?;
        conn.execute_batch("BEGIN IMMEDIATE")?;
        let kept_vars = match &project.vars {
            Some(path) => unchanged_vars(&conn, path)?,
            None => None,
        };
        let log = summaries::ChangeLog::start(&conn)?;
        let mut delta = Delta::start(&conn, kept_vars.is_some())?;
        let mut tables = Tables::new(&conn)?;
        tables.root = delta.root.clone();
        tables.keep_domains()?;
        tables.keep_source_files()?;
        delta.recognise(known);
        // Rows are removed before the rows that referred to them are brought up to date (node
        // resolution, inline annotations); the end state is consistent, as a test checks.
        let (read, (counts, reverse_lengths)) = {
            let mut loader = Loader {
                tables,
                filter: Filter::new(self.rules.clone(), true),
                writer: delta,
            };
            let read = self.read(&mut loader, &reporter, cache, kept_vars);
            // The digest reading's error first: a reader that failed for want of digests says
            // less than the reading's own error.
            digests.finish()?;
            let read = read?;
            tracing::debug!(
                "compared entries in {:.2} s",
                started.elapsed().as_secs_f64()
            );
            reporter.phase(Phase::Linking);
            let Loader {
                mut tables, writer, ..
            } = loader;
            (read, writer.finish(&mut tables)?)
        };
        tracing::debug!(
            "brought derived rows up to date at {:.2} s",
            started.elapsed().as_secs_f64()
        );
        reporter.phase(Phase::Indexing);
        log.apply(&counts, &reverse_lengths)?;
        tracing::debug!(
            "brought the summaries up to date at {:.2} s",
            started.elapsed().as_secs_f64()
        );
        let bytes = self.write_meta(&conn, &read, 0)?;
        tracing::debug!(
            "wrote the import's metadata at {:.2} s",
            started.elapsed().as_secs_f64()
        );
        // The totals are read before the commit: once it is done, nothing may fail the delta
        // (a failure would import fully what is already committed).
        let totals =
            |sql: &str| conn.query_row(sql, [], |r| r.get::<_, i64>(0).map(|n| n.max(0) as u64));
        let summary = ImportSummary {
            db: project.db.clone(),
            files: totals("SELECT files FROM index_summary")?,
            symbols: totals("SELECT symbols FROM index_summary")?,
            edges: totals("SELECT call_edges FROM index_summary")?,
            domains: totals("SELECT domains FROM index_summary")?,
            warnings: totals("SELECT count(*) FROM import_warnings")?,
            excluded: 0,
            bytes,
            db_bytes: 0,
            written: None,
            elapsed: started.elapsed(),
            delta: Some(counts),
            full_because: None,
        };
        let write_out = write_out_in_place(&project.db);
        conn.execute_batch("COMMIT")?;
        tracing::debug!(
            "committed the changes at {:.2} s",
            started.elapsed().as_secs_f64()
        );
        drop(reporter);
        checkpoint(&conn, write_out);
        tracing::debug!("checkpointed at {:.2} s", started.elapsed().as_secs_f64());
        drop(conn);
        let db_bytes = file_size(&project.db).unwrap_or_else(|err| {
            tracing::warn!("the delta is committed, but its database's size is unknown: {err:#}");
            0
        });
        Ok(ImportSummary {
            db_bytes,
            ..summary
        })
    }

    /// The progress reporter of this import.
    fn reporter(&self, progress: &Arc<Progress>) -> Result<Reporter> {
        Reporter::start(
            self.args.no_progress,
            self.args.progress_interval,
            self.cache_path,
            self.cache_meta.len(),
            progress,
            self.started,
        )
    }

    /// Starts reading the cache.
    fn start_reading(
        &self,
        known: Option<Arc<KnownEntries>>,
        progress: Arc<Progress>,
        ahead: usize,
    ) -> Result<Reading> {
        Reading::start(
            self.cache_path,
            DocumentKind::Cache,
            self.limits(),
            known,
            progress,
            ahead,
        )
    }

    fn limits(&self) -> Limits {
        Limits {
            max_entry_bytes: self.args.max_entry_mb.saturating_mul(1 << 20),
        }
    }

    /// Writes the cache being read into `loader`, then reads the vars file into it, unless the
    /// database keeps it (`kept_vars`, see [`unchanged_vars`]).
    fn read<'c, W: EntryWriter<'c>>(
        &self,
        loader: &mut Loader<'c, W>,
        reporter: &Reporter,
        cache: Reading,
        kept_vars: Option<KeptVars>,
    ) -> Result<Read> {
        let cache = cache.finish(loader, Some(reporter))?;
        let mut vars = None;
        if let Some(vars_path) = &self.project.vars {
            if let Some(kept) = kept_vars {
                return Ok(Read {
                    cache,
                    vars: Some((vars_path.clone(), kept.outcome, kept.metadata)),
                });
            }
            // Taken before the reading, as the cache's is: were the file rewritten during it,
            // its recorded size or time differs and freshness compares its hash again (taken
            // after, they would match a file whose new content was never imported).
            let metadata = fs::metadata(vars_path)
                .with_context(|| format!("cannot read {}", vars_path.display()))?;
            let reading = Reading::start(
                vars_path,
                DocumentKind::Vars,
                self.limits(),
                None,
                Arc::new(Progress::default()),
                READ_AHEAD,
            )?;
            vars = Some((vars_path.clone(), reading.finish(loader, None)?, metadata));
        }
        Ok(Read { cache, vars })
    }

    /// Records where the import came from (see `freshness`) and returns the bytes read.
    fn write_meta(&self, conn: &Connection, read: &Read, dropped: u64) -> Result<u64> {
        let mut bytes = read.cache.bytes;
        let mut meta: Vec<(&str, String)> = vec![
            ("acpdb_version", env!("CARGO_PKG_VERSION").to_string()),
            ("source_path", self.cache_path.display().to_string()),
            (db::PROJECT_DIR_KEY, self.project.root_text()),
            ("source_size", self.cache_meta.len().to_string()),
            ("source_mtime", mtime_text(self.cache_meta)),
            ("source_sha256", read.cache.sha256.clone()),
            (
                "imported_at",
                chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            ),
            (db::CURSOR_SECRET_KEY, db::new_secret(conn)?),
            (config::SHA256_META_KEY, self.config_state.to_string()),
            (config::DROPPED_META_KEY, dropped.to_string()),
        ];
        conn.execute(
            "DELETE FROM meta WHERE key IN ('vars_path', 'vars_size', 'vars_mtime', 'vars_sha256')",
            [],
        )?;
        if let Some((vars_path, outcome, vars_meta)) = &read.vars {
            meta.push(("vars_path", vars_path.display().to_string()));
            meta.push(("vars_size", vars_meta.len().to_string()));
            meta.push(("vars_mtime", mtime_text(vars_meta)));
            meta.push(("vars_sha256", outcome.sha256.clone()));
            bytes += outcome.bytes;
        }
        let sources = baseline::source_tree(conn, &self.project.root)?;
        let baseline_files = baseline::record(conn, &self.project.root, sources)?;
        meta.push((db::SOURCE_TREE_KEY, sources.into()));
        meta.push((db::SOURCE_BASELINE_FILES_KEY, baseline_files.to_string()));
        meta.push(("import_ms", self.started.elapsed().as_millis().to_string()));
        let mut insert = conn.prepare("INSERT OR REPLACE INTO meta(key, value) VALUES (?1, ?2)")?;
        for (key, value) in &meta {
            insert.execute(params![key, value])?;
        }
        Ok(bytes)
    }
}

/// The vars file when it is byte for byte the one the database holds (the SHA-256 recorded at
/// the last import): a delta then keeps its rows instead of rewriting them, as they depend on
/// its bytes only (the config and the project root do not change within a delta). `None` when
/// it differs or cannot be read (reading it then says why).
fn unchanged_vars(conn: &Connection, path: &Path) -> Result<Option<KeptVars>> {
    let Some((_, _, recorded_sha256)) = crate::freshness::recorded(conn)?.vars else {
        return Ok(None);
    };
    let kept = crate::regular_file::open(path).and_then(|file| {
        let metadata = file.metadata()?;
        let outcome = ReadOutcome::of_bytes(file)?;
        Ok(KeptVars { outcome, metadata })
    });
    Ok(kept
        .ok()
        .filter(|kept| kept.outcome.sha256 == recorded_sha256))
}

fn file_size(path: &Path) -> Result<u64> {
    Ok(fs::metadata(path)
        .with_context(|| format!("cannot read {}", path.display()))?
        .len())
}

/// Opens the served database for a delta written in place: registered with `sqlite_locks` (the
/// server's pools share its locks), in WAL mode (as a full import leaves it; a database of an
/// older build is switched once readers are between two transactions), with the delta's
/// settings.
fn open_in_place(path: &Path) -> Result<Connection> {
    let conn = Connection::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    crate::sqlite_locks::register(path);
    conn.busy_timeout(IN_PLACE_BUSY_TIMEOUT)?;
    let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
    anyhow::ensure!(
        mode.eq_ignore_ascii_case("wal"),
        "{} cannot be switched to WAL mode (it stays in {mode} mode)",
        path.display()
    );
    conn.execute_batch(DELTA_PRAGMAS)?;
    conn.pragma_update(None, "cache_size", -DELTA_CACHE_KIB)?;
    register_functions(&conn)?;
    Ok(conn)
}

/// How long a delta waits for the readers of the served database to let it switch modes or
/// begin writing.
const IN_PLACE_BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// How often a commit in place and its checkpoint have the WAL's and the database's dirty pages
/// written out ([`write_out_in_place`]): at 100K symbols the two take about a tenth of a second.
const IN_PLACE_WRITEBACK_EVERY: Duration = Duration::from_millis(5);

/// Starts the kernel writing out the WAL and the database at `db` every
/// [`IN_PLACE_WRITEBACK_EVERY`], from just before a commit in place to the end of its
/// [`checkpoint`]: the checkpoint's first `fsync`, of the WAL, then finds the frames the commit
/// wrote already on their way (at 100K symbols and a 1 % edit, the delta took 0.294 s instead of
/// 0.315 s on average over ten alternating pairs; at 1M, its checkpoint 0.68 s instead of
/// 0.77 s), and its last, of the database, finds the pages it copied. Not started earlier: a
/// transaction that spilled a page to the WAL and changed it again rewrites that frame, and the
/// device would write it twice. The descriptors are kept open by [`crate::sqlite_locks`], one
/// a file whatever the number of deltas.
fn write_out_in_place(db: &Path) -> crate::replace::Writeback {
    let wal = crate::sqlite_locks::companion(db, "-wal");
    let files = [wal.as_path(), db]
        .into_iter()
        .filter_map(crate::sqlite_locks::kept_descriptor)
        .collect();
    crate::replace::Writeback::of(files, IN_PLACE_WRITEBACK_EVERY)
}

/// How long a checkpoint in place waits for the readers that started before its commit.
const CHECKPOINT_WAIT: Duration = Duration::from_secs(2);

/// After a commit in place on `conn`, the database at `db`: copies its pages into the database
/// file, waiting up to [`CHECKPOINT_WAIT`] for readers of older states to finish (SQLite's
/// `RESTART` mode: new readers go on; the next delta then writes its WAL from the start). A
/// checkpoint that did not wait would copy nothing a reader of the state before the commit
/// still sees, and under a server's steady reads the WAL would grow by a delta each time (at 1M
/// symbols, to 4 GB after twelve), every read slowed by it. What a reader keeps longer is
/// copied by the next checkpoint, at the latest when the last connection closes.
///
/// Once every page is copied, the WAL file is cut to nothing (`TRUNCATE` mode, which finds no
/// reader left on it by then). Kept, it would take one delta's pages of disk for as long as a
/// server keeps the database open (413 MB at 1M symbols and a 1 % edit), and a read-only
/// connection cannot remove it when it closes: every process that then opens the database
/// first alone (`acpdb sql`, a server starting) would read it through to rebuild its index,
/// 0.18 s of each `acpdb sql` call at 1M. Cutting it takes 0.1 s there, after the commit.
///
/// Meanwhile the write-out it is given, started before the commit ([`write_out_in_place`]),
/// has the device write beside the copying, so that the checkpoint's last `fsync` (at 1M
/// symbols and a 1 % edit, of 400 MB) finds little left; it stops when the checkpoint ends.
///
/// Not needed for the committed state to hold, so a failure is only logged.
fn checkpoint(conn: &Connection, _write_out: crate::replace::Writeback) {
    let checkpoint = conn
        .busy_timeout(CHECKPOINT_WAIT)
        .and_then(|()| wal_checkpoint(conn, "RESTART"));
    match checkpoint {
        Ok((false, wal_pages, copied)) => {
            tracing::debug!("checkpoint: {copied} of {wal_pages} WAL pages copied");
            cut_wal(conn);
        }
        Ok((true, wal_pages, copied)) => tracing::info!(
            "checkpoint: {copied} of {wal_pages} WAL pages copied; readers kept the rest after {} s",
            CHECKPOINT_WAIT.as_secs()
        ),
        Err(err) => tracing::warn!("the delta committed, but its checkpoint failed: {err}"),
    }
}

/// After a checkpoint that copied every page, cuts the WAL file to nothing (`TRUNCATE` mode;
/// its counts are then all zero, which is why the copy itself runs in `RESTART` mode first). A
/// reader that began on the WAL meanwhile keeps it, until the next checkpoint.
fn cut_wal(conn: &Connection) {
    match wal_checkpoint(conn, "TRUNCATE") {
        Ok((false, _, _)) => {}
        Ok((true, _, _)) => tracing::debug!("the WAL was kept: a reader began on it meanwhile"),
        Err(err) => tracing::warn!("the delta's checkpoint is done, but its WAL was kept: {err}"),
    }
}

/// Runs a WAL checkpoint in `mode`: whether readers kept it from ending, the WAL's pages and
/// those copied into the database.
fn wal_checkpoint(conn: &Connection, mode: &str) -> rusqlite::Result<(bool, i64, i64)> {
    conn.query_row(&format!("PRAGMA wal_checkpoint({mode})"), [], |r| {
        Ok((r.get(0)?, r.get(1)?, r.get(2)?))
    })
}

/// Whether another connection has the database at `path` open in WAL mode. A connection
/// that reads it and closes is its last one when nobody else has it open: SQLite then removes
/// its `-wal` and `-shm` files, which are left otherwise (or by a process killed with it open,
/// until that next clean close).
fn in_use(path: &Path) -> bool {
    let companions = || {
        ["-wal", "-shm"]
            .iter()
            .any(|suffix| crate::sqlite_locks::companion(path, suffix).exists())
    };
    if !path.is_file() || !companions() {
        return false;
    }
    if let Ok(conn) = Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE)
    {
        let _ = conn.query_row("SELECT count(*) FROM sqlite_schema", [], |r| {
            r.get::<_, i64>(0)
        });
    }
    companions()
}

/// Puts a full import's database `tmp` at `db`: renamed over it when nobody has it open
/// ([`in_use`]), copied into its pages otherwise ([`copy_into_place`]). The new file is made
/// durable before the last look, so that the look and the rename are a moment apart, not the
/// seconds of an `fsync`: a reader that opened the old file between them would stay on it and
/// read it through the new file's WAL.
fn place(tmp: &Path, db: &Path) -> Result<()> {
    if !in_use(db) {
        let synced = crate::replace::sync(tmp)?;
        if !in_use(db) {
            return Ok(synced.replace(db)?);
        }
    }
    copy_into_place(tmp, db)
}

/// Puts a full import's database `tmp` in place of the database at `db`, which someone has open
/// ([`in_use`]): its pages are copied in one transaction, which readers see whole once
/// it commits (renaming a new file over it would leave the old database's `-wal` and `-shm`
/// files next to the new one, and SQLite would read the new file through them).
fn copy_into_place(tmp: &Path, db: &Path) -> Result<()> {
    let source = Connection::open_with_flags(tmp, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    let mut target = open_in_place(db)?;
    let write_out = write_out_in_place(db);
    {
        use rusqlite::backup::{Backup, StepResult};
        let backup = Backup::new(&source, &mut target)?;
        let deadline = Instant::now() + IN_PLACE_BUSY_TIMEOUT;
        // Every page in one step: one transaction.
        while let StepResult::Busy | StepResult::Locked | StepResult::More = backup.step(-1)? {
            anyhow::ensure!(Instant::now() < deadline, "{} stays busy", db.display());
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    checkpoint(&target, write_out);
    drop(target);
    drop(source);
    crate::sqlite_locks::remove_database(tmp)
        .with_context(|| format!("cannot remove {}", tmp.display()))
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

#[cfg(all(test, target_os = "linux"))]
mod tests;
