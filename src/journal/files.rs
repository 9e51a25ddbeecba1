//! Reading files for the journal: the files attempts name (hashed when an attempt is logged, gets
//! a result or is reverted) and the attempts file. Every read opens the file anew without
//! following a final symbolic link and without blocking (a FIFO cannot hang it), accepts regular
//! files only, reads at most [`FILE_LIMIT`] bytes, and streams: only a hash and, for small text
//! files, the content are kept.

use std::fs::{self, File, OpenOptions};
use std::io::{self, ErrorKind, Read};
use std::path::Path;

use super::action::{JournalError, FILE_LIMIT};
use super::md5::Md5;
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
                "Invalid path: {name} is one of acpdb's own database files (the index, the \
                 journal or an import's temporary file), which the journal does not read"
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
    let Some(file) = open_regular_of_any_size(path)? else {
        return Ok(None);
    };
    let len = file.metadata()?.len();
    if len > FILE_LIMIT {
        return Err(FileError::TooLarge(len));
    }
    Ok(Some(file))
}

/// The length and the MD5 of the regular file at `path` (opened as [`open_regular`] opens,
/// whatever its size), read in pieces; `None` when nothing is there.
pub(crate) fn length_and_md5(path: &Path) -> Result<Option<(u64, String)>, FileError> {
    let Some(file) = open_regular_of_any_size(path)? else {
        return Ok(None);
    };
    let read = digest(file, 0, u64::MAX)?;
    Ok(Some((read.length, read.hash)))
}

/// [`open_regular`] without its size limit.
fn open_regular_of_any_size(path: &Path) -> Result<Option<GuardedFile>, FileError> {
    let meta = match fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(err) if is_absent(&err) => return Ok(None),
        Err(err) => return Err(err.into()),
    };
    // Checked before opening, so that opening has no side effects on special files…
    check_type(&meta)?;
    let file = match open_for_reading(path) {
        Ok(Some(file)) => GuardedFile::new(file),
        Ok(None) => return Err(FileError::Database),
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
    Ok(Some(file))
}

/// Opens `path` for reading ([`options`]), unless it is one of acpdb's databases (`None`). On
/// Linux it is first opened as a location only (`O_PATH`, whose descriptor, unlike any other,
/// closes without dropping the process's locks on the file), checked, and then opened for
/// reading through that descriptor, so the file read is the file checked and a database is
/// never opened for reading. Elsewhere the path is checked before it is opened, and the
/// caller's check on the handle catches a file swapped in between.
#[cfg(target_os = "linux")]
fn open_for_reading(path: &Path) -> io::Result<Option<File>> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let location = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_NOFOLLOW)
        .open(path)?;
    let meta = location.metadata()?;
    if meta.file_type().is_symlink() {
        return Err(io::Error::from_raw_os_error(libc::ELOOP));
    }
    if crate::sqlite_locks::is_registered(&meta) {
        return Ok(None);
    }
    if !meta.is_file() {
        // Refused by its type on the handle, never opened for reading.
        return Ok(Some(location));
    }
    // The descriptor's name in /proc is a link to the very file (so no `O_NOFOLLOW` here); without
    // /proc, the path is opened again and checked on the handle afterwards.
    let through = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(format!("/proc/self/fd/{}", location.as_raw_fd()));
    match through {
        Err(err) if err.kind() == ErrorKind::NotFound => options().open(path).map(Some),
        opened => opened.map(Some),
    }
}

#[cfg(not(target_os = "linux"))]
fn open_for_reading(path: &Path) -> io::Result<Option<File>> {
    if crate::sqlite_locks::is_registered(&fs::symlink_metadata(path)?) {
        return Ok(None);
    }
    options().open(path).map(Some)
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
    /// Bytes read.
    pub(crate) length: u64,
    /// Lower-case hex MD5.
    pub(crate) hash: String,
    /// The content, when kept.
    pub(crate) text: Option<String>,
}

/// Reads `file` to its end in pieces, hashing it and keeping its text when it has at most
/// `keep` bytes; more than `limit` bytes ([`FILE_LIMIT`] for a file read as a snapshot: one
/// growing while read) is an error.
pub(crate) fn digest(file: impl Read, keep: usize, limit: u64) -> Result<Digest, FileError> {
    let mut md5 = Md5::new();
    let mut kept = Vec::new();
    let mut total: u64 = 0;
    let mut buffer = vec![0u8; 64 * 1024];
    let mut reader = file.take(limit.saturating_add(1));
    loop {
        let n = match reader.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => n,
            Err(err) if err.kind() == ErrorKind::Interrupted => continue,
            Err(err) => return Err(err.into()),
        };
        total += n as u64;
        if total > limit {
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
        length: total,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_os = "linux")]
    #[test]
    fn a_database_is_refused_without_being_opened_for_reading() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("held.db");
        let reader = crate::sqlite_locks::locked_database(&db);
        crate::sqlite_locks::register(&db);
        let probe = File::open(&db).unwrap();
        assert!(crate::sqlite_locks::shared_lock_held(&probe));
        // As when the file is swapped in after the check on its path: the check on the
        // location refuses it, and closing the location keeps the reader's lock.
        assert!(open_for_reading(&db).unwrap().is_none());
        assert!(crate::sqlite_locks::shared_lock_held(&probe));
        let text = dir.path().join("text.txt");
        fs::write(&text, "hello").unwrap();
        let mut read = String::new();
        open_for_reading(&text)
            .unwrap()
            .unwrap()
            .read_to_string(&mut read)
            .unwrap();
        assert_eq!(read, "hello");
        drop(reader);
    }
}
