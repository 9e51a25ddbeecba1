//! `acpdb import`: streams an ACP cache (and its vars file) into a fresh SQLite database and
//! swaps it in atomically.
//!
//! Invariants: the importer is the only writer of the index tables; it builds into a temporary
//! file next to the target and renames it over the target only after everything committed, so a
//! reader never sees a half-import and a failure leaves the previous database as it was. Memory
//! is bounded by the largest entry, a fixed call-graph edge buffer (sorted runs spill to
//! temporary files) and a fixed-size record per call-graph node name (see `graph.rs`).

use std::collections::HashSet;
use std::fs;
use std::hash::{Hash, Hasher};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, sync_channel, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{params, Connection, OptionalExtension, Statement, ToSql};
use serde_json::Value;

use crate::cache::fields::{self, Cell, Record};
use crate::cache::paths::canonical_path;
use crate::cache::reader::{
    self, DocumentKind, Event, Limits, List, Progress, ReadOutcome, Scope, Section,
};
use crate::cache::{normalize_lock_level, LOCK_LEVELS};
use crate::db;
use crate::freshness::mtime_text;
use crate::project::Project;
use fts::FtsBuilder;
use graph::CallGraph;

mod fts;
mod graph;

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

/// How far reading a cache of `total` bytes has come, in percent.
pub fn percent_read(read: u64, total: u64) -> f64 {
    if total == 0 {
        return 0.0;
    }
    (read as f64 * 100.0 / total as f64).min(100.0)
}

/// Progress in the words of the progress lines and the "index not ready" error:
/// `42% of 930.0 MB read, 3.1 s elapsed`.
pub fn progress_text(read: u64, total: u64, elapsed: Duration) -> String {
    format!(
        "{:.0}% of {:.1} MB read, {:.1} s elapsed",
        percent_read(read, total),
        total as f64 / 1e6,
        elapsed.as_secs_f64()
    )
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
        (db::CURSOR_SECRET_KEY, db::new_secret()),
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

/// The phases of an import, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Reading,
    Linking,
    Indexing,
}

impl Phase {
    /// The phase's name in the progress bar and lines.
    fn name(self) -> &'static str {
        match self {
            Phase::Reading => "reading the cache",
            Phase::Linking => "linking the call graph",
            Phase::Indexing => "building indexes and full-text search",
        }
    }

    /// Where the phase starts on the progress bar, in units of the cache's size: reading covers
    /// 0..1, and the later phases the share of the time they took after reading at 100K and 1M
    /// symbols (docs/benchmarks.md), so that the bar's ETA covers the whole import.
    fn start(self) -> f64 {
        match self {
            Phase::Reading => 0.0,
            Phase::Linking => 1.0,
            Phase::Indexing => 1.0 + LINKING_SHARE,
        }
    }
}

/// Time of the linking and the indexing phases relative to the reading phase.
const LINKING_SHARE: f64 = 0.25;
const INDEXING_SHARE: f64 = 0.75;

/// How an import shows its progress on stderr: a bar with the phase and an ETA on a terminal,
/// otherwise a line when it starts and one per interval (phase, percent of the cache read,
/// MB/s), in the units of the summary line (MB = 10^6 bytes). Stops when dropped.
enum Reporter {
    Quiet,
    Bar {
        bar: indicatif::ProgressBar,
        progress: Arc<Progress>,
        /// Size of the cache: the length of the reading phase on the bar.
        total: u64,
    },
    Lines {
        phase: Arc<Mutex<&'static str>>,
        /// Dropping it stops the printing thread.
        stop: Option<mpsc::Sender<()>>,
        thread: Option<JoinHandle<()>>,
    },
}

