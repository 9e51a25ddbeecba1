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
//!   ([`db::TimeLimit`]), and no expression may build a value over [`MAX_VALUE_BYTES`], so no
//!   single function call outlasts the limit; [`run`] also caps SQLite's memory at
//!   [`MAX_HEAP_BYTES`].
//!
//! Output stops after the row cap; the caller decides how to report the truncation
//! ([`run`] prints a note on stderr). The SQL text must hold exactly one statement: a string
//! with several is refused before anything runs, so a script never half-executes.

use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use rusqlite::fallible_iterator::FallibleIterator;
use rusqlite::hooks::{AuthAction, AuthContext, Authorization, TransactionOperation};
use rusqlite::limits::Limit;
use rusqlite::types::{Value, ValueRef};
use rusqlite::{Batch, Connection};
use serde::Serialize;

use crate::db;
use crate::project::Project;

/// Table cells longer than this many characters are cut and end in `…`.
pub const TABLE_CELL_WIDTH: usize = 60;

/// Largest string or blob one expression may build (SQLite's `SQLITE_LIMIT_LENGTH`), so a
/// single function call such as `randomblob(1e9)` can neither run long nor take gigabytes.
pub const MAX_VALUE_BYTES: i32 = 64 << 20;

/// Most memory SQLite may hold in the `acpdb sql` process; a query needing more fails with
/// "out of memory" instead of growing without bound.
pub const MAX_HEAP_BYTES: i64 = 1 << 30;

/// Pragmas that only report on the schema, the file or the connection; an argument names an
/// object (`PRAGMA table_info(symbols)`) or a limit and never changes anything. SQLite itself
/// runs some of them inside other statements (FTS5 reads `data_version` on every query).
const INSPECTION_PRAGMAS: &[&str] = &[
    "collation_list",
    "compile_options",
    "data_version",
    "database_list",
    "foreign_key_check",
    "foreign_key_list",
    "freelist_count",
    "function_list",
    "index_info",
    "index_list",
    "index_xinfo",
    "integrity_check",
    "module_list",
    "page_count",
    "pragma_list",
    "quick_check",
    "table_info",
    "table_list",
    "table_xinfo",
];

/// Setting pragmas that may be read (no argument) but not assigned.
const READABLE_SETTING_PRAGMAS: &[&str] = &[
    "analysis_limit",
    "application_id",
    "auto_vacuum",
    "automatic_index",
    "busy_timeout",
    "cache_size",
    "cache_spill",
    "cell_size_check",
    "defer_foreign_keys",
    "encoding",
    "foreign_keys",
    "hard_heap_limit",
    "ignore_check_constraints",
    "journal_size_limit",
    "legacy_alter_table",
    "locking_mode",
    "max_page_count",
    "mmap_size",
    "page_size",
    "query_only",
    "recursive_triggers",
    "reverse_unordered_selects",
    "schema_version",
    "secure_delete",
    "soft_heap_limit",
    "synchronous",
    "temp_store",
    "threads",
    "trusted_schema",
    "user_version",
    "wal_autocheckpoint",
];

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
            timeout: (!timeout.is_zero()).then_some(timeout),
            max_rows: self.max_rows,
        })
    }
}

/// How a result is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputFormat {
    /// An aligned text table drawn with box-drawing borders (`┌─┬─┐`, `│`, `├─┼─┤`, `└─┴─┘`):
    /// the header, then one line per row. `NULL` prints as `NULL`, numbers are right-aligned,
    /// a backslash, the border `│` and control characters in text show escaped (`\\`,
    /// `\u{2502}`, `\n`, …), and cells longer than [`TABLE_CELL_WIDTH`] characters are cut. No
    /// output when the statement has no columns.
    Table,
    /// One line holding `{"columns": [name…], "rows": [[value…]…], "truncated": bool,
    /// "row_count": N}`, where `row_count` is the number of rows in `rows` and `truncated`
    /// says the row cap stopped the output. INTEGER and REAL are numbers (a non-finite REAL is
    /// the string `inf`, `-inf` or `NaN`), TEXT a string, NULL `null`, BLOB a string `x'0a1b…'`.
    Json,
    /// CSV per RFC 4180: a header row, CRLF line ends, fields holding a comma, quote, CR or LF
    /// quoted with inner quotes doubled. NULL is an empty field, BLOB is `x'0a1b…'`.
    Csv,
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
    crate::freshness::warn_if_outdated(project);
    // SAFETY: sets a process-wide SQLite setting; this process runs only this query.
    unsafe {
        rusqlite::ffi::sqlite3_hard_heap_limit64(MAX_HEAP_BYTES);
    }
    let mut out = io::BufWriter::new(io::stdout().lock());
    let report = execute_file(&project.db, &args.sql, &options, &mut out)?;
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

