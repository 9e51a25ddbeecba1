//! The read-only SQL console behind `acpdb sql "SELECT …"`.
//!
//! [`execute`] runs one statement against a connection and writes the result as an aligned
//! table, JSON or CSV. Three guards keep it read-only and bounded, whatever connection it gets:
//!
//! * an authorizer allows only reading (`SELECT`, table reads, functions, recursive CTEs, the
//!   inspection pragmas and reading settings) and refuses everything else, naming the refused
//!   operation: while the statement is prepared, and while it runs for the statements SQLite
//!   runs internally on its behalf (then naming the user's statement too);
//! * a prepared statement that SQLite still reports as writing (`VACUUM`, which has no
//!   authorizer action) is refused before it runs;
//! * a progress handler interrupts the statement once the time limit has passed
//!   ([`db::TimeLimit`]), and no expression may build a value over [`MAX_VALUE_BYTES`]; a
//!   result may hold at most [`MAX_RESULT_BYTES`] of values. [`run`] also caps SQLite's memory
//!   at [`MAX_HEAP_BYTES`] and ends the process when a query is still running
//!   [`STOP_AFTER_LIMIT`] past its time limit: a single `LIKE` or `GLOB` call over a long text
//!   can run for hours without giving the progress handler a turn.
//!
//! Output stops after the row cap; the caller decides how to report the truncation
//! ([`run`] prints a note on stderr). The SQL text must hold exactly one statement: a string
//! with several is refused before anything runs, so a script never half-executes.

use std::io::{self, Write};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use rusqlite::fallible_iterator::FallibleIterator;
use rusqlite::hooks::{AuthContext, Authorization};
use rusqlite::limits::Limit;
use rusqlite::types::{Value, ValueRef};
use rusqlite::{Batch, Connection};

use crate::db;
use crate::project::Project;

mod authorizer;
mod output;

use authorizer::refusal;
pub use authorizer::{authorize, Verdict};
use output::{clip, write_csv, write_json, write_table, ResultSet};
pub use output::{OutputFormat, TABLE_CELL_WIDTH};

/// Largest string or blob one expression may build (SQLite's `SQLITE_LIMIT_LENGTH`), so a
/// single function call such as `randomblob(1e9)` can neither run long nor take gigabytes.
pub const MAX_VALUE_BYTES: i32 = 64 << 20;

/// Most memory SQLite may hold in the `acpdb sql` process; a query needing more fails with
/// "out of memory" instead of growing without bound.
pub const MAX_HEAP_BYTES: i64 = 1 << 30;

/// Most memory a result's rows may take (they are kept until they are written: the values, the
/// texts and blobs they hold, the rows' vectors and the list of rows); a query whose rows pass
/// it fails, naming how far it got, instead of growing without bound.
pub const MAX_RESULT_BYTES: usize = 256 << 20;

/// How long `acpdb sql` lets a query run past its time limit before it ends the process: one
/// SQLite call (a `LIKE` or `GLOB` over a long text, say) runs to its end before the progress
/// handler can interrupt it, and some take hours.
pub const STOP_AFTER_LIMIT: Duration = Duration::from_secs(2);

/// Arguments of `acpdb sql`.
#[derive(Debug, clap::Args)]
pub struct SqlArgs {
    /// The SQL statement to run (exactly one; reading only).
    pub sql: String,
    /// Print a JSON object {"columns", "rows", "truncated", "row_count"} instead of a table.
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print CSV (RFC 4180) with a header row instead of a table.
    #[arg(long)]
    pub csv: bool,
    /// Interrupt the query after this many seconds (0 for no limit).
    #[arg(long, value_name = "SECONDS", default_value_t = 5.0)]
    pub timeout: f64,
    /// Print at most this many rows (0 for no limit).
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub max_rows: usize,
}

impl SqlArgs {
    /// The query options these arguments select.
    pub fn options(&self) -> Result<QueryOptions> {
        let format = if self.json {
            OutputFormat::Json
        } else if self.csv {
            OutputFormat::Csv
        } else {
            OutputFormat::Table
        };
        let timeout = Duration::try_from_secs_f64(self.timeout)
            .ok()
            .with_context(|| {
                format!(
                    "--timeout must be a number of seconds (0 for no limit), got {}",
                    self.timeout
                )
            })?;
        Ok(QueryOptions {
            format,
            // Only 0 means no limit: a positive time too small to count is the shortest one.
            timeout: (self.timeout != 0.0).then(|| timeout.max(Duration::from_nanos(1))),
            max_rows: self.max_rows,
        })
    }
}

