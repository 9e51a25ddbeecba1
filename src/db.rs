//! Opening the index database: connection settings, migrations and the read pool.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};
use serde_json::Value;

mod embedded {
    refinery::embed_migrations!("migrations/index");
}

/// How many `graph.reverse` entries acp-mcp considers for `acp_get_hotpaths`: the rows of the
/// `hot_nodes` summary table.
pub const HOTPATH_SLOTS: usize = 20;

/// Schema version of the bulk-loaded tables (before secondary indexes and FTS).
pub const LOAD_SCHEMA_VERSION: i32 = 13;

/// Schema version with the name indexes that resolving call-graph nodes reads, before the index
/// of nodes by symbol (which is built after the nodes are resolved).
pub const RESOLVE_SCHEMA_VERSION: i32 = 14;

/// `text` as SQLite's text functions (`substr`, `GLOB`) read it: up to its first NUL.
pub fn before_nul(text: &str) -> &str {
    text.split('\0').next().unwrap_or_default()
}

/// The last two characters of `text` as SQLite's `substr(text, -2)` reads them
/// ([`before_nul`]).
pub fn last_two_chars(text: &str) -> &str {
    let text = before_nul(text);
    let start = text.char_indices().rev().nth(1).map_or(0, |(i, _)| i);
    &text[start..]
}

/// What the trigram indexes of names hold besides the text, so that an ending is one trigram
/// (migration V25's views, `substr(text, -2) || char(31)`): [`last_two_chars`], then U+001F.
pub fn trigram_text_end(text: &str) -> String {
    format!("{}\u{1f}", last_two_chars(text))
}

/// Applies index migrations up to `target` (all when `None`).
pub fn migrate(conn: &mut Connection, target: Option<i32>) -> Result<()> {
    let mut runner = embedded::migrations::runner();
    if let Some(version) = target {
        runner = runner.set_target(refinery::Target::Version(version));
    }
    runner.run(conn).context("applying index migrations")?;
    Ok(())
}

/// Version of the newest index migration: the schema this build of acpdb reads.
pub fn current_schema_version() -> i64 {
    embedded::migrations::runner()
        .get_migrations()
        .iter()
        .map(|m| i64::from(m.version()))
        .max()
        .unwrap_or(0)
}

/// Version of the newest migration applied to an index database (`None` when it has none).
pub fn schema_version(conn: &Connection) -> Result<Option<i64>> {
    let exists: bool = conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE name = 'refinery_schema_history')",
        [],
        |r| r.get(0),
    )?;
    if !exists {
        return Ok(None);
    }
    Ok(conn.query_row(
        "SELECT max(version) FROM refinery_schema_history",
        [],
        |r| r.get(0),
    )?)
}

/// Opens the index database read-only for queries.
pub fn open_read_only(path: &Path) -> Result<Connection> {
    if !path.is_file() {
        anyhow::bail!(
            "no acpdb database at {}; run `acpdb import` in the project first",
            path.display()
        );
    }
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_URI,
    )
    .with_context(|| format!("opening {}", path.display()))?;
    conn.busy_timeout(Duration::from_secs(5))?;
    conn.pragma_update(None, "query_only", true)?;
    configure_query_connection(&conn)?;
    Ok(conn)
}

/// `text` lower-cased one character at a time, as the trigram tokenizer folds case: each
/// character becomes the first character of its lower case (so `Σ` is always `σ`, never the
/// final `ς`), and containment in folded texts matches the index's, except for the few
/// letters FTS5's tables leave as they are (`İ` here becomes `i`).
fn fold(text: &str) -> String {
    if text.is_ascii() {
        return text.to_ascii_lowercase();
    }
    text.chars()
        .map(|c| c.to_lowercase().next().unwrap_or(c))
        .collect()
}

