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

impl DiskState {
    /// The state `meta` describes (from `lstat`, or `fstat` on a handle).
    pub fn of(meta: &fs::Metadata) -> io::Result<DiskState> {
        let modified = meta.modified()?;
        let mtime_ns = match modified.duration_since(UNIX_EPOCH) {
            Ok(after) => i64::try_from(after.as_nanos()).unwrap_or(i64::MAX),
            Err(before) => i64::try_from(before.duration().as_nanos()).map_or(i64::MIN, |n| -n),
        };
        Ok(DiskState {
            size: meta.len(),
            mtime_ns,
        })
    }
}

/// A project directory whose files are looked at without leaving it: a path that is absolute
/// or climbs out (`..`) is refused ([`under_root`]), and so is one that passes through a
/// symbolic link anywhere below the directory (a linked directory could lead outside it).
pub struct Beneath {
    root: PathBuf,
    /// The directory, opened once, that Linux resolves paths beneath (`openat2`).
    #[cfg(target_os = "linux")]
    dir: Option<File>,
}

impl Beneath {
    /// Files under `root`.
    pub fn new(root: &Path) -> Beneath {
        #[cfg(target_os = "linux")]
        let dir = {
            use std::os::unix::fs::OpenOptionsExt;
            OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
                .open(root)
                .ok()
        };
        Beneath {
            root: root.to_path_buf(),
            #[cfg(target_os = "linux")]
            dir,
        }
    }

    /// The [`DiskState`] of `relative` (a path as the index writes it): `Ok(None)` when
    /// nothing is there. A path that would leave the directory, or passes through a symbolic
    /// link or ends in one, is an [`io::ErrorKind::InvalidInput`] error; other errors (a
    /// directory that cannot be searched) are as they are.
    pub fn disk_state(&self, relative: &str) -> io::Result<Option<DiskState>> {
        let refused = || {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{relative} leaves the project directory or passes through a link"),
            )
        };
        let path = under_root(&self.root, relative).ok_or_else(refused)?;
        #[cfg(target_os = "linux")]
        if let Some(dir) = self
            .dir
            .as_ref()
            .filter(|_| !OPENAT2_REFUSED.load(std::sync::atomic::Ordering::Relaxed))
        {
            match open_beneath(dir, relative, 0) {
                Ok(file) => {
                    // A final link is opened as itself (`O_PATH | O_NOFOLLOW`).
                    let meta = file.metadata()?;
                    if meta.file_type().is_symlink() {
                        return Err(refused());
                    }
                    return DiskState::of(&meta).map(Some);
                }
                Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
                Err(err) if err.raw_os_error() == Some(libc::ELOOP) => return Err(refused()),
                // A kernel before 5.6, or a sandbox (seccomp) refusing the call: look at each
                // directory below instead, from now on.
                Err(err) if matches!(err.raw_os_error(), Some(libc::ENOSYS | libc::EPERM)) => {
                    OPENAT2_REFUSED.store(true, std::sync::atomic::Ordering::Relaxed);
                }
                Err(err) => return Err(err),
            }
        }
        self.walked_state(relative, &path).map_err(|err| match err {
            Walked::Refused => refused(),
            Walked::Failed(err) => err,
        })
    }

    /// A path handle (`O_PATH`) of the directory `relative` (`""`: the project directory),
    /// opened beneath the project without passing through a symbolic link; an
    /// [`io::ErrorKind::Unsupported`] error where the kernel cannot promise that (no
    /// `openat2`).
    #[cfg(target_os = "linux")]
    pub fn directory(&self, relative: &str) -> io::Result<File> {
        let unsupported = || io::Error::from(io::ErrorKind::Unsupported);
        let dir = self.dir.as_ref().ok_or_else(unsupported)?;
        if OPENAT2_REFUSED.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(unsupported());
        }
        if relative.is_empty() {
            return dir.try_clone();
        }
        if under_root(&self.root, relative).is_none() {
            return Err(io::Error::from(io::ErrorKind::InvalidInput));
        }
        open_beneath(dir, relative, libc::O_DIRECTORY)
    }

    /// [`Beneath::disk_state`] by an `lstat` of each directory on the way, then of the file:
    /// where `openat2` is missing. `path` is `relative` under the root.
    fn walked_state(&self, relative: &str, path: &Path) -> Result<Option<DiskState>, Walked> {
        let mut directory = self.root.clone();
        let mut components = Path::new(relative).components().peekable();
        while let Some(component) = components.next() {
            directory.push(component);
            if components.peek().is_some() {
                match fs::symlink_metadata(&directory) {
                    Ok(meta) if meta.file_type().is_symlink() => return Err(Walked::Refused),
                    Ok(_) => {}
                    Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
                    Err(err) => return Err(Walked::Failed(err)),
                }
            }
        }
        match fs::symlink_metadata(path) {
            Ok(meta) if meta.file_type().is_symlink() => Err(Walked::Refused),
            Ok(meta) => DiskState::of(&meta).map(Some).map_err(Walked::Failed),
            Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(err) => Err(Walked::Failed(err)),
        }
    }
}

