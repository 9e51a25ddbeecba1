//! Confining the paths named by debug attempts and hack markers to the project root.
//!
//! A path is accepted when it names something inside the root: relative paths are normalised
//! the way acp-cli does (`\` → `/`, empty and `.` segments dropped, `..` resolved), but a `..`
//! that would climb above the root is refused instead of being dropped; absolute paths must lie
//! under the root; and no symbolic link on the way may lead outside it. The result is the
//! canonical root-relative spelling used everywhere in the journal (`src/a.ts`).

use std::fs;
use std::path::{Component, Path, PathBuf};

use super::JournalError;

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

    /// The file a canonical relative path names on disk.
    pub(crate) fn file(&self, relative: &str) -> PathBuf {
        self.canonical.join(relative)
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