impl Reporter {
    fn start(
        args: &ImportArgs,
        cache: &Path,
        total: u64,
        progress: &Arc<Progress>,
        started: Instant,
    ) -> Result<Reporter> {
        if args.no_progress {
            return Ok(Reporter::Quiet);
        }
        if std::io::stderr().is_terminal() {
            let end = Phase::Indexing.start() + INDEXING_SHARE;
            let bar = indicatif::ProgressBar::with_draw_target(
                Some((total as f64 * end) as u64),
                indicatif::ProgressDrawTarget::stderr(),
            );
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "{msg:38} {bar:30} {percent:>3}% {elapsed_precise} ETA {eta}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            bar.set_message(Phase::Reading.name());
            bar.enable_steady_tick(Duration::from_millis(250));
            return Ok(Reporter::Bar {
                bar,
                progress: Arc::clone(progress),
                total,
            });
        }
        let interval = Duration::try_from_secs_f64(args.progress_interval)
            .ok()
            .filter(|i| !i.is_zero())
            .with_context(|| {
                format!(
                    "--progress-interval must be a positive number of seconds, got {}",
                    args.progress_interval
                )
            })?;
        eprintln!(
            "import: reading {} ({:.1} MB)",
            cache.display(),
            total as f64 / 1e6
        );
        let phase = Arc::new(Mutex::new(Phase::Reading.name()));
        let (stop, stopped) = mpsc::channel::<()>();
        let (shown, progress) = (Arc::clone(&phase), Arc::clone(progress));
        let thread = std::thread::Builder::new()
            .name("acpdb-progress".into())
            .spawn(move || {
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(interval) {
                    let phase = *shown.lock().unwrap_or_else(|e| e.into_inner());
                    let read = progress.bytes.load(Ordering::Relaxed);
                    let elapsed = started.elapsed();
                    let rate = read as f64 / 1e6 / elapsed.as_secs_f64().max(1e-6);
                    eprintln!(
                        "import: {phase}, {} ({rate:.1} MB/s)",
                        progress_text(read, total, elapsed)
                    );
                }
            })?;
        Ok(Reporter::Lines {
            phase,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// Shows the bytes of the cache read so far.
    fn tick(&self) {
        if let Reporter::Bar { bar, progress, .. } = self {
            bar.set_position(progress.bytes.load(Ordering::Relaxed));
        }
    }

    /// Names the phase the import has reached.
    fn phase(&self, phase: Phase) {
        match self {
            Reporter::Quiet => {}
            Reporter::Bar { bar, total, .. } => {
                bar.set_message(phase.name());
                bar.set_position((*total as f64 * phase.start()) as u64);
            }
            Reporter::Lines { phase: shown, .. } => {
                *shown.lock().unwrap_or_else(|e| e.into_inner()) = phase.name();
            }
        }
    }
}

impl Drop for Reporter {
    fn drop(&mut self) {
        match self {
            Reporter::Quiet => {}
            Reporter::Bar { bar, .. } => bar.finish_and_clear(),
            Reporter::Lines { stop, thread, .. } => {
                drop(stop.take());
                if let Some(thread) = thread.take() {
                    let _ = thread.join();
                }
            }
        }
    }
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

/// A cell as a SQL value.
struct Sql<'a>(&'a Cell);

impl ToSql for Sql<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self.0 {
            Cell::Null => ToSqlOutput::Borrowed(ValueRef::Null),
            Cell::Text(s) => ToSqlOutput::Borrowed(ValueRef::Text(s.as_bytes())),
            Cell::Int(i) => ToSqlOutput::Borrowed(ValueRef::Integer(*i)),
        })
    }
}

#[derive(Debug, Default)]
struct Counts {
    files: u64,
    symbols: u64,
    edges: u64,
    domains: u64,
    warnings: u64,
}

const MAX_WARNING_ROWS: u64 = 10_000;

const KNOWN_LANGUAGES: &[&str] = &[
    "typescript",
    "javascript",
    "python",
    "rust",
    "go",
    "java",
    "c-sharp",
    "cpp",
    "c",
    "ruby",
    "php",
    "swift",
    "kotlin",
];
const KNOWN_SYMBOL_TYPES: &[&str] = &[
    "function",
    "method",
    "class",
    "interface",
    "type",
    "enum",
    "struct",
    "trait",
    "const",
];
const KNOWN_INLINE_TYPES: &[&str] = &["critical", "todo", "fixme", "perf", "hack"];
const KNOWN_VISIBILITY: &[&str] = &["public", "private", "protected"];

