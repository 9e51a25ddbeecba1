//! Is this answer still true? The source files an answer names, checked on disk against what
//! the import saw, and the project's git HEAD against the commit the cache was made at (ACP
//! spec §11.2).
//!
//! **Per file**, the baseline is the file's size and modification time on disk when the index
//! was imported (`source_baseline`, written by every import): a file whose size or time
//! differs was edited since, and its lines may have moved. The cache's own recorded mtimes are
//! not the baseline: after a fresh clone or checkout every file is newer than the cache says,
//! but as the import that follows saw it. A file without a baseline row (one the import could
//! not look at, in a directory it may not search) is compared with the moment of the import
//! instead; each stale file says
//! which signal found it. A file gone from disk is reported as deleted, unless the import found
//! none of the project's files on disk (an index served without its sources). One look per
//! file beneath the project directory ([`crate::regular_file::Beneath`]: a path handle, never read, so a FIFO cannot
//! block; a path through a symbolic link, or out of the project, is never looked at), kept for
//! the server's watch interval ([`keep_checks_for`]).
//!
//! **Per index**, `HEAD` is read from `.git` without running git (`HEAD`, loose refs,
//! `packed-refs`, and the `gitdir:` file of a worktree or submodule), each file at most
//! [`GIT_FILE_LIMIT`] bytes and only if it is a regular file; and a **sweep** compares every
//! baseline row with the disk, at most a budget of files per step ([`sweep`]: the server's
//! watcher steps it in the background; overview answers take a small step without a watcher,
//! or until a small project's first pass), a new pass at most every [`SWEEP_INTERVAL`], so
//! that overviews say how many indexed files changed without any answer paying for a pass
//! over a large project.
//!
//! **Under the server's watcher** the kernel reports edits as they happen (`events.rs`,
//! Linux `inotify` on the directories of the indexed files): a file with no event since the
//! last pass began is answered from that pass without a look at the disk, an edited one is
//! looked at again at once, and a new pass starts only after an event (or every
//! [`FULL_SWEEP_INTERVAL`]). `baseline.rs` holds what answers compare with, `looks.rs` the
//! files' kept looks, `sweeps.rs` the sweep and what it knows.

mod baseline;
mod events;
mod looks;
mod sweeps;

use std::path::Path;
use std::time::UNIX_EPOCH;

use rusqlite::{Connection, OptionalExtension};
use serde::Serialize;
use serde_json::Value;

use super::QueryResult;
use crate::regular_file::under_root;
use baseline::{baseline, change_since, meta, recorded, rfc3339_ns, Change};
use looks::observed;
pub use looks::{forget_checks, keep_checks_for};
pub use sweeps::{
    changes_seen, first_pass_pending, sweep, sweep_in_background, SourceChanges,
    FULL_SWEEP_INTERVAL, SWEEP_INTERVAL,
};
use sweeps::{source_changes, swept_in_background, Known};

/// Largest `.git` file read (HEAD, a ref, `gitdir:`); `packed-refs` may be larger.
pub const GIT_FILE_LIMIT: u64 = 4096;

/// Largest `packed-refs` read.
const PACKED_REFS_LIMIT: u64 = 16 * 1024 * 1024;

/// Files an overview answer compares itself, at most, when a sweep is due or under way: a
/// small project is swept whole by the answer that asks.
pub const ANSWER_SWEEP_BUDGET: usize = 256;

/// A file an answer names that changed on disk after the index was imported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct StaleFile {
    /// Canonical path.
    pub path: String,
    /// `modified` or `deleted`.
    pub change: &'static str,
    /// When the index was imported (RFC 3339).
    pub indexed_at: String,
    /// When the file was last modified (RFC 3339), for a modified file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub modified_at: Option<String>,
    /// What told: `baseline` (its size or modification time differ from what the import saw)
    /// or `import_time` (no baseline for it: modified after the import, or gone).
    pub signal: &'static str,
}