/// Prepares `conn` for the queries of the tools (done by [`open_read_only`] and [`read_pool`]):
/// plans that do not depend on the values bound (SQLite's query planner stability guarantee),
/// and the SQL functions queries use.
///
/// Without the guarantee SQLite compiles a statement again whenever a value the planner looked
/// at changes: every `LIMIT ?`, `MATCH ?` or `LIKE ?` call with another value than the last
/// would pay a fresh compilation (a third of a miss's time).
///
/// The functions: `acpdb_fold(text)`, the text lower-cased over all of Unicode a character at
/// a time (`École` → `école`; NULL stays NULL), the case folding of substring search, which
/// checks the candidates of the trigram indexes with `instr(acpdb_fold(name), acpdb_fold(?))`.
pub fn configure_query_connection(conn: &Connection) -> rusqlite::Result<()> {
    use rusqlite::config::DbConfig;
    use rusqlite::functions::FunctionFlags;
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)?;
    conn.create_scalar_function(
        "acpdb_fold",
        1,
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
        |ctx| {
            Ok(match ctx.get_raw(0) {
                ValueRef::Text(text) => Some(fold(&String::from_utf8_lossy(text))),
                _ => None,
            })
        },
    )
}

/// Prepared statements a read connection keeps: more than the distinct statements of every tool
/// together, so that a mix of calls never prepares a statement twice (a search statement takes
/// about a millisecond to prepare).
const STATEMENT_CACHE: usize = 128;

/// A pool of read-only connections for concurrent tool calls.
pub type ReadPool = r2d2::Pool<r2d2_sqlite::SqliteConnectionManager>;

/// The import (its identity, `import_identity`) every connection of a set of read pools must be on,
/// shared by their connection managers.
#[derive(Clone)]
pub struct PoolImport(Arc<RwLock<String>>);

impl PoolImport {
    /// Moves the pools to `import`, the identity their file holds now: after a delta written
    /// into that file, their connections read the new import from their next transaction on,
    /// and a connection opened later must be on it too.
    pub fn follow(&self, import: String) {
        *self.0.write().unwrap_or_else(PoisonError::into_inner) = import;
    }

    /// Whether `import` is the identity the pools' connections must have.
    pub fn is(&self, import: &str) -> bool {
        *self.0.read().unwrap_or_else(PoisonError::into_inner) == import
    }
}

/// Builds a read-only connection pool over the index database.
///
/// The index database is in WAL mode: a read transaction takes a read mark in the `-shm` file
/// and keeps the snapshot it started with while a delta writes the file in place; a connection
/// keeps its page cache between transactions as long as nothing was written.
///
/// Every connection is opened when the pool is built and kept (none is closed when idle or
/// old), and each must be on the same import as the first one (the same cursor secret): a
/// connection opened by path after the file was replaced would otherwise answer from another
/// database than its pool's.
pub fn read_pool(path: &Path, size: u32) -> Result<ReadPool> {
    let ([pool], _) = read_pools(path, [size])?;
    Ok(pool)
}

/// Like [`read_pool`], one pool per size, every connection of every pool on the same import,
/// which the returned handle moves on after a delta written into the file.
pub fn read_pools<const N: usize>(
    path: &Path,
    sizes: [u32; N],
) -> Result<([ReadPool; N], PoolImport)> {
    if !path.is_file() {
        anyhow::bail!(
            "no acpdb database at {}; run `acpdb import` in the project first",
            path.display()
        );
    }
    // The pools hold locks on the file and its `-shm` for as long as they are open.
    crate::sqlite_locks::register(path);
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let expected = Connection::open_with_flags(path, flags)
        .and_then(|c| import_identity(&c))
        .with_context(|| format!("{} is not an acpdb index", path.display()))?;
    let expected = PoolImport(Arc::new(RwLock::new(expected)));
    let manager = || {
        let expected = expected.clone();
        r2d2_sqlite::SqliteConnectionManager::file(path)
            .with_flags(flags)
            .with_init(move |c| {
                if !expected.is(&import_identity(c)?) {
                    return Err(rusqlite::Error::SqliteFailure(
                        rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CANTOPEN),
                        Some("the database file was replaced while its pool was opened".into()),
                    ));
                }
                c.busy_timeout(Duration::from_secs(5))?;
                c.pragma_update(None, "query_only", true)?;
                c.pragma_update(None, "cache_size", -16_000)?;
                c.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
                c.pragma_update(None, "mmap_size", 0)?;
                configure_query_connection(c)
            })
    };
    let pools = sizes
        .iter()
        .map(|&size| {
            r2d2::Pool::builder()
                .max_size(size)
                .min_idle(Some(size))
                .idle_timeout(None)
                .max_lifetime(None)
                .build(manager())
                .with_context(|| format!("opening {}", path.display()))
        })
        .collect::<Result<Vec<_>>>()?;
    let pools = pools
        .try_into()
        .unwrap_or_else(|_| unreachable!("one pool per size"));
    Ok((pools, expected))
}

