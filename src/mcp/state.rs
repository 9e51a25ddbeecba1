//! The served index: which database answers, whether it is fresh, and background (re)imports.
//!
//! Invariants: a tool call always gets an answer or a clear error at once, never a wait for an
//! import. While a re-import runs, the previous database keeps answering and answers carry a
//! staleness note; the new database is swapped in only when complete. A delta written into the
//! served file is seen whole by the same pools from their first transaction after its commit.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Instant;

use crate::cache::scanner::Progress;
use crate::db::{self, ReadPool};
use crate::freshness::{self, Freshness};
use crate::import::{self, ImportArgs};
use crate::project::{find_cache, Project};

use super::warm::CacheWarmer;

/// Read connections per core by default: a query that waits on I/O leaves its core to another.
const CONNECTIONS_PER_CORE: u32 = 2;

/// The default size of the read pool: two connections per core, at least four.
pub fn default_pool_size() -> u32 {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    (cores * CONNECTIONS_PER_CORE).max(4)
}

/// How a server serves its index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Connections in the read pools together (see [`split_pool`]).
    pub pool_size: u32,
    /// Serve the database as it is: never import, never write, reopen it when the file is
    /// replaced; the journal tools are refused.
    pub read_only: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            pool_size: default_pool_size(),
            read_only: false,
        }
    }
}

/// Why the index cannot answer right now.
#[derive(Debug, Clone)]
pub struct Unavailable {
    /// What keeps it from answering.
    pub reason: UnavailableReason,
    /// What happened and what to do.
    pub message: String,
    /// Progress details, when building.
    pub data: Option<serde_json::Value>,
}

/// What keeps the index from answering (`mcp::errors` gives each its JSON-RPC code).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnavailableReason {
    /// There is no cache to import.
    NoCache,
    /// The cache could not be imported, and no earlier import can answer.
    ImportFailed,
    /// The first import is running.
    Building,
}

#[derive(Debug)]
enum Phase {
    /// Answering from `current`.
    Serving,
    /// No cache and no database.
    NoCache,
    /// The first import is running; nothing to answer from yet.
    FirstBuild {
        progress: Arc<Progress>,
        total: u64,
        started: Instant,
    },
    /// The first import failed.
    FirstBuildFailed(String),
}

/// The read pools being served. Their connections are closed on a thread of their own when
/// their last holder lets them go: closing the last connection to a database file that an
/// import renamed over frees that file (0.07 s for the 1 GB database of 1M symbols, growing
/// with the file), and neither a tool call nor the lock that hands the pools out should wait
/// for that.
pub type ServedPool = DroppedApart<ReadPools>;

/// Files the watcher compares with their baseline per tick ([`IndexState::sweep_sources`]):
/// a few milliseconds on a blocking thread, so that the sweep of a large project never takes
/// a noticeable share of a core from the answers (16,384 a tick cost point tools several per
/// cent of their p50 at 100,000 files); 100,000 files are swept in 49 ticks, under two
/// minutes at the default interval. Where the kernel reports edits, answers rest on an import's
/// first pass: it runs in steps of this size for up to [`FIRST_PASS_SLICE`] a tick.
pub const SWEEP_STEP: usize = 2_048;

/// How long one tick of the watcher steps an import's first pass, at most.
pub const FIRST_PASS_SLICE: std::time::Duration = std::time::Duration::from_secs(1);

/// The read connections of the served database, those of point lookups apart from those of
/// heavy queries (searches, walks, impact): each connection has its own page cache, and the
/// thousands of rows a search reads would otherwise push out the pages that lookups read again
/// and again.
pub struct ReadPools {
    /// For light calls (and resources, prompts and the journal).
    pub light: ReadPool,
    /// For heavy calls.
    pub heavy: ReadPool,
    /// The import both pools' connections are on.
    import: db::PoolImport,
    /// The device and inode of the file the pools read, taken before they were opened (so
    /// that a file renamed over the path meanwhile is seen as another one).
    file: Option<(u64, u64)>,
}

/// How a pool of `size` connections (`--pool-size`) is split: (light, heavy), half of them
/// (at least one) for heavy queries, the others (at least one) for point lookups.
pub fn split_pool(size: u32) -> (u32, u32) {
    let heavy = (size / 2).max(1);
    (size.saturating_sub(heavy).max(1), heavy)
}

/// A value dropped on a thread of its own (or, when no thread can be started, where it is let
/// go of).
pub struct DroppedApart<T: Send + 'static>(Option<T>);

