//! Confining the paths named by debug attempts and hack markers to the project root.
//!
//! A path is accepted when it names something inside the root: relative paths are normalised
//! the way acp-cli does (`\` → `/`, empty and `.` segments dropped, `..` resolved), but a `..`
//! that would climb above the root is refused instead of being dropped; absolute paths must lie
//! under the root; and no symbolic link on the way may lead outside it. The result is the
//! canonical root-relative spelling used everywhere in the journal (`src/a.ts`).
//!
//! Checking a path once is not enough: a file can be replaced by a symbolic link after it was
//! named. So [`Root::open`] confines the path again at every read and then checks that the
//! opened file itself lies inside the root.

use std::fs::{self, File};
use std::path::{Component, Path, PathBuf};

use super::action::JournalError;
use super::files::{self, FileError};
use crate::config::{PathRules, CONFIG_FILE};
use crate::sqlite_locks::GuardedFile;

/// The project root, both as given (absolute) and with symbolic links resolved.
#[derive(Debug, Clone)]
pub(crate) struct Root {
    given: PathBuf,
    canonical: PathBuf,
}

impl Root {
    /// Resolves `root`, which must be an existing directory.
    pub(crate) fn new(root: &Path) -> Result<Root, JournalError> {
        let given = std::path::absolute(root).map_err(|e| {
            JournalError::Internal(format!(
                "Cannot resolve project root {}: {e}",
                root.display()
            ))
        })?;
        let canonical = fs::canonicalize(&given).map_err(|e| {
            JournalError::Internal(format!(
                "Cannot resolve project root {}: {e}",
                root.display()
            ))
        })?;
        Ok(Root { given, canonical })
    }

    /// The root with symbolic links resolved.
    pub(crate) fn path(&self) -> &Path {
        &self.canonical
    }

    /// The canonical root-relative form of `input`, or -32602 when it leaves the root.
    pub(crate) fn resolve(&self, input: &str) -> Result<String, JournalError> {
        let outside = || JournalError::InvalidParams(format!("Path outside project root: {input}"));
        let slashed = input.replace('\\', "/");
        let relative = if Path::new(&slashed).is_absolute() {
            let path = Path::new(&slashed);
            let rest = path
                .strip_prefix(&self.given)
                .or_else(|_| path.strip_prefix(&self.canonical))
                .map_err(|_| outside())?;
            rest.to_string_lossy().into_owned()
        } else {
            slashed
        };
        let mut segments: Vec<&str> = Vec::new();
        for segment in relative.split('/') {
            match segment {
                "" | "." => {}
                ".." => {
                    segments.pop().ok_or_else(outside)?;
                }
                name => segments.push(name),
            }
        }
        if segments.is_empty() {
            return Err(JournalError::InvalidParams(format!(
                "Invalid path: '{input}' names the project root, not a file"
            )));
        }
        if !self.stays_inside(&segments) {
            return Err(outside());
        }
        Ok(segments.join("/"))
    }

    /// The project config's `include`/`exclude` rules, read now through [`Root::open`] (so
    /// confined and bounded like any project file): a file in use by an action is read before
    /// its transaction begins. No config means no rules; a config that cannot be read or parsed
    /// is an invalid-params error naming it, like a config that is no regular file.
    pub(crate) fn rules(&self) -> Result<PathRules, JournalError> {
        let Some(file) = self.open(CONFIG_FILE)? else {
            return Ok(PathRules::none());
        };
        // The project's file, as a FIFO or a file too large is: the caller's to fix (-32602).
        PathRules::read(file, &self.given.join(CONFIG_FILE))
            .map_err(|err| JournalError::InvalidParams(format!("{err:#}")))
    }

    /// [`Root::resolve`], refusing (-32602) a path that the project config excludes.
    pub(crate) fn resolve_kept(
        &self,
        input: &str,
        rules: &PathRules,
    ) -> Result<String, JournalError> {
        let path = self.resolve(input)?;
        match rules.refusal(&path) {
            Some(refusal) => Err(JournalError::InvalidParams(refusal)),
            None => Ok(path),
        }
    }