/// Runs `read` in one read transaction of `conn`, so that every statement of one answer reads
/// the same snapshot of the index (a delta committing meanwhile is seen whole or not at all) and
/// the file's locks are taken once per answer instead of once per statement (a quarter of a
/// short call's time). Inside a transaction already, `read` simply joins it.
pub fn in_snapshot<T, E: From<rusqlite::Error>>(
    conn: &Connection,
    read: impl FnOnce(&Connection) -> std::result::Result<T, E>,
) -> std::result::Result<T, E> {
    if !conn.is_autocommit() {
        return read(conn);
    }
    conn.prepare_cached("BEGIN")?.execute([])?;
    let _end = SnapshotEnd(conn);
    read(conn)
}

/// Ends the read transaction of [`in_snapshot`] when dropped, also when the reading failed or
/// panicked, so that a pooled connection never keeps an old snapshot for the next caller.
struct SnapshotEnd<'c>(&'c Connection);

impl Drop for SnapshotEnd<'_> {
    fn drop(&mut self) {
        // Nothing was written: ending the transaction only releases the snapshot and its locks,
        // and ROLLBACK ends it whatever state an interrupted statement left.
        if !self.0.is_autocommit() {
            let end = self.0.prepare_cached("ROLLBACK");
            if end.and_then(|mut end| end.execute([])).is_err() {
                let _ = self.0.execute_batch("ROLLBACK");
            }
        }
    }
}

/// How often (in SQLite virtual machine steps) a [`TimeLimit`] checks the clock.
const TIME_LIMIT_STEPS: i32 = 1000;

/// A time limit on one connection's statements: a progress handler interrupts any statement
/// running past the deadline (a statement started after it is interrupted at its first check).
/// Removed when dropped, so pooled connections can carry one per call.
pub struct TimeLimit<'c> {
    conn: &'c Connection,
    expired: Arc<AtomicBool>,
}

impl<'c> TimeLimit<'c> {
    /// Installs a limit of `limit` from now on `conn`.
    pub fn install(conn: &'c Connection, limit: Duration) -> Result<TimeLimit<'c>> {
        let expired = Arc::new(AtomicBool::new(false));
        if let Some(deadline) = Instant::now().checked_add(limit) {
            let flag = Arc::clone(&expired);
            conn.progress_handler(
                TIME_LIMIT_STEPS,
                Some(move || {
                    let over = Instant::now() >= deadline;
                    if over {
                        flag.store(true, Ordering::Relaxed);
                    }
                    over
                }),
            )
            .context("installing the query time limit")?;
        }
        Ok(TimeLimit { conn, expired })
    }

    /// Whether a statement was interrupted because the limit passed.
    pub fn expired(&self) -> bool {
        self.expired.load(Ordering::Relaxed)
    }
}

impl Drop for TimeLimit<'_> {
    fn drop(&mut self) {
        // Removing the handler of a connection that accepted one cannot fail.
        let _ = self.conn.progress_handler(0, None::<fn() -> bool>);
    }
}

/// The `meta` key of the secret that authenticates pagination cursors: drawn at each import,
/// so cursors end with the import that issued them.
pub const CURSOR_SECRET_KEY: &str = "cursor_secret";

/// `meta` key of the project directory an index was imported in (absolute): a path a user gives
/// under it is taken relative to it, as one under the cache's `project.root` is.
pub const PROJECT_DIR_KEY: &str = "project_dir";

/// `meta` key saying whether the project's source files were on disk when the index was
/// imported (`present` or `absent`): an index served without its sources (generated, or
/// imported elsewhere) never calls its files deleted.
pub const SOURCE_TREE_KEY: &str = "source_tree";

