//! Files replaced whole: the new content goes to a temporary file beside the target, named
//! after the target and the writer's process id (`.acp.db.<pid>.tmp`) and never more readable
//! than the target ([`create_temp`]), is made durable, given the target's permissions, and is
//! renamed over the target, so readers see the old file or the new one, never a mix. Writers
//! killed halfway leave their temporary file behind; [`sweep`] removes those.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// A temporary file untouched this long is taken for a leftover even if a process with its
/// writer's id runs (ids are reused); live writers keep modifying theirs.
const STALE_AFTER: Duration = Duration::from_secs(5 * 60);

/// The temporary file this process writes a new `path` to.
pub fn temp_path(path: &Path) -> PathBuf {
    parent_dir(path).join(temp_name(path, std::process::id()))
}

/// Moves the finished temporary file `temp` over `path`, which keeps its permissions (see
/// [`create_temp`]): its content is synced first and the directory after, so the new file is on
/// disk when this returns.
pub fn replace(temp: &Path, path: &Path) -> std::io::Result<()> {
    sync(temp)?.replace(path)
}

/// Makes the temporary file `temp` durable, the slow part of [`replace`], for [`Synced::replace`]
/// to finish. Anything but a regular file there, such as a FIFO that would hang the open, is
/// refused.
pub fn sync(temp: &Path) -> std::io::Result<Synced> {
    let file = crate::regular_file::open_own(temp, fs::OpenOptions::new().read(true))?;
    file.sync_all()?;
    Ok(Synced {
        file,
        temp: temp.to_path_buf(),
    })
}

/// A temporary file made durable ([`sync`]), open, ready to be moved over its target.
pub struct Synced {
    file: File,
    temp: PathBuf,
}

impl Synced {
    /// Moves the file over `path`, which keeps its permissions, and syncs the directory.
    pub fn replace(self, path: &Path) -> std::io::Result<()> {
        self.replace_like(path, path)
    }

    /// [`Synced::replace`], the file given the permissions of `like` when there is one.
    fn replace_like(self, path: &Path, like: &Path) -> std::io::Result<()> {
        if let Ok(meta) = fs::metadata(like) {
            self.file.set_permissions(meta.permissions())?;
        }
        drop(self.file);
        fs::rename(&self.temp, path)?;
        // Syncing a directory is not possible everywhere; the rename itself has happened.
        if let Ok(dir) = File::open(parent_dir(path)) {
            let _ = dir.sync_all();
        }
        Ok(())
    }
}

/// How often [`Writeback::start`] starts writing out what was written since.
pub const WRITEBACK_EVERY: Duration = Duration::from_millis(500);

/// Starts the kernel writing files to disk while they are written, so that the `fsync` that
/// follows ([`replace`]'s, a checkpoint's) finds little left to write. Each tick asks for the
/// write-out of the files' dirty pages without waiting for it (Linux's `sync_file_range`);
/// elsewhere it does nothing. Stops when dropped, or when the kernel refuses.
#[must_use = "the write-out stops when the Writeback is dropped"]
pub struct Writeback {
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// The descriptors written out through, open until the Writeback is dropped even when the
    /// thread stopped early or never started: closing any descriptor of a file drops every
    /// POSIX lock the process holds on it, SQLite's included.
    files: Vec<Arc<File>>,
}

impl Writeback {
    /// Starts writing out `path`, a file being built, every [`WRITEBACK_EVERY`]; a file that
    /// cannot be opened, or is not a regular file, gets no early write-out (the final `fsync`
    /// writes it all).
    pub fn start(path: &Path) -> Writeback {
        let files = if cfg!(target_os = "linux") {
            crate::regular_file::open_own(path, fs::OpenOptions::new().read(true))
                .map(Arc::new)
                .into_iter()
                .collect()
        } else {
            Vec::new()
        };
        Writeback::of(files, WRITEBACK_EVERY)
    }

    /// Starts writing out `files` every `every`.
    pub fn of(files: Vec<Arc<File>>, every: Duration) -> Writeback {
        let mut writeback = Writeback {
            stop: None,
            thread: None,
            files,
        };
        if !cfg!(target_os = "linux") || writeback.files.is_empty() {
            return writeback;
        }
        let files = writeback.files.clone();
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("acpdb-writeback".into())
            .spawn(move || {
                while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                    stopped.recv_timeout(every)
                {
                    if let Err(err) = files.iter().try_for_each(|file| start_write_out(file)) {
                        tracing::debug!("no early write-out: {err}");
                        return;
                    }
                }
            });
        if let Ok(thread) = thread {
            writeback.stop = Some(stop);
            writeback.thread = Some(thread);
        }
        writeback
    }
}

impl Drop for Writeback {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Asks the kernel to start writing `file`'s dirty pages out, without waiting for them.
#[cfg(target_os = "linux")]
fn start_write_out(file: &File) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: the descriptor is open for as long as `file` lives; offset 0 and length 0 name
    // the whole file, and the flag only starts write-out.
    let done =
        unsafe { libc::sync_file_range(file.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE) };
    if done == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(not(target_os = "linux"))]
