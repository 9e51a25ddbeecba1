//! The debug/hack journal through its library API: every `acp_debug` and `acp_hack` action and
//! error, path confinement, expiry, the attempts-file export (validated against the bundled
//! schema), import and round trip of existing attempts files, crash safety and concurrent
//! writers (child processes re-running this test binary in "writer mode").

use std::collections::HashSet;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::common::mkfifo;
use acpdb::journal::{
    CacheHack, DebugRequest, HackRequest, Journal, JournalError, ProjectIndex, ATTEMPTS_SCHEMA,
    FILE_LIMIT, TEXT_LIMIT,
};
use chrono::{DateTime, NaiveDate, TimeZone, Utc};
use serde_json::{json, Value};
use tempfile::TempDir;

const MINIMAL_SAMPLE: &str = r#"{
  "$schema": "https://acp-protocol.dev/schemas/v1/attempts.schema.json",
  "version": "1.0.0",
  "updated_at": "2024-01-15T10:00:00Z",
  "attempts": {},
  "checkpoints": {},
  "history": []
}"#;

const WITH_HISTORY_SAMPLE: &str = r#"{
  "$schema": "https://acp-protocol.dev/schemas/v1/attempts.schema.json",
  "version": "1.0.0",
  "updated_at": "2024-01-15T12:00:00Z",
  "attempts": {
    "attempt-001": {
      "id": "attempt-001",
      "status": "active",
      "created_at": "2024-01-15T10:00:00Z",
      "updated_at": "2024-01-15T11:00:00Z",
      "files": [
        {
          "path": "src/auth.rs",
          "original_hash": "d41d8cd98f00b204e9800998ecf8427e",
          "modified_hash": "e9800998ecf8427ed41d8cd98f00b204",
          "lines_changed": [10, 25]
        }
      ],
      "revert_if": ["test failure", "build error"]
    }
  },
  "checkpoints": {
    "before-auth-refactor": {
      "name": "before-auth-refactor",
      "created_at": "2024-01-15T09:00:00Z",
      "description": "State before auth refactoring",
      "files": {
        "src/auth.rs": {
          "hash": "d41d8cd98f00b204e9800998ecf8427e"
        }
      }
    }
  },
  "history": [
    {
      "id": "past-attempt-001",
      "status": "verified",
      "started_at": "2024-01-14T09:00:00Z",
      "ended_at": "2024-01-14T12:00:00Z",
      "files_modified": 3,
      "outcome": "Successfully added user model"
    },
    {
      "id": "past-attempt-002",
      "status": "reverted",
      "started_at": "2024-01-13T14:00:00Z",
      "ended_at": "2024-01-13T16:00:00Z",
      "files_modified": 5,
      "outcome": "Database refactor caused test failures"
    }
  ]
}"#;

const BAD_STATUS_SAMPLE: &str = r#"{
  "$schema": "https://acp-protocol.dev/schemas/v1/attempts.schema.json",
  "version": "1.0.0",
  "attempts": {
    "attempt-001": {
      "id": "attempt-001",
      "status": "invalid_status",
      "started_at": "2024-01-15T10:00:00Z",
      "files": []
    }
  },
  "checkpoints": {},
  "history": []
}"#;

const INVALID_HASH_SAMPLE: &str = r#"{
  "$schema": "https://acp-protocol.dev/schemas/v1/attempts.schema.json",
  "version": "1.0.0",
  "attempts": {
    "attempt-001": {
      "id": "attempt-001",
      "status": "active",
      "started_at": "2024-01-15T10:00:00Z",
      "files": [
        {
          "path": "test.rs",
          "hash": "not-a-valid-md5-hash"
        }
      ]
    }
  },
  "checkpoints": {},
  "history": []
}"#;

const EMPTY_MD5: &str = "d41d8cd98f00b204e9800998ecf8427e";

/// A project directory with a journal whose clock the test sets.
struct Fixture {
    dir: TempDir,
    journal: Journal,
    clock: Arc<Mutex<DateTime<Utc>>>,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("src/auth")).unwrap();
        fs::write(
            dir.path().join("src/auth/jwt.ts"),
            "export const VAT = 0.2;\n",
        )
        .unwrap();
        fs::write(dir.path().join("src/api.ts"), "a").unwrap();
        Fixture::open_in(dir)
    }

    fn open_in(dir: TempDir) -> Fixture {
        let clock = Arc::new(Mutex::new(at(2025, 12, 27, 10, 30, 0)));
        let journal = open(dir.path()).unwrap();
        let shared = clock.clone();
        let journal = journal.with_clock(Arc::new(move || *shared.lock().unwrap()));
        Fixture {
            dir,
            journal,
            clock,
        }
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    fn set_time(&self, time: DateTime<Utc>) {
        *self.clock.lock().unwrap() = time;
    }

    fn debug(&self, request: Value) -> Result<Value, JournalError> {
        self.journal
            .debug(debug_request(request))
            .map(|r| r.to_value())
    }

    fn hack(&self, request: Value) -> Result<Value, JournalError> {
        self.journal
            .hack(hack_request(request))
            .map(|r| r.to_value())
    }

    fn debug_ok(&self, request: Value) -> Value {
        self.debug(request.clone())
            .unwrap_or_else(|e| panic!("{request}: {e}"))
    }

    fn hack_ok(&self, request: Value) -> Value {
        self.hack(request.clone())
            .unwrap_or_else(|e| panic!("{request}: {e}"))
    }

    fn attempts_file(&self) -> Value {
        read_json(&attempts_path(self.root()))
    }

    fn start(&self) -> String {
        let started = self.debug_ok(json!({"action": "start", "data": {
            "problem": "Authentication fails for expired tokens",
            "hypothesis": "Token expiration check happens after signature validation"}}));
        started["session_id"].as_str().unwrap().to_owned()
    }
}

fn at(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, mo, d, h, mi, s).unwrap()
}

fn journal_db(root: &Path) -> PathBuf {
    root.join(".acp/acp.journal.db")
}

fn attempts_path(root: &Path) -> PathBuf {
    root.join(".acp/acp.attempts.json")
}

fn open(root: &Path) -> Result<Journal, JournalError> {
    Journal::open(&journal_db(root), root, &attempts_path(root))
}

#[cfg(unix)]
#[test]
fn journal_files_planted_as_links_are_never_written_through() {
    let outside = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let root = project.path();
    fs::create_dir_all(root.join(".acp")).unwrap();
    let refusal = |what: &str| match open(root) {
        Ok(_) => panic!("a linked {what} is refused"),
        Err(err) => err.message().to_string(),
    };
    let elsewhere = outside.path().join("journal.db");
    std::os::unix::fs::symlink(&elsewhere, journal_db(root)).unwrap();
    let message = refusal("journal database");
    assert!(
        message.contains("is a symbolic link, which acpdb does not write through"),
        "{message}"
    );
    assert!(
        !elsewhere.exists(),
        "the journal was created through the link"
    );

    fs::remove_file(journal_db(root)).unwrap();
    let attempts = outside.path().join("attempts.json");
    fs::write(&attempts, "keep").unwrap();
    std::os::unix::fs::symlink(&attempts, attempts_path(root)).unwrap();
    let message = refusal("attempts file");
    assert!(
        message.contains("is a symbolic link, which the journal neither reads nor writes through"),
        "{message}"
    );
    assert_eq!(fs::read_to_string(&attempts).unwrap(), "keep");
}

/// SQLite's no-follow flag refuses a link anywhere in a path, not only at its end: a project
/// reached through a linked directory (`/tmp` on macOS, a linked home or work directory) still
/// records its sessions, and the files they touch.
#[cfg(unix)]
#[test]
fn a_project_reached_through_a_linked_directory_keeps_its_journal() {
    let project = tempfile::tempdir().unwrap();
    fs::create_dir_all(project.path().join(".acp")).unwrap();
    fs::create_dir_all(project.path().join("src")).unwrap();
    fs::write(project.path().join("src/api.ts"), "export const a = 1;\n").unwrap();
    let links = tempfile::tempdir().unwrap();
    let root = links.path().join("project");
    std::os::unix::fs::symlink(project.path(), &root).unwrap();
    let journal = open(&root).unwrap_or_else(|err| panic!("{}", err.message()));
    let started = journal
        .debug(debug_request(json!({"action": "start", "data": {
            "problem": "Reached through a link", "hypothesis": "The journal opens"}})))
        .unwrap()
        .to_value();
    let session = started["session_id"].as_str().unwrap();
    journal
        .debug(debug_request(json!({"action": "attempt", "data": {
            "session_id": session, "description": "Touch the API", "files": ["src/api.ts"]}})))
        .unwrap_or_else(|err| panic!("{}", err.message()));
    let written = read_json(&attempts_path(project.path()));
    assert_eq!(
        written["attempts"].as_object().unwrap().len(),
        1,
        "{written}"
    );
    assert!(journal_db(project.path()).is_file());
}

fn debug_request(value: Value) -> DebugRequest {
    serde_json::from_value(value).unwrap()
}

fn hack_request(value: Value) -> HackRequest {
    serde_json::from_value(value).unwrap()
}

fn read_json(path: &Path) -> Value {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}\n{text}", path.display()))
}

fn invalid(result: Result<Value, JournalError>) -> String {
    match result {
        Err(err @ JournalError::InvalidParams(_)) => err.message().to_owned(),
        other => panic!("expected invalid params, got {other:?}"),
    }
}

/// Schema violations of `document` (empty when valid).
fn schema_errors(document: &Value) -> Vec<String> {
    let schema: Value = serde_json::from_str(ATTEMPTS_SCHEMA).unwrap();
    let validator = jsonschema::draft7::options()
        .should_validate_formats(true)
        .build(&schema)
        .unwrap();
    validator
        .iter_errors(document)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect()
}

fn assert_valid(document: &Value) {
    let errors = schema_errors(document);
    assert!(
        errors.is_empty(),
        "schema errors: {errors:#?}\n{document:#}"
    );
}

/// Keys of a JSON object in the order the text gives them.
fn key_order(text: &str) -> Vec<String> {
    let mut keys = Vec::new();
    let mut depth = 0;
    let mut rest = text;
    while let Some(i) = rest.find(['{', '}', '[', ']', '"']) {
        let c = rest.as_bytes()[i];
        rest = &rest[i + 1..];
        match c {
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth -= 1,
            _ => {
                let end = rest.find('"').unwrap();
                let word = &rest[..end];
                rest = &rest[end + 1..];
                if depth == 1 && rest.trim_start().starts_with(':') {
                    keys.push(word.to_owned());
                }
            }
        }
    }
    keys
}