/// What to run a query with.
#[derive(Debug, Clone, Copy)]
pub struct QueryOptions {
    /// The output format.
    pub format: OutputFormat,
    /// Interrupt the query after this long (`None`: no limit).
    pub timeout: Option<Duration>,
    /// Stop after this many rows (0: no limit).
    pub max_rows: usize,
}

/// The outcome of a query that ran to completion or to the row cap.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QueryReport {
    /// Rows written.
    pub rows: usize,
    /// Whether the row cap stopped the output before the last row.
    pub truncated: bool,
    /// Time spent running the query (not counting writing the output).
    pub elapsed: Duration,
}

/// Runs `acpdb sql`: queries the project's database read-only and prints the result on stdout;
/// on stderr, a warning when the database is older than the cache and a note when the row cap
/// truncated the result.
pub fn run(project: &Project, args: &SqlArgs) -> Result<()> {
    let options = args.options()?;
    // SAFETY: process-wide SQLite settings, made before this process opens any connection (the
    // freshness check below is the first): memory statistics on, which acpdb's SQLite build
    // leaves off (.cargo/config.toml) and without which the heap limit is not enforced; then
    // the limit itself. This process runs only this query.
    let configured = unsafe {
        rusqlite::ffi::sqlite3_config(rusqlite::ffi::SQLITE_CONFIG_MEMSTATUS, 1 as std::ffi::c_int)
    };
    anyhow::ensure!(
        configured == rusqlite::ffi::SQLITE_OK,
        "cannot enable SQLite's memory statistics (code {configured}), without which the heap limit does not hold"
    );
    // SAFETY: as above.
    unsafe {
        rusqlite::ffi::sqlite3_hard_heap_limit64(MAX_HEAP_BYTES);
    }
    crate::freshness::warn_if_outdated(project);
    let conn = db::open_read_only(&project.db)?;
    let watchdog = options
        .timeout
        .map(|limit| Watchdog::arm(limit + STOP_AFTER_LIMIT, limit));
    let (result, elapsed) = fetch(&conn, &args.sql, &options)?;
    drop(watchdog);
    let mut out = io::BufWriter::new(io::stdout().lock());
    let report = write_result(&result, options.format, elapsed, &mut out)?;
    out.flush().context("writing the query result")?;
    if report.truncated {
        eprintln!("{}", truncation_note(report.rows));
    }
    Ok(())
}

/// The stderr note for output cut at `rows` rows.
pub fn truncation_note(rows: usize) -> String {
    format!(
        "note: output truncated at {rows} rows; raise the limit with --max-rows N (0 for no limit)"
    )
}

/// Runs one read-only statement on `conn` and writes its result to `out`.
///
/// The authorizer and progress handler are installed for the duration of the call and removed
/// afterwards, so a pooled connection can be passed in. Errors: empty SQL, more than one
/// statement, a refused (writing) statement, a timeout, or SQLite's own message.
pub fn execute(
    conn: &Connection,
    sql: &str,
    options: &QueryOptions,
    out: &mut dyn Write,
) -> Result<QueryReport> {
    let (result, elapsed) = fetch(conn, sql, options)?;
    write_result(&result, options.format, elapsed, out)
}

/// Runs one read-only statement on `conn` under [`Guard`] and collects its rows, with the time
/// that took.
fn fetch(conn: &Connection, sql: &str, options: &QueryOptions) -> Result<(ResultSet, Duration)> {
    let start = Instant::now();
    let guard = Guard::install(conn, options.timeout)?;
    let result = guard.fetch(sql, options.max_rows)?;
    Ok((result, start.elapsed()))
}

/// Writes `result` in `format`, reporting it as fetched in `elapsed`.
fn write_result(
    result: &ResultSet,
    format: OutputFormat,
    elapsed: Duration,
    out: &mut dyn Write,
) -> Result<QueryReport> {
    match format {
        OutputFormat::Table => write_table(out, result),
        OutputFormat::Json => write_json(out, result),
        OutputFormat::Csv => write_csv(out, result),
    }
    .context("writing the query result")?;
    Ok(QueryReport {
        rows: result.rows.len(),
        truncated: result.truncated,
        elapsed,
    })
}

