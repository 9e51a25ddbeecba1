//! Reading files for the journal: the files attempts name (hashed when an attempt is logged, gets
//! a result or is reverted) and the attempts file. Every read opens the file anew without
//! following a final symbolic link and without blocking (a FIFO cannot hang it), accepts regular
//! files only, reads at most [`FILE_LIMIT`] bytes, and streams: only a hash and, for small text
//! files, the content are kept.

use std::fs::{self, OpenOptions};
use std::io::{self, ErrorKind, Read};
use std::path::Path;

use super::md5::Md5;
use super::{JournalError, FILE_LIMIT};
use crate::sqlite_locks::GuardedFile;

/// Why a file could not be read.
#[derive(Debug)]
pub(crate) enum FileError {
    /// It is a directory.
    Directory,
    /// It is neither a regular file nor a directory (FIFO, socket, device); names the kind.
    Special(&'static str),
    /// It is (or became while being opened) a symbolic link.
    Link,
    /// It has more than [`FILE_LIMIT`] bytes (the size seen, or the limit plus one).
    TooLarge(u64),
    /// It is one of the SQLite databases this process holds locks on, or a companion file of
    /// one ([`crate::sqlite_locks`]): reading it would drop those locks.
    Database,
    /// Any other failure.
    Io(io::Error),
}

impl From<io::Error> for FileError {
    fn from(err: io::Error) -> Self {
        FileError::Io(err)
    }
}

impl FileError {
    /// The error for a file the caller named: -32602, or -32603 for an I/O failure.
    pub(crate) fn into_error(self, name: &str) -> JournalError {
        let message = self.describe(name);
        match self {
            FileError::Io(_) => JournalError::Internal(message),
            _ => JournalError::InvalidParams(message),
        }
    }

    /// The reason, naming the file.
    pub(crate) fn describe(&self, name: &str) -> String {
        match self {
            FileError::Directory => {
                format!("Not a file: {name}; list the files inside the directory instead")
            }
            FileError::Special(kind) => {
                format!(
                    "Not a regular file: {name} is a {kind}; the journal reads regular files only"
                )
            }
            FileError::Link => {
                format!("Cannot read {name}: it was replaced by a symbolic link; retry")
            }
            FileError::TooLarge(size) => format!(
                "File too large: {name} has {size} bytes; the journal reads files of at most \
                 {FILE_LIMIT} bytes"
            ),
            FileError::Database => format!(
                "Invalid path: {name} is one of acpdb's own database files (the index or the \
                 journal), which the journal does not read"
            ),
            FileError::Io(err) => format!("Cannot read {name}: {err}"),
        }
    }
}

/// Whether an error says there is no file at the path (nothing there, or a component of the
/// path that is a file, as in `a.ts/x`).
pub(crate) fn is_absent(err: &io::Error) -> bool {
    matches!(err.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory)
}

/// Opens `path` for reading if it is a regular file of at most [`FILE_LIMIT`] bytes; `None`
/// when nothing is there. A final symbolic link is refused ([`FileError::Link`]), not followed,
/// and so is a database of acpdb's ([`FileError::Database`]).
pub(crate) fn open_regular(path: &Path) -> Result<Option<GuardedFile>, FileError> {
    let meta = match fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(err) if is_absent(&err) => return Ok(None),
        Err(err) => return Err(err.into()),
    };
    // Checked before opening, so that opening has no side effects on special files…
    check_type(&meta)?;
    if crate::sqlite_locks::is_registered(&meta) {
        return Err(FileError::Database);
    }
    let file = match options().open(path) {
        Ok(file) => GuardedFile::new(file),
        Err(err) if is_absent(&err) => return Ok(None),
        Err(err) if is_link_error(&err) => return Err(FileError::Link),
        Err(err) => return Err(err.into()),
    };
    // …and again on the handle, in case the file was replaced in between (a database opened
    // that way stays open, see `GuardedFile`).
    let meta = file.metadata()?;
    if crate::sqlite_locks::is_registered(&meta) {
        return Err(FileError::Database);
    }
    check_type(&meta)?;
    if meta.len() > FILE_LIMIT {
        return Err(FileError::TooLarge(meta.len()));
    }
    Ok(Some(file))
}

/// Read-only, without following a final symbolic link and without blocking on open.
#[cfg(unix)]
fn options() -> OpenOptions {
    use std::os::unix::fs::OpenOptionsExt;
    let mut options = OpenOptions::new();
    options
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    options
}

#[cfg(not(unix))]
fn options() -> OpenOptions {
    let mut options = OpenOptions::new();
    options.read(true);
    options
}

/// Whether opening failed because the final component is a symbolic link (`O_NOFOLLOW`).
#[cfg(unix)]
fn is_link_error(err: &io::Error) -> bool {
    err.raw_os_error() == Some(libc::ELOOP)
}

#[cfg(not(unix))]
fn is_link_error(_err: &io::Error) -> bool {
    false
}

fn check_type(meta: &fs::Metadata) -> Result<(), FileError> {
    let kind = meta.file_type();
    if kind.is_file() {
        return Ok(());
    }
    if kind.is_dir() {
        return Err(FileError::Directory);
    }
    if kind.is_symlink() {
        return Err(FileError::Link);
    }
    Err(FileError::Special(crate::regular_file::kind_name(&kind)))
}

/// What [`digest`] read: the MD5 and, when the file is UTF-8 of at most the asked size, its text.
pub(crate) struct Digest {
    /// Lower-case hex MD5.
    pub(crate) hash: String,
    /// The content, when kept.
    pub(crate) text: Option<String>,
}

/// Reads `file` to its end in pieces, hashing it and keeping its text when it has at most
/// `keep` bytes; more than [`FILE_LIMIT`] bytes (a file growing while read) is an error.
pub(crate) fn digest(file: impl Read, keep: usize) -> Result<Digest, FileError> {
    let mut md5 = Md5::new();
    let mut kept = Vec::new();
    let mut total: u64 = 0;
    let mut buffer = vec![0u8; 64 * 1024];
    let mut reader = file.take(FILE_LIMIT + 1);
    loop {
        let n = match reader.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => n,
            Err(err) if err.kind() == ErrorKind::Interrupted => continue,
            Err(err) => return Err(err.into()),
        };
        total += n as u64;
        if total > FILE_LIMIT {
            return Err(FileError::TooLarge(total));
        }
        md5.update(&buffer[..n]);
        if total <= keep as u64 {
            kept.extend_from_slice(&buffer[..n]);
        }
    }
    let text = (total <= keep as u64)
        .then(|| String::from_utf8(kept).ok())
        .flatten();
    Ok(Digest {
        hash: md5.finish(),
        text,
    })
}

/// The whole content of the regular file at `path` (at most [`FILE_LIMIT`] bytes); `None` when
/// nothing is there.
pub(crate) fn read_regular(path: &Path) -> Result<Option<Vec<u8>>, FileError> {
    let Some(file) = open_regular(path)? else {
        return Ok(None);
    };
    let mut bytes = Vec::new();
    file.take(FILE_LIMIT + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > FILE_LIMIT {
        return Err(FileError::TooLarge(bytes.len() as u64));
    }
    Ok(Some(bytes))
}