/// Where the index stands against the project's git repository and its files on disk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct SourceState {
    /// The commit the cache was made at (`git_commit`), when it records one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub indexed_commit: Option<String>,
    /// The project's `HEAD` commit, when it is a git repository.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub head: Option<String>,
    /// Whether `HEAD` is another commit than the one indexed.
    pub head_moved: bool,
    /// The indexed files changed on disk since the import, as far as swept; absent when the
    /// index has no baseline (served without its sources).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub files: Option<SourceChanges>,
    /// In words, with what to do.
    pub message: String,
}

/// The indexed files among `paths` (canonical, relative to the project) changed on disk after
/// the index was imported, in the order given, each once.
pub fn stale_files<'a>(
    conn: &Connection,
    paths: impl IntoIterator<Item = &'a str>,
) -> QueryResult<Vec<StaleFile>> {
    let Some(baseline) = baseline(conn)? else {
        return Ok(Vec::new());
    };
    let imported_ns = baseline
        .imported
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
    let mut asked: Vec<&str> = Vec::new();
    for path in paths {
        if !asked.contains(&path) {
            asked.push(path);
        }
    }
    if asked.is_empty() {
        return Ok(Vec::new());
    }
    let mut lookup =
        conn.prepare_cached("SELECT size, mtime_ns FROM source_baseline WHERE path = ?1")?;
    let mut indexed = conn.prepare_cached("SELECT 1 FROM files WHERE path = ?1")?;
    let mut stale: Vec<StaleFile> = Vec::new();
    let mut project = None;
    let known = sweeps::known(&baseline, &asked);
    for (path, known) in asked.into_iter().zip(known) {
        // A file the last pass found unchanged, and no event since: no lookup at all.
        if known == Known::Swept(None) {
            continue;
        }
        let then = lookup.query_row([path], |r| recorded(r, 0)).optional()?;
        // A string that names no indexed file is not the index's to judge.
        if then.is_none() && !indexed.exists([path])? {
            continue;
        }
        let now = match known {
            Known::Swept(Some(now)) if then.is_some() => Some(now),
            Known::Look { not_before } => observed(&mut project, &baseline.root, path, not_before),
            // A path whose hash alone matched one the pass compared.
            Known::Swept(_) => observed(&mut project, &baseline.root, path, None),
        };
        let Some(now) = now else {
            continue;
        };
        let (change, signal) = match then {
            Some(then) => (change_since(then, now), "baseline"),
            None => {
                let change = match now {
                    None => Some(Change::Deleted),
                    Some(now) if now.mtime_ns > imported_ns => Some(Change::Modified(now.mtime_ns)),
                    Some(_) => None,
                };
                (change, "import_time")
            }
        };
        let Some(change) = change else {
            continue;
        };
        let (change, modified_at) = match change {
            Change::Modified(at) => ("modified", Some(rfc3339_ns(at))),
            Change::Deleted => ("deleted", None),
        };
        stale.push(StaleFile {
            path: path.to_string(),
            change,
            indexed_at: baseline.imported_at.clone(),
            modified_at,
            signal,
        });
    }
    Ok(stale)
}

/// Members whose string value names a file in an answer: a file entry's `path`, a symbol's
/// `file`, wherever they are nested.
const FILE_MEMBERS: [&str; 2] = ["file", "path"];

/// Members whose list of strings names files (a domain's `files`, `acp_context`'s
/// `similar_files` and `key_files`).
const FILE_LIST_MEMBERS: [&str; 3] = ["files", "similar_files", "key_files"];

/// Files of one answer checked on disk, at most: the first ones it names. Each costs a row
/// read and, once per watch interval, a look at the disk (about 4 µs in all); a listing of
/// hundreds of files would otherwise pay for every one.
pub const NAMED_FILES_CHECKED: usize = 16;

/// The canonical path of a file a question names (`src/a.ts` for `./src/a.ts`), for
/// [`stale_files`].
pub fn asked_file(path: &str) -> String {
    crate::cache::paths::canonical_path(path, None)
}