/// Opens the database at `path` read-only and runs [`execute`] on it.
pub fn execute_file(
    path: &Path,
    sql: &str,
    options: &QueryOptions,
    out: &mut dyn Write,
) -> Result<QueryReport> {
    let conn = db::open_read_only(path)?;
    execute(&conn, sql, options, out)
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
    let start = Instant::now();
    let guard = Guard::install(conn, options.timeout)?;
    let result = guard.fetch(sql, options.max_rows)?;
    let elapsed = start.elapsed();
    drop(guard);
    match options.format {
        OutputFormat::Table => write_table(out, &result),
        OutputFormat::Json => write_json(out, &result),
        OutputFormat::Csv => write_csv(out, &result),
    }
    .context("writing the query result")?;
    Ok(QueryReport {
        rows: result.rows.len(),
        truncated: result.truncated,
        elapsed,
    })
}

/// The console's verdict on one operation SQLite asks about while preparing a statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Reading: allowed.
    Allow,
    /// Refused at once; the text names the operation.
    Refuse(String),
    /// A write to the schema table. SQLite asks about it before the operation that needs it
    /// (CREATE, DROP, ANALYZE), so preparing goes on until that operation is refused by name;
    /// the statement is refused either way.
    RefuseLater(String),
}

/// Decides whether the console may do `action`.
pub fn authorize(action: &AuthAction<'_>) -> Verdict {
    use AuthAction as A;
    let refused = match *action {
        A::Select | A::Read { .. } | A::Recursive => return Verdict::Allow,
        A::Function { function_name } if !function_name.eq_ignore_ascii_case("load_extension") => {
            return Verdict::Allow
        }
        A::Function { function_name } => format!("the function {function_name}()"),
        A::Pragma {
            pragma_name,
            pragma_value,
        } => {
            let listed = |list: &[&str]| list.iter().any(|p| p.eq_ignore_ascii_case(pragma_name));
            match pragma_value {
                _ if listed(INSPECTION_PRAGMAS) => return Verdict::Allow,
                None if listed(READABLE_SETTING_PRAGMAS) => return Verdict::Allow,
                None => format!("PRAGMA {pragma_name}"),
                Some(value) => format!("PRAGMA {pragma_name} = {value}"),
            }
        }
        A::Insert { table_name } => format!("INSERT into {table_name}"),
        A::Update {
            table_name,
            column_name,
        } => format!("UPDATE of {table_name}.{column_name}"),
        A::Delete { table_name } => format!("DELETE from {table_name}"),
        A::CreateTable { table_name } => format!("CREATE TABLE {table_name}"),
        A::CreateTempTable { table_name } => format!("CREATE TEMP TABLE {table_name}"),
        A::CreateIndex {
            index_name,
            table_name,
        } => {
            format!("CREATE INDEX {index_name} on {table_name}")
        }
        A::CreateTempIndex {
            index_name,
            table_name,
        } => {
            format!("CREATE TEMP INDEX {index_name} on {table_name}")
        }
        A::CreateView { view_name } => format!("CREATE VIEW {view_name}"),
        A::CreateTempView { view_name } => format!("CREATE TEMP VIEW {view_name}"),
        A::CreateTrigger {
            trigger_name,
            table_name,
        } => {
            format!("CREATE TRIGGER {trigger_name} on {table_name}")
        }
        A::CreateTempTrigger {
            trigger_name,
            table_name,
        } => {
            format!("CREATE TEMP TRIGGER {trigger_name} on {table_name}")
        }
        A::CreateVtable {
            table_name,
            module_name,
        } => {
            format!("CREATE VIRTUAL TABLE {table_name} USING {module_name}")
        }
        A::DropTable { table_name } => format!("DROP TABLE {table_name}"),
        A::DropTempTable { table_name } => format!("DROP TEMP TABLE {table_name}"),
        A::DropIndex { index_name, .. } => format!("DROP INDEX {index_name}"),
        A::DropTempIndex { index_name, .. } => format!("DROP TEMP INDEX {index_name}"),
        A::DropView { view_name } => format!("DROP VIEW {view_name}"),
        A::DropTempView { view_name } => format!("DROP TEMP VIEW {view_name}"),
        A::DropTrigger { trigger_name, .. } => format!("DROP TRIGGER {trigger_name}"),
        A::DropTempTrigger { trigger_name, .. } => format!("DROP TEMP TRIGGER {trigger_name}"),
        A::DropVtable { table_name, .. } => format!("DROP VIRTUAL TABLE {table_name}"),
        A::AlterTable { table_name, .. } => format!("ALTER TABLE {table_name}"),
        A::Attach { filename } => format!("ATTACH '{filename}'"),
        A::Detach { database_name } => format!("DETACH {database_name}"),
        A::Reindex { index_name } => format!("REINDEX {index_name}"),
        A::Analyze { table_name } => format!("ANALYZE {table_name}"),
        A::Transaction { operation } => {
            format!("{} (transaction control)", operation_name(operation))
        }
        A::Savepoint {
            operation,
            savepoint_name,
        } => match operation {
            TransactionOperation::Begin => format!("SAVEPOINT {savepoint_name}"),
            other => format!(
                "{} {savepoint_name} (transaction control)",
                operation_name(other)
            ),
        },
        A::Unknown {
            code: rusqlite::ffi::SQLITE_ATTACH,
            ..
        } => "ATTACH".to_owned(),
        A::Unknown {
            code: rusqlite::ffi::SQLITE_DETACH,
            ..
        } => "DETACH".to_owned(),
        A::Unknown { code, .. } => {
            format!("an operation SQLite reports with authorizer code {code}")
        }
        _ => format!("{action:?}"),
    };
    match *action {
        A::Insert { table_name } | A::Update { table_name, .. } | A::Delete { table_name }
            if is_schema_table(table_name) =>
        {
            Verdict::RefuseLater(refused)
        }
        _ => Verdict::Refuse(refused),
    }
}