impl<T: Send + 'static> DroppedApart<T> {
    /// Wraps `value`.
    pub fn new(value: T) -> DroppedApart<T> {
        DroppedApart(Some(value))
    }
}

impl<T: Send + 'static> std::ops::Deref for DroppedApart<T> {
    type Target = T;

    fn deref(&self) -> &T {
        self.0.as_ref().expect("a value is there until dropped")
    }
}

impl<T: Send + 'static> Drop for DroppedApart<T> {
    fn drop(&mut self) {
        let value = self.0.take();
        let _ = std::thread::Builder::new()
            .name("acpdb-drop".into())
            .spawn(move || drop(value));
    }
}

/// Shared state of a running server.
pub struct IndexState {
    options: Options,
    project: RwLock<Project>,
    current: RwLock<Option<Arc<ServedPool>>>,
    phase: Mutex<Phase>,
    /// Why the answers may be out of date (a re-import is running or failed).
    stale: Mutex<Option<String>>,
    importing: AtomicBool,
    /// The cache changed while an import ran: import again when it ends.
    rerun: AtomicBool,
    signature: Mutex<Option<Signature>>,
    /// The identity of the database file last opened (read-only, also of the file watched
    /// for before one could be opened): a different file at the path means it was replaced.
    db_file: Mutex<Option<FileId>>,
    /// Counts the changes of what answers mean: a new database, or a change of staleness.
    generation: AtomicU64,
}

type Signature = (
    Option<(u64, String)>,
    Option<(u64, String)>,
    Option<(u64, String)>,
);

impl IndexState {
    /// Decides what to serve and starts an import in the background when needed (never in
    /// read-only mode, which serves the database file as it is).
    pub fn start(project: Project, options: Options) -> Arc<IndexState> {
        let state = Arc::new(IndexState {
            options,
            project: RwLock::new(project.clone()),
            current: RwLock::new(None),
            phase: Mutex::new(Phase::NoCache),
            stale: Mutex::new(None),
            importing: AtomicBool::new(false),
            rerun: AtomicBool::new(false),
            signature: Mutex::new(None),
            db_file: Mutex::new(None),
            generation: AtomicU64::new(1),
        });
        if options.read_only {
            state.start_read_only(&project);
            return state;
        }
        *state
            .signature
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(signature(&project));
        import::sweep_temporary_files(&project.db);
        let freshness = freshness::check(&project)
            .unwrap_or_else(|e| Freshness::Stale(format!("cannot read the database: {e:#}")));
        match (&project.cache, freshness) {
            (_, Freshness::Fresh) | (None, Freshness::Stale(_)) => {
                state.open_current();
            }
            (None, Freshness::Missing) => {
                tracing::warn!(
                    "no ACP cache under {}: run `acp index` there; tools answer -32000 until a cache exists",
                    project.root.display()
                );
            }
            (Some(_), Freshness::Stale(reason)) => {
                tracing::info!("{reason}; re-importing in the background, answering from the previous import meanwhile");
                state.open_current();
                state.spawn_import(reason);
            }
            (Some(_), Freshness::Incompatible(reason)) => {
                tracing::info!("{reason}; rebuilding it in the background");
                state.spawn_import(reason);
            }
            (None, Freshness::Incompatible(reason)) => {
                tracing::error!("{reason}, and there is no cache to rebuild it from");
                *state.phase.lock().unwrap_or_else(PoisonError::into_inner) = Phase::FirstBuildFailed(format!(
                    "{reason}, and there is no cache to rebuild it from: run `acp index` in the project, then restart the server"
                ));
            }
            (Some(cache), Freshness::Missing) => {
                tracing::info!(
                    "no database yet; importing {} in the background",
                    cache.display()
                );
                state.spawn_import("first import".into());
            }
        }
        state
    }

    /// Opens the database as it is; another schema version than this build reads is an error
    /// to fix by publishing a database built by the same acpdb version.
    fn start_read_only(&self, project: &Project) {
        *self.db_file.lock().unwrap_or_else(PoisonError::into_inner) = file_id(&project.db);
        match freshness::check_with(project, freshness::Compare::Metadata) {
            Ok(Freshness::Incompatible(reason)) => {
                tracing::error!("{reason}; a read-only server cannot rebuild it");
                *self.phase.lock().unwrap_or_else(PoisonError::into_inner) =
                    Phase::FirstBuildFailed(format!(
                        "{reason}, and a read-only server does not import: publish a database \
                         imported by this acpdb version"
                    ));
            }
            Ok(Freshness::Missing) => {
                *self.phase.lock().unwrap_or_else(PoisonError::into_inner) =
                    Phase::FirstBuildFailed(format!(
                        "no database at {}; a read-only server does not import: run `acpdb \
                         import` where the cache is and copy the database here",
                        project.db.display()
                    ));
            }
            _ => {
                self.open_current();
            }
        }
    }