struct Loader<'c> {
    conn: &'c Connection,
    insert_file: Statement<'c>,
    insert_symbol: Statement<'c>,
    insert_source_file: Statement<'c>,
    insert_domain: Statement<'c>,
    insert_domain_file: Statement<'c>,
    insert_domain_symbol: Statement<'c>,
    insert_inline: Statement<'c>,
    insert_constraint: Statement<'c>,
    insert_graph_list: Statement<'c>,
    insert_var: Statement<'c>,
    insert_warning: Statement<'c>,
    graph: CallGraph<'c>,
    fts: FtsBuilder,
    /// Hashes of the keys inserted so far, per section, to spot duplicates.
    seen_keys: HashSet<(u8, u64)>,
    root: Option<String>,
    root_ord: i64,
    graph_ord: i64,
    constraints_ord: i64,
    vars_ord: i64,
    hack_ord: i64,
    debug_ord: i64,
    saw_files: bool,
    saw_symbols: bool,
    counts: Counts,
}

impl<'c> Loader<'c> {
    fn new(conn: &'c Connection, spill_dir: &Path, fts: FtsBuilder) -> Result<Loader<'c>> {
        // The modelled columns come from `cache::fields`, in the order records hold their cells.
        let file_cols = format!("key, path, {}", fields::select_list(fields::FILE_FIELDS));
        let symbol_cols = format!(
            "key, file_path, {}",
            fields::select_list(fields::SYMBOL_FIELDS)
        );
        let domain_cols = format!("key, {}", fields::select_list(fields::DOMAIN_FIELDS));
        let var_cols = format!("name, {}", fields::select_list(fields::VAR_FIELDS));
        Ok(Loader {
            conn,
            insert_file: conn.prepare(&insert_sql("files", &file_cols, false))?,
            insert_symbol: conn.prepare(&insert_sql("symbols", &symbol_cols, false))?,
            insert_source_file: conn.prepare(&insert_sql("source_files", "key, path, mtime, value_json", false))?,
            insert_domain: conn.prepare(&insert_sql("domains", &domain_cols, true))?,
            insert_domain_file: conn.prepare(&insert_sql("domain_files", "domain, path, source", true))?,
            insert_domain_symbol: conn.prepare(&insert_sql("domain_symbols", "domain, symbol", true))?,
            insert_inline: conn.prepare(&insert_sql(
                "inline_annotations",
                "file_id, ord, line, type, directive, value, ticket, expires, auto_generated",
                false,
            ))?,
            insert_constraint: conn.prepare(&insert_sql(
                "constraints",
                "key, path, lock_level, lock_reason, directive, style, behavior, quality_json, raw_json",
                true,
            ))?,
            insert_graph_list: conn.prepare(&insert_sql("graph_lists", "node_id, reverse, items", false))?,
            insert_var: conn.prepare(&insert_sql("vars", &var_cols, true))?,
            insert_warning: conn.prepare("INSERT INTO import_warnings(path, message) VALUES (?1, ?2)")?,
            graph: CallGraph::new(conn, spill_dir)?,
            fts,
            seen_keys: HashSet::new(),
            root: None,
            root_ord: 0,
            graph_ord: 0,
            constraints_ord: 0,
            vars_ord: 0,
            hack_ord: 0,
            debug_ord: 0,
            saw_files: false,
            saw_symbols: false,
            counts: Counts::default(),
        })
    }

    fn warn(&mut self, path: impl Into<String>, message: impl Into<String>) -> Result<()> {
        self.counts.warnings += 1;
        if self.counts.warnings <= MAX_WARNING_ROWS {
            self.insert_warning
                .execute(params![path.into(), message.into()])?;
        }
        Ok(())
    }

    fn check_enum(
        &mut self,
        path: impl FnOnce() -> String,
        what: &str,
        value: Option<&str>,
        known: &[&str],
    ) -> Result<()> {
        if let Some(value) = value {
            if !known.contains(&value) {
                self.warn(
                    path(),
                    format!("unknown {what} `{value}` (kept as written)"),
                )?;
            }
        }
        Ok(())
    }

    fn canonical(&self, raw: &str) -> String {
        canonical_path(raw, self.root.as_deref())
    }

    fn event(&mut self, kind: DocumentKind, event: Event) -> Result<()> {
        match event {
            Event::Member { scope, key, value } => self.member(kind, scope, key, value),
            Event::File { key, record } => self.file(key, record),
            Event::Symbol { key, record } => self.symbol(key, record),
            Event::Entry {
                section,
                key,
                value,
            } => self.entry(section, key, value),
            Event::Item { list, value } => self.item(list, value),
        }
    }

    fn member(
        &mut self,
        kind: DocumentKind,
        scope: Scope,
        key: String,
        value: Option<Value>,
    ) -> Result<()> {
        let text = value.as_ref().map(Value::to_string);
        if let Some(value) = &value {
            let streamed = match (kind, scope) {
                (DocumentKind::Vars, _) => key == "variables",
                (DocumentKind::Cache, Scope::Root) => [
                    "source_files",
                    "files",
                    "symbols",
                    "domains",
                    "graph",
                    "constraints",
                ]
                .contains(&key.as_str()),
                (DocumentKind::Cache, Scope::Graph) => {
                    ["forward", "reverse"].contains(&key.as_str())
                }
                (DocumentKind::Cache, Scope::Constraints) => {
                    ["by_file", "by_lock_level"].contains(&key.as_str())
                }
            };
            if streamed && !value.is_null() {
                let prefix = match scope {
                    Scope::Root => "",
                    Scope::Graph => "graph.",
                    Scope::Constraints => "constraints.",
                };
                self.warn(
                    format!("{prefix}{key}"),
                    format!(
                        "expected an object, found {}; kept verbatim, no entries imported from it",
                        reader::json_type(value)
                    ),
                )?;
            }
        }
        match (kind, scope) {
            (DocumentKind::Vars, _) => {
                self.vars_ord += 1;
                self.conn.execute(
                    "INSERT OR REPLACE INTO vars_root(key, ord, value_json) VALUES (?1, ?2, ?3)",
                    params![key, self.vars_ord, text],
                )?;
            }
            (DocumentKind::Cache, Scope::Root) => {
                self.root_ord += 1;
                match key.as_str() {
                    "files" => self.saw_files = true,
                    "symbols" => self.saw_symbols = true,
                    "project" => {
                        self.root = value
                            .as_ref()
                            .and_then(|p| p.get("root"))
                            .and_then(Value::as_str)
                            .map(str::to_string);
                    }
                    "conventions" => {
                        if let Some(conventions) = &value {
                            self.conventions(conventions)?;
                        }
                    }
                    _ => {}
                }
                self.conn.execute(
                    "INSERT OR REPLACE INTO cache_root(key, ord, value_json) VALUES (?1, ?2, ?3)",
                    params![key, self.root_ord, text],
                )?;
            }
            (DocumentKind::Cache, Scope::Graph) => {
                self.graph_ord += 1;
                self.conn.execute(
                    "INSERT OR REPLACE INTO graph_root(key, ord, value_json) VALUES (?1, ?2, ?3)",
                    params![key, self.graph_ord, text],
                )?;
            }
            (DocumentKind::Cache, Scope::Constraints) => {
                self.constraints_ord += 1;
                self.conn.execute(
                    "INSERT OR REPLACE INTO constraints_root(key, ord, value_json) VALUES (?1, ?2, ?3)",
                    params![key, self.constraints_ord, text],
                )?;
            }
        }
        Ok(())
    }

    fn conventions(&mut self, conventions: &Value) -> Result<()> {
        let naming = conventions
            .get("fileNaming")
            .or_else(|| conventions.get("file_naming"));
        if let Some(Value::Array(rules)) = naming {
            for rule in rules {
                self.conn.execute(
                    "INSERT INTO conventions(kind, directory, pattern, confidence, value_json) VALUES ('file_naming', ?1, ?2, ?3, ?4)",
                    params![
                        rule.get("directory").and_then(Value::as_str),
                        rule.get("pattern").and_then(Value::as_str),
                        rule.get("confidence").and_then(Value::as_f64),
                        rule.to_string()
                    ],
                )?;
            }
        }
        if let Some(imports) = conventions.get("imports").filter(|v| !v.is_null()) {
            self.conn.execute(
                "INSERT INTO conventions(kind, value_json) VALUES ('imports', ?1)",
                params![imports.to_string()],
            )?;
        }
        Ok(())
    }

    fn entry(&mut self, section: Section, key: String, value: Value) -> Result<()> {
        match section {
            Section::Files | Section::Symbols => {
                unreachable!("the reader sends file and symbol entries as records")
            }
            Section::GraphForward | Section::GraphReverse => self.graph_list(section, key, value),
            Section::SourceFiles => {
                let path = self.canonical(&key);
                let (mtime, raw) = match value {
                    Value::String(s) => (Some(s), None),
                    other => (None, Some(other.to_string())),
                };
                let duplicate = self.is_duplicate(0, "source_files", &key)?;
                if !duplicate {
                    self.insert_source_file
                        .execute(params![key, path, mtime, raw])?;
                }
                if duplicate {
                    self.warn(
                        format!("source_files[{key:?}]"),
                        "duplicate key; the first entry is kept",
                    )?;
                }
                Ok(())
            }
            Section::Domains => self.domain(key, value),
            Section::ByFile => self.constraint(key, value),
            Section::ByLockLevel => {
                let level = normalize_lock_level(&key);
                if !LOCK_LEVELS.contains(&level.as_str()) {
                    self.warn(
                        format!("constraints.by_lock_level[{key:?}]"),
                        format!("unknown lock level `{key}`"),
                    )?;
                }
                self.conn.execute(
                    "INSERT OR IGNORE INTO lock_level_lists(key, lock_level, items_json) VALUES (?1, ?2, ?3)",
                    params![key, level, value.to_string()],
                )?;
                Ok(())
            }
            Section::Variables => self.variable(key, value),
        }
    }

    fn file(&mut self, key: String, record: Record) -> Result<()> {
        let path = self.canonical(&key);
        let Record { cells, extra } = record;
        let json_path = || format!("files[{key:?}]");
        self.check_enum(json_path, "language", cells[2].as_str(), KNOWN_LANGUAGES)?;
        let mut values: Vec<&dyn ToSql> = Vec::with_capacity(17);
        values.push(&key);
        values.push(&path);
        let sql_cells: Vec<Sql> = cells.iter().map(Sql).collect();
        for cell in &sql_cells {
            values.push(cell);
        }
        values.push(&extra);
        if self.is_duplicate(1, "files", &key)? {
            return self.warn(json_path(), "duplicate key; the first entry is kept");
        }
        self.insert_file.execute(values.as_slice())?;
        self.counts.files += 1;
        let file_id = self.conn.last_insert_rowid();
        if let Some(domains) = cells[12].as_str() {
            if let Ok(Value::Array(domains)) = serde_json::from_str::<Value>(domains) {
                for domain in domains.iter().filter_map(Value::as_str) {
                    self.insert_domain_file
                        .execute(params![domain, path, "file"])?;
                }
            }
        }
        if let Some(inline) = cells[13].as_str() {
            if let Ok(Value::Array(items)) = serde_json::from_str::<Value>(inline) {
                for (ord, item) in items.iter().enumerate() {
                    let text = |k: &str| item.get(k).and_then(Value::as_str).map(str::to_string);
                    let kind = text("type");
                    self.check_enum(
                        || format!("files[{key:?}].inline[{ord}]"),
                        "inline annotation type",
                        kind.as_deref(),
                        KNOWN_INLINE_TYPES,
                    )?;
                    self.insert_inline.execute(params![
                        file_id,
                        ord as i64,
                        item.get("line").and_then(Value::as_i64),
                        kind,
                        text("directive"),
                        text("value"),
                        text("ticket"),
                        text("expires"),
                        item.get("auto_generated")
                            .and_then(Value::as_bool)
                            .unwrap_or(false),
                    ])?;
                }
            }
        }
        Ok(())
    }

    fn symbol(&mut self, key: String, record: Record) -> Result<()> {
        let Record { cells, extra } = record;
        let json_path = || format!("symbols[{key:?}]");
        self.check_enum(
            json_path,
            "symbol type",
            cells[2].as_str(),
            KNOWN_SYMBOL_TYPES,
        )?;
        self.check_enum(
            json_path,
            "visibility",
            cells[11].as_str(),
            KNOWN_VISIBILITY,
        )?;
        let file_path = cells[3].as_str().map(|f| self.canonical(f));
        let mut values: Vec<&dyn ToSql> = Vec::with_capacity(18);
        values.push(&key);
        values.push(&file_path);
        let sql_cells: Vec<Sql> = cells.iter().map(Sql).collect();
        for cell in &sql_cells {
            values.push(cell);
        }
        values.push(&extra);
        if self.is_duplicate(2, "symbols", &key)? {
            return self.warn(json_path(), "duplicate key; the first entry is kept");
        }
        self.insert_symbol.execute(values.as_slice())?;
        self.counts.symbols += 1;
        // name, qualified_name, signature, purpose, summary: the columns of `symbols_fts`.
        self.fts.push(
            self.conn.last_insert_rowid(),
            [0, 1, 7, 9, 8].map(|i| &cells[i]),
        )?;
        let own_name = cells[1].as_str().unwrap_or(&key);
        for (column, forward) in [(12usize, true), (13usize, false)] {
            let Some(list) = cells[column].as_str() else {
                continue;
            };
            let Ok(Value::Array(items)) = serde_json::from_str::<Value>(list) else {
                continue;
            };
            let me = self.graph.node(own_name)?;
            for other in items.iter().filter_map(Value::as_str) {
                let other = self.graph.node(other)?;
                let (caller, callee) = if forward { (me, other) } else { (other, me) };
                self.graph.push_edge(caller, callee, forward)?;
            }
        }
        Ok(())
    }

    /// Whether `key` was already inserted in `section` (an exact check in SQL confirms a hash
    /// match, so distinct keys are never taken for duplicates).
    fn is_duplicate(&mut self, section: u8, table: &str, key: &str) -> Result<bool> {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        key.hash(&mut hasher);
        if self.seen_keys.insert((section, hasher.finish())) {
            return Ok(false);
        }
        let found: Option<i64> = self
            .conn
            .query_row(
                &format!("SELECT 1 FROM {table} WHERE key = ?1 LIMIT 1"),
                [key],
                |r| r.get(0),
            )
            .optional()?;
        Ok(found.is_some())
    }

    fn graph_list(&mut self, section: Section, key: String, value: Value) -> Result<()> {
        let forward = section == Section::GraphForward;
        let key_id = self.graph.node(&key)?;
        if !self.graph.claim_list(key_id, !forward) {
            return self.warn(
                format!("{}[{key:?}]", section.path()),
                "duplicate key; the first entry is kept",
            );
        }
        let Value::Array(items) = &value else {
            self.insert_graph_list
                .execute(params![key_id, !forward, value.to_string()])?;
            return self.warn(
                format!("{}[{key:?}]", section.path()),
                "expected a list of names; kept verbatim but not added to the call graph",
            );
        };
        if !forward {
            self.graph.add_reverse_len(key_id, items.len());
        }
        let mut ids = Vec::with_capacity(items.len());
        for other in items.iter().filter_map(Value::as_str) {
            let other_id = self.graph.node(other)?;
            ids.push(other_id);
            let (caller, callee) = if forward {
                (key_id, other_id)
            } else {
                (other_id, key_id)
            };
            self.graph.push_edge(caller, callee, forward)?;
        }
        if ids.len() == items.len() {
            self.insert_graph_list.execute(params![
                key_id,
                !forward,
                db::encode_graph_items(&ids)
            ])?;
        } else {
            self.insert_graph_list
                .execute(params![key_id, !forward, value.to_string()])?;
        }
        Ok(())
    }

    fn domain(&mut self, key: String, value: Value) -> Result<()> {
        let Value::Object(map) = value else {
            unreachable!("the reader only yields object entries")
        };
        let (cells, extra) = fields::split(map, fields::DOMAIN_FIELDS);
        let extra_text = Value::Object(extra).to_string();
        let inserted = self.insert_domain.execute(params![
            key,
            Sql(&cells[0]),
            Sql(&cells[1]),
            Sql(&cells[2]),
            Sql(&cells[3]),
            extra_text
        ])?;
        if inserted == 0 {
            return self.warn(
                format!("domains[{key:?}]"),
                "duplicate key; the first entry is kept",
            );
        }
        self.counts.domains += 1;
        let name = cells[0].as_str().unwrap_or(&key).to_string();
        if let Some(Ok(Value::Array(files))) = cells[2].as_str().map(serde_json::from_str::<Value>)
        {
            for file in files.iter().filter_map(Value::as_str) {
                let path = self.canonical(file);
                self.insert_domain_file
                    .execute(params![name, path, "domain"])?;
            }
        }
        if let Some(Ok(Value::Array(symbols))) =
            cells[3].as_str().map(serde_json::from_str::<Value>)
        {
            for symbol in symbols.iter().filter_map(Value::as_str) {
                self.insert_domain_symbol.execute(params![name, symbol])?;
            }
        }
        Ok(())
    }

    fn constraint(&mut self, key: String, value: Value) -> Result<()> {
        let path = self.canonical(&key);
        let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_string);
        let mutation = value.get("mutation");
        let raw_level =
            text(value.get("lock_level")).or_else(|| text(mutation.and_then(|m| m.get("level"))));
        let lock_level = raw_level
            .as_deref()
            .map(normalize_lock_level)
            .unwrap_or_else(|| "normal".into());
        if !LOCK_LEVELS.contains(&lock_level.as_str()) {
            self.warn(
                format!("constraints.by_file[{key:?}]"),
                format!("unknown lock level `{lock_level}` (kept as written)"),
            )?;
        }
        let lock_reason =
            text(value.get("lock_reason")).or_else(|| text(mutation.and_then(|m| m.get("reason"))));
        let style = match value.get("style") {
            Some(Value::String(s)) => Some(s.clone()),
            Some(style) => text(style.get("guide")),
            None => None,
        };
        let behavior = match value.get("behavior") {
            Some(Value::String(s)) => Some(s.clone()),
            Some(behavior) => text(behavior.get("approach")),
            None => None,
        };
        let quality = quality_list(&value);
        self.insert_constraint.execute(params![
            key,
            path,
            lock_level,
            lock_reason,
            text(value.get("directive")),
            style,
            behavior,
            Value::from(quality).to_string(),
            value.to_string()
        ])?;
        Ok(())
    }