/// Why [`Beneath::walked_state`] found no state.
enum Walked {
    /// A symbolic link on the way or at the end.
    Refused,
    /// The file system's error.
    Failed(io::Error),
}

/// Whether `openat2` was refused once (an old kernel, a sandbox): not tried again.
#[cfg(target_os = "linux")]
static OPENAT2_REFUSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// `relative` opened as a path only (never read, so a FIFO cannot block) beneath `dir`,
/// refusing symbolic links in any component (`ELOOP`) and ways out of `dir` (`EXDEV`).
#[cfg(target_os = "linux")]
fn open_beneath(dir: &File, relative: &str, flags: libc::c_int) -> io::Result<File> {
    use std::os::fd::{AsRawFd, FromRawFd};
    let name = std::ffi::CString::new(relative)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in a path"))?;
    // SAFETY: `open_how` is plain data; every field is set below or zero as the kernel wants.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC | flags) as u64;
    how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;
    // SAFETY: `name` and `how` outlive the call, and the size passed is `how`'s.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir.as_raw_fd(),
            name.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel returned a new descriptor that nothing else owns.
    Ok(unsafe { File::from_raw_fd(fd as i32) })
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

/// Makes a FIFO at `path`, for tests that nothing may block on.
#[cfg(all(test, unix))]
pub(crate) fn make_fifo(path: &Path) {
    let name = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: `name` is a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
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
    fn files_are_looked_at_beneath_the_root_never_through_a_link() {
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("secret.ts"), b"outside").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir(root.join("src")).unwrap();
        fs::write(root.join("src/a.ts"), b"12345").unwrap();
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(outside.path(), root.join("linked")).unwrap();
            std::os::unix::fs::symlink(root.join("src/a.ts"), root.join("src/link.ts")).unwrap();
            make_fifo(&root.join("src/pipe"));
        }
        let project = Beneath::new(root);
        // What each path gives: its size, "gone", or refused.
        let looked = |relative: &str| -> Vec<String> {
            let path = root.join(relative);
            let by_kernel = match project.disk_state(relative) {
                Ok(Some(state)) => state.size.to_string(),
                Ok(None) => "gone".into(),
                Err(err) if err.kind() == io::ErrorKind::InvalidInput => "refused".into(),
                Err(err) => panic!("{relative}: {err}"),
            };
            let by_walk = match project.walked_state(relative, &path) {
                Ok(Some(state)) => state.size.to_string(),
                Ok(None) => "gone".into(),
                Err(Walked::Refused) => "refused".into(),
                Err(Walked::Failed(err)) => panic!("{relative}: {err}"),
            };
            vec![by_kernel, by_walk]
        };
        assert_eq!(looked("src/a.ts"), ["5", "5"]);
        assert_eq!(looked("./src/a.ts"), ["5", "5"]);
        assert_eq!(looked("src/gone.ts"), ["gone", "gone"]);
        assert_eq!(looked("gone/a.ts"), ["gone", "gone"]);
        assert_eq!(
            project.disk_state("../secret.ts").unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
        assert_eq!(
            project.disk_state("/etc/passwd").unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
        #[cfg(unix)]
        {
            assert_eq!(looked("linked/secret.ts"), ["refused", "refused"]);
            assert_eq!(looked("src/link.ts"), ["refused", "refused"]);
            // A FIFO is looked at, never opened: no wait for a writer.
            assert_eq!(looked("src/pipe"), ["0", "0"]);
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
        make_fifo(&path);
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