    /// Connections in the read pools together (see [`split_pool`]).
    pub fn pool_size(&self) -> u32 {
        self.options.pool_size
    }

    /// Whether this server is read-only (see [`Options::read_only`]).
    pub fn read_only(&self) -> bool {
        self.options.read_only
    }

    /// In read-only mode: when the database was replaced (a new file renamed over it, or a
    /// delta written into it), answers from it as it is now; calls already running finish on
    /// what they started with.
    pub fn poll_database(&self) {
        if self.database_replaced() {
            tracing::info!(
                "{} was replaced; opening the new file",
                self.db_path().display()
            );
            self.start_read_only(&self.project());
        }
    }

    /// Opens the database file as it is now and answers from it, with no staleness note; false
    /// (logged) when it cannot be opened, and the previous database, if any, keeps answering.
    fn open_current(&self) -> bool {
        if self.follow_in_place() {
            return true;
        }
        let path = self.db_path();
        // Whether or not the new file can be opened, descriptors kept of a file no longer at
        // the path are done with.
        crate::sqlite_locks::release_replaced();
        let opened = file_id(&path);
        *self.db_file.lock().unwrap_or_else(PoisonError::into_inner) = opened;
        let (light, heavy) = split_pool(self.options.pool_size);
        match db::read_pools(&path, [light, heavy]).map(|([light, heavy], import)| ReadPools {
            light,
            heavy,
            import,
            file: opened.as_ref().map(inode),
        }) {
            Ok(pool) => {
                let previous = {
                    let mut current = self.current.write().unwrap_or_else(PoisonError::into_inner);
                    // The note goes before the new pool can be taken: no answer from it carries a
                    // note that it comes from the previous import. The generation moves on
                    // before it too, so no answer kept from the previous pool is given again.
                    self.new_generation();
                    current.replace(Arc::new(DroppedApart::new(pool)))
                };
                drop(previous);
                *self.phase.lock().unwrap_or_else(PoisonError::into_inner) = Phase::Serving;
                true
            }
            Err(err) => {
                tracing::error!("cannot open {}: {err:#}", path.display());
                *self.phase.lock().unwrap_or_else(PoisonError::into_inner) =
                    Phase::FirstBuildFailed(format!("{err:#}"));
                false
            }
        }
    }

    /// When the file at the path is the one the served pools read (the same device and inode: a
    /// delta, or a full import of a database in use, was written into its pages, by this
    /// server's import or another process's), moves them to the import it holds now instead of
    /// opening new pools: their connections read it from their next transaction on and keep
    /// their prepared statements, whose preparing (about a millisecond for a search statement)
    /// made the first calls after each delta slower. False when there is no pool to keep or the
    /// file is another one.
    fn follow_in_place(&self) -> bool {
        let path = self.db_path();
        let Some(pool) = self
            .current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
        else {
            return false;
        };
        // The file the pools read, not the one last seen at the path (a read-only server
        // records the new file's identity before it opens it).
        let same_file = |now: &Option<FileId>| {
            cfg!(unix) && pool.file.is_some() && pool.file == now.as_ref().map(inode)
        };
        if !same_file(&file_id(&path)) {
            return false;
        }
        let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY;
        let Ok(import) = rusqlite::Connection::open_with_flags(&path, flags)
            .and_then(|conn| db::import_identity(&conn))
        else {
            return false;
        };
        // Checked again after the read: an import renaming a new file over the path meanwhile
        // may have given the identity of another file than the pools'.
        let now = file_id(&path);
        if !same_file(&now) {
            return false;
        }
        let _current = self.current.write().unwrap_or_else(PoisonError::into_inner);
        pool.import.follow(import);
        *self.db_file.lock().unwrap_or_else(PoisonError::into_inner) = now;
        self.new_generation();
        *self.phase.lock().unwrap_or_else(PoisonError::into_inner) = Phase::Serving;
        true
    }