#[test]
fn start_matches_the_rfc_example() {
    let f = Fixture::new();
    let response = f
        .journal
        .debug(debug_request(json!({"action": "start", "data": {
            "problem": "Authentication fails for expired tokens",
            "hypothesis": "Token expiration check happens after signature validation"}})))
        .unwrap();
    assert_eq!(
        response.to_value(),
        json!({"action": "start", "session_id": "debug-20251227-001",
               "created_at": "2025-12-27T10:30:00Z", "status": "active",
               "problem": "Authentication fails for expired tokens",
               "hypothesis": "Token expiration check happens after signature validation"})
    );
    assert_eq!(
        key_order(response.text()),
        [
            "action",
            "session_id",
            "created_at",
            "status",
            "problem",
            "hypothesis"
        ]
    );
}

#[test]
fn ids_follow_day_and_session_sequences() {
    let f = Fixture::new();
    assert_eq!(f.start(), "debug-20251227-001");
    assert_eq!(f.start(), "debug-20251227-002");
    f.set_time(at(2025, 12, 28, 0, 0, 1));
    let third = f.start();
    assert_eq!(third, "debug-20251228-001");
    for expected in ["attempt-001", "attempt-002"] {
        let logged = f.debug_ok(json!({"action": "attempt", "data": {
            "session_id": third, "description": "try"}}));
        assert_eq!(logged["attempt_id"], expected);
    }
    let logged = f.debug_ok(json!({"action": "attempt", "data": {
        "session_id": "debug-20251227-001", "description": "try"}}));
    assert_eq!(logged["attempt_id"], "attempt-001");
}

/// A file of an attempt that can no longer be read when its result or revert is recorded keeps
/// the hash it had, and the answer says which and why rather than pass it for unchanged.
#[cfg(unix)]
#[test]
fn files_that_cannot_be_read_at_a_result_are_named_in_the_answer() {
    let f = Fixture::new();
    let session = f.start();
    for (file, verb) in [("src/api.ts", "result"), ("src/auth/jwt.ts", "revert")] {
        let logged = f.debug_ok(json!({"action": "attempt", "data": {
            "session_id": session, "description": "try", "files": [file]}}));
        let attempt = logged["attempt_id"].as_str().unwrap().to_owned();
        fs::remove_file(f.root().join(file)).unwrap();
        mkfifo(&f.root().join(file));
        let answer = f.debug_ok(json!({"action": verb, "data": {
            "session_id": session, "attempt_id": attempt, "success": false}}));
        let unread = answer["unread_files"]
            .as_array()
            .expect("unread files named");
        assert_eq!(unread.len(), 1, "{answer}");
        let unread = unread[0].as_str().unwrap();
        assert!(unread.contains(&format!("{file} is a FIFO")), "{unread}");
    }
    // Files read as usual leave the field out.
    let logged = f.debug_ok(json!({"action": "attempt", "data": {
        "session_id": session, "description": "try"}}));
    let answer = f.debug_ok(json!({"action": "result", "data": {
        "session_id": session, "attempt_id": logged["attempt_id"], "success": true}}));
    assert!(answer.get("unread_files").is_none(), "{answer}");
}

/// The attempts file the journal writes outgrows what it reads whole (64 MiB) once it holds
/// enough snapshots: unchanged since written, it is known by its length and MD5, read in pieces,
/// and the journal keeps working; changed by someone else, it is refused as too large.
#[test]
fn an_attempts_file_the_journal_grew_past_the_read_limit_keeps_it_working() {
    let f = Fixture::new();
    // An attempt of acp-cli's whose snapshot takes the file to just under the limit.
    let mut document: Value = serde_json::from_str(WITH_HISTORY_SAMPLE).unwrap();
    let filler = "x".repeat(FILE_LIMIT as usize - 60_000);
    document["attempts"]["attempt-001"]["files"][0]["original_content"] = json!(filler);
    fs::write(attempts_path(f.root()), document.to_string()).unwrap();
    // The journal's own attempt adds a snapshot of 99,000 bytes: its export passes the limit.
    fs::write(f.root().join("src/big.ts"), "y".repeat(99_000)).unwrap();
    let session = f.start();
    f.debug_ok(json!({"action": "attempt", "data": {
        "session_id": session, "description": "big", "files": ["src/big.ts"]}}));
    let size = fs::metadata(attempts_path(f.root())).unwrap().len();
    assert!(size > FILE_LIMIT, "{size}");
    drop(open(f.root()).unwrap_or_else(|err| panic!("{}", err.message())));
    // Changed by another writer, it would have to be read whole: refused, and named.
    let mut bytes = fs::read(attempts_path(f.root())).unwrap();
    let at = bytes.iter().rposition(|&b| b == b'x').unwrap();
    bytes[at] = b'z';
    fs::write(attempts_path(f.root()), bytes).unwrap();
    let message = match open(f.root()) {
        Ok(_) => panic!("a file too large to merge is refused"),
        Err(err) => err.message().to_owned(),
    };
    assert!(message.contains("File too large"), "{message}");
}

#[test]
fn full_session_lifecycle() {
    let f = Fixture::new();
    let session = f.start();
    f.set_time(at(2025, 12, 27, 10, 35, 0));
    let logged = f
        .journal
        .debug(debug_request(json!({"action": "attempt", "data": {
            "session_id": session,
            "description": "Move expiration check before signature validation",
            "files": ["src/auth/jwt.ts"]}})))
        .unwrap();
    assert_eq!(
        logged.to_value(),
        json!({"action": "attempt", "session_id": "debug-20251227-001",
               "attempt_id": "attempt-001",
               "description": "Move expiration check before signature validation",
               "files": ["src/auth/jwt.ts"], "created_at": "2025-12-27T10:35:00Z"})
    );
    assert_eq!(
        key_order(logged.text()),
        [
            "action",
            "session_id",
            "attempt_id",
            "description",
            "files",
            "created_at"
        ]
    );

    let status = f.debug_ok(json!({"action": "status"}));
    assert_eq!(
        status,
        json!({"action": "status", "session": {
            "id": "debug-20251227-001", "status": "active",
            "problem": "Authentication fails for expired tokens",
            "hypothesis": "Token expiration check happens after signature validation",
            "created_at": "2025-12-27T10:30:00Z",
            "attempts": [{"id": "attempt-001",
                          "description": "Move expiration check before signature validation",
                          "files": ["src/auth/jwt.ts"], "status": "pending",
                          "created_at": "2025-12-27T10:35:00Z"}]}})
    );

    f.set_time(at(2025, 12, 27, 10, 40, 0));
    let failed = f.debug_ok(json!({"action": "result", "data": {
        "session_id": session, "attempt_id": "attempt-001", "success": false,
        "notes": "Still fails"}}));
    assert_eq!(
        failed,
        json!({"action": "result", "session_id": session, "attempt_id": "attempt-001",
               "status": "failed", "success": false, "notes": "Still fails",
               "recorded_at": "2025-12-27T10:40:00Z"})
    );

    let second = f.debug_ok(json!({"action": "attempt", "data": {
        "session_id": session, "description": "Check expiry first", "files": ["src/api.ts"]}}));
    assert_eq!(second["attempt_id"], "attempt-002");
    let succeeded = f.debug_ok(json!({"action": "result", "data": {
        "session_id": session, "attempt_id": "attempt-002", "success": true}}));
    assert_eq!(succeeded["status"], "succeeded");
    assert!(succeeded.get("notes").is_none());

    f.set_time(at(2025, 12, 27, 10, 45, 0));
    let reverted = f.debug_ok(json!({"action": "revert", "data": {
        "session_id": session, "attempt_id": "attempt-001"}}));
    assert_eq!(
        reverted,
        json!({"action": "revert", "session_id": session, "attempt_id": "attempt-001",
               "status": "reverted", "files": ["src/auth/jwt.ts"],
               "reverted_at": "2025-12-27T10:45:00Z"})
    );

    let other = f.start();
    let listed = f.debug_ok(json!({"action": "list"}));
    assert_eq!(listed["total"], 2);
    assert_eq!(listed["sessions"][0]["id"], session);
    assert_eq!(listed["sessions"][0]["attempt_count"], 2);
    assert_eq!(listed["sessions"][1]["id"], other);

    f.set_time(at(2025, 12, 27, 11, 0, 0));
    let resolved = f.debug_ok(json!({"action": "resolve", "data": {
        "session_id": session, "resolution": "Expiry checked before signature"}}));
    assert_eq!(
        resolved,
        json!({"action": "resolve", "session_id": session, "status": "resolved",
               "resolution": "Expiry checked before signature",
               "resolved_at": "2025-12-27T11:00:00Z", "attempt_count": 2})
    );

    let listed = f.debug_ok(json!({"action": "list"}));
    assert_eq!(listed["total"], 1);
    assert_eq!(listed["sessions"][0]["id"], other);

    let status = f.debug_ok(json!({"action": "status", "data": {"session_id": session}}));
    let session_view = &status["session"];
    assert_eq!(session_view["status"], "resolved");
    assert_eq!(
        session_view["resolution"],
        "Expiry checked before signature"
    );
    assert_eq!(session_view["resolved_at"], "2025-12-27T11:00:00Z");
    let attempts = session_view["attempts"].as_array().unwrap();
    assert_eq!(attempts[0]["status"], "reverted");
    assert_eq!(attempts[0]["success"], false);
    assert_eq!(attempts[0]["notes"], "Still fails");
    assert_eq!(attempts[0]["result_at"], "2025-12-27T10:40:00Z");
    assert_eq!(attempts[0]["reverted_at"], "2025-12-27T10:45:00Z");
    assert_eq!(attempts[1]["status"], "succeeded");
    assert_eq!(attempts[1]["success"], true);

    let default_status = f.debug_ok(json!({"action": "status"}));
    assert_eq!(default_status["session"]["id"], other);
}