/// The files `answer` names (canonical paths, each once, at most [`NAMED_FILES_CHECKED`]):
/// what [`stale_files`] checks for any tool's answer. Strings that name no indexed file are
/// left for [`stale_files`] to drop.
pub fn files_named(answer: &Value) -> Vec<String> {
    let mut named = Vec::new();
    // A `Value` always deserialises.
    let _ = serde::de::DeserializeSeed::deserialize(Walk::new(&mut named), answer);
    named
}

/// [`files_named`] of an answer's JSON text, read as it streams by (no value is built); text
/// that is not JSON (a literal message) names no file.
pub fn files_named_in(text: &str) -> Vec<String> {
    let mut named = Vec::new();
    let mut json = serde_json::Deserializer::from_str(text);
    if serde::de::DeserializeSeed::deserialize(Walk::new(&mut named), &mut json).is_err() {
        named.clear();
    }
    named
}

/// Walks any JSON for the files it names, into the list it holds; `value` says what the value
/// walked is to its member's name.
struct Walk<'a> {
    named: &'a mut Vec<String>,
    value: Member,
}

/// What a member's name says of its value.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Member {
    /// A file's path when it is a string ([`FILE_MEMBERS`]); any other value is walked.
    File,
    /// Files: each item of a list as a [`Member::File`] ([`FILE_LIST_MEMBERS`]).
    Files,
    /// Walked for the members below.
    Other,
}

impl Member {
    fn of(name: &str) -> Member {
        if FILE_MEMBERS.contains(&name) {
            Member::File
        } else if FILE_LIST_MEMBERS.contains(&name) {
            Member::Files
        } else {
            Member::Other
        }
    }
}

impl<'a> Walk<'a> {
    fn new(named: &'a mut Vec<String>) -> Walk<'a> {
        Walk {
            named,
            value: Member::Other,
        }
    }

    /// The walk of a value below this one, which is `value` to its member's name.
    fn below(&mut self, value: Member) -> Walk<'_> {
        Walk {
            named: &mut *self.named,
            value,
        }
    }
}

impl<'de> serde::de::DeserializeSeed<'de> for Walk<'_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, json: D) -> Result<(), D::Error> {
        json.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Walk<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("JSON")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
        while let Some(member) = map.next_key_seed(MemberName)? {
            map.next_value_seed(self.below(member))?;
        }
        Ok(())
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        // The items of a list of files each name one (a path, or an object such as a file
        // impact's `{file, …}`); any other list is walked.
        let item = match self.value {
            Member::Files => Member::File,
            _ => Member::Other,
        };
        while seq.next_element_seed(self.below(item))?.is_some() {}
        Ok(())
    }
    fn visit_str<E>(self, path: &str) -> Result<(), E> {
        if self.value == Member::File {
            let path = asked_file(path);
            let named = self.named;
            if !path.is_empty() && named.len() < NAMED_FILES_CHECKED && !named.contains(&path) {
                named.push(path);
            }
        }
        Ok(())
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
}

/// A member's name, classified without keeping it.
struct MemberName;

impl<'de> serde::de::DeserializeSeed<'de> for MemberName {
    type Value = Member;
    fn deserialize<D: serde::Deserializer<'de>>(self, json: D) -> Result<Member, D::Error> {
        json.deserialize_str(self)
    }
}

impl<'de> serde::de::Visitor<'de> for MemberName {
    type Value = Member;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a member name")
    }
    fn visit_str<E>(self, name: &str) -> Result<Member, E> {
        Ok(Member::of(name))
    }
}

/// The note added to an answer naming `stale` files, `None` when there are none.
pub fn stale_note(stale: &[StaleFile]) -> Option<String> {
    if stale.is_empty() {
        return None;
    }
    let list: Vec<String> = stale
        .iter()
        .map(|s| match &s.modified_at {
            Some(at) => format!("{} (modified {at})", s.path),
            None => format!("{} (deleted)", s.path),
        })
        .collect();
    let signal = if stale.iter().all(|s| s.signal == "baseline") {
        "size or modification time differ from what the import saw"
    } else {
        "modification time after the import, for files without a baseline"
    };
    Some(format!(
        "Stale: changed on disk since the index was imported ({}): {}. Line numbers may be off; re-run `acp index`. (Signal: {signal}.)",
        stale[0].indexed_at,
        list.join(", ")
    ))
}