    /// Answers from now on are of a new index: no staleness note, no staleness check or
    /// answer kept from before.
    fn new_generation(&self) {
        self.set_stale(None);
        crate::query::staleness::forget_checks();
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    /// Whether the database is another one than the one last opened: an import by another
    /// process renamed a new file over it, or wrote a delta into it.
    fn database_replaced(&self) -> bool {
        let now = file_id(&self.db_path());
        now.is_some() && *self.db_file.lock().unwrap_or_else(PoisonError::into_inner) != now
    }

    /// The project being served.
    pub fn project(&self) -> Project {
        self.project
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The pool to answer from, or why there is none.
    pub fn pool(&self) -> Result<Arc<ServedPool>, Unavailable> {
        self.pool_and_note().map(|(pool, _)| pool)
    }

    /// [`IndexState::pool`] and the note that answers read from it carry
    /// ([`IndexState::stale_note`]), read together: a swap removes the note before the new
    /// pool can be taken, so an answer read from the previous pool keeps the note even when it
    /// is sent after the swap, and one read from the new pool has none.
    pub fn pool_and_note(&self) -> Result<(Arc<ServedPool>, Option<String>), Unavailable> {
        {
            let current = self.current.read().unwrap_or_else(PoisonError::into_inner);
            if let Some(pool) = current.clone() {
                return Ok((pool, self.stale_note()));
            }
        }
        let project = self.project();
        let phase = self.phase.lock().unwrap_or_else(PoisonError::into_inner);
        Err(match &*phase {
            Phase::FirstBuild { progress, total, started } => {
                let read = progress.bytes.load(Ordering::Relaxed);
                let percent = import::percent_read(read, *total);
                Unavailable {
                    reason: UnavailableReason::Building,
                    message: format!(
                        "Index not ready: importing the ACP cache ({}). Retry in a few seconds.",
                        import::progress_text(read, *total, started.elapsed())
                    ),
                    data: Some(serde_json::json!({"bytes_read": read, "bytes_total": total, "percent": percent})),
                }
            }
            Phase::FirstBuildFailed(err) => Unavailable {
                reason: UnavailableReason::ImportFailed,
                message: format!("Cache could not be imported: {err}. Fix the cache (or run 'acp index' again) and retry."),
                data: None,
            },
            Phase::NoCache | Phase::Serving => Unavailable {
                reason: UnavailableReason::NoCache,
                message: format!(
                    "Cache not found: {}. Run 'acp index' first.",
                    project.root.join(".acp/acp.cache.json").display()
                ),
                data: None,
            },
        })
    }

    /// Why answers may be out of date, if they may.
    pub fn stale_note(&self) -> Option<String> {
        self.stale
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Sets why answers may be out of date (`None`: they are not); a different note starts a
    /// new [`IndexState::answer_generation`] (a cache file only touched keeps the answers).
    fn set_stale(&self, note: Option<String>) {
        let mut stale = self.stale.lock().unwrap_or_else(PoisonError::into_inner);
        if *stale != note {
            *stale = note;
            self.generation.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Whether a database is being served.
    fn serving(&self) -> bool {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
    }

    /// The generation answers computed now belong to, while the served index is current; `None`
    /// while it is stale or unavailable (answers must not be kept then). Two calls that see the
    /// same generation see the same database, equally fresh: it moves with every new index and
    /// whenever source files may have changed ([`crate::query::staleness::changes_seen`]: a
    /// sweep that finds other changes, an edit of an indexed file the kernel reports, at once).
    pub fn answer_generation(&self) -> Option<u64> {
        let generation =
            self.generation.load(Ordering::SeqCst) + crate::query::staleness::changes_seen();
        (self.serving() && self.stale_note().is_none()).then_some(generation)
    }

    /// Takes one background step of the sweep of the served index's files on disk
    /// ([`crate::query::staleness::sweep`], at most [`SWEEP_STEP`] files, on a light
    /// connection when one is free, in a snapshot of its own), or the steps of an import's
    /// first pass for up to [`FIRST_PASS_SLICE`] where the kernel reports edits (answers rest
    /// on it). What the sweep finds moves the answer generation through
    /// [`crate::query::staleness::changes_seen`].
    pub fn sweep_sources(&self) {
        let started = std::time::Instant::now();
        loop {
            let Ok(pool) = self.pool() else {
                return;
            };
            let Some(conn) = pool.light.try_get() else {
                return;
            };
            let pending = db::in_snapshot(&conn, |conn| -> crate::query::QueryResult<_> {
                crate::query::staleness::sweep(conn, SWEEP_STEP)?;
                crate::query::staleness::first_pass_pending(conn)
            });
            let pending = pending.unwrap_or_else(|err| {
                tracing::debug!("sweep of the source files: {err}");
                false
            });
            // At most a second's steps of a first pass per tick: a stopping server waits for
            // no more.
            if !pending || started.elapsed() >= FIRST_PASS_SLICE {
                return;
            }
        }
    }

    /// Checks whether the cache, vars or project config changed on disk and re-imports if so.
    pub fn poll_changes(self: &Arc<Self>) {
        {
            let mut project = self.project.write().unwrap_or_else(PoisonError::into_inner);
            if project.cache.is_none() {
                project.cache = find_cache(&project.root);
            }
            if project.vars.is_none() {
                let root = project.root.clone();
                project.vars = [root.join(".acp/acp.vars.json"), root.join(".acp.vars.json")]
                    .into_iter()
                    .find(|p| p.is_file());
            }
        }
        let project = self.project();
        let now = signature(&project);
        let changed = {
            let mut seen = self
                .signature
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let changed = seen.as_ref() != Some(&now);
            *seen = Some(now);
            changed
        };
        if changed && project.cache.is_some() {
            self.import_if_changed(&project, "the cache changed on disk");
        }
    }

    /// Imports when the cache's content differs from what the served database holds: a file
    /// that was only touched (same content, new mtime) is not imported again.
    fn import_if_changed(self: &Arc<Self>, project: &Project, reason: &str) {
        match freshness::check(project) {
            Ok(Freshness::Fresh) => {
                tracing::debug!("the cache's content is what the served database holds");
                if !self.importing.load(Ordering::SeqCst) {
                    // Another process imported it into a new file: answer from that file.
                    if self.database_replaced() {
                        tracing::info!(
                            "the database file was replaced; answering from the new file"
                        );
                        if !self.open_current() {
                            return;
                        }
                    }
                    // A note about a failed re-import no longer applies.
                    self.set_stale(None);
                }
            }
            Ok(Freshness::Stale(why) | Freshness::Incompatible(why)) => {
                self.spawn_import(format!("{reason}: {why}"));
            }
            Ok(Freshness::Missing) => self.spawn_import(reason.to_string()),
            Err(err) => self.spawn_import(format!("{reason} (cannot compare: {err:#})")),
        }
    }

    /// Starts an import on a background thread; when one is running, another follows it.
    pub fn spawn_import(self: &Arc<Self>, reason: String) {
        // Recorded before the look, so that an import ending between the two still sees it (it
        // clears `importing`, then takes `rerun`); an import started here answers it itself.
        self.rerun.store(true, Ordering::SeqCst);
        if self.importing.swap(true, Ordering::SeqCst) {
            tracing::info!("{reason}; importing again when the running import ends");
            return;
        }
        self.rerun.store(false, Ordering::SeqCst);
        let project = self.project();
        let Some(cache) = project.cache.clone() else {
            self.importing.store(false, Ordering::SeqCst);
            return;
        };
        let progress = Arc::new(Progress::default());
        let total = std::fs::metadata(&cache).map(|m| m.len()).unwrap_or(0);
        let serving = self.serving();
        if serving {
            self.set_stale(Some(format!(
                "The index is stale: {reason}; it is being re-imported and this answer comes from the previous import."
            )));
        } else {
            *self.phase.lock().unwrap_or_else(PoisonError::into_inner) = Phase::FirstBuild {
                progress: progress.clone(),
                total,
                started: Instant::now(),
            };
        }
        let state = Arc::clone(self);
        tracing::info!(
            "background import started ({reason}): reading {} ({:.1} MB)",
            cache.display(),
            total as f64 / 1e6
        );
        let started = Instant::now();
        let spawned = std::thread::Builder::new().name("acpdb-import".into()).spawn(move || {
            // A delta written into the served database empties the pools' page caches as soon
            // as it changes it, not at the next calls: from a thread started before this one
            // yields, so that it keeps the priority and the cores of the calls.
            let warmer = state.pool().ok().and_then(|pool| {
                CacheWarmer::start(&state.db_path(), [pool.light.clone(), pool.heavy.clone()])
            });
            let confined = if serving { yield_to_tool_calls() } else { None };
            // A panic fails the import like an error: `importing` is cleared whatever happens.
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                import::import_with_progress(&project, &ImportArgs::default(), progress)
            }))
            .unwrap_or_else(|_| Err(anyhow::anyhow!("the import stopped on an internal error")));
            drop(warmer);
            // The pools opened next, and their threads, get every core.
            drop(confined);
            match result {
                Ok(summary) => {
                    tracing::info!("background import finished: {}", summary.line());
                    // The note goes as the new database starts answering.
                    if !state.open_current() {
                        state.set_stale(Some(format!(
                            "The index is stale: the cache was re-imported into {} but the new database cannot be opened (see the server's log); this answer comes from the previous import.",
                            project.db.display()
                        )));
                    }
                }
                Err(err) => {
                    let message = format!("{err:#}");
                    tracing::error!(
                        "background import failed after {:.2} s: {message}",
                        started.elapsed().as_secs_f64()
                    );
                    if state.serving() {
                        state.set_stale(Some(format!(
                            "The index is stale: the cache changed but re-importing it failed: {message}. This answer comes from the previous import; fix the cache (or run 'acp index' again), and acpdb imports it when it changes."
                        )));
                    } else {
                        *state.phase.lock().unwrap_or_else(PoisonError::into_inner) = Phase::FirstBuildFailed(message);
                    }
                }
            }
            state.importing.store(false, Ordering::SeqCst);
            if state.rerun.swap(false, Ordering::SeqCst) {
                let project = state.project();
                state.import_if_changed(&project, "the cache changed during the import");
            }
        });
        if let Err(err) = spawned {
            tracing::error!("cannot start the import thread: {err}");
            self.importing.store(false, Ordering::SeqCst);
        }
    }

    /// The database path being served.
    pub fn db_path(&self) -> PathBuf {
        self.project
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .db
            .clone()
    }
}

/// A database's identity: the device, inode, size and modification time of its file, and the
/// size and modification time of its `-wal` file, which a delta written in place changes
/// before the database file itself (at the checkpoint).
type FileId = (u64, u64, u64, Option<std::time::SystemTime>, Option<WalId>);

/// The device and inode of a file: the same file whatever was written into it.
fn inode(id: &FileId) -> (u64, u64) {
    (id.0, id.1)
}

/// The size and modification time of a `-wal` file.
type WalId = (u64, Option<std::time::SystemTime>);

fn file_id(path: &std::path::Path) -> Option<FileId> {
    let meta = std::fs::metadata(path).ok()?;
    #[cfg(unix)]
    let (dev, ino) = {
        use std::os::unix::fs::MetadataExt;
        (meta.dev(), meta.ino())
    };
    #[cfg(not(unix))]
    let (dev, ino) = (0, 0);
    let wal = std::fs::metadata(crate::sqlite_locks::companion(path, "-wal"))
        .ok()
        .map(|wal| (wal.len(), wal.modified().ok()));
    Some((dev, ino, meta.len(), meta.modified().ok(), wal))
}

fn signature(project: &Project) -> Signature {
    (
        project
            .cache
            .as_deref()
            .and_then(freshness::quick_signature),
        project.vars.as_deref().and_then(freshness::quick_signature),
        freshness::quick_signature(&project.config),
    )
}

/// Lowers the calling thread's scheduling priority to [`crate::priority::REIMPORT`] nice levels
/// below the server's, so that a re-import running while the previous database answers leaves
/// the cores to tool calls first, heavy ones included, and confines it to half the cores
/// ([`crate::priority::Confined`]) until the returned value is dropped, so that the others'
/// caches and memory stay the tool calls'. The threads an import starts (the reader, the file's
/// hasher, the digests' reader, the full-text builder) inherit both; the full-text builder's own
/// lowering, measured from the process too, leaves it there.
fn yield_to_tool_calls() -> Option<crate::priority::Confined> {
    if let Err(err) = crate::priority::lower_this_thread(crate::priority::REIMPORT) {
        tracing::debug!("cannot lower the import's priority: {err}");
    }
    crate::priority::Confined::to_half_the_cores()
        .map_err(|err| tracing::debug!("cannot confine the import to half the cores: {err}"))
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::thread::ThreadId;
    use std::time::Duration;

    /// Tells which thread drops it, then waits (at most 10 s) to be let go.
    struct SlowToDrop {
        dropped_on: mpsc::Sender<ThreadId>,
        released: Mutex<mpsc::Receiver<()>>,
    }

    impl Drop for SlowToDrop {
        fn drop(&mut self) {
            let _ = self.dropped_on.send(std::thread::current().id());
            let released = self.released.lock().unwrap_or_else(PoisonError::into_inner);
            let _ = released.recv_timeout(Duration::from_secs(10));
        }
    }

    /// The demo project in `dir`, imported, served read-only.
    fn serve_demo(dir: &std::path::Path) -> (Project, Arc<IndexState>) {
        std::fs::create_dir(dir.join(".acp")).unwrap();
        std::fs::copy(
            concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/fixtures/demo/.acp/acp.cache.json"
            ),
            dir.join(".acp/acp.cache.json"),
        )
        .unwrap();
        let project = Project::from_args(&crate::project::ProjectArgs {
            project: dir.to_path_buf(),
            cache: None,
            db: None,
        })
        .unwrap();
        import::import(&project, &ImportArgs::default()).unwrap();
        let options = Options {
            pool_size: 2,
            read_only: true,
        };
        (project.clone(), IndexState::start(project, options))
    }

    fn imported_at(pool: &ServedPool) -> String {
        let conn = pool.light.get().unwrap();
        conn.query_row(
            "SELECT value FROM meta WHERE key = 'imported_at'",
            [],
            |r| r.get(0),
        )
        .unwrap()
    }

    #[test]
    fn answers_keep_the_staleness_note_of_the_pool_they_were_read_from() {
        let dir = tempfile::tempdir().unwrap();
        let (project, state) = serve_demo(dir.path());
        assert_eq!(state.pool_and_note().unwrap().1, None);

        let note = "answers come from the previous import";
        state.set_stale(Some(note.into()));
        let (previous, previous_note) = state.pool_and_note().unwrap();
        // Another database renamed over the served one is served from new pools. A call that
        // took the previous pool before the swap still sends the note with its answer, and one
        // that takes the new pool sends none.
        rename_another_import_over(&project);
        assert!(state.open_current());
        let (current, current_note) = state.pool_and_note().unwrap();
        assert!(!Arc::ptr_eq(&previous, &current));
        assert_eq!(previous_note.as_deref(), Some(note));
        assert_eq!(current_note, None);
        assert_eq!(state.stale_note(), None);
        assert_ne!(imported_at(&previous), imported_at(&current));
    }

    #[test]
    fn a_delta_written_in_place_is_served_from_the_same_pools() {
        let dir = tempfile::tempdir().unwrap();
        let (project, state) = serve_demo(dir.path());
        let (served, _) = state.pool_and_note().unwrap();
        let before = imported_at(&served);
        let generation = state.answer_generation();

        edit_and_import(&project, "Edited since the last import.");

        state.poll_database();
        let (current, note) = state.pool_and_note().unwrap();
        assert!(Arc::ptr_eq(&served, &current), "the served pools are kept");
        assert_eq!(note, None);
        assert_ne!(imported_at(&current), before, "and read the new import");
        assert_ne!(state.answer_generation(), generation);
        // The pools now expect connections on the new import.
        let import = db::import_identity(&current.light.get().unwrap()).unwrap();
        assert!(current.import.is(&import));

        // A full import of a served database is copied into its pages: the same file, read by
        // the same pools.
        let full = ImportArgs {
            full: true,
            ..ImportArgs::default()
        };
        std::thread::sleep(Duration::from_millis(5));
        let delta_import = imported_at(&current);
        import::import(&project, &full).unwrap();
        state.poll_database();
        let (current, _) = state.pool_and_note().unwrap();
        assert!(Arc::ptr_eq(&served, &current));
        assert_ne!(imported_at(&current), delta_import);

        // Another file renamed over it: new pools.
        rename_another_import_over(&project);
        state.poll_database();
        assert!(!Arc::ptr_eq(&served, &state.pool().unwrap()));
    }

    /// Bytes of page cache `conn` holds, as SQLite counts them: reading the count starts no
    /// transaction, so it never empties the cache itself.
    fn cached_bytes(conn: &rusqlite::Connection) -> i32 {
        let (mut current, mut highest) = (0, 0);
        // SAFETY: the handle stays open while `conn` is borrowed; the outputs are ours.
        let status = unsafe {
            rusqlite::ffi::sqlite3_db_status(
                conn.handle(),
                rusqlite::ffi::SQLITE_DBSTATUS_CACHE_USED,
                &mut current,
                &mut highest,
                0,
            )
        };
        assert_eq!(status, rusqlite::ffi::SQLITE_OK);
        current
    }

    /// The bytes cached by the connection `pool` hands out next, after it read every table.
    fn fill_next_cache(pool: &ReadPool) -> i32 {
        let conn = pool.get().unwrap();
        let tables: Vec<String> = conn
            .prepare("SELECT name FROM sqlite_schema WHERE type = 'table'")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        for table in tables {
            let read = format!("SELECT count(*) FROM (SELECT * FROM \"{table}\")");
            conn.query_row(&read, [], |r| r.get::<_, i64>(0)).unwrap();
        }
        cached_bytes(&conn)
    }

    /// Gives the cache's first symbol another summary and imports it (a delta).
    fn edit_and_import(project: &Project, summary: &str) {
        let cache_path = project.cache.clone().unwrap();
        let mut cache: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&cache_path).unwrap()).unwrap();
        let symbols = cache["symbols"].as_object_mut().unwrap();
        symbols.values_mut().next().unwrap()["summary"] = summary.into();
        std::fs::write(&cache_path, serde_json::to_vec(&cache).unwrap()).unwrap();
        std::thread::sleep(Duration::from_millis(5));
        let imported = import::import(project, &ImportArgs::default()).unwrap();
        assert!(imported.delta.is_some(), "a delta: {}", imported.line());
    }

    #[test]
    fn a_delta_watched_by_a_warmer_empties_the_next_connections_page_caches() {
        let dir = tempfile::tempdir().unwrap();
        let (project, state) = serve_demo(dir.path());
        let served = state.pool().unwrap();
        let next_cached = |pool: &ReadPool| cached_bytes(&pool.get().unwrap());

        // Unwatched, a connection keeps its pages until its next read, which empties them.
        let full = fill_next_cache(&served.light);
        edit_and_import(&project, "Edited unwatched.");
        assert_eq!(next_cached(&served.light), full);

        let filled = [
            fill_next_cache(&served.light),
            fill_next_cache(&served.heavy),
        ];
        let pools = [served.light.clone(), served.heavy.clone()];
        let warmer = CacheWarmer::start(&project.db, pools).unwrap();
        edit_and_import(&project, "Edited while watched.");
        // Stopping takes a last look: every change is handled by then.
        drop(warmer);
        for (pool, filled) in [&served.light, &served.heavy].into_iter().zip(filled) {
            let now = next_cached(pool);
            assert!(now < filled / 2, "{now} of {filled} bytes still cached");
        }
    }

    /// Imports the project's cache fully into a database of another directory and renames it
    /// over the project's database, as a read-only server's database is published.
    fn rename_another_import_over(project: &Project) {
        let elsewhere = tempfile::tempdir().unwrap();
        std::fs::create_dir(elsewhere.path().join(".acp")).unwrap();
        std::fs::copy(
            project.cache.as_ref().unwrap(),
            elsewhere.path().join(".acp/acp.cache.json"),
        )
        .unwrap();
        let other = Project::from_args(&crate::project::ProjectArgs {
            project: elsewhere.path().to_path_buf(),
            cache: None,
            db: None,
        })
        .unwrap();
        std::thread::sleep(Duration::from_millis(5));
        import::import(&other, &ImportArgs::default()).unwrap();
        std::fs::rename(&other.db, &project.db).unwrap();
    }

    #[test]
    fn a_pool_is_split_between_light_and_heavy_calls_with_one_connection_each_at_least() {
        assert_eq!(split_pool(1), (1, 1));
        assert_eq!(split_pool(2), (1, 1));
        assert_eq!(split_pool(3), (2, 1));
        assert_eq!(split_pool(4), (2, 2));
        for size in 2..64 {
            let (light, heavy) = split_pool(size);
            assert_eq!(light + heavy, size);
            assert!(light >= heavy && heavy >= 1);
        }
    }

    #[test]
    fn a_value_dropped_apart_is_dropped_on_another_thread_without_waiting() {
        let (dropped_on, dropping_thread) = mpsc::channel();
        let (release, released) = mpsc::channel();
        let value = Arc::new(DroppedApart::new(SlowToDrop {
            dropped_on,
            released: Mutex::new(released),
        }));
        let holder = Arc::clone(&value);
        drop(value);
        // The last holder lets it go: this returns before the value is released.
        drop(holder);
        release.send(()).unwrap();
        let thread = dropping_thread
            .recv_timeout(Duration::from_secs(10))
            .expect("the value was dropped");
        assert_ne!(thread, std::thread::current().id());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_reimport_runs_below_the_heavy_queries() {
        let (process, reimport) = std::thread::spawn(|| {
            yield_to_tool_calls();
            // SAFETY: getpid and getpriority take plain integers; `who = 0` is the calling
            // thread, `who = pid` the main thread.
            unsafe {
                (
                    libc::getpriority(libc::PRIO_PROCESS, libc::getpid() as libc::id_t),
                    libc::getpriority(libc::PRIO_PROCESS, 0),
                )
            }
        })
        .join()
        .unwrap();
        assert_eq!(reimport, (process + crate::priority::REIMPORT).min(19));
        assert!(
            reimport > process + crate::priority::HEAVY_QUERIES || reimport == 19,
            "re-import at {reimport}, server at {process}"
        );
    }
}