    fn item(&mut self, list: List, value: Value) -> Result<()> {
        match list {
            List::Hacks => {
                self.hack_ord += 1;
                let file = value
                    .get("file")
                    .and_then(Value::as_str)
                    .map(|f| self.canonical(f));
                self.conn.execute(
                    "INSERT INTO cache_hacks(ord, id, path, line, expires, raw_json) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    params![
                        self.hack_ord,
                        value.get("id").and_then(Value::as_str),
                        file,
                        value.get("line").and_then(Value::as_i64),
                        value.get("expires").and_then(Value::as_str),
                        value.to_string()
                    ],
                )?;
            }
            List::DebugSessions => {
                self.debug_ord += 1;
                self.conn.execute(
                    "INSERT INTO cache_debug_sessions(ord, raw_json) VALUES (?1, ?2)",
                    params![self.debug_ord, value.to_string()],
                )?;
            }
        }
        Ok(())
    }

    fn variable(&mut self, key: String, value: Value) -> Result<()> {
        let Value::Object(map) = value else {
            unreachable!("the reader only yields object entries")
        };
        let (cells, extra) = fields::split(map, fields::VAR_FIELDS);
        self.check_enum(
            || format!("variables[{key:?}]"),
            "variable type",
            cells[0].as_str(),
            &["symbol", "file", "domain", "layer", "pattern", "context"],
        )?;
        let extra_text = Value::Object(extra).to_string();
        let mut values: Vec<&dyn ToSql> = vec![&key];
        let sql_cells: Vec<Sql> = cells.iter().map(Sql).collect();
        for cell in &sql_cells {
            values.push(cell);
        }
        values.push(&extra_text);
        if self.insert_var.execute(values.as_slice())? == 0 {
            self.warn(
                format!("variables[{key:?}]"),
                "duplicate key; the first entry is kept",
            )?;
        }
        Ok(())
    }

    /// Refuses a document that has no `files` or `symbols` member (it is not an ACP cache) and
    /// warns about other missing required members.
    fn check_cache_shape(&mut self, path: &Path) -> Result<()> {
        let present: Vec<String> = {
            let mut stmt = self.conn.prepare("SELECT key FROM cache_root")?;
            let keys = stmt
                .query_map([], |r| r.get(0))?
                .collect::<rusqlite::Result<_>>()?;
            keys
        };
        for required in [
            "version",
            "generated_at",
            "project",
            "stats",
            "source_files",
        ] {
            if !present.iter().any(|k| k == required) {
                self.warn(required, format!("required member `{required}` is missing"))?;
            }
        }
        let mut missing = Vec::new();
        if !self.saw_files {
            missing.push("`files`");
        }
        if !self.saw_symbols {
            missing.push("`symbols`");
        }
        if !missing.is_empty() {
            bail!(
                "{}: not an ACP cache: the top-level object has no {} member (run `acp index` to regenerate it)",
                path.display(),
                missing.join(" or ")
            );
        }
        Ok(())
    }

    /// Builds the de-duplicated edge table and the node table; returns the final counts and
    /// the full-text builder, to finish once the indexes are built.
    fn finish(mut self) -> Result<(Counts, FtsBuilder)> {
        self.counts.edges = self.graph.finish(self.conn)?;
        if let Some(root) = self
            .root
            .clone()
            .filter(|r| r.starts_with('/') || r.contains(":\\") || r.contains(":/"))
        {
            rebase_absolute_paths(self.conn, &root)?;
        }
        Ok((std::mem::take(&mut self.counts), self.fts))
    }
}