#[test]
fn status_defaults_to_the_most_recent_active_session() {
    let f = Fixture::new();
    assert_eq!(
        f.debug_ok(json!({"action": "list"})),
        json!({"action": "list", "sessions": [], "total": 0})
    );
    let message = invalid(f.debug(json!({"action": "status"})));
    assert!(message.starts_with("No active debug session"), "{message}");
    let first = f.start();
    let second = f.start();
    assert_eq!(
        f.debug_ok(json!({"action": "status"}))["session"]["id"],
        second
    );
    f.debug_ok(json!({"action": "resolve", "data": {"session_id": second, "resolution": "ok"}}));
    assert_eq!(
        f.debug_ok(json!({"action": "status", "data": {}}))["session"]["id"],
        first
    );
}

#[test]
fn missing_and_invalid_debug_parameters_are_refused() {
    let f = Fixture::new();
    let session = f.start();
    assert_eq!(
        invalid(f.debug(json!({}))),
        "Missing required parameter: action"
    );
    assert_eq!(
        invalid(f.debug(json!({"action": "explode"}))),
        "Invalid action: explode. Use: start, attempt, result, revert, resolve, status, list"
    );
    let cases = [
        (
            json!({"action": "start"}),
            "'problem' required for start action",
        ),
        (
            json!({"action": "start", "data": {"problem": "p"}}),
            "'hypothesis' required for start action",
        ),
        (
            json!({"action": "start", "data": {"problem": "  ", "hypothesis": "h"}}),
            "'problem' required for start action",
        ),
        (
            json!({"action": "attempt", "data": {"description": "d"}}),
            "'session_id' required for attempt action",
        ),
        (
            json!({"action": "attempt", "data": {"session_id": session}}),
            "'description' required for attempt action",
        ),
        (
            json!({"action": "result", "data": {"session_id": session}}),
            "'attempt_id' required for result action",
        ),
        (
            json!({"action": "result", "data": {"session_id": session, "attempt_id": "attempt-001"}}),
            "'success' required for result action",
        ),
        (
            json!({"action": "result", "data": {"attempt_id": "attempt-001", "success": true}}),
            "'session_id' required for result action",
        ),
        (
            json!({"action": "revert", "data": {"session_id": session}}),
            "'attempt_id' required for revert action",
        ),
        (
            json!({"action": "revert", "data": {"attempt_id": "attempt-001"}}),
            "'session_id' required for revert action",
        ),
        (
            json!({"action": "resolve", "data": {"session_id": session}}),
            "'resolution' required for resolve action",
        ),
        (
            json!({"action": "resolve", "data": {"resolution": "r"}}),
            "'session_id' required for resolve action",
        ),
    ];
    for (request, expected) in cases {
        assert_eq!(invalid(f.debug(request.clone())), expected, "{request}");
    }
    // A type error is caught by deserialisation, before the journal sees the call.
    assert!(serde_json::from_value::<DebugRequest>(
        json!({"action": "result", "data": {"success": "yes"}})
    )
    .is_err());
}

#[test]
fn impossible_moves_say_what_is_allowed() {
    let f = Fixture::new();
    let session = f.start();
    let unknown = invalid(f.debug(json!({"action": "attempt", "data": {
        "session_id": "debug-20990101-001", "description": "d"}})));
    assert!(
        unknown.starts_with("Session not found: debug-20990101-001"),
        "{unknown}"
    );
    assert!(unknown.contains("'list'"), "{unknown}");

    let no_attempts = invalid(f.debug(json!({"action": "result", "data": {
        "session_id": session, "attempt_id": "attempt-001", "success": true}})));
    assert!(
        no_attempts.starts_with(&format!(
            "Attempt not found: attempt-001 in session {session}"
        )),
        "{no_attempts}"
    );
    assert!(no_attempts.contains("no attempts yet"), "{no_attempts}");

    f.debug_ok(json!({"action": "attempt", "data": {"session_id": session, "description": "d"}}));
    let unknown_attempt = invalid(f.debug(json!({"action": "revert", "data": {
        "session_id": session, "attempt_id": "attempt-009"}})));
    assert!(
        unknown_attempt.contains("this session has: attempt-001"),
        "{unknown_attempt}"
    );

    f.debug_ok(json!({"action": "result", "data": {
        "session_id": session, "attempt_id": "attempt-001", "success": false}}));
    let twice = invalid(f.debug(json!({"action": "result", "data": {
        "session_id": session, "attempt_id": "attempt-001", "success": true}})));
    assert!(
        twice.starts_with("Attempt already has a result: attempt-001"),
        "{twice}"
    );
    assert!(twice.contains("revert this one"), "{twice}");

    f.debug_ok(
        json!({"action": "revert", "data": {"session_id": session, "attempt_id": "attempt-001"}}),
    );
    let reverted_twice = invalid(f.debug(json!({"action": "revert", "data": {
        "session_id": session, "attempt_id": "attempt-001"}})));
    assert!(
        reverted_twice.starts_with("Attempt already reverted: attempt-001"),
        "{reverted_twice}"
    );
    assert!(
        reverted_twice.contains("log a new attempt"),
        "{reverted_twice}"
    );
    let result_after_revert = invalid(f.debug(json!({"action": "result", "data": {
        "session_id": session, "attempt_id": "attempt-001", "success": true}})));
    assert!(
        result_after_revert.starts_with("Attempt already reverted"),
        "{result_after_revert}"
    );

    f.debug_ok(json!({"action": "resolve", "data": {"session_id": session, "resolution": "done"}}));
    let expected = format!("Session is not active: {session} (status: resolved)");
    for request in [
        json!({"action": "attempt", "data": {"session_id": session, "description": "d"}}),
        json!({"action": "result", "data": {"session_id": session, "attempt_id": "attempt-001", "success": true}}),
        json!({"action": "revert", "data": {"session_id": session, "attempt_id": "attempt-001"}}),
        json!({"action": "resolve", "data": {"session_id": session, "resolution": "again"}}),
    ] {
        let message = invalid(f.debug(request.clone()));
        assert!(message.starts_with(&expected), "{request}: {message}");
        assert!(message.contains("start a new session"), "{message}");
    }
}

#[test]
fn paths_must_stay_inside_the_project_root() {
    let f = Fixture::new();
    let session = f.start();
    let outside = tempfile::tempdir().unwrap();
    fs::write(outside.path().join("secret.txt"), "secret").unwrap();
    std::os::unix::fs::symlink(outside.path(), f.root().join("src/escape")).unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("secret.txt"),
        f.root().join("src/leak.txt"),
    )
    .unwrap();
    std::os::unix::fs::symlink("/nonexistent/elsewhere", f.root().join("src/dangling")).unwrap();
    std::os::unix::fs::symlink(f.root().join("src/auth"), f.root().join("src/inner")).unwrap();

    let inside_abs = f.root().join("src/auth/jwt.ts").display().to_string();
    let refused = [
        "../x".to_owned(),
        "src/../../x".to_owned(),
        "..\\x".to_owned(),
        "/etc/passwd".to_owned(),
        "src/escape/secret.txt".to_owned(),
        "src/leak.txt".to_owned(),
        "src/dangling/file".to_owned(),
        format!("{}/../other/file", f.root().display()),
    ];
    for path in &refused {
        let message = invalid(f.debug(json!({"action": "attempt", "data": {
            "session_id": session, "description": "d", "files": ["src/api.ts", path]}})));
        assert_eq!(message, format!("Path outside project root: {path}"));
        let message =
            invalid(f.hack(json!({"action": "mark", "data": {"file": path, "reason": "r"}})));
        assert_eq!(message, format!("Path outside project root: {path}"));
    }
    // Nothing was recorded by the refused calls.
    let status = f.debug_ok(json!({"action": "status"}));
    assert_eq!(status["session"]["attempts"], json!([]));

    let accepted = f.debug_ok(json!({"action": "attempt", "data": {
        "session_id": session, "description": "d",
        "files": ["./src//auth/./jwt.ts", inside_abs, "src\\api.ts", "src/x/../new.ts",
                  "src/inner/jwt.ts"]}}));
    assert_eq!(
        accepted["files"],
        json!([
            "src/auth/jwt.ts",
            "src/api.ts",
            "src/new.ts",
            "src/inner/jwt.ts"
        ])
    );
    assert!(invalid(f.debug(json!({"action": "attempt", "data": {
        "session_id": session, "description": "d", "files": ["src/.."]}})))
    .contains("names the project root"));
    assert!(invalid(f.debug(json!({"action": "attempt", "data": {
        "session_id": session, "description": "d", "files": ["src/auth"]}})))
    .starts_with("Not a file: src/auth"));
}

/// The `modified_hash` the journal records for `path` in an attempt.
fn modified_hash(f: &Fixture, session: &str, attempt: &str, path: &str) -> String {
    let conn = rusqlite::Connection::open(journal_db(f.root())).unwrap();
    conn.query_row(
        "SELECT modified_hash FROM attempt_files
         WHERE session_id = ?1 AND attempt_id = ?2 AND path = ?3",
        [session, attempt, path],
        |row| row.get(0),
    )
    .unwrap()
}

