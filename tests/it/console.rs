//! `acpdb sql`: runs the real binary against a small database built with plain rusqlite, and the
//! documented queries against the demo project.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant, SystemTime};

use rusqlite::Connection;
use tempfile::TempDir;

/// A temporary project holding `test.db` with a `symbols` table and a 50-row `nums` table.
struct Fixture {
    dir: TempDir,
    db: PathBuf,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("test.db");
        let conn = Connection::open(&db).unwrap();
        conn.execute_batch(
            "CREATE TABLE symbols(name TEXT NOT NULL, line INTEGER, score REAL, body BLOB);
             INSERT INTO symbols VALUES
               ('main', 10, 1.5, NULL),
               ('say \"hi\", then go', 200, NULL, x'00ff'),
               ('run', 3, 0.25, NULL);
             CREATE TABLE nums(n INTEGER PRIMARY KEY);
             WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 50)
             INSERT INTO nums SELECT n FROM c;",
        )
        .unwrap();
        drop(conn);
        Fixture { dir, db }
    }

    /// Runs `acpdb -C <dir> --db <db> sql <args…>`.
    fn sql(&self, args: &[&str]) -> Output {
        self.sql_command(args).output().unwrap()
    }

    /// The command `acpdb -C <dir> --db <db> sql <args…>`.
    fn sql_command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_acpdb"));
        command
            .arg("-C")
            .arg(self.dir.path())
            .arg("--db")
            .arg(&self.db)
            .arg("sql")
            .args(args)
            .env_remove("ACPDB_LOG");
        command
    }

    /// The database file's bytes and modification time.
    fn snapshot(&self) -> (Vec<u8>, SystemTime) {
        let modified = std::fs::metadata(&self.db).unwrap().modified().unwrap();
        (std::fs::read(&self.db).unwrap(), modified)
    }

    /// Names of the files in the project directory.
    fn files(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.dir.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).unwrap()
}

fn assert_success(output: &Output) {
    assert!(
        output.status.success(),
        "acpdb sql failed: {}",
        stderr(output)
    );
}

fn assert_failure(output: &Output) {
    assert!(
        !output.status.success(),
        "acpdb sql succeeded: {}",
        stdout(output)
    );
    assert!(output.stdout.is_empty(), "a failed query prints no result");
}

#[test]
fn table_output() {
    let fixture = Fixture::new();
    let output = fixture.sql(&["SELECT name, line, score, body FROM symbols ORDER BY line"]);
    assert_success(&output);
    let expected = "\
┌───────────────────┬──────┬───────┬─────────┐
│ name              │ line │ score │ body    │
├───────────────────┼──────┼───────┼─────────┤
│ run               │    3 │  0.25 │ NULL    │
│ main              │   10 │   1.5 │ NULL    │
│ say \"hi\", then go │  200 │ NULL  │ x'00ff' │
└───────────────────┴──────┴───────┴─────────┘
";
    assert_eq!(stdout(&output), expected);
    assert_eq!(stderr(&output), "");
}

#[test]
fn table_cells_holding_the_border_stay_in_their_column() {
    let fixture = Fixture::new();
    let output = fixture.sql(&["SELECT 'a | b' AS pipe, 'a │ b' AS border, 2 AS n"]);
    assert_success(&output);
    let expected = "\
┌───────┬──────────────┬───┐
│ pipe  │ border       │ n │
├───────┼──────────────┼───┤
│ a | b │ a \\u{2502} b │ 2 │
└───────┴──────────────┴───┘
";
    assert_eq!(stdout(&output), expected);
}

#[test]
fn json_output() {
    let fixture = Fixture::new();
    let output = fixture.sql(&[
        "--json",
        "SELECT name, line, score, body FROM symbols ORDER BY line",
    ]);
    assert_success(&output);
    let value: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(
        value["columns"],
        serde_json::json!(["name", "line", "score", "body"])
    );
    assert_eq!(
        value["rows"],
        serde_json::json!([
            ["run", 3, 0.25, null],
            ["main", 10, 1.5, null],
            ["say \"hi\", then go", 200, null, "x'00ff'"],
        ])
    );
    assert_eq!(value["row_count"], 3);
    assert_eq!(value["truncated"], false);
    assert!(value["rows"][0][1].is_i64() && value["rows"][0][2].is_f64());
}