fn insert_sql(table: &str, columns: &str, or_ignore: bool) -> String {
    let n = columns.split(',').count();
    let placeholders = (1..=n)
        .map(|i| format!("?{i}"))
        .collect::<Vec<_>>()
        .join(", ");
    let verb = if or_ignore {
        "INSERT OR IGNORE"
    } else {
        "INSERT"
    };
    format!("{verb} INTO {table}({columns}) VALUES ({placeholders})")
}

/// The normalised quality list of a constraint entry in either shape.
fn quality_list(value: &Value) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    match value.get("quality") {
        Some(Value::Array(items)) => {
            out.extend(items.iter().filter_map(Value::as_str).map(str::to_string))
        }
        Some(Value::Object(q)) => {
            if q.get("tests_required").and_then(Value::as_bool) == Some(true) {
                out.push("tests-required".into());
            }
            if q.get("security_review").and_then(Value::as_bool) == Some(true) {
                out.push("security-review".into());
            }
        }
        _ => {}
    }
    if let Some(Value::Object(m)) = value.get("mutation") {
        for (flag, name) in [
            ("requires_tests", "tests-required"),
            ("requires_docs", "docs-required"),
            ("requires_approval", "approval-required"),
        ] {
            if m.get(flag).and_then(Value::as_bool) == Some(true) && !out.iter().any(|q| q == name)
            {
                out.push(name.into());
            }
        }
    }
    out
}