#[test]
fn files_are_confined_again_at_every_read() {
    let f = Fixture::new();
    let session = f.start();
    let outside = tempfile::tempdir().unwrap();
    fs::write(outside.path().join("api.ts"), "outside secret").unwrap();
    fs::write(outside.path().join("jwt.ts"), "outside secret").unwrap();
    let secret_md5 = md5_of(b"outside secret");
    let logged = f.debug_ok(json!({"action": "attempt", "data": {
        "session_id": session, "description": "d", "files": ["src/api.ts", "src/auth/jwt.ts"]}}));
    let attempt = logged["attempt_id"].as_str().unwrap().to_owned();
    let api_md5 = modified_hash(&f, &session, &attempt, "src/api.ts");

    // The file becomes a link to a file outside, and its directory a link to a directory
    // outside: the result keeps the hashes it had instead of reading outside the root.
    fs::remove_file(f.root().join("src/api.ts")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("api.ts"), f.root().join("src/api.ts")).unwrap();
    fs::rename(f.root().join("src/auth"), f.root().join("src/auth-moved")).unwrap();
    std::os::unix::fs::symlink(outside.path(), f.root().join("src/auth")).unwrap();
    f.debug_ok(json!({"action": "result", "data": {
        "session_id": session, "attempt_id": attempt, "success": false}}));
    assert_eq!(modified_hash(&f, &session, &attempt, "src/api.ts"), api_md5);
    let jwt_md5 = modified_hash(&f, &session, &attempt, "src/auth/jwt.ts");
    assert_eq!(jwt_md5, md5_of(b"export const VAT = 0.2;\n"));
    assert_eq!(api_md5, md5_of(b"a"));

    // A revert through a link to an endless device returns at once and reads nothing.
    fs::remove_file(f.root().join("src/api.ts")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", f.root().join("src/api.ts")).unwrap();
    let started = Instant::now();
    f.debug_ok(json!({"action": "revert", "data": {
        "session_id": session, "attempt_id": attempt}}));
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(modified_hash(&f, &session, &attempt, "src/api.ts"), api_md5);

    // A new attempt through the same links is refused, and nothing outside was stored.
    for path in ["src/api.ts", "src/auth/jwt.ts"] {
        let message = invalid(f.debug(json!({"action": "attempt", "data": {
            "session_id": session, "description": "d", "files": [path]}})));
        assert_eq!(message, format!("Path outside project root: {path}"));
    }
    let text = fs::read_to_string(attempts_path(f.root())).unwrap();
    assert!(!text.contains("outside secret"), "{text}");
    assert!(!text.contains(&secret_md5), "{text}");
}

fn md5_of(bytes: &[u8]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    fs::write(&path, bytes).unwrap();
    let out = Command::new("md5sum").arg(&path).output().unwrap();
    String::from_utf8(out.stdout).unwrap()[..32].to_owned()
}

#[test]
fn only_regular_files_of_bounded_size_are_read() {
    let f = Fixture::new();
    let session = f.start();
    mkfifo(&f.root().join("src/pipe"));
    let big = fs::File::create(f.root().join("src/big.bin")).unwrap();
    big.set_len(FILE_LIMIT + 1).unwrap();

    let (sender, receiver) = std::sync::mpsc::channel();
    let journal = open(f.root()).unwrap();
    let request = debug_request(json!({"action": "attempt", "data": {
        "session_id": session, "description": "d", "files": ["src/api.ts", "src/pipe"]}}));
    std::thread::spawn(move || sender.send(journal.debug(request)).unwrap());
    let answer = receiver
        .recv_timeout(Duration::from_secs(10))
        .expect("an attempt naming a FIFO answers at once");
    assert_eq!(
        invalid(answer.map(|r| r.to_value())),
        "Not a regular file: src/pipe is a FIFO; the journal reads regular files only"
    );

    let message = invalid(f.debug(json!({"action": "attempt", "data": {
        "session_id": session, "description": "d", "files": ["src/big.bin"]}})));
    assert_eq!(
        message,
        format!(
            "File too large: src/big.bin has {} bytes; the journal reads files of at most \
             {FILE_LIMIT} bytes",
            FILE_LIMIT + 1
        )
    );
    let status = f.debug_ok(json!({"action": "status"}));
    assert_eq!(status["session"]["attempts"], json!([]));
    f.debug_ok(json!({"action": "attempt", "data": {
        "session_id": session, "description": "d", "files": ["src/api.ts"]}}));
    // A path through a file names nothing, as a missing file does: no internal error.
    for nothing in ["src/missing.ts", "src/api.ts/x"] {
        f.debug_ok(json!({"action": "attempt", "data": {
            "session_id": session, "description": "d", "files": [nothing]}}));
    }
}

#[test]
fn text_fields_are_capped() {
    let f = Fixture::new();
    let long = "x".repeat(TEXT_LIMIT + 1);
    let message = invalid(f.debug(json!({"action": "start", "data": {
        "problem": long, "hypothesis": "h"}})));
    assert_eq!(
        message,
        format!(
            "problem: at most {TEXT_LIMIT} bytes, got {}",
            TEXT_LIMIT + 1
        )
    );
    let session = f.start();
    let refused = [
        (
            "files",
            json!({"action": "attempt", "data": {
            "session_id": session, "description": "d", "files": [long]}}),
        ),
        (
            "description",
            json!({"action": "attempt", "data": {
            "session_id": session, "description": long}}),
        ),
        (
            "notes",
            json!({"action": "result", "data": {
            "session_id": session, "attempt_id": "attempt-001", "success": true, "notes": long}}),
        ),
        (
            "resolution",
            json!({"action": "resolve", "data": {
            "session_id": session, "resolution": long}}),
        ),
    ];
    for (field, request) in refused {
        let message = invalid(f.debug(request));
        assert!(
            message.starts_with(&format!("{field}: at most {TEXT_LIMIT} bytes")),
            "{message}"
        );
    }
    let message = invalid(f.hack(json!({"action": "mark", "data": {
        "file": "src/api.ts", "reason": long}})));
    assert!(message.starts_with("reason: at most"), "{message}");

    let fits = "y".repeat(TEXT_LIMIT);
    let started = f.debug_ok(json!({"action": "start", "data": {
        "problem": fits, "hypothesis": "h"}}));
    assert_eq!(started["problem"].as_str().map(str::len), Some(TEXT_LIMIT));
    let size = fs::metadata(attempts_path(f.root())).unwrap().len();
    assert!(
        size < 4 * TEXT_LIMIT as u64,
        "attempts file of {size} bytes"
    );
}

#[test]
fn stale_temp_files_are_swept_when_the_journal_opens() {
    let dir = project_with_file();
    let acp = dir.path().join(".acp");
    fs::create_dir_all(&acp).unwrap();
    // Beyond any pid_max, so no such process runs.
    let dead = acp.join(".acp.attempts.json.99999999.tmp");
    let live_fresh = acp.join(format!(".acp.attempts.json.{}.tmp", std::process::id()));
    let live_old = acp.join(".acp.attempts.json.1.tmp");
    let others = [
        acp.join(".acp.attempts.json.backup.tmp"),
        acp.join(".acp.attempts.json.0123.tmp"),
        acp.join(".acp.attempts.json.99999999.tmp.keep"),
        acp.join(".other.json.99999999.tmp"),
    ];
    let long_ago = SystemTime::now() - Duration::from_secs(3600);
    for path in [&dead, &live_fresh, &live_old].into_iter().chain(&others) {
        let file = fs::File::create(path).unwrap();
        if path != &live_fresh {
            file.set_modified(long_ago).unwrap();
        }
    }
    open(dir.path()).unwrap();
    assert!(!dead.exists(), "the temp file of a gone writer is removed");
    assert!(!live_old.exists(), "an old temp file is removed");
    assert!(live_fresh.exists(), "a running writer's temp file is kept");
    for path in &others {
        assert!(
            path.exists(),
            "{} is not a temp file of the journal",
            path.display()
        );
    }
}

struct Index {
    files: HashSet<String>,
    hacks: Vec<CacheHack>,
}

impl ProjectIndex for Index {
    fn is_indexed(&self, path: &str) -> bool {
        self.files.contains(path)
    }

    fn cache_hacks(&self) -> anyhow::Result<Vec<CacheHack>> {
        Ok(self.hacks.clone())
    }
}

#[test]
fn files_unknown_to_the_index_are_accepted_and_flagged() {
    let f = Fixture::new();
    let index = Index {
        files: HashSet::from(["src/api.ts".to_owned()]),
        hacks: Vec::new(),
    };
    let journal = open(f.root()).unwrap().with_index(Arc::new(index));
    let started = journal
        .debug(debug_request(
            json!({"action": "start", "data": {"problem": "p", "hypothesis": "h"}}),
        ))
        .unwrap()
        .to_value();
    let logged = journal
        .debug(debug_request(json!({"action": "attempt", "data": {
            "session_id": started["session_id"], "description": "d",
            "files": ["src/api.ts", "src/auth/jwt.ts", "src/brand-new.ts"]}})))
        .unwrap()
        .to_value();
    assert_eq!(
        logged["files"],
        json!(["src/api.ts", "src/auth/jwt.ts", "src/brand-new.ts"])
    );
    assert_eq!(
        logged["unindexed_files"],
        json!(["src/auth/jwt.ts", "src/brand-new.ts"])
    );

    let marked = journal
        .hack(hack_request(
            json!({"action": "mark", "data": {"file": "src/other.ts", "reason": "r"}}),
        ))
        .unwrap()
        .to_value();
    assert_eq!(marked["unindexed_files"], json!(["src/other.ts"]));

    let closure = open(f.root())
        .unwrap()
        .with_index(Arc::new(|path: &str| path == "src/other.ts"));
    let marked = closure
        .hack(hack_request(
            json!({"action": "mark", "data": {"file": "src/other.ts", "reason": "r"}}),
        ))
        .unwrap()
        .to_value();
    assert!(marked.get("unindexed_files").is_none(), "{marked}");
}

#[test]
fn hack_mark_list_revert() {
    let f = Fixture::new();
    f.set_time(at(2025, 12, 27, 10, 0, 0));
    let marked = f
        .journal
        .hack(hack_request(json!({"action": "mark", "data": {
            "file": "src/api/legacy.ts", "line": 45,
            "reason": "Workaround for legacy API response format",
            "ticket": "PROJ-1234", "expires": "2026-01-15"}})))
        .unwrap();
    let expected_hack = json!({"id": "hack-001", "file": "src/api/legacy.ts", "line": 45,
        "reason": "Workaround for legacy API response format", "ticket": "PROJ-1234",
        "expires": "2026-01-15", "expired": false, "created_at": "2025-12-27T10:00:00Z",
        "source": "mcp"});
    assert_eq!(
        marked.to_value(),
        json!({"action": "mark", "hack": expected_hack})
    );
    assert!(marked.text().find("\"id\"").unwrap() < marked.text().find("\"source\"").unwrap());

    f.hack_ok(json!({"action": "mark", "data": {"file": "./src/a.ts", "line": 9, "reason": "b"}}));
    f.hack_ok(json!({"action": "mark", "data": {"file": "src/a.ts", "line": 3, "reason": "c"}}));
    f.hack_ok(json!({"action": "mark", "data": {"file": "src/a.ts", "reason": "d"}}));

    let listed = f.hack_ok(json!({"action": "list"}));
    let ids: Vec<&str> = listed["hacks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["hack-004", "hack-003", "hack-002", "hack-001"]);
    assert_eq!(listed["total"], 4);
    assert_eq!(listed["expired_count"], 0);
    assert_eq!(listed["hacks"][3], expected_hack);

    let filtered = f.hack_ok(json!({"action": "list", "data": {"file": "src/./a.ts"}}));
    assert_eq!(filtered["total"], 3);

    assert_eq!(
        f.hack_ok(json!({"action": "revert", "data": {"id": "hack-003"}})),
        json!({"action": "revert", "id": "hack-003", "removed": true})
    );
    assert!(
        invalid(f.hack(json!({"action": "revert", "data": {"id": "hack-003"}})))
            .starts_with("Hack not found: hack-003")
    );
    assert_eq!(f.hack_ok(json!({"action": "list"}))["total"], 3);
    // Ids are never handed out twice, even after a revert.
    let next = f.hack_ok(json!({"action": "mark", "data": {"file": "src/z.ts", "reason": "e"}}));
    assert_eq!(next["hack"]["id"], "hack-005");
}

#[test]
fn hack_parameters_are_checked() {
    let f = Fixture::new();
    assert_eq!(
        invalid(f.hack(json!({"data": {}}))),
        "Missing required parameter: action"
    );
    assert_eq!(
        invalid(f.hack(json!({"action": "remove"}))),
        "Invalid action: remove. Use: mark, list, revert, cleanup"
    );
    let cases = [
        (
            json!({"action": "mark", "data": {"reason": "r"}}),
            "'file' required for mark action".to_owned(),
        ),
        (
            json!({"action": "mark", "data": {"file": "a.ts"}}),
            "'reason' required for mark action".to_owned(),
        ),
        (
            json!({"action": "revert"}),
            "'id' required for revert action".to_owned(),
        ),
        (
            json!({"action": "revert", "data": {"id": "hack-404"}}),
            "Hack not found: hack-404".to_owned(),
        ),
    ];
    for (request, expected) in cases {
        let message = invalid(f.hack(request.clone()));
        assert!(message.starts_with(&expected), "{request}: {message}");
    }
    for bad in [
        "2026-13-01",
        "2026-02-30",
        "2026-1-5",
        "tomorrow",
        "2026-01-15T00:00:00Z",
    ] {
        assert_eq!(
            invalid(f.hack(
                json!({"action": "mark", "data": {"file": "a.ts", "reason": "r", "expires": bad}})
            )),
            format!("Invalid expires date: {bad} (expected YYYY-MM-DD)")
        );
    }
    for line in [0, -4] {
        let message = invalid(f.hack(
            json!({"action": "mark", "data": {"file": "a.ts", "reason": "r", "line": line}}),
        ));
        assert!(
            message.starts_with(&format!("Invalid line: {line}")),
            "{message}"
        );
    }
    assert_eq!(f.hack_ok(json!({"action": "list"}))["total"], 0);
}

#[test]
fn expiry_is_computed_against_today() {
    let f = Fixture::new();
    f.hack_ok(json!({"action": "mark", "data": {"file": "src/legacy.ts", "reason": "Old API", "expires": "2026-01-15"}}));
    f.hack_ok(json!({"action": "mark", "data": {"file": "src/utils/temp.ts", "reason": "Quick fix for demo", "expires": "2025-12-01"}}));
    f.hack_ok(json!({"action": "mark", "data": {"file": "src/forever.ts", "reason": "No expiry"}}));

    f.set_time(at(2026, 1, 15, 23, 59, 59));
    let listed = f.hack_ok(json!({"action": "list"}));
    assert_eq!(listed["expired_count"], 1);
    let only = f.hack_ok(json!({"action": "list", "data": {"expired_only": true}}));
    assert_eq!(only["total"], 1);
    assert_eq!(only["hacks"][0]["id"], "hack-002");
    assert_eq!(
        f.hack_ok(json!({"action": "cleanup"})),
        json!({"action": "cleanup",
               "expired_hacks": [{"id": "hack-002", "file": "src/utils/temp.ts",
                                  "reason": "Quick fix for demo", "expires": "2025-12-01"}],
               "count": 1, "message": "Found 1 expired hack(s). Use 'revert' to remove."})
    );

    f.set_time(at(2026, 1, 16, 0, 0, 0));
    let cleanup = f.hack_ok(json!({"action": "cleanup"}));
    assert_eq!(cleanup["count"], 2);
    assert_eq!(
        cleanup["message"],
        "Found 2 expired hack(s). Use 'revert' to remove."
    );
    let in_file = f.hack_ok(
        json!({"action": "list", "data": {"file": "src/legacy.ts", "expired_only": true}}),
    );
    assert_eq!(in_file["total"], 1);
    assert_eq!(in_file["hacks"][0]["expired"], true);

    // Cleanup only reports; revert removes.
    f.hack_ok(json!({"action": "revert", "data": {"id": "hack-001"}}));
    f.hack_ok(json!({"action": "revert", "data": {"id": "hack-002"}}));
    assert_eq!(
        f.hack_ok(json!({"action": "cleanup"})),
        json!({"action": "cleanup", "expired_hacks": [], "count": 0,
               "message": "Found 0 expired hack(s). Use 'revert' to remove."})
    );
}

#[test]
fn index_hacks_are_listed_read_only() {
    let f = Fixture::new();
    let index = Index {
        files: HashSet::new(),
        hacks: vec![
            CacheHack {
                id: "./src/legacy/export.ts:12".to_owned(),
                file: "./src/legacy/export.ts".to_owned(),
                line: Some(12),
                reason: "Temporary hack".to_owned(),
                ticket: None,
                expires: Some(NaiveDate::from_ymd_opt(2025, 3, 1).unwrap()),
                created_at: "2025-02-01T00:00:00Z".to_owned(),
            },
            // An id of the form the journal gives its own.
            CacheHack {
                id: "hack-001".to_owned(),
                file: "./src/other.ts".to_owned(),
                line: None,
                reason: "Annotated".to_owned(),
                ticket: None,
                expires: None,
                created_at: "2025-02-01T00:00:00Z".to_owned(),
            },
        ],
    };
    let journal = open(f.root())
        .unwrap()
        .with_index(Arc::new(index))
        .with_clock(Arc::new(|| {
            Utc.with_ymd_and_hms(2025, 12, 27, 0, 0, 0).unwrap()
        }));
    let marked = journal
        .hack(hack_request(json!({"action": "mark", "data": {"file": "src/legacy/export.ts", "line": 30, "reason": "mine"}})))
        .unwrap()
        .to_value();
    assert_eq!(marked["hack"]["id"], "hack-002", "{marked}");
    let listed = journal
        .hack(hack_request(
            json!({"action": "list", "data": {"file": "src/legacy/export.ts"}}),
        ))
        .unwrap()
        .to_value();
    assert_eq!(listed["total"], 2);
    assert_eq!(
        listed["hacks"][0],
        json!({"id": "./src/legacy/export.ts:12", "file": "src/legacy/export.ts", "line": 12,
               "reason": "Temporary hack", "expires": "2025-03-01", "expired": true,
               "created_at": "2025-02-01T00:00:00Z", "source": "cache"})
    );
    assert_eq!(listed["hacks"][1]["source"], "mcp");
    assert_eq!(listed["expired_count"], 1);
    let err = journal
        .hack(hack_request(
            json!({"action": "revert", "data": {"id": "./src/legacy/export.ts:12"}}),
        ))
        .unwrap_err();
    assert_eq!(
        err.message(),
        "Hack ./src/legacy/export.ts:12 comes from a source annotation; remove the @acp:hack \
         comment and re-run acp index"
    );
    let err = journal
        .hack(hack_request(
            json!({"action": "revert", "data": {"id": "hack-001"}}),
        ))
        .unwrap_err();
    assert!(err
        .message()
        .starts_with("Hack hack-001 comes from a source annotation"));
}

#[test]
fn every_debug_write_exports_a_schema_valid_attempts_file() {
    let f = Fixture::new();
    let session = f.start();
    let file = f.attempts_file();
    assert_valid(&file);
    assert_eq!(file["checkpoints"][&session]["description"],
        "Problem: Authentication fails for expired tokens\nHypothesis: Token expiration check happens after signature validation");

    f.set_time(at(2025, 12, 27, 10, 35, 0));
    f.debug_ok(json!({"action": "attempt", "data": {"session_id": session, "description": "first", "files": ["src/auth/jwt.ts", "src/missing.ts"]}}));
    let file = f.attempts_file();
    assert_valid(&file);
    let key = format!("{session}:attempt-001");
    assert_eq!(
        file["attempts"][&key],
        json!({"id": key, "for_issue": session, "description": "first", "status": "active",
               "created_at": "2025-12-27T10:35:00Z", "updated_at": "2025-12-27T10:35:00Z",
               "files": [
                   {"path": "src/auth/jwt.ts", "original_hash": "cb1e39684998b12b7c476d404c491ac7",
                    "original_content": "export const VAT = 0.2;\n",
                    "modified_hash": "cb1e39684998b12b7c476d404c491ac7"},
                   {"path": "src/missing.ts", "original_hash": EMPTY_MD5, "modified_hash": EMPTY_MD5}],
               "revert_if": []})
    );
    assert_eq!(file["updated_at"], "2025-12-27T10:35:00Z");

    fs::write(f.root().join("src/auth/jwt.ts"), "a").unwrap();
    f.set_time(at(2025, 12, 27, 10, 40, 0));
    f.debug_ok(json!({"action": "result", "data": {"session_id": session, "attempt_id": "attempt-001", "success": false, "notes": "Still broken"}}));
    f.debug_ok(
        json!({"action": "attempt", "data": {"session_id": session, "description": "second"}}),
    );
    f.debug_ok(json!({"action": "result", "data": {"session_id": session, "attempt_id": "attempt-002", "success": true}}));
    f.debug_ok(
        json!({"action": "attempt", "data": {"session_id": session, "description": "third"}}),
    );
    f.debug_ok(
        json!({"action": "revert", "data": {"session_id": session, "attempt_id": "attempt-003"}}),
    );
    let file = f.attempts_file();
    assert_valid(&file);
    let failed = &file["attempts"][&key];
    assert_eq!(failed["status"], "failed");
    assert_eq!(
        failed["files"][0]["modified_hash"],
        "0cc175b9c0f1b6a831c399e269772661"
    );
    assert!(file["attempts"]
        .get(format!("{session}:attempt-002"))
        .is_none());
    assert!(file["attempts"]
        .get(format!("{session}:attempt-003"))
        .is_none());
    let history: Vec<(String, String, Option<String>)> = file["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["id"].as_str().unwrap().to_owned(),
                h["status"].as_str().unwrap().to_owned(),
                h.get("outcome").map(|o| o.as_str().unwrap().to_owned()),
            )
        })
        .collect();
    assert_eq!(
        history,
        [
            (
                key.clone(),
                "failed".to_owned(),
                Some("Still broken".to_owned())
            ),
            (
                format!("{session}:attempt-002"),
                "verified".to_owned(),
                Some("Verified and kept".to_owned())
            ),
            (
                format!("{session}:attempt-003"),
                "reverted".to_owned(),
                Some("Reverted".to_owned())
            ),
        ]
    );

    f.set_time(at(2025, 12, 27, 11, 0, 0));
    f.debug_ok(
        json!({"action": "resolve", "data": {"session_id": session, "resolution": "fixed"}}),
    );
    let file = f.attempts_file();
    assert_valid(&file);
    let last = file["history"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        last,
        json!({"id": session, "status": "verified", "started_at": "2025-12-27T10:30:00Z",
               "ended_at": "2025-12-27T11:00:00Z", "for_issue": session, "files_modified": 2,
               "outcome": "Resolved: fixed"})
    );
    assert_eq!(file["updated_at"], "2025-12-27T11:00:00Z");
    assert_eq!(
        key_order(&fs::read_to_string(attempts_path(f.root())).unwrap()),
        [
            "$schema",
            "version",
            "updated_at",
            "attempts",
            "checkpoints",
            "history"
        ]
    );

    // Hack markers never reach the attempts file.
    let before = fs::read(attempts_path(f.root())).unwrap();
    f.hack_ok(json!({"action": "mark", "data": {"file": "src/api.ts", "reason": "r"}}));
    assert_eq!(fs::read(attempts_path(f.root())).unwrap(), before);

    let report = f.journal.export().unwrap();
    assert_eq!(
        (report.attempts, report.checkpoints, report.history),
        (1, 1, 4)
    );
}

