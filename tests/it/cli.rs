//! The command line around its results: a reader that closes stdout early, progress lines when
//! stderr is not a terminal, warnings about a database older than the cache, and the server's
//! log of background imports.

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{acpdb, fixture, mkfifo, read_stderr, run_unblocked, stderr, stdout, TempProject};

/// A generated project of 10,000 symbols, imported.
fn generated() -> TempProject {
    TempProject::generated(1000)
}

/// `acpdb -C <root> <args>` with stdout and stderr piped.
fn command(project: &TempProject, args: &[&str]) -> Command {
    let mut cmd = acpdb();
    cmd.arg("-C")
        .arg(project.root())
        .args(args)
        .stderr(Stdio::piped());
    cmd
}

/// Waits for `child` and returns its exit status and stderr.
fn finish(mut child: Child) -> (std::process::ExitStatus, String) {
    let err = read_stderr(&mut child);
    (child.wait().unwrap(), err)
}

/// Runs the command with stdout a pipe whose reader is already gone: its first write fails.
fn with_stdout_closed_at_once(mut cmd: Command) -> (std::process::ExitStatus, String) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .unwrap();
    let (writer, reader) = {
        let _entered = runtime.enter();
        tokio::net::unix::pipe::pipe().unwrap()
    };
    drop(reader);
    let child = cmd
        .stdout(writer.into_blocking_fd().unwrap())
        .spawn()
        .unwrap();
    finish(child)
}

/// Runs the command like `… | head -1`: reads one line of stdout, then closes it.
fn with_stdout_closed_after_a_line(mut cmd: Command) -> (std::process::ExitStatus, String) {
    let mut child = cmd.stdout(Stdio::piped()).spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(!line.is_empty(), "no output before the pipe closed");
    finish(child)
}

#[test]
fn a_closed_stdout_ends_commands_quietly() {
    let project = generated();
    let out = project.run(&[
        "sql",
        "--csv",
        "SELECT name FROM graph_nodes WHERE symbol_id IS NOT NULL ORDER BY callers DESC LIMIT 1",
    ]);
    let most_called = stdout(&out).lines().nth(1).unwrap().to_owned();
    let commands: [&[&str]; 4] = [
        &["query", "callers", &most_called, "--limit", "100"],
        &["query", "search", "a", "--limit", "100"],
        &["sql", "--max-rows", "0", "SELECT * FROM symbols"],
        &["export-cache"],
    ];
    for args in commands {
        let full = project.run(args);
        assert!(full.status.success(), "{args:?}: {}", stderr(&full));
        for (how, (status, err)) in [
            (
                "closed at once",
                with_stdout_closed_at_once(command(&project, args)),
            ),
            (
                "closed after a line",
                with_stdout_closed_after_a_line(command(&project, args)),
            ),
        ] {
            assert_eq!(status.code(), Some(0), "{args:?}, stdout {how}: {err}");
            assert_eq!(err, "", "{args:?}, stdout {how}");
        }
    }
    let big = project.run(&["sql", "--max-rows", "0", "SELECT * FROM symbols"]);
    assert!(big.stdout.len() > 1 << 20, "bigger than any pipe buffer");
}

/// The periodic lines of an import's stderr, checked: a start line giving the cache's size in
/// `unit`, the same size in every periodic line, the summary last.
fn progress_lines<'a>(err: &'a str, unit: &str) -> Vec<&'a str> {
    let lines: Vec<&str> = err.lines().collect();
    let size = lines[0]
        .strip_prefix("import: reading ")
        .and_then(|rest| rest.rsplit_once(" ("))
        .and_then(|(_, size)| size.strip_suffix(')'))
        .unwrap_or_else(|| panic!("no start line: {err}"));
    assert!(size.ends_with(unit), "{err}");
    assert!(lines.last().unwrap().starts_with("imported "), "{err}");
    let progress = lines[1..lines.len() - 1].to_vec();
    assert!(!progress.is_empty(), "no progress line: {err}");
    for line in &progress {
        assert!(
            line.starts_with("import: ")
                && line.contains(&format!("% of {size} read, "))
                && line.contains(" s elapsed (")
                && line.ends_with(" MB/s)"),
            "{line}"
        );
    }
    progress
}

