//! Opening the files acpdb reads (the cache, the vars, the project config, a token file) and
//! those it keeps in `.acp/`, so that nothing put in their place can hang it or redirect it: a
//! file is opened without blocking (a FIFO with no writer would otherwise wait forever in
//! `open`) and refused unless the open handle is a regular file. The check is on the handle, so
//! a file swapped between a look and the open is caught too. The files acpdb keeps are also
//! never opened through a symbolic link.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::path::{Component, Path, PathBuf};
use std::time::UNIX_EPOCH;

/// Opens `path` for reading if it is a regular file (a final symbolic link is followed). Any
/// other kind is an [`io::ErrorKind::InvalidInput`] error that names it, such as "is a FIFO,
/// not a regular file".
pub fn open(path: &Path) -> io::Result<File> {
    open_regular(path, OpenOptions::new().read(true), false)
}

/// Opens `path` with `options` (say, to write it) unless its last component is a symbolic link
/// or it is anything but a regular file, without blocking; for the files acpdb keeps in the
/// project's `.acp/`, which a link could otherwise redirect outside the project. A link is an
/// [`io::ErrorKind::InvalidInput`] error saying "is a symbolic link, not a regular file".
pub fn open_own(path: &Path, options: &mut OpenOptions) -> io::Result<File> {
    open_regular(path, options, true)
}

/// Opens `path` with `options`, without blocking and, with `no_link`, without following a
/// final symbolic link; then [`checked`].
fn open_regular(path: &Path, options: &mut OpenOptions, no_link: bool) -> io::Result<File> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        let no_link_flag = if no_link { libc::O_NOFOLLOW } else { 0 };
        options.custom_flags(libc::O_NONBLOCK | no_link_flag);
    }
    let file = options.open(path).map_err(|err| {
        #[cfg(unix)]
        if no_link && err.raw_os_error() == Some(libc::ELOOP) {
            return io::Error::new(
                io::ErrorKind::InvalidInput,
                "is a symbolic link, not a regular file",
            );
        }
        err
    })?;
    checked(file)
}

/// `file` if it is a regular file, made blocking again; else an error naming its kind.
fn checked(file: File) -> io::Result<File> {
    let kind = file.metadata()?.file_type();
    if !kind.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("is a {}, not a regular file", kind_name(&kind)),
        ));
    }
    #[cfg(unix)]
    clear_nonblocking(&file)?;
    Ok(file)
}

/// Reads of a regular file ignore `O_NONBLOCK`; it is cleared all the same, so the handle is an
/// ordinary one.
#[cfg(unix)]
fn clear_nonblocking(file: &File) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let fd = file.as_raw_fd();
    // SAFETY: `fd` is an open descriptor owned by `file` for the duration of both calls, and
    // F_GETFL / F_SETFL only read and set its status flags.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// All of `reader` if it holds at most `limit` bytes, reading no further than one byte past
/// it; more is an [`io::ErrorKind::InvalidData`] error saying "is larger than 4 MiB" (the limit
/// in MiB, KiB or bytes, whichever divides it).
pub fn read_limited(reader: impl Read, limit: u64) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    reader
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        let limit = match limit {
            l if l >= 1 << 20 && l % (1 << 20) == 0 => format!("{} MiB", l >> 20),
            l if l >= 1 << 10 && l % (1 << 10) == 0 => format!("{} KiB", l >> 10),
            l => format!("{l} bytes"),
        };
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("is larger than {limit}"),
        ));
    }
    Ok(bytes)
}

/// `relative` under `root`, or `None` when it is absolute or climbs out (`..`): the only way a
/// path read from an index becomes a path on disk, so that no index makes acpdb look outside
/// its project.
pub fn under_root(root: &Path, relative: &str) -> Option<PathBuf> {
    let path = Path::new(relative);
    path.components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
        .then(|| root.join(path))
}

/// What a source file looks like on disk, as `lstat` sees it (a symbolic link is never
/// followed, a FIFO never opened): its size and modification time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiskState {
    /// Bytes.
    pub size: u64,
    /// Modification time, nanoseconds since the Unix epoch (negative before it).
    pub mtime_ns: i64,
}