#[test]
fn a_failed_export_is_reported_after_the_commit() {
    let dir = tempfile::tempdir().unwrap();
    // The attempts file's directory cannot be created: a file is in the way.
    fs::write(dir.path().join("blocked"), "").unwrap();
    let attempts = dir.path().join("blocked/acp.attempts.json");
    let journal = Journal::open(&dir.path().join("journal.db"), dir.path(), &attempts).unwrap();
    let started = journal
        .debug(debug_request(
            json!({"action": "start", "data": {"problem": "p", "hypothesis": "h"}}),
        ))
        .unwrap()
        .to_value();
    let warning = started["export_warning"].as_str().unwrap();
    assert!(warning.starts_with("Cannot write"), "{warning}");
    let listed = journal
        .debug(debug_request(json!({"action": "list"})))
        .unwrap()
        .to_value();
    assert_eq!(listed["total"], 1);
    let err = journal.export().unwrap_err();
    assert!(matches!(err, JournalError::Internal(_)), "{err:?}");
}

#[test]
fn valid_samples_round_trip_json_equal() {
    for sample in [MINIMAL_SAMPLE, WITH_HISTORY_SAMPLE] {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join(".acp")).unwrap();
        fs::write(attempts_path(dir.path()), sample).unwrap();
        let original: Value = serde_json::from_str(sample).unwrap();
        assert_valid(&original);

        let journal = open(dir.path()).unwrap();
        journal.export().unwrap();
        assert_eq!(read_json(&attempts_path(dir.path())), original);

        // Opening again does not import the same file twice.
        drop(journal);
        let journal = open(dir.path()).unwrap();
        journal.export().unwrap();
        assert_eq!(read_json(&attempts_path(dir.path())), original);
    }
}