#[test]
fn import_prints_progress_lines_when_stderr_is_not_a_terminal() {
    let project = generated();
    let out = project.run(&["import", "--full", "--progress-interval", "0.01"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    let progress = progress_lines(&err, " MB");
    assert!(
        progress
            .iter()
            .any(|line| line.starts_with("import: building indexes and full-text search, ")),
        "{err}"
    );
    // A cache of a few kB: every line gives its size in kB.
    let small = TempProject::copy_of(&fixture("demo"));
    let out = small.run(&["import", "--full", "--progress-interval", "0.0005"]);
    assert!(out.status.success(), "{}", stderr(&out));
    progress_lines(&stderr(&out), " kB");

    // A quick import at the default pace: the start line and the summary; without progress,
    // the summary alone.
    let demo = TempProject::copy_of(&fixture("demo"));
    let err = stderr(&demo.import());
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "{err}");
    assert!(
        lines[0].starts_with("import: reading ") && lines[1].starts_with("imported "),
        "{err}"
    );
    // Imported again unchanged: a delta that writes nothing, its summary alone.
    let err = stderr(&demo.run(&["import", "--no-progress"]));
    assert!(
        err.starts_with("delta: no entry changed in ") && err.lines().count() == 1,
        "{err}"
    );
}

#[test]
fn sql_and_query_warn_when_the_cache_is_newer_than_the_database() {
    let project = TempProject::copy_of(&fixture("demo"));
    project.import();
    let sql = ["sql", "SELECT count(*) FROM symbols"];
    let query = ["query", "symbol", "validateSession"];
    for args in [&sql[..], &query[..]] {
        let out = project.run(args);
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(stderr(&out), "", "{args:?} on a fresh database");
    }

    // `acp index` rewrites the cache (here: the same content, a newer mtime).
    let cache = std::fs::read(project.cache_path()).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    std::fs::write(project.cache_path(), cache).unwrap();
    for args in [&sql[..], &query[..]] {
        let out = project.run(args);
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(!out.stdout.is_empty(), "{args:?} still answers");
        let err = stderr(&out);
        assert!(
            err.contains("WARN")
                && err.contains("the database is older than the cache")
                && err.contains("acp.cache.json changed since the last import")
                && err.contains("acpdb import"),
            "{args:?}: {err}"
        );
    }
    project.import();
    assert_eq!(stderr(&project.run(&sql)), "");
}

/// Collects the lines of a child's stderr on a thread.
fn stderr_lines(child: &mut Child) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    let err = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Waits up to a minute for a line containing every one of `parts`; returns it.
fn wait_for_line(lines: &mpsc::Receiver<String>, parts: &[&str], seen: &mut Vec<String>) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) => {
                seen.push(line.clone());
                if parts.iter().all(|part| line.contains(part)) {
                    return line;
                }
            }
            Err(_) => panic!(
                "no line with {parts:?} on stderr; saw:\n{}",
                seen.join("\n")
            ),
        }
    }
}

#[test]
fn serve_logs_background_imports_with_outcome_and_time() {
    let project = TempProject::copy_of(&fixture("demo"));
    let mut child = acpdb()
        .env_remove("ACPDB_LOG")
        .arg("-C")
        .arg(project.root())
        .args(["serve", "--watch-interval", "0.1"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    let lines = stderr_lines(&mut child);
    let mut seen = Vec::new();
    wait_for_line(
        &lines,
        &["INFO", "background import started (first import)", "MB)"],
        &mut seen,
    );
    let done = wait_for_line(&lines, &["INFO", "background import finished"], &mut seen);
    assert!(done.contains(" s (") && done.contains("MB/s"), "{done}");

    std::thread::sleep(Duration::from_millis(20));
    let cache = std::fs::read_to_string(project.cache_path()).unwrap();
    std::fs::write(project.cache_path(), format!("{cache} ")).unwrap();
    wait_for_line(
        &lines,
        &["background import started (the cache changed on disk"],
        &mut seen,
    );
    wait_for_line(&lines, &["background import finished"], &mut seen);

    std::fs::write(project.cache_path(), "{\"files\": {").unwrap();
    wait_for_line(&lines, &["background import started"], &mut seen);
    let failed = wait_for_line(
        &lines,
        &["ERROR", "background import failed after "],
        &mut seen,
    );
    assert!(failed.contains(" s: "), "{failed}");

    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();
}

#[cfg(unix)]
#[test]
fn endless_or_special_inputs_of_the_cli_are_refused_at_once() {
    let project = TempProject::copy_of(&fixture("demo"));
    project.import();
    let (status, err) = run_unblocked(
        project.root(),
        &["impact", "--diff", "/dev/zero"],
        "an endless diff",
    );
    assert!(!status.success());
    assert!(
        err.contains("--diff /dev/zero: is larger than 16 MiB"),
        "{err}"
    );
    let token = project.root().join("token");
    mkfifo(&token);
    // Nobody writes to the FIFO: reading it would block the server's start for ever.
    let (status, err) = run_unblocked(
        project.root(),
        &[
            "serve",
            "--http",
            "127.0.0.1:0",
            "--token-file",
            token.to_str().unwrap(),
        ],
        "a FIFO token file",
    );
    assert!(!status.success());
    assert!(err.contains("is a FIFO, not a regular file"), "{err}");
}