/// The [`DiskState`] of `path`: `Ok(None)` when nothing is there; other errors (a directory
/// that cannot be searched) as they are.
pub fn disk_state(path: &Path) -> io::Result<Option<DiskState>> {
    let meta = match fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(err),
    };
    let modified = meta.modified()?;
    let mtime_ns = match modified.duration_since(UNIX_EPOCH) {
        Ok(after) => i64::try_from(after.as_nanos()).unwrap_or(i64::MAX),
        Err(before) => i64::try_from(before.duration().as_nanos()).map_or(i64::MIN, |n| -n),
    };
    Ok(Some(DiskState {
        size: meta.len(),
        mtime_ns,
    }))
}

/// What a file of this kind is called in messages: "regular file", "directory", "symbolic
/// link", "FIFO", "socket", "device" or "special file".
pub fn kind_name(kind: &fs::FileType) -> &'static str {
    if kind.is_file() {
        return "regular file";
    }
    if kind.is_dir() {
        return "directory";
    }
    if kind.is_symlink() {
        return "symbolic link";
    }
    special_kind_name(kind)
}

#[cfg(unix)]
fn special_kind_name(kind: &fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if kind.is_fifo() {
        "FIFO"
    } else if kind.is_socket() {
        "socket"
    } else if kind.is_block_device() || kind.is_char_device() {
        "device"
    } else {
        "special file"
    }
}

#[cfg(not(unix))]
fn special_kind_name(_kind: &fs::FileType) -> &'static str {
    "special file"
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn disk_state_never_follows_a_link_and_tells_a_missing_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.ts");
        fs::write(&file, b"12345").unwrap();
        let state = disk_state(&file).unwrap().unwrap();
        assert_eq!(state.size, 5);
        assert!(state.mtime_ns > 0);
        assert_eq!(disk_state(&dir.path().join("gone.ts")).unwrap(), None);
        #[cfg(unix)]
        {
            let link = dir.path().join("link.ts");
            std::os::unix::fs::symlink("/nonexistent/target/of/link", &link).unwrap();
            let seen = disk_state(&link)
                .unwrap()
                .expect("the link itself is there");
            assert_ne!(seen.size, 5);
        }
    }

    #[test]
    fn a_regular_file_opens_and_reads_as_usual() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.json");
        fs::write(&path, b"{}").unwrap();
        let mut text = String::new();
        open(&path).unwrap().read_to_string(&mut text).unwrap();
        assert_eq!(text, "{}");
    }

    #[test]
    fn a_directory_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let err = open(dir.path()).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(err.to_string(), "is a directory, not a regular file");
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_without_a_writer_is_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pipe");
        let name = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
        // SAFETY: `name` is a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        // Nobody writes to it: a blocking open would never return.
        let err = open(&path).unwrap_err();
        assert_eq!(err.to_string(), "is a FIFO, not a regular file");
    }

    #[cfg(unix)]
    #[test]
    fn an_own_file_is_never_opened_through_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("elsewhere");
        fs::write(&target, b"keep").unwrap();
        let link = dir.path().join("lock");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let mut options = OpenOptions::new();
        options.write(true).create(true).truncate(true);
        let err = open_own(&link, &mut options).unwrap_err();
        assert_eq!(err.to_string(), "is a symbolic link, not a regular file");
        assert_eq!(fs::read(&target).unwrap(), b"keep");
        let own = dir.path().join("own");
        open_own(&own, &mut options).unwrap();
        assert!(own.is_file());
    }

    #[test]
    fn reading_stops_one_byte_past_the_limit() {
        assert_eq!(read_limited(&b"abc"[..], 3).unwrap(), b"abc");
        let err = read_limited(io::repeat(b'x'), 4 << 20).unwrap_err();
        assert_eq!(err.to_string(), "is larger than 4 MiB");
        let err = read_limited(io::repeat(b'x'), 64 << 10).unwrap_err();
        assert_eq!(err.to_string(), "is larger than 64 KiB");
        assert_eq!(
            read_limited(&b"abcd"[..], 3).unwrap_err().to_string(),
            "is larger than 3 bytes"
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_device_is_refused_by_name() {
        let err = open(Path::new("/dev/null")).unwrap_err();
        assert_eq!(err.to_string(), "is a device, not a regular file");
    }
}