#[test]
fn imported_records_survive_journal_writes() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join(".acp")).unwrap();
    fs::write(attempts_path(dir.path()), WITH_HISTORY_SAMPLE).unwrap();
    let f = Fixture::open_in(dir);
    let session = f.start();
    f.debug_ok(json!({"action": "attempt", "data": {"session_id": session, "description": "d"}}));
    f.debug_ok(json!({"action": "result", "data": {"session_id": session, "attempt_id": "attempt-001", "success": true, "notes": "works"}}));
    let file = f.attempts_file();
    assert_valid(&file);
    let original: Value = serde_json::from_str(WITH_HISTORY_SAMPLE).unwrap();
    assert_eq!(
        file["attempts"]["attempt-001"],
        original["attempts"]["attempt-001"]
    );
    assert_eq!(
        file["checkpoints"]["before-auth-refactor"],
        original["checkpoints"]["before-auth-refactor"]
    );
    let history = file["history"].as_array().unwrap();
    assert_eq!(history.len(), 3);
    assert_eq!(history[..2], original["history"].as_array().unwrap()[..]);
    assert_eq!(history[2]["outcome"], "works");
    assert_eq!(file["updated_at"], "2025-12-27T10:30:00Z");
}

#[test]
fn invalid_samples_are_refused_with_a_clear_message() {
    let cases = [
        (
            BAD_STATUS_SAMPLE,
            vec![
                "missing field `updated_at`",
                "unknown variant `invalid_status`",
            ],
        ),
        (
            INVALID_HASH_SAMPLE,
            vec![
                "missing field `updated_at`",
                "attempts[\"attempt-001\"]",
                "original_hash",
            ],
        ),
        ("{\"version\": ", vec!["not valid JSON"]),
        ("[]", vec!["not a JSON object"]),
    ];
    for (sample, expected) in cases {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join(".acp")).unwrap();
        fs::write(attempts_path(dir.path()), sample).unwrap();
        let err = open(dir.path()).unwrap_err();
        assert!(matches!(err, JournalError::Internal(_)), "{err:?}");
        let message = err.message();
        assert!(message.starts_with("Cannot import "), "{message}");
        assert!(message.contains("left unchanged"), "{message}");
        for part in expected {
            assert!(message.contains(part), "{part:?} not in {message}");
        }
        assert_eq!(
            fs::read_to_string(attempts_path(dir.path())).unwrap(),
            sample
        );
    }

    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join(".acp")).unwrap();
    let mut document: Value = serde_json::from_str(WITH_HISTORY_SAMPLE).unwrap();
    document["attempts"]["attempt-001"]["files"][0]["modified_hash"] = json!("ABC");
    document["checkpoints"]["before-auth-refactor"]["git_commit"] = json!("abc");
    document["history"][0]["ended_at"] = json!("yesterday");
    fs::write(attempts_path(dir.path()), document.to_string()).unwrap();
    let message = open(dir.path()).unwrap_err().message().to_owned();
    for part in [
        "modified_hash: \"ABC\"",
        "git_commit: \"abc\"",
        "history[0].ended_at",
    ] {
        assert!(message.contains(part), "{part:?} not in {message}");
    }
}

#[test]
fn acp_cli_files_with_nulls_and_unknown_members_are_kept() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join(".acp")).unwrap();
    let written_by_cli = json!({
        "$schema": "https://acp-protocol.dev/schemas/v1/attempts.schema.json",
        "version": "0.7.0",
        "updated_at": "2026-01-04T16:00:00.123456789Z",
        "attempts": {"manual-1": {"id": "manual-1", "for_issue": null, "description": null,
            "status": "active", "created_at": "2026-01-04T16:00:00.123456789Z",
            "updated_at": "2026-01-04T16:00:00.123456789Z",
            "files": [{"path": "src/a.ts", "original_hash": EMPTY_MD5, "original_content": null,
                       "modified_hash": EMPTY_MD5, "lines_changed": null, "x_tool": {"a": null, "b": 1}}],
            "revert_if": [], "x_reviewer": "ana"}},
        "checkpoints": {"cp": {"name": "cp", "created_at": "2026-01-04T15:00:00Z", "description": null, "files": {}}},
        "history": [{"id": "old", "status": "failed", "started_at": "2026-01-01T00:00:00Z",
                     "ended_at": "2026-01-01T01:00:00Z", "for_issue": null, "files_modified": 0, "outcome": null}]
    });
    fs::write(attempts_path(dir.path()), written_by_cli.to_string()).unwrap();
    let journal = open(dir.path()).unwrap();
    journal.export().unwrap();
    let file = read_json(&attempts_path(dir.path()));
    let mut expected = written_by_cli.clone();
    let attempt = &mut expected["attempts"]["manual-1"];
    attempt.as_object_mut().unwrap().retain(|_, v| !v.is_null());
    let file_entry = attempt["files"][0].as_object_mut().unwrap();
    file_entry.retain(|_, v| !v.is_null());
    file_entry.insert("x_tool".to_owned(), json!({"b": 1}));
    expected["checkpoints"]["cp"]
        .as_object_mut()
        .unwrap()
        .remove("description");
    expected["history"][0]
        .as_object_mut()
        .unwrap()
        .retain(|_, v| !v.is_null());
    assert_eq!(file, expected);
    // The null-free parts the schema knows validate; only the unknown members do not.
    let errors = schema_errors(&file);
    assert_eq!(errors.len(), 2, "{errors:#?}");
    assert!(
        errors
            .iter()
            .all(|e| e.contains("x_tool") || e.contains("x_reviewer")),
        "{errors:#?}"
    );
}