#[test]
fn csv_output() {
    let fixture = Fixture::new();
    let output = fixture.sql(&[
        "--csv",
        "SELECT name, line, score FROM symbols ORDER BY line",
    ]);
    assert_success(&output);
    assert_eq!(
        stdout(&output),
        "name,line,score\r\nrun,3,0.25\r\nmain,10,1.5\r\n\"say \"\"hi\"\", then go\",200,\r\n"
    );
}

/// A row of one empty value is a record of its own, not a bare line break that CSV readers
/// (Python's `csv`, pandas) skip, miscounting the rows.
#[test]
fn csv_rows_of_one_empty_value_are_records() {
    let fixture = Fixture::new();
    let output = fixture.sql(&[
        "--csv",
        "SELECT NULL AS v UNION ALL SELECT '' UNION ALL SELECT 'x'",
    ]);
    assert_success(&output);
    assert_eq!(stdout(&output), "v\r\n\"\"\r\n\"\"\r\nx\r\n");
}

#[test]
fn json_and_csv_are_exclusive() {
    let fixture = Fixture::new();
    let output = fixture.sql(&["--json", "--csv", "SELECT 1"]);
    assert_failure(&output);
    assert!(
        stderr(&output).contains("cannot be used with"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn row_cap_truncates_with_a_note() {
    let fixture = Fixture::new();
    let output = fixture.sql(&["--max-rows", "5", "SELECT n FROM nums ORDER BY n"]);
    assert_success(&output);
    let lines: Vec<String> = stdout(&output)
        .lines()
        .map(|l| l.trim_matches(['│', ' ']).to_owned())
        .collect();
    assert_eq!(lines[3..8], ["1", "2", "3", "4", "5"]);
    assert_eq!(
        lines.len(),
        9,
        "five rows between the header and the bottom border"
    );
    let note = stderr(&output);
    assert!(
        note.contains("truncated at 5 rows") && note.contains("--max-rows"),
        "{note}"
    );

    let output = fixture.sql(&["--json", "--max-rows", "5", "SELECT n FROM nums ORDER BY n"]);
    assert_success(&output);
    let value: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(value["rows"], serde_json::json!([[1], [2], [3], [4], [5]]));
    assert_eq!(
        (value["row_count"].as_u64(), value["truncated"].as_bool()),
        (Some(5), Some(true))
    );
    assert!(stderr(&output).contains("truncated at 5 rows"));
}

#[test]
fn row_cap_default_and_unlimited() {
    let fixture = Fixture::new();
    for args in [
        &["--csv", "SELECT n FROM nums"][..],
        &["--csv", "--max-rows", "0", "SELECT n FROM nums"],
    ] {
        let output = fixture.sql(args);
        assert_success(&output);
        assert_eq!(stdout(&output).lines().count(), 51);
        assert_eq!(stderr(&output), "");
    }
    let output = fixture.sql(&["--csv", "--max-rows", "50", "SELECT n FROM nums"]);
    assert_eq!(
        stderr(&output),
        "",
        "exactly max-rows rows is not a truncation"
    );
}

#[test]
fn writes_are_refused_and_leave_the_file_unchanged() {
    let fixture = Fixture::new();
    let before = fixture.snapshot();
    let files = fixture.files();
    let cases = [
        (
            "INSERT INTO symbols(name) VALUES ('x')",
            "INSERT into symbols",
        ),
        ("UPDATE symbols SET line = 0", "UPDATE of symbols.line"),
        ("DELETE FROM nums", "DELETE from nums"),
        ("DROP TABLE symbols", "DROP TABLE symbols"),
        (
            "CREATE INDEX by_line ON symbols(line)",
            "CREATE INDEX by_line on symbols",
        ),
        ("ATTACH 'other.db' AS other", "ATTACH 'other.db'"),
        ("PRAGMA journal_mode=DELETE", "PRAGMA journal_mode = DELETE"),
        ("PRAGMA user_version = 3", "PRAGMA user_version = 3"),
        ("BEGIN IMMEDIATE", "BEGIN"),
        ("VACUUM", "the writing statement `VACUUM`"),
    ];
    for (sql, named) in cases {
        let output = fixture.sql(&[sql]);
        assert_failure(&output);
        let message = stderr(&output);
        assert!(
            message.contains("refused: acpdb sql is read-only") && message.contains(named),
            "{sql}: {message}"
        );
        assert!(message.contains("acpdb import"), "{sql}: {message}");
        assert!(
            fixture.snapshot() == before,
            "{sql} changed the database file"
        );
        assert_eq!(fixture.files(), files, "{sql} created or removed files");
    }
    let count: i64 = Connection::open(&fixture.db)
        .unwrap()
        .query_row("SELECT count(*) FROM symbols", [], |row| row.get(0))
        .unwrap();
    assert_eq!(count, 3);
}

#[test]
fn schema_inspection_is_allowed() {
    let fixture = Fixture::new();
    let output = fixture.sql(&[
        "--csv",
        "SELECT name, type FROM pragma_table_info('symbols')",
    ]);
    assert_success(&output);
    assert_eq!(
        stdout(&output),
        "name,type\r\nname,TEXT\r\nline,INTEGER\r\nscore,REAL\r\nbody,BLOB\r\n"
    );
    let output = fixture.sql(&["--csv", "PRAGMA user_version"]);
    assert_success(&output);
    assert_eq!(stdout(&output), "user_version\r\n0\r\n");
    let output = fixture.sql(&["--json", "PRAGMA table_info(nums)"]);
    assert_success(&output);
    let value: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(value["rows"][0][1], "n");
}

#[test]
fn timeout_interrupts_a_long_query() {
    let fixture = Fixture::new();
    let started = Instant::now();
    let output = fixture.sql(&[
        "--timeout",
        "0.2",
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000000000) \
         SELECT count(*) FROM c",
    ]);
    let elapsed = started.elapsed();
    assert_failure(&output);
    let message = stderr(&output);
    assert!(
        message.contains("query interrupted after 0.2 seconds"),
        "{message}"
    );
    assert!(message.contains("--timeout"), "{message}");
    assert!(elapsed < Duration::from_secs(4), "took {elapsed:?}");
    // A limit too small to count is the shortest one, not none (only 0 is none).
    let output = fixture.sql(&[
        "--timeout",
        "1e-10",
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 100000000) \
         SELECT count(*) FROM c",
    ]);
    assert_failure(&output);
    assert!(
        stderr(&output).contains("query interrupted"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn syntax_error_shows_sqlites_message() {
    let fixture = Fixture::new();
    let output = fixture.sql(&["SELEC name FROM symbols"]);
    assert_failure(&output);
    let message = stderr(&output);
    assert!(
        message.contains("near \"SELEC\": syntax error"),
        "{message}"
    );
}

#[test]
fn one_statement_at_a_time() {
    let fixture = Fixture::new();
    let output = fixture.sql(&["SELECT 1; SELECT 2"]);
    assert_failure(&output);
    let message = stderr(&output);
    assert!(
        message.contains("single statement") && message.contains("`SELECT 2`"),
        "{message}"
    );

    let output = fixture.sql(&["SELECT count(*) FROM nums; DELETE FROM nums"]);
    assert_failure(&output);
    assert!(
        stderr(&output).contains("DELETE from nums"),
        "{}",
        stderr(&output)
    );

    let output = fixture.sql(&["--csv", "SELECT count(*) AS n FROM nums;"]);
    assert_success(&output);
    assert_eq!(stdout(&output), "n\r\n50\r\n");
}

#[test]
fn empty_sql_is_an_error() {
    let fixture = Fixture::new();
    for sql in ["", "   ", "/* nothing */"] {
        let output = fixture.sql(&[sql]);
        assert_failure(&output);
        assert!(
            stderr(&output).contains("no SQL to run"),
            "{sql:?}: {}",
            stderr(&output)
        );
    }
}

#[test]
fn missing_database_points_to_import() {
    let mut fixture = Fixture::new();
    fixture.db = fixture.dir.path().join("absent.db");
    let output = fixture.sql(&["SELECT 1"]);
    assert_failure(&output);
    assert!(
        stderr(&output).contains("acpdb import"),
        "{}",
        stderr(&output)
    );
    assert!(!fixture.db.exists());
}

/// The statements of the ```sql blocks in a Markdown text; each ends with a line ending in `;`
/// and keeps the comment lines before it.
fn sql_statements(markdown: &str) -> Vec<String> {
    let mut statements = Vec::new();
    let mut in_block = false;
    let mut current = String::new();
    for line in markdown.lines() {
        let fence = line.trim_start().starts_with("```");
        if !in_block {
            in_block = fence && line.trim() == "```sql";
            continue;
        }
        if fence {
            assert!(
                current.trim().is_empty(),
                "a statement without `;`: {current}"
            );
            in_block = false;
            continue;
        }
        current.push_str(line);
        current.push('\n');
        if line.trim_end().ends_with(';') {
            statements.push(std::mem::take(&mut current));
        }
    }
    statements
}

#[test]
fn every_query_in_the_schema_docs_runs_on_the_demo_project() {
    let project = common::TempProject::copy_of(&common::fixture("demo"));
    project.import();
    let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/schema.md");
    let statements = sql_statements(&std::fs::read_to_string(doc).unwrap());
    assert!(statements.len() >= 6, "{statements:?}");
    for sql in &statements {
        let output = project.run(&["sql", "--json", "--", sql]);
        assert!(
            output.status.success(),
            "{sql}\nfailed: {}",
            stderr(&output)
        );
        assert_eq!(stderr(&output), "", "{sql}");
        let value: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
        assert!(
            value["row_count"].as_u64() > Some(0),
            "{sql}\nfinds nothing on the demo project"
        );
    }
}

#[test]
fn full_text_search_and_file_checks_run_on_an_import() {
    let project = common::TempProject::copy_of(&common::fixture("demo"));
    project.import();
    let output = project.run(&[
        "sql",
        "--csv",
        "SELECT s.name FROM symbols_fts f JOIN symbols s ON s.id = f.rowid \
         WHERE symbols_fts MATCH 'validate*' ORDER BY s.name",
    ]);
    assert_success(&output);
    assert_eq!(stdout(&output), "name\r\nvalidateSession\r\n");
    for check in ["integrity_check", "quick_check"] {
        let output = project.run(&["sql", "--csv", &format!("PRAGMA {check}")]);
        assert_success(&output);
        assert_eq!(stdout(&output), format!("{check}\r\nok\r\n"));
    }
    for setting in ["data_version", "page_size", "synchronous", "cache_size"] {
        assert_success(&project.run(&["sql", &format!("PRAGMA {setting}")]));
    }
    let output = project.run(&["sql", "PRAGMA cache_size = 10"]);
    assert!(
        stderr(&output).contains("(PRAGMA cache_size = 10 is not allowed)"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn one_expensive_expression_cannot_outrun_the_limits() {
    let fixture = Fixture::new();
    let started = Instant::now();
    let out = fixture.sql(&[
        "SELECT length(randomblob(1000000000)), length(randomblob(1000000000)), length(randomblob(1000000000))",
    ]);
    assert_failure(&out);
    assert!(stderr(&out).contains("too big"), "{}", stderr(&out));
    assert!(started.elapsed() < Duration::from_secs(30));
    let out = fixture.sql(&[
        "--timeout",
        "0.2",
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT count(*) FROM n",
    ]);
    assert_failure(&out);
    assert!(
        stderr(&out).contains("interrupted after 0.2 seconds"),
        "{}",
        stderr(&out)
    );
}

/// A query that holds more than `MAX_HEAP_BYTES` at once (18 values of 60 MB, each under the
/// per-value limit) stops with SQLite's out-of-memory error instead of taking the memory: the
/// heap limit needs SQLite's memory statistics, which `acpdb sql` turns on for itself.
#[test]
fn queries_stop_at_the_heap_limit() {
    let fixture = Fixture::new();
    let values = u64::try_from(acpdb::console::MAX_HEAP_BYTES).unwrap() / 60_000_000 + 1;
    let columns: Vec<String> = (0..values)
        .map(|i| format!("zeroblob(60000000) || x'00' AS c{i}"))
        .collect();
    let lengths: Vec<String> = (0..values).map(|i| format!("length(c{i})")).collect();
    let sql = format!(
        "SELECT {} FROM (SELECT {})",
        lengths.join(" + "),
        columns.join(", ")
    );
    let output = fixture.sql(&[&sql]);
    assert_failure(&output);
    assert!(
        stderr(&output).contains("out of memory"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_query_stuck_in_one_sqlite_call_is_stopped_soon_after_its_time_limit() {
    let fixture = Fixture::new();
    // One GLOB call over a 20 MB text: minutes of work in a single step of SQLite's virtual
    // machine, which the progress handler behind --timeout never gets to interrupt.
    let glob = "SELECT printf('%.*c', 20000000, 'a') GLOB '*' || printf('%.*c', 3000, 'a') || 'b*'";
    let args = [
        "--db",
        fixture.db.to_str().unwrap(),
        "sql",
        "--timeout",
        "0.2",
        glob,
    ];
    let started = Instant::now();
    let (status, stderr) = common::run_unblocked(fixture.dir.path(), &args, "a long GLOB");
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("past its time limit of 0.2 s") && stderr.contains("--timeout"),
        "{stderr}"
    );
    assert!(started.elapsed() < Duration::from_secs(15));
}

#[test]
fn a_result_too_large_to_hold_is_refused_naming_the_row() {
    let fixture = Fixture::new();
    let output = fixture
        .sql(&["SELECT n, zeroblob(60000000), zeroblob(60000000), zeroblob(60000000) FROM nums"]);
    assert_failure(&output);
    let message = stderr(&output);
    assert!(
        message.contains("the result passed 256 MiB in memory at row 2")
            && message.contains("LIMIT"),
        "{message}"
    );
}

/// Peak RSS in bytes of `acpdb sql <args>` on the fixture, and its stderr (Linux: `wait4`, which
/// reaps the child).
#[cfg(target_os = "linux")]
#[allow(clippy::zombie_processes)]
fn sql_peak_rss(fixture: &Fixture, args: &[&str]) -> (u64, String) {
    let mut child = fixture
        .sql_command(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    let mut status = 0;
    // SAFETY: `usage` is a plain struct the call fills in; the pid is this test's own child,
    // waited for here and nowhere else.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        let pid = libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage);
        assert_eq!(pid, child.id() as libc::pid_t, "wait4 failed");
        usage
    };
    (usage.ru_maxrss as u64 * 1024, err)
}

#[cfg(target_os = "linux")]
#[test]
fn a_result_too_large_to_hold_stops_near_its_cap_in_memory() {
    let fixture = Fixture::new();
    let conn = Connection::open(&fixture.db).unwrap();
    conn.execute_batch(
        "CREATE TABLE words(w TEXT);
         WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 3000)
         INSERT INTO words SELECT 'word' || n FROM c;",
    )
    .unwrap();
    drop(conn);
    // Short values in many rows: what each kept value costs besides its bytes decides the peak.
    for query in [
        "SELECT a.w, b.w FROM words a, words b",
        "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c) SELECT n FROM c",
    ] {
        let (peak, err) = sql_peak_rss(
            &fixture,
            &["--csv", "--max-rows", "0", "--timeout", "60", query],
        );
        assert!(
            err.contains("the result passed 256 MiB in memory"),
            "{query}: {err}"
        );
        // The cap, and SQLite's own memory (the recursive query's queue) and the program's
        // besides it: 290-380 MiB here, where the rows' bookkeeping alone once took 1.3-2 GB.
        assert!(peak < 512 << 20, "{query}: peak RSS {} MiB", peak >> 20);
    }
}