/// Ends the process if a query is still running when it fires: the last resort of `acpdb sql`
/// against a single SQLite call that the time limit cannot interrupt. Disarmed when dropped.
struct Watchdog {
    _disarm: std::sync::mpsc::Sender<()>,
}

impl Watchdog {
    /// Fires after `after`, naming the time limit `limit` it enforces.
    fn arm(after: Duration, limit: Duration) -> Watchdog {
        let (disarm, disarmed) = std::sync::mpsc::channel::<()>();
        std::thread::spawn(move || {
            if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = disarmed.recv_timeout(after) {
                eprintln!(
                    "error: query stopped: still running {} s past its time limit of {} s, in \
                     one SQLite call that cannot be interrupted (a LIKE or GLOB over a long \
                     text, say); raise the limit with --timeout SECONDS (0 for no limit)",
                    STOP_AFTER_LIMIT.as_secs_f64(),
                    limit.as_secs_f64()
                );
                std::process::exit(1);
            }
        });
        Watchdog { _disarm: disarm }
    }
}

/// The authorizer and progress handler of one [`execute`] call; removed on drop.
struct Guard<'c> {
    conn: &'c Connection,
    timeout: Option<Duration>,
    /// The operations the authorizer refused, in the order SQLite asked.
    refused: Arc<Mutex<Vec<Refused>>>,
    /// The user's statement once it is prepared and running: operations SQLite asks about from
    /// then on belong to statements it runs internally on the user's behalf.
    running: Arc<Mutex<Option<String>>>,
    /// The time limit, while installed.
    limit: Option<db::TimeLimit<'c>>,
    /// `SQLITE_LIMIT_LENGTH` before the call, restored on drop.
    previous_length: i32,
}

impl<'c> Guard<'c> {
    fn install(conn: &'c Connection, timeout: Option<Duration>) -> Result<Self> {
        let previous_length = conn
            .set_limit(Limit::SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
            .context("limiting the size of values")?;
        let mut guard = Guard {
            conn,
            timeout,
            refused: Arc::default(),
            running: Arc::default(),
            limit: None,
            previous_length,
        };
        let refused = Arc::clone(&guard.refused);
        let running = Arc::clone(&guard.running);
        conn.authorizer(Some(move |ctx: AuthContext<'_>| {
            let (what, answer) = match authorize(&ctx.action) {
                Verdict::Allow => return Authorization::Allow,
                Verdict::Refuse(what) => (what, Authorization::Deny),
                Verdict::RefuseLater(what) => (what, Authorization::Allow),
            };
            let inside = running
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            refused
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(Refused { what, inside });
            answer
        }))
        .context("installing the read-only authorizer")?;
        if let Some(timeout) = timeout {
            guard.limit = Some(db::TimeLimit::install(conn, timeout)?);
        }
        Ok(guard)
    }

    /// What to name in a refusal: the last operation refused, which is the most specific, and
    /// the user's statement when SQLite refused an operation it ran internally for it.
    fn refused(&self) -> Option<String> {
        let refused = self.refused.lock().unwrap_or_else(PoisonError::into_inner);
        refused.last().map(|last| match &last.inside {
            None => last.what.clone(),
            Some(statement) => format!("`{statement}`, which runs {} inside SQLite,", last.what),
        })
    }

    /// Explains a SQLite error: a refusal, the time limit, or SQLite's own message.
    fn explain(&self, err: rusqlite::Error) -> anyhow::Error {
        if let Some(what) = self.refused() {
            return refusal(&what);
        }
        if self.limit.as_ref().is_some_and(db::TimeLimit::expired) {
            let seconds = self.timeout.unwrap_or_default().as_secs_f64();
            return anyhow!(
                "query interrupted after {seconds} seconds (the time limit); raise it with \
                 --timeout SECONDS (0 for no limit)"
            );
        }
        anyhow!("SQL error: {err}")
    }