#[test]
fn changes_made_by_acp_cli_are_merged_not_overwritten() {
    let f = Fixture::new();
    let session = f.start();
    for description in ["one", "two", "three"] {
        f.debug_ok(json!({"action": "attempt", "data": {"session_id": session, "description": description}}));
    }
    // Someone runs `acp attempt verify <1>`, `acp attempt fail <2>`, `acp attempt revert <3>`
    // and `acp attempt start manual-2`.
    let path = attempts_path(f.root());
    let mut file = read_json(&path);
    let history = file["history"].as_array_mut().unwrap();
    for (n, status, outcome) in [
        (1, "verified", "Verified and kept"),
        (2, "failed", "flaky"),
        (3, "reverted", "Reverted"),
    ] {
        history.push(
            json!({"id": format!("{session}:attempt-00{n}"), "status": status,
            "started_at": "2025-12-27T10:30:00Z", "ended_at": "2025-12-27T12:00:00Z",
            "for_issue": session, "files_modified": 0, "outcome": outcome}),
        );
    }
    let attempts = file["attempts"].as_object_mut().unwrap();
    attempts.remove(&format!("{session}:attempt-001"));
    attempts.remove(&format!("{session}:attempt-003"));
    attempts[&format!("{session}:attempt-002")]["status"] = json!("failed");
    attempts.insert(
        "manual-2".to_owned(),
        json!({"id": "manual-2", "status": "active",
        "created_at": "2025-12-27T11:00:00Z", "updated_at": "2025-12-27T11:00:00Z",
        "files": [], "revert_if": []}),
    );
    fs::write(&path, serde_json::to_string_pretty(&file).unwrap()).unwrap();

    f.set_time(at(2025, 12, 27, 13, 0, 0));
    let other = f.start();
    let status = f.debug_ok(json!({"action": "status", "data": {"session_id": session}}));
    let statuses: Vec<&str> = status["session"]["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["succeeded", "failed", "reverted"]);
    assert_eq!(status["session"]["attempts"][1]["notes"], "flaky");
    assert_eq!(
        status["session"]["attempts"][0]["result_at"],
        "2025-12-27T12:00:00Z"
    );

    let merged = read_json(&path);
    assert_valid(&merged);
    assert!(merged["attempts"].get("manual-2").is_some());
    assert_eq!(
        merged["attempts"][&format!("{session}:attempt-002")]["status"],
        "failed"
    );
    assert!(merged["attempts"]
        .get(format!("{session}:attempt-001"))
        .is_none());
    assert_eq!(
        merged["history"].as_array().unwrap().len(),
        3,
        "no duplicated history entries"
    );
    assert!(merged["checkpoints"].get(&other).is_some());
}

#[test]
fn ids_used_by_others_are_never_handed_out() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join(".acp")).unwrap();
    let mut document: Value = serde_json::from_str(MINIMAL_SAMPLE).unwrap();
    document["attempts"]["debug-20251227-001:attempt-001"] = json!({
        "id": "debug-20251227-001:attempt-001", "for_issue": "debug-20251227-001",
        "status": "active", "created_at": "2025-12-27T09:00:00Z",
        "updated_at": "2025-12-27T09:00:00Z", "files": [], "revert_if": []});
    document["checkpoints"]["debug-20251227-002"] = json!({
        "name": "debug-20251227-002", "created_at": "2025-12-27T09:00:00Z", "files": {}});
    fs::write(attempts_path(dir.path()), document.to_string()).unwrap();
    let f = Fixture::open_in(dir);
    assert_eq!(f.start(), "debug-20251227-003");
    let file = f.attempts_file();
    assert_valid(&file);
    assert_eq!(file["attempts"].as_object().unwrap().len(), 1);
    assert_eq!(file["checkpoints"].as_object().unwrap().len(), 2);
}

#[test]
fn history_is_capped_at_the_newest_thousand_entries() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join(".acp")).unwrap();
    let mut document: Value = serde_json::from_str(MINIMAL_SAMPLE).unwrap();
    document["history"] = (0..1005)
        .map(|i| {
            json!({"id": format!("h-{i}"), "status": "verified",
            "started_at": "2024-01-01T00:00:00Z", "ended_at": "2024-01-01T00:00:01Z",
            "files_modified": 0})
        })
        .collect();
    fs::write(attempts_path(dir.path()), document.to_string()).unwrap();
    let f = Fixture::open_in(dir);
    let session = f.start();
    f.debug_ok(json!({"action": "resolve", "data": {"session_id": session, "resolution": "r"}}));
    let file = f.attempts_file();
    assert_valid(&file);
    let history = file["history"].as_array().unwrap();
    assert_eq!(history.len(), 1000);
    assert_eq!(history[0]["id"], "h-6");
    assert_eq!(history[999]["id"], session);
}

#[test]
fn tool_parameter_schemas_and_a_shareable_journal() {
    fn shareable<T: Send + Sync>() {}
    shareable::<Journal>();
    let debug = serde_json::to_value(schemars::schema_for!(DebugRequest)).unwrap();
    assert_eq!(debug["required"], json!(["action"]));
    assert_eq!(
        debug["properties"]["action"]["enum"],
        json!(["start", "attempt", "result", "revert", "resolve", "status", "list"])
    );
    assert_eq!(debug["properties"]["action"]["type"], "string");
    let data = serde_json::to_string(&debug).unwrap();
    for field in [
        "problem",
        "hypothesis",
        "session_id",
        "description",
        "files",
        "attempt_id",
        "success",
        "notes",
        "resolution",
    ] {
        assert!(
            data.contains(&format!("\"{field}\"")),
            "{field} missing from {data}"
        );
    }
    let hack = serde_json::to_value(schemars::schema_for!(HackRequest)).unwrap();
    assert_eq!(hack["required"], json!(["action"]));
    assert_eq!(
        hack["properties"]["action"]["enum"],
        json!(["mark", "list", "revert", "cleanup"])
    );
    let data = serde_json::to_string(&hack).unwrap();
    for field in [
        "file",
        "line",
        "reason",
        "ticket",
        "expires",
        "expired_only",
        "id",
    ] {
        assert!(
            data.contains(&format!("\"{field}\"")),
            "{field} missing from {data}"
        );
    }
    assert!(data.contains("\"format\":\"date\""), "{data}");
}

#[test]
fn cli_mirrors_run_against_a_project() {
    let f = Fixture::new();
    f.start();
    let project = acpdb::project::Project {
        root: f.root().to_path_buf(),
        cache: None,
        vars: None,
        db: f.root().join(".acp/acp.db"),
        journal_db: journal_db(f.root()),
        attempts: attempts_path(f.root()),
        config: f.root().join(".acp.config.json"),
    };
    use acpdb::journal::{DebugArgs, DebugCommand, ExportAttemptsArgs, HackArgs, HackCommand};
    acpdb::journal::run_debug(
        &project,
        &DebugArgs {
            command: DebugCommand::List,
        },
    )
    .unwrap();
    acpdb::journal::run_debug(
        &project,
        &DebugArgs {
            command: DebugCommand::Status { id: None },
        },
    )
    .unwrap();
    let missing = DebugArgs {
        command: DebugCommand::Status {
            id: Some("debug-1".to_owned()),
        },
    };
    assert!(acpdb::journal::run_debug(&project, &missing).is_err());
    let list = HackArgs {
        command: HackCommand::List {
            expired: true,
            file: Some("src/a.ts".to_owned()),
        },
    };
    acpdb::journal::run_hack(&project, &list).unwrap();
    acpdb::journal::run_export_attempts(&project, &ExportAttemptsArgs {}).unwrap();
    assert_valid(&f.attempts_file());
}

// ---------------------------------------------------------------------------------------------
// Crash safety and concurrent writers: child processes re-run this binary in writer mode.

const WRITER_ENV: &str = "ACPDB_JOURNAL_TEST_WRITER";

/// Writer mode (only when `ACPDB_JOURNAL_TEST_WRITER=<root>|<count>` is set): records sessions
/// with an attempt and a result each, printing every acknowledged id as `ACK <id>`.
#[test]
fn journal_writer_child() {
    let Ok(spec) = std::env::var(WRITER_ENV) else {
        return;
    };
    let (root, count) = spec.split_once('|').unwrap();
    let count: usize = count.parse().unwrap();
    let root = Path::new(root);
    let journal = open(root).unwrap();
    for _ in 0..count {
        let started = journal
            .debug(debug_request(
                json!({"action": "start", "data": {"problem": "p", "hypothesis": "h"}}),
            ))
            .unwrap()
            .to_value();
        let session = started["session_id"].as_str().unwrap().to_owned();
        println!("ACK {session}");
        journal
            .debug(debug_request(json!({"action": "attempt", "data": {
                "session_id": session, "description": "d", "files": ["src/a.txt"]}})))
            .unwrap();
        println!("ACK {session} attempt-001");
        journal
            .debug(debug_request(json!({"action": "result", "data": {
                "session_id": session, "attempt_id": "attempt-001", "success": false}})))
            .unwrap();
        println!("ACK {session} attempt-001 failed");
    }
}

fn spawn_writer(root: &Path, count: usize) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "journal::journal_writer_child",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(WRITER_ENV, format!("{}|{count}", root.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// `ACK` lines of a writer's output (the first one shares its line with the test harness's
/// progress output); a line cut short by a kill does not count.
fn acknowledged(output: &str) -> Vec<String> {
    output
        .split_inclusive('\n')
        .filter(|line| line.ends_with('\n'))
        .filter_map(|line| {
            line.find("ACK ")
                .map(|i| line[i + 4..].trim_end().to_owned())
        })
        .collect()
}

fn project_with_file() -> TempDir {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("src")).unwrap();
    fs::write(dir.path().join("src/a.txt"), "content\n").unwrap();
    dir
}

/// Checks that every acknowledged write is in the journal and in a fresh export.
fn assert_acknowledged_present(root: &Path, acks: &[String]) {
    let journal = open(root).unwrap();
    for ack in acks {
        let mut parts = ack.split(' ');
        let session = parts.next().unwrap();
        let status = journal
            .debug(debug_request(
                json!({"action": "status", "data": {"session_id": session}}),
            ))
            .unwrap_or_else(|e| panic!("acknowledged {ack} lost: {e}"))
            .to_value();
        if let Some(attempt) = parts.next() {
            let attempt_view = &status["session"]["attempts"][0];
            assert_eq!(attempt_view["id"], attempt, "acknowledged {ack} lost");
            if parts.next().is_some() {
                assert_eq!(attempt_view["status"], "failed", "acknowledged {ack} lost");
            }
        }
    }
    journal.export().unwrap();
    let file = read_json(&attempts_path(root));
    assert_valid(&file);
    for ack in acks.iter().filter(|ack| !ack.contains(' ')) {
        assert!(
            file["checkpoints"].get(ack).is_some(),
            "{ack} missing from the export"
        );
    }
}

fn integrity_check(root: &Path) {
    let conn = rusqlite::Connection::open(journal_db(root)).unwrap();
    let result: String = conn
        .query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .unwrap();
    assert_eq!(result, "ok");
}

#[test]
fn killed_writers_never_lose_acknowledged_entries() {
    let dir = project_with_file();
    let mut seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .subsec_nanos()
        | 1;
    let mut random = move |bound: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 17;
        seed ^= seed << 5;
        u64::from(seed) % bound
    };
    let started = Instant::now();
    let mut acks = Vec::new();
    for _ in 0..20 {
        let mut child = spawn_writer(dir.path(), 10_000);
        std::thread::sleep(Duration::from_millis(20 + random(180)));
        child.kill().unwrap();
        child.wait().unwrap();
        let mut output = String::new();
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut output)
            .unwrap();
        acks.extend(acknowledged(&output));

        integrity_check(dir.path());
        let path = attempts_path(dir.path());
        if path.exists() {
            let file = read_json(&path);
            assert_valid(&file);
        }
        if started.elapsed() > Duration::from_secs(12) {
            break;
        }
    }
    assert!(!acks.is_empty(), "the writers never got to write");
    let unique: HashSet<&String> = acks.iter().collect();
    assert_eq!(unique.len(), acks.len(), "an id was handed out twice");
    assert_acknowledged_present(dir.path(), &acks);
    integrity_check(dir.path());
}