fn start_write_out(_file: &File) -> std::io::Result<()> {
    Ok(())
}

/// Creates the file `temp`, which must not exist (a link planted under its name is not
/// followed), for content that replaces the file `like`: with `like`'s permissions when there
/// is one (on Unix, from the moment it exists, plus reading and writing by its owner, who
/// writes it; [`replace`] gives it `like`'s own), so that content is never more readable than
/// before, not even halfway.
pub fn create_temp(temp: &Path, like: &Path) -> std::io::Result<File> {
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        let Ok(meta) = fs::metadata(like) else {
            return options.open(temp);
        };
        let mode = (meta.permissions().mode() & 0o7777) | 0o600;
        // The umask may take bits away from the mode the file is created with, never add any;
        // setting it again afterwards gives exactly the mode wanted.
        let file = options.mode(mode).open(temp)?;
        file.set_permissions(fs::Permissions::from_mode(mode))?;
        Ok(file)
    }
    #[cfg(not(unix))]
    {
        let _ = like;
        options.open(temp)
    }
}

/// Replaces `path` with `bytes` (see the module documentation). Leftovers of killed writers
/// are the callers' to [`sweep`] when they start, not on every write.
pub fn write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_like(path, bytes, path)
}

/// [`write()`], the new file given the permissions of `like` (the file it copies, say) rather
/// than those of the file it replaces: a copy of a private file is never more readable than it.
pub fn write_like(path: &Path, bytes: &[u8], like: &Path) -> std::io::Result<()> {
    fs::create_dir_all(parent_dir(path))?;
    let temp = temp_path(path);
    let written = (|| {
        // A new file, never one found there: a link planted under this name is not followed.
        match fs::remove_file(&temp) {
            Err(err) if err.kind() != std::io::ErrorKind::NotFound => return Err(err),
            _ => {}
        }
        let mut file = create_temp(&temp, like)?;
        file.write_all(bytes)?;
        sync(&temp)?.replace_like(path, like)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&temp);
    }
    written
}

/// Removes the temporary files of `path` that writers killed halfway left behind (with the
/// `-wal`, `-shm` and `-journal` files of a temporary database): those whose writer process is
/// gone, and those untouched for five minutes.
pub fn sweep(path: &Path) {
    let Ok(entries) = fs::read_dir(parent_dir(path)) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = temp_writer(path, &name.to_string_lossy()) else {
            continue;
        };
        let untouched = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|modified| SystemTime::now().duration_since(modified).ok())
            .is_some_and(|age| age > STALE_AFTER);
        if untouched || !process_runs(pid) {
            match fs::remove_file(entry.path()) {
                Ok(()) => {
                    tracing::debug!("removed {}, left by process {pid}", name.to_string_lossy())
                }
                Err(err) => tracing::debug!("cannot remove {}: {err}", name.to_string_lossy()),
            }
        }
    }
}

