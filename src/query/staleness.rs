//! Is this answer still true? The source files an answer names, checked on disk against the
//! moment the index was imported, and the project's git HEAD against the commit the cache was
//! made at (ACP spec §11.2).
//!
//! **Per file**, the signal is the file's modification time against the import's: a file
//! changed on disk after the index was imported may have moved its lines. The moment of the
//! import, not the cache's recorded mtimes, is the baseline: after a fresh clone or checkout
//! every file is newer than the cache says, but older than the import that follows. A file
//! gone from disk is reported as deleted, unless the import found none of the project's files
//! on disk (an index served without its sources). One `lstat` per file (never followed, never opened,
//! so a symlink or a FIFO costs nothing and cannot block), kept for [`STAT_TTL`]; paths that
//! would leave the project root are never looked at.
//!
//! **Per index**, `HEAD` is read from `.git` without running git (`HEAD`, loose refs,
//! `packed-refs`, and the `gitdir:` file of a worktree or submodule), each file at most
//! [`GIT_FILE_LIMIT`] bytes and only if it is a regular file.

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use rusqlite::{Connection, OptionalExtension};
use serde::Serialize;

use super::QueryResult;

/// How long the result of one file's `lstat` is reused.
pub const STAT_TTL: Duration = Duration::from_secs(1);

/// Files whose `lstat` results are kept at most.
const STAT_CACHE: usize = 4096;

/// Largest `.git` file read (HEAD, a ref, `gitdir:`); `packed-refs` may be larger.
pub const GIT_FILE_LIMIT: u64 = 4096;

/// Largest `packed-refs` read.
const PACKED_REFS_LIMIT: u64 = 16 * 1024 * 1024;

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
}

/// Where the index stands against the project's git repository.
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
    /// In words, with what to do.
    pub message: String,
}

/// What the answers compare with: the project directory and the moment of the import.
struct Baseline {
    root: PathBuf,
    imported_at: String,
    imported: SystemTime,
}

fn baseline(conn: &Connection) -> QueryResult<Option<Baseline>> {
    let meta = |key: &str| -> QueryResult<Option<String>> {
        Ok(conn
            .prepare_cached("SELECT value FROM meta WHERE key = ?1")?
            .query_row([key], |r| r.get(0))
            .optional()?)
    };
    let (Some(root), Some(imported_at)) = (meta(crate::db::PROJECT_DIR_KEY)?, meta("imported_at")?)
    else {
        return Ok(None);
    };
    if meta(crate::db::SOURCE_TREE_KEY)?.as_deref() == Some("absent") {
        return Ok(None);
    }
    let Ok(imported) = chrono::DateTime::parse_from_rfc3339(&imported_at) else {
        return Ok(None);
    };
    Ok(Some(Baseline {
        root: PathBuf::from(root),
        imported_at,
        imported: imported.with_timezone(&chrono::Utc).into(),
    }))
}

/// What one `lstat` found: the modification time, or `None` when the file is gone.
type Seen = Option<SystemTime>;

static STATS: Mutex<Option<HashMap<PathBuf, (Instant, Seen)>>> = Mutex::new(None);

/// The file's modification time (`None`: gone), from the cache while fresh. Errors other than
/// "not found" (permissions) count as unchanged.
fn modified(path: &Path) -> Option<Seen> {
    let now = Instant::now();
    {
        let cache = STATS.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((at, seen)) = cache.as_ref().and_then(|c| c.get(path)) {
            if now.duration_since(*at) < STAT_TTL {
                return Some(*seen);
            }
        }
    }
    let seen = match std::fs::symlink_metadata(path) {
        Ok(meta) => Some(meta.modified().ok()?),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => None,
        Err(_) => return None,
    };
    let mut cache = STATS.lock().unwrap_or_else(|e| e.into_inner());
    let cache = cache.get_or_insert_with(HashMap::new);
    if cache.len() >= STAT_CACHE {
        cache.retain(|_, (at, _)| now.duration_since(*at) < STAT_TTL);
        if cache.len() >= STAT_CACHE {
            cache.clear();
        }
    }
    cache.insert(path.to_path_buf(), (now, seen));
    Some(seen)
}

/// `relative` under `root`, or `None` when it is absolute or climbs out (`..`).
fn under_root(root: &Path, relative: &str) -> Option<PathBuf> {
    let path = Path::new(relative);
    path.components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
        .then(|| root.join(path))
}

fn rfc3339(time: SystemTime) -> String {
    chrono::DateTime::<chrono::Utc>::from(time).to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// The files among `paths` (canonical, relative to the project) changed on disk after the
/// index was imported, in the order given, each once.
pub fn stale_files<'a>(
    conn: &Connection,
    paths: impl IntoIterator<Item = &'a str>,
) -> QueryResult<Vec<StaleFile>> {
    let Some(baseline) = baseline(conn)? else {
        return Ok(Vec::new());
    };
    let mut stale: Vec<StaleFile> = Vec::new();
    for path in paths {
        if stale.iter().any(|s| s.path == path) {
            continue;
        }
        let Some(on_disk) = under_root(&baseline.root, path) else {
            continue;
        };
        let change = match modified(&on_disk) {
            None => continue,
            Some(None) => ("deleted", None),
            Some(Some(time)) if time > baseline.imported => ("modified", Some(rfc3339(time))),
            Some(Some(_)) => continue,
        };
        stale.push(StaleFile {
            path: path.to_string(),
            change: change.0,
            indexed_at: baseline.imported_at.clone(),
            modified_at: change.1,
        });
    }
    Ok(stale)
}

/// The canonical path of an entry's `field` (`path` of a file entry, `file` of a symbol's).
pub fn entry_path(entry: &super::ordered::Entry, field: &str) -> Option<String> {
    let path = entry.get(field)?.as_str()?;
    Some(crate::cache::paths::canonical_path(path, None))
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
    Some(format!(
        "Stale: changed on disk since the index was imported ({}): {}. Line numbers may be off; re-run `acp index`. (Signal: modification time after the import.)",
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

/// The index's commit against the project's `HEAD`.
pub fn source_state(conn: &Connection) -> QueryResult<SourceState> {
    let indexed_commit: Option<String> = conn
        .prepare_cached(
            "SELECT json_extract(value_json, '$') FROM cache_root WHERE key = 'git_commit'",
        )?
        .query_row([], |r| r.get::<_, Option<String>>(0))
        .optional()?
        .flatten();
    let head = baseline(conn)?.and_then(|b| git_head(&b.root));
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
    Ok(SourceState {
        indexed_commit,
        head,
        head_moved,
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

    #[test]
    fn paths_never_leave_the_root() {
        let root = Path::new("/p");
        assert_eq!(
            under_root(root, "src/a.ts"),
            Some(PathBuf::from("/p/src/a.ts"))
        );
        assert_eq!(
            under_root(root, "./src/a.ts"),
            Some(PathBuf::from("/p/./src/a.ts"))
        );
        for bad in ["../x", "/etc/passwd", "src/../../x"] {
            assert_eq!(under_root(root, bad), None, "{bad}");
        }
    }
}