/// `meta` key holding how many indexed files the import's `source_baseline` describes: what a
/// sweep of every file for changes on disk counts to ([`crate::query::staleness`]).
pub const SOURCE_BASELINE_FILES_KEY: &str = "source_baseline_files";

/// What tells one import's database from another's: its cursor secret, drawn at each import
/// (full or delta).
pub(crate) fn import_identity(conn: &Connection) -> rusqlite::Result<String> {
    conn.prepare_cached("SELECT value FROM meta WHERE key = ?1")?
        .query_row([CURSOR_SECRET_KEY], |r| r.get(0))
}

/// A new random secret for a database's cursors, hex, from SQLite's randomness.
pub fn new_secret(conn: &Connection) -> rusqlite::Result<String> {
    conn.query_row("SELECT lower(hex(randomblob(32)))", [], |r| r.get(0))
}

/// Encodes a `graph_lists.items` blob: each `graph_nodes` id as a LEB128 varint, in order.
pub fn encode_graph_items(ids: &[u32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(ids.len() * 3);
    encode_graph_items_into(ids, &mut out);
    out
}

/// [`encode_graph_items`] into `out` (cleared first), so that a buffer can serve many lists.
pub fn encode_graph_items_into(ids: &[u32], out: &mut Vec<u8>) {
    out.clear();
    for &id in ids {
        let mut rest = id;
        while rest >= 0x80 {
            out.push((rest as u8 & 0x7f) | 0x80);
            rest >>= 7;
        }
        out.push(rest as u8);
    }
}

/// Decodes a `graph_lists.items` blob (`None` when it is malformed).
pub fn decode_graph_items(blob: &[u8]) -> Option<Vec<u32>> {
    let mut ids = Vec::with_capacity(blob.len());
    let mut id = 0u32;
    let mut shift = 0u32;
    for &byte in blob {
        if shift == 28 && byte & 0x70 != 0 {
            return None;
        }
        id |= u32::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            ids.push(id);
            id = 0;
            shift = 0;
        } else {
            shift += 7;
            if shift > 28 {
                return None;
            }
        }
    }
    (shift == 0).then_some(ids)
}

/// Items `skip..skip + take` of the `graph.forward` (or, with `reverse`, `graph.reverse`) list
/// stored under `name`, as the cache wrote them, and the list's length: only the names of those
/// items are looked up, so a page of a hub's list costs a page. `None` when the cache has no
/// such list; one that is not a list has no items.
pub fn graph_list_page(
    conn: &Connection,
    reverse: bool,
    name: &str,
    skip: usize,
    take: usize,
) -> rusqlite::Result<Option<(Vec<Value>, usize)>> {
    let mut stmt = conn.prepare_cached(
        "SELECT l.items FROM graph_nodes n JOIN graph_lists l ON l.node_id = n.id AND l.reverse = ?1
         WHERE n.name = ?2",
    )?;
    let mut rows = stmt.query(rusqlite::params![reverse, name])?;
    let Some(row) = rows.next()? else {
        return Ok(None);
    };
    let items = row.get_ref(0)?;
    if let ValueRef::Blob(blob) = items {
        let ids = decode_graph_items(blob).ok_or_else(|| malformed_items(items))?;
        let page = node_names(conn, ids.iter().copied().skip(skip).take(take))?;
        return Ok(Some((page, ids.len())));
    }
    Ok(Some(match graph_list_value(conn, items)? {
        Value::Array(all) => {
            let len = all.len();
            (all.into_iter().skip(skip).take(take).collect(), len)
        }
        _ => (Vec::new(), 0),
    }))
}

/// The error for a `graph_lists.items` cell that cannot be read.
fn malformed_items(items: ValueRef<'_>) -> rusqlite::Error {
    let why = match items {
        ValueRef::Blob(_) => "malformed graph_lists.items blob",
        _ => "graph_lists.items is neither a blob nor text",
    };
    rusqlite::Error::FromSqlConversionFailure(0, items.data_type(), why.into())
}