/// Recomputes canonical paths once an absolute `project.root` is known (it may come after the
/// entries in the document).
fn rebase_absolute_paths(conn: &Connection, root: &str) -> Result<()> {
    let root_pattern = format!("{}%", root.replace('\\', "/").trim_end_matches('/'));
    for (table, raw, column) in [
        ("files", "key", "path"),
        ("source_files", "key", "path"),
        ("symbols", "file", "file_path"),
        ("constraints", "key", "path"),
    ] {
        conn.execute(
            &format!("UPDATE {table} SET {column} = acpdb_canonical_path({raw}, ?1) WHERE {column} LIKE ?2"),
            params![root, root_pattern],
        )?;
    }
    Ok(())
}

/// Resolves call-graph node names to symbols: exact key, then qualified name, then a unique
/// simple name.
fn resolve_graph_nodes(conn: &Connection) -> Result<()> {
    conn.execute_batch(
        "BEGIN;
         UPDATE graph_nodes SET symbol_id = (SELECT s.id FROM symbols s WHERE s.key = graph_nodes.name);
         UPDATE graph_nodes SET symbol_id = (SELECT min(s.id) FROM symbols s WHERE s.qualified_name = graph_nodes.name)
          WHERE symbol_id IS NULL;
         UPDATE graph_nodes SET symbol_id = (SELECT CASE WHEN count(*) = 1 THEN min(s.id) END FROM symbols s WHERE s.name = graph_nodes.name)
          WHERE symbol_id IS NULL;
         COMMIT;",
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn quality_from_both_shapes() {
        assert_eq!(
            quality_list(&json!({"quality": ["security-review"]})),
            vec!["security-review"]
        );
        assert_eq!(
            quality_list(
                &json!({"quality": {"tests_required": true}, "mutation": {"requires_docs": true, "requires_tests": true}})
            ),
            vec!["tests-required", "docs-required"]
        );
        assert!(quality_list(&json!({})).is_empty());
    }

    #[test]
    fn insert_sql_has_one_placeholder_per_column() {
        assert_eq!(
            insert_sql("t", "a, b", true),
            "INSERT OR IGNORE INTO t(a, b) VALUES (?1, ?2)"
        );
    }
}