/// A small regular file of the repository, trimmed.
fn read_git_file(path: &Path, limit: u64) -> Option<String> {
    let file = crate::regular_file::open(path).ok()?;
    let bytes = crate::regular_file::read_limited(file, limit).ok()?;
    Some(String::from_utf8(bytes).ok()?.trim().to_string())
}

/// A commit hash as git writes it (40 or 64 hex digits).
fn commit_hash(text: &str) -> Option<String> {
    let text = text.trim();
    (matches!(text.len(), 40 | 64) && text.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| text.to_ascii_lowercase())
}

/// The commit `HEAD` names in the repository at `root`, read from its files.
pub fn git_head(root: &Path) -> Option<String> {
    let mut git = root.join(".git");
    if let Some(pointer) = read_git_file(&git, GIT_FILE_LIMIT) {
        // A worktree or a submodule: `.git` is a file naming the real directory.
        let target = pointer.strip_prefix("gitdir:")?.trim();
        git = root.join(target);
    }
    let head = read_git_file(&git.join("HEAD"), GIT_FILE_LIMIT)?;
    let Some(name) = head.strip_prefix("ref:").map(str::trim) else {
        return commit_hash(&head);
    };
    if !name.starts_with("refs/") || under_root(Path::new(""), name).is_none() {
        return None;
    }
    // Refs live in the repository's common directory when this is a linked worktree.
    let common = read_git_file(&git.join("commondir"), GIT_FILE_LIMIT)
        .map_or_else(|| git.clone(), |dir| git.join(dir));
    for dir in [&git, &common] {
        if let Some(hash) = read_git_file(&dir.join(name), GIT_FILE_LIMIT) {
            return commit_hash(&hash);
        }
    }
    let packed = read_git_file(&common.join("packed-refs"), PACKED_REFS_LIMIT)?;
    packed.lines().find_map(|line| {
        let (hash, reference) = line.split_once(' ')?;
        (reference.trim() == name)
            .then(|| commit_hash(hash))
            .flatten()
    })
}

/// Whether an overview answer takes a sweep step itself ([`sweep_in_background`]).
fn answer_steps(conn: &Connection) -> QueryResult<bool> {
    if !swept_in_background() {
        return Ok(true);
    }
    let Some(baseline) = baseline(conn)? else {
        return Ok(false);
    };
    let swept_once = sweeps::swept_once(&baseline);
    let files: Option<u64> =
        meta(conn, crate::db::SOURCE_BASELINE_FILES_KEY)?.and_then(|n| n.parse().ok());
    Ok(!swept_once && files.is_some_and(|n| n <= ANSWER_SWEEP_BUDGET as u64))
}

/// The index's commit against the project's `HEAD`, and its files against the disk: after a
/// sweep step of at most [`ANSWER_SWEEP_BUDGET`] files, without a watcher or while a small
/// project waits for its first pass ([`sweep_in_background`]).
pub fn source_state(conn: &Connection) -> QueryResult<SourceState> {
    let budget = if answer_steps(conn)? {
        ANSWER_SWEEP_BUDGET
    } else {
        0
    };
    source_state_swept(conn, budget)
}