/// The names of the call-graph nodes `ids`, in their order.
fn node_names(conn: &Connection, ids: impl Iterator<Item = u32>) -> rusqlite::Result<Vec<Value>> {
    let mut name = conn.prepare_cached("SELECT name FROM graph_nodes WHERE id = ?1")?;
    ids.map(|id| name.query_row([id], |r| r.get::<_, String>(0).map(Value::String)))
        .collect()
}

/// The JSON value of a `graph_lists.items` cell: the list of names a blob encodes, or the text
/// as JSON.
pub fn graph_list_value(conn: &Connection, items: ValueRef<'_>) -> rusqlite::Result<Value> {
    match items {
        ValueRef::Blob(blob) => {
            let ids = decode_graph_items(blob).ok_or_else(|| malformed_items(items))?;
            Ok(Value::Array(node_names(conn, ids.into_iter())?))
        }
        ValueRef::Text(text) => serde_json::from_slice(text)
            .map_err(|e| rusqlite::Error::FromSqlConversionFailure(0, items.data_type(), e.into())),
        _ => Err(malformed_items(items)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_ends_with_its_answer_whatever_the_answer() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1)")
            .unwrap();
        let count = |c: &Connection| c.query_row("SELECT count(*) FROM t", [], |r| r.get(0));
        let nested: rusqlite::Result<i64> = in_snapshot(&conn, |c| {
            assert!(!c.is_autocommit());
            in_snapshot(c, count)
        });
        assert_eq!(nested.unwrap(), 1);
        assert!(conn.is_autocommit());
        let failed: rusqlite::Result<i64> = in_snapshot(&conn, |c| {
            c.query_row("SELECT * FROM missing", [], |r| r.get(0))
        });
        assert!(failed.is_err());
        assert!(conn.is_autocommit());
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _: rusqlite::Result<()> = in_snapshot(&conn, |_| panic!("a failing answer"));
        }));
        assert!(panicked.is_err());
        assert!(
            conn.is_autocommit(),
            "a pooled connection kept its snapshot"
        );
    }

    #[test]
    fn statements_are_compiled_once_whatever_values_are_bound() {
        use rusqlite::StatementStatus;
        let conn = Connection::open_in_memory().unwrap();
        configure_query_connection(&conn).unwrap();
        conn.execute_batch("CREATE TABLE t (x); CREATE INDEX t_x ON t (x);")
            .unwrap();
        let mut stmt = conn
            .prepare("SELECT x FROM t WHERE x > ?1 LIMIT ?2")
            .unwrap();
        for limit in 1..10 {
            stmt.query_map([limit, limit], |r| r.get::<_, i64>(0))
                .unwrap()
                .for_each(drop);
        }
        assert_eq!(stmt.get_status(StatementStatus::RePrepare), 0);
    }

    #[test]
    fn folding_keeps_one_character_per_character() {
        assert_eq!(fold("École"), "école");
        assert_eq!(fold("ΟΔΟΣ"), "οδοσ");
        assert_eq!(fold("makeΟΔΟΣΑ"), "makeοδοσα");
        assert_eq!(fold("İstanbul"), "istanbul");
        assert_eq!(fold("src/a.ts:x"), "src/a.ts:x");
    }

    /// The bundled SQLite is built with .cargo/config.toml's flags: a page cache per connection
    /// and no memory statistics, so read-pool queries share no mutex.
    #[test]
    fn sqlite_is_built_for_concurrent_readers() {
        let conn = Connection::open_in_memory().unwrap();
        let options: Vec<String> = conn
            .prepare("PRAGMA compile_options")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        assert!(
            options.iter().any(|o| o == "DEFAULT_MEMSTATUS=0"),
            "{options:?}"
        );
        assert!(
            !options.iter().any(|o| o == "ENABLE_MEMORY_MANAGEMENT"),
            "{options:?}"
        );
    }

    #[test]
    fn graph_items_round_trip() {
        let ids = [1, 127, 128, 300, 16_384, u32::MAX, 1, 1];
        let blob = encode_graph_items(&ids);
        assert_eq!(decode_graph_items(&blob).unwrap(), ids);
        assert_eq!(decode_graph_items(&[]).unwrap(), Vec::<u32>::new());
        assert!(decode_graph_items(&[0x80]).is_none());
        assert!(decode_graph_items(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x01]).is_none());
    }
}