    /// Prepares `sql`, checks that it is one reading statement, and collects its rows.
    fn fetch(&self, sql: &str, max_rows: usize) -> Result<ResultSet> {
        let sqlite = |err| self.explain(err);
        let mut batch = Batch::new(self.conn, sql);
        let Some(mut stmt) = batch.next().map_err(sqlite)? else {
            bail!("no SQL to run: the statement is empty (or only a comment)");
        };
        let next = batch.next().map_err(sqlite)?;
        if let Some(what) = self.refused() {
            return Err(refusal(&what));
        }
        if let Some(next) = next {
            bail!(
                "acpdb sql runs a single statement, but more follows the first (`{}`); run each \
                 statement separately",
                statement_excerpt(next.expanded_sql())
            );
        }
        if !stmt.readonly() {
            let what = format!(
                "the writing statement `{}`",
                statement_excerpt(stmt.expanded_sql())
            );
            return Err(refusal(&what));
        }
        let columns: Vec<String> = stmt.column_names().into_iter().map(String::from).collect();
        let width = columns.len();
        let mut rows = Vec::new();
        let mut truncated = false;
        *self.running.lock().unwrap_or_else(PoisonError::into_inner) =
            Some(statement_excerpt(stmt.expanded_sql()));
        let mut cursor = stmt.query([]).map_err(sqlite)?;
        let mut bytes = 0usize;
        while let Some(row) = cursor.next().map_err(sqlite)? {
            if max_rows != 0 && rows.len() == max_rows {
                truncated = true;
                break;
            }
            let values = (0..width)
                .map(|i| row.get_ref(i).map(owned_value))
                .collect::<rusqlite::Result<Vec<Value>>>()
                .map_err(sqlite)?;
            bytes += row_bytes(&values);
            // The list of rows doubles when it is full: count the room it will take.
            let list =
                rows.capacity().max((rows.len() + 1) * 2) * std::mem::size_of::<Vec<Value>>();
            if bytes + list > MAX_RESULT_BYTES {
                bail!(
                    "the result passed {} MiB in memory at row {}; ask for less (fewer rows or \
                     columns, LIMIT, substr() of long values)",
                    MAX_RESULT_BYTES >> 20,
                    rows.len() + 1
                );
            }
            rows.push(values);
        }
        Ok(ResultSet {
            columns,
            rows,
            truncated,
        })
    }
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        // Removing a handler fails only for a connection that is not owned, where
        // installing it failed first.
        let _ = self
            .conn
            .authorizer(None::<fn(AuthContext<'_>) -> Authorization>);
        let _ = self
            .conn
            .set_limit(Limit::SQLITE_LIMIT_LENGTH, self.previous_length);
    }
}

/// An operation the authorizer refused.
struct Refused {
    /// The operation, as [`authorize`] names it.
    what: String,
    /// The user's statement, when SQLite asked while running it (not while preparing it).
    inside: Option<String>,
}

/// A statement's text on one line, shortened for an error message.
fn statement_excerpt(sql: Option<String>) -> String {
    let sql = sql.unwrap_or_default();
    let text = sql.split_whitespace().collect::<Vec<_>>().join(" ");
    clip(&text, 80)
}

/// Copies a value out of a row; text that is not UTF-8 is converted lossily.
/// The bytes `value` holds, as counted against [`MAX_RESULT_BYTES`].
/// The memory a kept row takes: its place in the list of rows, and the heap blocks of its values
/// and of their texts and blobs.
fn row_bytes(values: &[Value]) -> usize {
    // A heap block as the allocator hands it out: the request and an 8-byte header, in 16-byte
    // granules, 32 bytes at least.
    let block = |size: usize| (size + 8).next_multiple_of(16).max(32);
    let heap = |value: &Value| match value {
        Value::Text(text) => block(text.capacity()),
        Value::Blob(blob) => block(blob.capacity()),
        _ => 0,
    };
    std::mem::size_of::<Vec<Value>>()
        + block(std::mem::size_of_val(values))
        + values.iter().map(heap).sum::<usize>()
}

fn owned_value(value: ValueRef<'_>) -> Value {
    match value {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => Value::Integer(i),
        ValueRef::Real(r) => Value::Real(r),
        ValueRef::Text(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(b) => Value::Blob(b.to_vec()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::hooks::{AuthAction, TransactionOperation};

    fn verdict(action: AuthAction<'_>) -> Verdict {
        authorize(&action)
    }

    fn refused(what: &str) -> Verdict {
        Verdict::Refuse(what.to_owned())
    }

    fn options(format: OutputFormat, max_rows: usize) -> QueryOptions {
        QueryOptions {
            format,
            timeout: Some(Duration::from_secs(5)),
            max_rows,
        }
    }

    fn sample() -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE TABLE symbols(name TEXT, line INTEGER, score REAL, body BLOB);
             INSERT INTO symbols VALUES
               ('main', 7, 1.0, x'00ff'),
               ('a, \"b\"', 120, NULL, NULL),
               ('two\nlines', 3, 2.5, NULL);",
        )
        .unwrap();
        conn
    }

    fn output(conn: &Connection, sql: &str, options: &QueryOptions) -> (String, QueryReport) {
        let mut out = Vec::new();
        let report = execute(conn, sql, options, &mut out).unwrap();
        (String::from_utf8(out).unwrap(), report)
    }

    fn error(conn: &Connection, sql: &str) -> String {
        let mut out = Vec::new();
        let err = execute(conn, sql, &options(OutputFormat::Table, 0), &mut out).unwrap_err();
        assert!(out.is_empty(), "nothing is written for a failed query");
        format!("{err:#}")
    }

    #[test]
    fn reading_is_allowed() {
        assert_eq!(verdict(AuthAction::Select), Verdict::Allow);
        assert_eq!(verdict(AuthAction::Recursive), Verdict::Allow);
        let read = AuthAction::Read {
            table_name: "symbols",
            column_name: "name",
        };
        assert_eq!(verdict(read), Verdict::Allow);
        assert_eq!(
            verdict(AuthAction::Function {
                function_name: "count"
            }),
            Verdict::Allow
        );
    }

    #[test]
    fn inspection_pragmas_are_allowed_with_arguments_settings_only_without() {
        let pragma = |pragma_name, pragma_value| AuthAction::Pragma {
            pragma_name,
            pragma_value,
        };
        assert_eq!(
            verdict(pragma("table_info", Some("symbols"))),
            Verdict::Allow
        );
        assert_eq!(
            verdict(pragma("INDEX_LIST", Some("symbols"))),
            Verdict::Allow
        );
        assert_eq!(verdict(pragma("user_version", None)), Verdict::Allow);
        assert_eq!(
            verdict(pragma("user_version", Some("7"))),
            refused("PRAGMA user_version = 7")
        );
        assert_eq!(
            verdict(pragma("journal_mode", Some("DELETE"))),
            refused("PRAGMA journal_mode = DELETE")
        );
        assert_eq!(
            verdict(pragma("writable_schema", None)),
            refused("PRAGMA writable_schema")
        );
    }

    #[test]
    fn full_text_search_and_integrity_checks_run() {
        let conn = sample();
        conn.execute_batch(
            "CREATE VIRTUAL TABLE words USING fts5(name);
             INSERT INTO words VALUES ('validateSession'), ('format');",
        )
        .unwrap();
        let csv = options(OutputFormat::Csv, 0);
        let (text, _) = output(
            &conn,
            "SELECT name FROM words WHERE words MATCH 'validate*'",
            &csv,
        );
        assert_eq!(text, "name\r\nvalidateSession\r\n");
        for check in ["integrity_check", "quick_check"] {
            let (text, _) = output(&conn, &format!("PRAGMA {check}"), &csv);
            assert_eq!(text, format!("{check}\r\nok\r\n"));
        }
        output(&conn, "PRAGMA data_version", &csv);
        output(&conn, "PRAGMA cache_size", &csv);
    }

    #[test]
    fn refusals_inside_sqlite_name_the_users_statement() {
        use rusqlite::functions::FunctionFlags;
        let conn = sample();
        // A function that runs SQL on the same connection, as FTS5 does internally.
        let handle = unsafe { conn.handle() } as usize;
        conn.create_scalar_function("run_inside", 1, FunctionFlags::SQLITE_UTF8, move |ctx| {
            // SAFETY: the connection outlives the statements calling this function, and
            // `from_handle` does not close it.
            let same = unsafe { Connection::from_handle(handle as *mut rusqlite::ffi::sqlite3) }?;
            same.execute_batch(&ctx.get::<String>(0)?)?;
            Ok(0)
        })
        .unwrap();
        let message = error(&conn, "SELECT run_inside('PRAGMA writable_schema = 1')");
        assert!(
            message.starts_with(
                "refused: acpdb sql is read-only (`SELECT run_inside('PRAGMA writable_schema = \
                 1')`, which runs PRAGMA writable_schema = 1 inside SQLite, is not allowed)"
            ),
            "{message}"
        );
    }

    #[test]
    fn writes_are_refused_by_name() {
        assert_eq!(
            verdict(AuthAction::Insert {
                table_name: "symbols"
            }),
            refused("INSERT into symbols")
        );
        assert_eq!(
            verdict(AuthAction::Update {
                table_name: "symbols",
                column_name: "line"
            }),
            refused("UPDATE of symbols.line")
        );
        assert_eq!(
            verdict(AuthAction::DropTable {
                table_name: "symbols"
            }),
            refused("DROP TABLE symbols")
        );
        assert_eq!(
            verdict(AuthAction::Attach {
                filename: "other.db"
            }),
            refused("ATTACH 'other.db'")
        );
        let attach_expr = AuthAction::Unknown {
            code: rusqlite::ffi::SQLITE_ATTACH,
            arg1: None,
            arg2: None,
        };
        assert_eq!(verdict(attach_expr), refused("ATTACH"));
        assert_eq!(
            verdict(AuthAction::Transaction {
                operation: TransactionOperation::Begin
            }),
            refused("BEGIN (transaction control)")
        );
        assert_eq!(
            verdict(AuthAction::Function {
                function_name: "load_extension"
            }),
            refused("the function load_extension()")
        );
    }

    #[test]
    fn schema_table_writes_are_refused_after_the_named_operation() {
        assert_eq!(
            verdict(AuthAction::Insert {
                table_name: "sqlite_master"
            }),
            Verdict::RefuseLater("INSERT into sqlite_master".to_owned())
        );
        let conn = sample();
        assert!(error(&conn, "CREATE INDEX by_line ON symbols(line)")
            .contains("(CREATE INDEX by_line on symbols is not allowed)"));
        assert!(error(&conn, "DROP TABLE symbols").contains("(DROP TABLE symbols is not allowed)"));
    }

    #[test]
    fn writes_are_refused_on_a_writable_connection_too() {
        let conn = sample();
        let message = error(&conn, "DELETE FROM symbols");
        assert!(
            message.starts_with("refused: acpdb sql is read-only (DELETE from symbols"),
            "{message}"
        );
        assert!(message.contains("acpdb import"), "{message}");
        let count: i64 = conn
            .query_row("SELECT count(*) FROM symbols", [], |r| r.get(0))
            .unwrap();
        assert_eq!(count, 3);
    }

    #[test]
    fn statements_sqlite_reports_as_writing_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let copy = dir.path().join("copy.db");
        let conn = sample();
        let message = error(&conn, &format!("VACUUM INTO '{}'", copy.display()));
        assert!(
            message.contains("the writing statement `VACUUM INTO"),
            "{message}"
        );
        assert!(!copy.exists());
    }

    #[test]
    fn hooks_are_removed_after_a_query() {
        let conn = sample();
        output(&conn, "SELECT 1", &options(OutputFormat::Table, 0));
        error(&conn, "INSERT INTO symbols(name) VALUES ('x')");
        conn.execute("INSERT INTO symbols(name) VALUES ('x')", [])
            .unwrap();
    }

    #[test]
    fn one_statement_only() {
        let conn = sample();
        let message = error(&conn, "SELECT 1; SELECT 2");
        assert!(
            message.contains("runs a single statement") && message.contains("`SELECT 2`"),
            "{message}"
        );
        let (text, _) = output(
            &conn,
            "SELECT 1 AS one; -- trailing comment",
            &options(OutputFormat::Csv, 0),
        );
        assert_eq!(text, "one\r\n1\r\n");
        assert!(error(&conn, "  ").contains("no SQL to run"));
        assert!(error(&conn, "-- nothing").contains("no SQL to run"));
    }

    #[test]
    fn syntax_errors_show_sqlites_message() {
        let message = error(&sample(), "SELEC 1");
        assert!(
            message.starts_with("SQL error: near \"SELEC\": syntax error"),
            "{message}"
        );
    }

    #[test]
    fn table_output_aligns_and_escapes() {
        let (text, report) = output(
            &sample(),
            "SELECT name, line, score, body FROM symbols ORDER BY rowid",
            &options(OutputFormat::Table, 0),
        );
        let expected = "\
┌────────────┬──────┬───────┬─────────┐
│ name       │ line │ score │ body    │
├────────────┼──────┼───────┼─────────┤
│ main       │    7 │   1.0 │ x'00ff' │
│ a, \"b\"     │  120 │ NULL  │ NULL    │
│ two\\nlines │    3 │   2.5 │ NULL    │
└────────────┴──────┴───────┴─────────┘
";
        assert_eq!(text, expected);
        assert_eq!((report.rows, report.truncated), (3, false));
    }

    #[test]
    fn long_table_cells_are_cut() {
        let (text, _) = output(
            &sample(),
            "SELECT printf('%.100c', 'x') AS long",
            &options(OutputFormat::Table, 0),
        );
        let line = text.lines().nth(3).unwrap();
        let cell = line.trim_matches(['│', ' ']);
        assert_eq!(cell.chars().count(), TABLE_CELL_WIDTH);
        assert!(cell.ends_with("x…"));
    }

    #[test]
    fn table_cells_never_read_as_borders() {
        let (text, _) = output(
            &sample(),
            "SELECT 'a│b' AS \"x│y\", 'C:\\dir' AS path, 'a\tb' AS tab",
            &options(OutputFormat::Table, 0),
        );
        let expected = "\
┌────────────┬─────────┬──────┐
│ x\\u{2502}y │ path    │ tab  │
├────────────┼─────────┼──────┤
│ a\\u{2502}b │ C:\\\\dir │ a\\tb │
└────────────┴─────────┴──────┘
";
        assert_eq!(text, expected);
    }

    #[test]
    fn csv_output_quotes_per_rfc_4180() {
        let (text, _) = output(
            &sample(),
            "SELECT name, score FROM symbols ORDER BY rowid",
            &options(OutputFormat::Csv, 0),
        );
        assert_eq!(
            text,
            "name,score\r\nmain,1.0\r\n\"a, \"\"b\"\"\",\r\n\"two\nlines\",2.5\r\n"
        );
    }

    #[test]
    fn json_output_shape() {
        let (text, _) = output(
            &sample(),
            "SELECT name, line, score, body FROM symbols ORDER BY rowid",
            &options(OutputFormat::Json, 2),
        );
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            value,
            serde_json::json!({
                "columns": ["name", "line", "score", "body"],
                "rows": [["main", 7, 1.0, "x'00ff'"], ["a, \"b\"", 120, null, null]],
                "row_count": 2,
                "truncated": true,
            })
        );
    }