fn parent_dir(path: &Path) -> &Path {
    path.parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// `.<file name>.<pid>.tmp`.
fn temp_name(path: &Path, pid: u32) -> String {
    format!(".{}.{pid}.tmp", file_name(path))
}

/// The writer's process id when `name` is a temporary file of `path`.
fn temp_writer(path: &Path, name: &str) -> Option<u32> {
    // A temporary database's SQLite files go with it.
    let name = ["-wal", "-shm", "-journal"]
        .iter()
        .find_map(|suffix| name.strip_suffix(suffix))
        .unwrap_or(name);
    let pid = name
        .strip_prefix(&format!(".{}.", file_name(path)))?
        .strip_suffix(".tmp")?;
    // Spelled back exactly: no sign, no leading zeros.
    pid.parse().ok().filter(|pid| temp_name(path, *pid) == name)
}

/// Whether a process with id `pid` runs (assumed when it cannot be told).
#[cfg(unix)]
fn process_runs(pid: u32) -> bool {
    if pid == std::process::id() {
        return true;
    }
    let Ok(id) = libc::pid_t::try_from(pid) else {
        return false;
    };
    if id <= 0 {
        return true;
    }
    // SAFETY: signal 0 only checks that the process exists and may be signalled; nothing is
    // sent, and `id` is positive so it names one process, never a group.
    if unsafe { libc::kill(id, 0) } == 0 {
        return true;
    }
    std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// Without a way to ask, every writer is taken to run; only the age rule sweeps.
#[cfg(not(unix))]
fn process_runs(_pid: u32) -> bool {
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_names_are_recognised_only_when_spelled_exactly() {
        let path = Path::new("/p/.acp/acp.db");
        assert_eq!(temp_writer(path, ".acp.db.42.tmp"), Some(42));
        assert_eq!(temp_writer(path, ".acp.db.42.tmp-wal"), Some(42));
        assert_eq!(temp_writer(path, ".acp.db.42.tmp-journal"), Some(42));
        for other in [
            ".acp.db.42.tmp-walrus",
            ".acp.db.42-wal",
            ".acp.db.042.tmp",
            ".acp.db.+42.tmp",
            ".acp.db.x.tmp",
            "acp.db.42.tmp",
            ".acp.db.42.tmp.keep",
        ] {
            assert_eq!(temp_writer(path, other), None, "{other}");
        }
    }

    #[test]
    fn writeback_leaves_the_file_as_written_and_stops_when_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        // A file that is not there gets no write-out.
        assert!(Writeback::start(&path).thread.is_none());
        let mut file = File::create(&path).unwrap();
        let writeback = Writeback::start(&path);
        assert_eq!(writeback.thread.is_some(), cfg!(target_os = "linux"));
        assert!(start_write_out(&file).is_ok());
        let chunk = vec![7u8; 1 << 20];
        for _ in 0..8 {
            file.write_all(&chunk).unwrap();
            std::thread::sleep(WRITEBACK_EVERY / 4);
        }
        let started = std::time::Instant::now();
        drop(writeback);
        assert!(
            started.elapsed() < WRITEBACK_EVERY * 4,
            "{:?}",
            started.elapsed()
        );
        let written = fs::read(&path).unwrap();
        assert_eq!(written.len(), 8 << 20);
        assert!(written.iter().all(|&b| b == 7));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn writeback_keeps_its_descriptor_open_after_the_kernel_refuses() {
        use std::os::fd::AsRawFd;
        // The kernel refuses to write a character device out: the thread stops at its first
        // tick, and the descriptor must stay open until the Writeback is dropped.
        let null = Arc::new(File::open("/dev/null").unwrap());
        let writeback = Writeback::of(vec![null], WRITEBACK_EVERY);
        let thread = writeback.thread.as_ref().expect("a write-out thread");
        let started = std::time::Instant::now();
        while !thread.is_finished() {
            assert!(
                started.elapsed() < WRITEBACK_EVERY * 10,
                "the thread did not stop"
            );
            std::thread::sleep(WRITEBACK_EVERY / 10);
        }
        let fd = writeback.files[0].as_raw_fd();
        let target = fs::read_link(format!("/proc/self/fd/{fd}")).unwrap();
        assert_eq!(target, Path::new("/dev/null"));
        drop(writeback);
    }

    /// A FIFO put where a database, its WAL or a temporary file is expected (by anyone who can
    /// write to `.acp/`) is refused at once: opened as a file, it would wait for a writer
    /// forever, holding the import's lock and its write transaction.
    #[cfg(unix)]
    #[test]
    fn a_fifo_in_place_of_a_file_written_out_or_renamed_is_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join(".acp.db.1.tmp");
        crate::regular_file::make_fifo(&fifo);
        let target = dir.path().join("acp.db");
        fs::write(&target, b"old").unwrap();
        let (done, finished) = std::sync::mpsc::channel();
        let opened = target.clone();
        std::thread::spawn(move || {
            let written_out = Writeback::start(&fifo).files.len();
            let replaced = replace(&fifo, &opened).map_err(|err| err.to_string());
            let kept = crate::sqlite_locks::kept_descriptor(&fifo).is_some();
            let _ = done.send((written_out, replaced, kept));
        });
        let (written_out, replaced, kept) = finished
            .recv_timeout(Duration::from_secs(20))
            .expect("an open waited for a writer of the FIFO");
        assert_eq!(written_out, 0);
        assert_eq!(replaced.unwrap_err(), "is a FIFO, not a regular file");
        assert!(!kept);
        assert_eq!(fs::read(&target).unwrap(), b"old");
    }

    #[test]
    fn write_replaces_and_sweep_removes_dead_writers_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.json");
        let dead = dir.path().join(".f.json.99999999.tmp");
        let mine = temp_path(&path);
        fs::write(&dead, "x").unwrap();
        sweep(&path);
        write(&path, b"one").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"one");
        assert!(!dead.exists() && !mine.exists());
    }

    #[cfg(unix)]
    #[test]
    fn a_file_written_again_keeps_its_permissions() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("attempts.json");
        let mode = |path: &Path| fs::metadata(path).unwrap().permissions().mode() & 0o777;
        write(&path, b"one").unwrap();
        for (wanted, while_written) in [(0o600, 0o600), (0o640, 0o640), (0o444, 0o644)] {
            fs::set_permissions(&path, fs::Permissions::from_mode(wanted)).unwrap();
            let temp = temp_path(&path);
            drop(create_temp(&temp, &path).unwrap());
            assert_eq!(
                mode(&temp),
                while_written,
                "a new file for one of {wanted:o}"
            );
            fs::remove_file(&temp).unwrap();

            write(&path, b"two").unwrap();
            assert_eq!(mode(&path), wanted);
            assert_eq!(fs::read(&path).unwrap(), b"two");
        }
    }
}