    /// Opens the file at the canonical root-relative path `relative` for reading, confined
    /// again: symbolic links on the way are resolved and must stay inside the root, the file
    /// must be a regular file of at most [`FILE_LIMIT`](super::FILE_LIMIT) bytes, and the opened handle must
    /// be a file inside the root. `None` when nothing is there.
    pub(crate) fn open(&self, relative: &str) -> Result<Option<GuardedFile>, JournalError> {
        let outside =
            || JournalError::InvalidParams(format!("Path outside project root: {relative}"));
        let refused = |err: FileError| err.into_error(relative);
        let real = match fs::canonicalize(self.canonical.join(relative)) {
            Ok(real) => real,
            Err(err) if files::is_absent(&err) => return Ok(None),
            Err(err) => return Err(refused(err.into())),
        };
        if !real.starts_with(&self.canonical) {
            return Err(outside());
        }
        let Some(file) = files::open_regular(&real).map_err(refused)? else {
            return Ok(None);
        };
        if !self.holds(&file, &real) {
            return Err(outside());
        }
        Ok(Some(file))
    }

    /// Whether the opened `file` lies inside the root. On Linux the kernel names the file the
    /// handle refers to; elsewhere on Unix the handle must be the very file (device and inode)
    /// that `real`, a path inside the root, names now.
    #[cfg(unix)]
    fn holds(&self, file: &File, real: &Path) -> bool {
        use std::os::unix::fs::MetadataExt;
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            let handle = format!("/proc/self/fd/{}", file.as_raw_fd());
            if let Ok(opened) = fs::read_link(handle) {
                return opened.starts_with(&self.canonical);
            }
        }
        match (file.metadata(), fs::symlink_metadata(real)) {
            (Ok(opened), Ok(named)) => opened.dev() == named.dev() && opened.ino() == named.ino(),
            _ => false,
        }
    }

    /// Whether the opened file lies inside the root: `real` still resolves to itself.
    #[cfg(not(unix))]
    fn holds(&self, _file: &File, real: &Path) -> bool {
        fs::canonicalize(real).is_ok_and(|again| again == real)
    }

    /// Walks `segments` from the root and checks that every symbolic link met on the way
    /// resolves inside the root. Segments past the first missing one cannot be links.
    fn stays_inside(&self, segments: &[&str]) -> bool {
        let mut current = self.canonical.clone();
        for segment in segments {
            let next = current.join(segment);
            let Ok(meta) = fs::symlink_metadata(&next) else {
                return true;
            };
            if !meta.file_type().is_symlink() {
                current = next;
                continue;
            }
            current = match fs::canonicalize(&next) {
                Ok(target) => target,
                Err(_) => match fs::read_link(&next) {
                    Ok(target) => lexical(&current.join(target)),
                    Err(_) => return false,
                },
            };
            if !current.starts_with(&self.canonical) {
                return false;
            }
        }
        true
    }
}

/// `path` with `.` and `..` components resolved without touching the file system.
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// Normalises a path for comparison without confining it (used for paths that come from the
/// index, which may carry `./` prefixes).
pub(crate) fn normalise(path: &str) -> String {
    let mut segments: Vec<&str> = Vec::new();
    for segment in path.split(['/', '\\']) {
        match segment {
            "" | "." => {}
            ".." => {
                segments.pop();
            }
            name => segments.push(name),
        }
    }
    segments.join("/")
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    /// A path checked by [`Root::resolve`] and then replaced by links leading outside is
    /// refused when it is opened.
    #[test]
    fn open_confines_again() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("a.ts"), "secret").unwrap();
        fs::create_dir(root.path().join("src")).unwrap();
        fs::write(root.path().join("src/a.ts"), "inside").unwrap();
        fs::write(root.path().join("b.ts"), "inside").unwrap();
        let root_ = Root::new(root.path()).unwrap();
        let a = root_.resolve("src/a.ts").unwrap();
        let b = root_.resolve("b.ts").unwrap();
        assert!(root_.open(&a).unwrap().is_some());

        fs::remove_file(root.path().join("b.ts")).unwrap();
        symlink(outside.path().join("a.ts"), root.path().join("b.ts")).unwrap();
        fs::rename(root.path().join("src"), root.path().join("moved")).unwrap();
        symlink(outside.path(), root.path().join("src")).unwrap();
        for path in [&a, &b] {
            let err = root_.open(path).unwrap_err();
            assert_eq!(
                err,
                JournalError::InvalidParams(format!("Path outside project root: {path}"))
            );
        }
        // Links that stay inside are followed.
        fs::remove_file(root.path().join("src")).unwrap();
        symlink(root.path().join("moved"), root.path().join("src")).unwrap();
        assert!(root_.open(&a).unwrap().is_some());
    }
}