    #[test]
    fn row_cap_reports_truncation_only_when_rows_were_left() {
        let conn = sample();
        let (_, report) = output(
            &conn,
            "SELECT * FROM symbols",
            &options(OutputFormat::Csv, 3),
        );
        assert_eq!((report.rows, report.truncated), (3, false));
        let (text, report) = output(
            &conn,
            "SELECT * FROM symbols",
            &options(OutputFormat::Csv, 1),
        );
        assert_eq!((report.rows, report.truncated), (1, true));
        assert_eq!(text.lines().count(), 2);
    }

    #[test]
    fn time_limit_interrupts_the_query() {
        let conn = sample();
        let limited = QueryOptions {
            timeout: Some(Duration::from_millis(100)),
            ..options(OutputFormat::Table, 0)
        };
        let started = Instant::now();
        let err = execute(
            &conn,
            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c",
            &limited,
            &mut Vec::new(),
        )
        .unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(3));
        let message = err.to_string();
        assert!(
            message.contains("interrupted after 0.1 seconds") && message.contains("--timeout"),
            "{message}"
        );
    }

    #[test]
    fn timeout_argument_is_validated() {
        let args = |timeout| SqlArgs {
            sql: "SELECT 1".into(),
            json: false,
            csv: true,
            timeout,
            max_rows: 5,
        };
        let parsed = args(0.0).options().unwrap();
        assert_eq!(
            (parsed.format, parsed.timeout, parsed.max_rows),
            (OutputFormat::Csv, None, 5)
        );
        assert_eq!(
            args(1.5).options().unwrap().timeout,
            Some(Duration::from_millis(1500))
        );
        assert!(args(-1.0).options().is_err());
        assert!(args(f64::NAN).options().is_err());
    }
}