/// Whether `name` is the schema table (`sqlite_master` or one of its aliases).
fn is_schema_table(name: &str) -> bool {
    [
        "sqlite_master",
        "sqlite_schema",
        "sqlite_temp_master",
        "sqlite_temp_schema",
    ]
    .iter()
    .any(|schema| schema.eq_ignore_ascii_case(name))
}

/// The statement keyword of a transaction operation.
fn operation_name(operation: TransactionOperation) -> &'static str {
    match operation {
        TransactionOperation::Begin => "BEGIN",
        TransactionOperation::Rollback => "ROLLBACK",
        TransactionOperation::Release => "RELEASE",
        _ => "COMMIT",
    }
}

/// The error for a refused operation.
fn refusal(what: &str) -> anyhow::Error {
    anyhow!(
        "refused: acpdb sql is read-only ({what} is not allowed); use `acpdb import` to rebuild \
         the index"
    )
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
        while let Some(row) = cursor.next().map_err(sqlite)? {
            if max_rows != 0 && rows.len() == max_rows {
                truncated = true;
                break;
            }
            let values = (0..width)
                .map(|i| row.get_ref(i).map(owned_value))
                .collect::<rusqlite::Result<Vec<Value>>>()
                .map_err(sqlite)?;
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

/// A fetched result.
struct ResultSet {
    columns: Vec<String>,
    rows: Vec<Vec<Value>>,
    truncated: bool,
}

/// A statement's text on one line, shortened for an error message.
fn statement_excerpt(sql: Option<String>) -> String {
    let sql = sql.unwrap_or_default();
    let text = sql.split_whitespace().collect::<Vec<_>>().join(" ");
    clip(&text, 80)
}

/// Copies a value out of a row; text that is not UTF-8 is converted lossily.
fn owned_value(value: ValueRef<'_>) -> Value {
    match value {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => Value::Integer(i),
        ValueRef::Real(r) => Value::Real(r),
        ValueRef::Text(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(b) => Value::Blob(b.to_vec()),
    }
}

/// `x'…'` with the bytes in lowercase hex.
fn blob_literal(bytes: &[u8]) -> String {
    let mut text = String::with_capacity(bytes.len() * 2 + 3);
    text.push_str("x'");
    for byte in bytes {
        let _ = write!(text, "{byte:02x}");
    }
    text.push('\'');
    text
}

/// A REAL as text, keeping `.0` on whole numbers so it reads as a REAL.
fn real_text(value: f64) -> String {
    format!("{value:?}")
}

/// `text` cut to at most `width` characters, ending in `…` when cut.
fn clip(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(width.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// Text as a table cell (before clipping): a backslash, the column border `│` and control
/// characters are escaped (`\\`, `\u{2502}`, `\n`, `\t`, …), so text never reads as a border
/// or a line break.
fn escape_cell(text: &str) -> String {
    let mut cell = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => cell.push_str("\\\\"),
            BORDER => cell.push_str("\\u{2502}"),
            c if c.is_control() => cell.extend(c.escape_debug()),
            c => cell.push(c),
        }
    }
    cell
}

/// A value as a table cell (before clipping).
fn table_cell(value: &Value) -> String {
    match value {
        Value::Null => "NULL".to_owned(),
        Value::Integer(i) => i.to_string(),
        Value::Real(r) => real_text(*r),
        Value::Text(t) => escape_cell(t),
        Value::Blob(b) => blob_literal(b),
    }
}

/// The vertical border between and around table cells.
const BORDER: char = '│';

/// One horizontal rule of the table: `left`, `─` runs as wide as the columns (plus their
/// padding) joined by `join`, then `right`.
fn table_rule(widths: &[usize], (left, join, right): (char, char, char)) -> String {
    let runs: Vec<String> = widths.iter().map(|w| "─".repeat(w + 2)).collect();
    format!("{left}{}{right}", runs.join(&join.to_string()))
}

fn write_table(out: &mut dyn Write, result: &ResultSet) -> io::Result<()> {
    if result.columns.is_empty() {
        return Ok(());
    }
    let header: Vec<(String, bool)> = result
        .columns
        .iter()
        .map(|c| (clip(&escape_cell(c), TABLE_CELL_WIDTH), false))
        .collect();
    let body: Vec<Vec<(String, bool)>> = result
        .rows
        .iter()
        .map(|row| {
            row.iter()
                .map(|v| {
                    let numeric = matches!(v, Value::Integer(_) | Value::Real(_));
                    (clip(&table_cell(v), TABLE_CELL_WIDTH), numeric)
                })
                .collect()
        })
        .collect();
    let mut widths: Vec<usize> = header.iter().map(|(h, _)| h.chars().count()).collect();
    for row in &body {
        for (width, (cell, _)) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let write_row = |out: &mut dyn Write, cells: &[(String, bool)]| {
        let mut line = String::new();
        line.push(BORDER);
        for ((cell, numeric), width) in cells.iter().zip(&widths) {
            let _ = if *numeric {
                write!(line, " {cell:>width$} {BORDER}")
            } else {
                write!(line, " {cell:<width$} {BORDER}")
            };
        }
        writeln!(out, "{line}")
    };
    writeln!(out, "{}", table_rule(&widths, ('┌', '┬', '┐')))?;
    write_row(out, &header)?;
    writeln!(out, "{}", table_rule(&widths, ('├', '┼', '┤')))?;
    for row in &body {
        write_row(out, row)?;
    }
    writeln!(out, "{}", table_rule(&widths, ('└', '┴', '┘')))
}

/// The `--json` document; see [`OutputFormat::Json`].
#[derive(Serialize)]
struct JsonResult<'a> {
    columns: &'a [String],
    rows: Vec<Vec<serde_json::Value>>,
    truncated: bool,
    row_count: usize,
}

fn json_value(value: &Value) -> serde_json::Value {
    match value {
        Value::Null => serde_json::Value::Null,
        Value::Integer(i) => (*i).into(),
        Value::Real(r) => serde_json::Number::from_f64(*r)
            .map_or_else(|| real_text(*r).into(), serde_json::Value::Number),
        Value::Text(t) => t.as_str().into(),
        Value::Blob(b) => blob_literal(b).into(),
    }
}

fn write_json(out: &mut dyn Write, result: &ResultSet) -> io::Result<()> {
    let document = JsonResult {
        columns: &result.columns,
        rows: result
            .rows
            .iter()
            .map(|row| row.iter().map(json_value).collect())
            .collect(),
        truncated: result.truncated,
        row_count: result.rows.len(),
    };
    serde_json::to_writer(&mut *out, &document)?;
    writeln!(out)
}

/// A CSV field, quoted when RFC 4180 requires it.
fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\r', '\n']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_owned()
    }
}

fn csv_text(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::Integer(i) => i.to_string(),
        Value::Real(r) => real_text(*r),
        Value::Text(t) => t.clone(),
        Value::Blob(b) => blob_literal(b),
    }
}

/// Writes one CSV record ending in CRLF.
fn write_csv_record<S: AsRef<str>>(out: &mut dyn Write, fields: &[S]) -> io::Result<()> {
    let fields: Vec<String> = fields.iter().map(|f| csv_field(f.as_ref())).collect();
    write!(out, "{}\r\n", fields.join(","))
}

fn write_csv(out: &mut dyn Write, result: &ResultSet) -> io::Result<()> {
    write_csv_record(out, &result.columns)?;
    for row in &result.rows {
        write_csv_record(out, &row.iter().map(csv_text).collect::<Vec<_>>())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