/// [`source_state`] after a sweep step of at most `budget` files (0: none, what the last steps
/// found).
pub fn source_state_swept(conn: &Connection, budget: usize) -> QueryResult<SourceState> {
    let indexed_commit: Option<String> = conn
        .prepare_cached(
            "SELECT json_extract(value_json, '$') FROM cache_root WHERE key = 'git_commit'",
        )?
        .query_row([], |r| r.get::<_, Option<String>>(0))
        .optional()?
        .flatten();
    let baseline = baseline(conn)?;
    let head = baseline.as_ref().and_then(|b| git_head(&b.root));
    let head_moved =
        matches!((&indexed_commit, &head), (Some(a), Some(b)) if !a.eq_ignore_ascii_case(b));
    let message = match (&indexed_commit, &head) {
        (Some(indexed), Some(head)) if head_moved => format!(
            "Indexed at commit {}, HEAD is {}: the code moved on; re-run `acp index`.",
            short(indexed),
            short(head)
        ),
        (Some(indexed), Some(_)) => format!("Indexed at commit {}, which is HEAD.", short(indexed)),
        (None, Some(head)) => format!("The cache records no commit; HEAD is {}.", short(head)),
        (Some(indexed), None) => format!(
            "Indexed at commit {}; the project has no git HEAD to compare with.",
            short(indexed)
        ),
        (None, None) => {
            "The cache records no commit and the project is no git repository.".to_string()
        }
    };
    let files = match &baseline {
        Some(baseline) => source_changes(conn, baseline, budget)?,
        None => None,
    };
    let message = match &files {
        Some(files) => format!("{message} {}", files.describe()),
        None => message,
    };
    Ok(SourceState {
        indexed_commit,
        head,
        head_moved,
        files,
        message,
    })
}

fn short(hash: &str) -> &str {
    &hash[..hash.len().min(12)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_files_an_answer_names_are_read_from_its_text_as_from_its_value() {
        let answer = serde_json::json!({
            "path": "./src/a.ts",
            "summary": "mentions src/never.ts",
            "files": ["src/b.ts", 3, {"file": "src/f.ts", "symbols": ["x"]}, "src/a.ts"],
            "result": [{"file": "src/c\"q.ts", "lines": [1, 2]}, {"file": null}],
            "nested": {"similar_files": ["src/d.ts"], "key_files": "not a list"},
            "file": {"path": "src/e.ts"},
            "count": 1.5,
            "ok": true
        });
        let expected = [
            "src/a.ts",
            "src/b.ts",
            "src/f.ts",
            "src/e.ts",
            "src/d.ts",
            "src/c\"q.ts",
        ];
        let mut from_value = files_named(&answer);
        let mut from_text = files_named_in(&serde_json::to_string_pretty(&answer).unwrap());
        from_value.sort();
        from_text.sort();
        let mut expected = expected.map(String::from).to_vec();
        expected.sort();
        assert_eq!(from_value, expected);
        assert_eq!(from_text, expected);
        assert!(files_named_in("No constraints for this file").is_empty());
        let many: Vec<String> = (0..100).map(|i| format!("src/{i}.ts")).collect();
        let listed = files_named_in(&serde_json::json!({ "files": many }).to_string());
        assert_eq!(listed.len(), NAMED_FILES_CHECKED);
        assert_eq!(listed[0], "src/0.ts");
    }

    #[test]
    fn head_is_read_from_refs_packed_refs_and_worktrees() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let git = root.join(".git");
        std::fs::create_dir_all(git.join("refs/heads")).unwrap();
        let a = "a".repeat(40);
        let b = "b".repeat(40);
        std::fs::write(git.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        assert_eq!(git_head(root), None, "no such ref yet");
        std::fs::write(
            git.join("packed-refs"),
            format!("# pack-refs\n{b} refs/heads/main\n"),
        )
        .unwrap();
        assert_eq!(git_head(root), Some(b.clone()));
        std::fs::write(git.join("refs/heads/main"), format!("{a}\n")).unwrap();
        assert_eq!(git_head(root), Some(a.clone()), "a loose ref wins");
        std::fs::write(git.join("HEAD"), format!("{b}\n")).unwrap();
        assert_eq!(git_head(root), Some(b.clone()), "a detached HEAD");
        std::fs::write(git.join("HEAD"), "ref: refs/../../../etc/passwd\n").unwrap();
        assert_eq!(git_head(root), None, "a ref may not leave the repository");

        let linked = root.join("linked");
        std::fs::create_dir_all(git.join("worktrees/linked")).unwrap();
        std::fs::create_dir_all(&linked).unwrap();
        std::fs::write(
            linked.join(".git"),
            format!("gitdir: {}\n", git.join("worktrees/linked").display()),
        )
        .unwrap();
        std::fs::write(git.join("worktrees/linked/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(git.join("worktrees/linked/commondir"), "../..\n").unwrap();
        assert_eq!(git_head(&linked), Some(a));
    }
}