#[test]
fn concurrent_writers_neither_lose_nor_duplicate() {
    const PER_WRITER: usize = 12;
    let dir = project_with_file();
    let children = [
        spawn_writer(dir.path(), PER_WRITER),
        spawn_writer(dir.path(), PER_WRITER),
    ];
    let mut acks = Vec::new();
    for child in children {
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success(), "writer failed: {output:?}");
        acks.extend(acknowledged(&String::from_utf8(output.stdout).unwrap()));
    }
    let sessions: Vec<&String> = acks.iter().filter(|ack| !ack.contains(' ')).collect();
    assert_eq!(sessions.len(), 2 * PER_WRITER);
    assert_eq!(
        sessions.iter().collect::<HashSet<_>>().len(),
        2 * PER_WRITER,
        "duplicate ids"
    );
    assert_eq!(acks.len(), 3 * 2 * PER_WRITER);

    let journal = open(dir.path()).unwrap();
    let listed = journal
        .debug(debug_request(json!({"action": "list"})))
        .unwrap()
        .to_value();
    assert_eq!(listed["total"], 2 * PER_WRITER);
    assert_acknowledged_present(dir.path(), &acks);
    let file = read_json(&attempts_path(dir.path()));
    assert_eq!(
        file["checkpoints"].as_object().unwrap().len(),
        2 * PER_WRITER
    );
    assert_eq!(file["attempts"].as_object().unwrap().len(), 2 * PER_WRITER);
    assert_eq!(file["history"].as_array().unwrap().len(), 2 * PER_WRITER);
    integrity_check(dir.path());
}

#[test]
fn writers_opening_a_new_journal_at_the_same_moment_all_succeed() {
    const WRITERS: usize = 6;
    for _ in 0..5 {
        let dir = project_with_file();
        let root = dir.path().to_path_buf();
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(WRITERS));
        let threads: Vec<_> = (0..WRITERS)
            .map(|i| {
                let root = root.clone();
                let barrier = barrier.clone();
                std::thread::spawn(move || {
                    barrier.wait();
                    let journal = open(&root).unwrap_or_else(|e| panic!("open {i}: {e}"));
                    journal
                        .debug(debug_request(json!({"action": "start",
                            "data": {"problem": format!("p{i}"), "hypothesis": "h"}})))
                        .unwrap_or_else(|e| panic!("start {i}: {e}"))
                        .to_value()["session_id"]
                        .as_str()
                        .unwrap()
                        .to_owned()
                })
            })
            .collect();
        let ids: HashSet<String> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        assert_eq!(ids.len(), WRITERS, "an id was handed out twice");
        integrity_check(&root);
    }
}

/// A thread swaps a project file between a regular file and a link to a file outside the
/// project, as fast as it can, while attempts record it: nothing from outside is ever stored.
#[test]
fn a_file_swapped_for_an_outside_link_in_a_loop_is_never_read() {
    const TRIES: usize = 1000;
    let f = Fixture::new();
    let session = f.start();
    let outside = tempfile::tempdir().unwrap();
    let secret = "outside secret, never to be stored";
    fs::write(outside.path().join("api.ts"), secret).unwrap();
    let secret_md5 = md5_of(secret.as_bytes());
    let target = f.root().join("src/api.ts");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let swapped = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let swapper = {
        let stop = stop.clone();
        let swapped = swapped.clone();
        let target = target.clone();
        let link_to = outside.path().join("api.ts");
        std::thread::spawn(move || {
            let staged = target.with_file_name(".api.ts.swap");
            let mut swaps = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = fs::remove_file(&staged);
                if swaps.is_multiple_of(2) {
                    std::os::unix::fs::symlink(&link_to, &staged).unwrap();
                } else {
                    fs::write(&staged, "a").unwrap();
                }
                fs::rename(&staged, &target).unwrap();
                swaps += 1;
                swapped.store(swaps, std::sync::atomic::Ordering::Relaxed);
            }
            swaps
        })
    };
    // At least TRIES attempts, and on until the file was swapped often enough under them and
    // one attempt found it regular (a loaded machine may run either thread slowly), within a
    // bound.
    let started = Instant::now();
    let mut recorded = 0;
    let mut tries = 0;
    while (tries < TRIES
        || swapped.load(std::sync::atomic::Ordering::Relaxed) <= 100
        || recorded == 0)
        && started.elapsed() < Duration::from_secs(60)
    {
        tries += 1;
        let answer = f.debug(json!({"action": "attempt", "data": {
            "session_id": session, "description": "race", "files": ["src/api.ts"]}}));
        if answer.is_ok() {
            recorded += 1;
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let swaps = swapper.join().unwrap();
    assert!(swaps > 100, "the file was swapped only {swaps} times");
    assert!(
        recorded > 0,
        "no attempt was recorded while the file was regular"
    );
    let mut stored = fs::read(attempts_path(f.root())).unwrap();
    for entry in fs::read_dir(f.root().join(".acp")).unwrap() {
        let path = entry.unwrap().path();
        if path.to_string_lossy().contains("journal") {
            stored.extend(fs::read(&path).unwrap());
        }
    }
    let stored = String::from_utf8_lossy(&stored);
    assert!(
        !stored.contains(secret),
        "the outside file's content was stored"
    );
    assert!(
        !stored.contains(&secret_md5),
        "the outside file's hash was stored"
    );
}

/// Whether a process holds a lock that conflicts with writing `len` bytes at `start` of the
/// file `file` is open on (this process included: open-file-description locks conflict with
/// its own POSIX locks).
#[cfg(target_os = "linux")]
fn lock_held(file: &fs::File, start: i64, len: i64) -> bool {
    use std::os::fd::AsRawFd;
    // SAFETY: a plain struct, then filled in by the kernel from a descriptor that is open.
    let mut lock: libc::flock = unsafe { std::mem::zeroed() };
    lock.l_type = libc::F_WRLCK as i16;
    lock.l_whence = libc::SEEK_SET as i16;
    lock.l_start = start;
    lock.l_len = len;
    let asked = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_GETLK, &mut lock) };
    assert_eq!(asked, 0, "{}", std::io::Error::last_os_error());
    lock.l_type != libc::F_UNLCK as i16
}

#[cfg(target_os = "linux")]
#[test]
fn naming_the_journals_own_files_leaves_its_locks_alone() {
    let f = Fixture::new();
    let session = f.start();
    // The journal's connection holds a shared lock on its database file and a read lock on
    // the wal-index's "dead man switch" (byte 128 of the -shm file) for as long as it is
    // open: a process that can lock either exclusively takes itself for the last user and
    // may checkpoint and delete the WAL under it. The probes stay open to the end: closing a
    // descriptor would drop those locks itself.
    let db = fs::File::open(journal_db(f.root())).unwrap();
    let shm = fs::File::open(f.root().join(".acp/acp.journal.db-shm")).unwrap();
    let locked = || lock_held(&db, 0x4000_0002, 510) && lock_held(&shm, 128, 1);
    assert!(locked());
    // A hard link under another name is the same file.
    fs::hard_link(journal_db(f.root()), f.root().join("src/journal-copy.db")).unwrap();
    for name in [
        ".acp/acp.journal.db-shm",
        ".acp/acp.journal.db",
        ".acp/acp.journal.db-wal",
        "src/journal-copy.db",
    ] {
        let message = invalid(f.debug(json!({"action": "attempt", "data": {
            "session_id": session, "description": "touch the journal",
            "files": [name]}})));
        assert!(
            message.contains("acpdb's own database files"),
            "{name}: {message}"
        );
        assert!(locked(), "naming {name} dropped the journal's locks");
    }
    f.debug_ok(json!({"action": "attempt", "data": {
        "session_id": session, "description": "an ordinary file", "files": ["src/api.ts"]}}));
    assert!(locked());
}

#[test]
fn a_config_that_cannot_be_used_is_one_kind_of_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("src")).unwrap();
    fs::write(dir.path().join("src/a.ts"), "export const a = 1;\n").unwrap();
    let journal = Journal::open(
        &dir.path().join("journal.db"),
        dir.path(),
        &dir.path().join("acp.attempts.json"),
    )
    .unwrap();
    let config = dir.path().join(".acp.config.json");
    let mark = || {
        journal.hack(hack_request(
            json!({"action": "mark", "data": {"file": "src/a.ts", "line": 1, "reason": "r"}}),
        ))
    };
    let big = format!("{{\"pad\": \"{}\"}}", "a".repeat(5 << 20));
    for (what, write) in [
        (
            "not JSON",
            Box::new(|c: &Path| fs::write(c, "{").unwrap()) as Box<dyn Fn(&Path)>,
        ),
        (
            "a bad pattern",
            Box::new(|c: &Path| fs::write(c, r#"{"exclude": ["a{"]}"#).unwrap()),
        ),
        (
            "too large",
            Box::new(move |c: &Path| fs::write(c, &big).unwrap()),
        ),
        (
            "too many patterns",
            Box::new(|c: &Path| {
                let globs: Vec<String> = (0..=acpdb::config::MAX_PATTERNS)
                    .map(|i| format!("gen{i}/**"))
                    .collect();
                fs::write(c, json!({ "exclude": globs }).to_string()).unwrap()
            }),
        ),
        ("a FIFO", Box::new(|c: &Path| mkfifo(c))),
    ] {
        let _ = fs::remove_file(&config);
        write(&config);
        let err = mark().unwrap_err();
        assert!(
            matches!(err, JournalError::InvalidParams(_)),
            "{what}: {err:?}"
        );
        assert!(
            err.message().contains(".acp.config.json"),
            "{what}: {err:?}"
        );
    }
}
