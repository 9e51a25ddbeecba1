//! Keeping the POSIX locks of this process's SQLite connections. POSIX ties a lock to the
//! process and the file, not to the descriptor it was taken through, so closing any
//! descriptor of a file drops every lock the process holds on it; SQLite guards only the
//! descriptors it opened itself. The index database and the journal are held that way (the
//! read pools keep a shared lock on the index, the journal's connection locks its database
//! and its `-shm` file for as long as it is open; a process that can lock them exclusively
//! takes itself for the last user and may checkpoint and delete the journal's WAL). So:
//!
//! * a database copied while it is served is read through a descriptor kept open
//!   ([`copy_kept_open`]) until a new file replaces it ([`close_kept_open`]);
//! * the databases this process opens are registered ([`register`]), and code that opens a
//!   file a client named (the journal's snapshots of the files an attempt touches) refuses
//!   one of them or its companions ([`is_registered`]) and holds what it opened as a
//!   [`GuardedFile`], which keeps the descriptor open if its file turns out to be (or becomes,
//!   renamed into place) a registered one.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

/// The SQLite files that come with a database file, its own name first.
const COMPANIONS: [&str; 4] = ["", "-wal", "-shm", "-journal"];

/// The database files registered, as absolute paths.
static REGISTERED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Descriptors opened of registered files, kept while their files are registered ones (those
/// of a replaced database are closed by [`close_kept_open`]).
static KEPT_WHILE_REGISTERED: Mutex<Vec<File>> = Mutex::new(Vec::new());

/// Registers the SQLite database at `path` as one this process holds locks on.
pub fn register(path: &Path) {
    let path = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut registered = REGISTERED.lock().unwrap_or_else(PoisonError::into_inner);
    if !registered.contains(&path) {
        registered.push(path);
    }
}

/// Whether the file `meta` describes is a registered database or one of its companion files
/// (`-wal`, `-shm`, `-journal`), as they are now.
pub fn is_registered(meta: &fs::Metadata) -> bool {
    #[cfg(unix)]
    {
        let wanted = file_id(meta);
        let registered = REGISTERED.lock().unwrap_or_else(PoisonError::into_inner);
        registered.iter().any(|db| {
            COMPANIONS.iter().any(|suffix| {
                let mut name = db.clone().into_os_string();
                name.push(suffix);
                fs::metadata(PathBuf::from(name)).is_ok_and(|meta| file_id(&meta) == wanted)
            })
        })
    }
    #[cfg(not(unix))]
    {
        let _ = (meta, &REGISTERED, COMPANIONS);
        false
    }
}

/// Keeps `file`, a descriptor of a registered file, open while its file is one.
fn keep_open(file: File) {
    KEPT_WHILE_REGISTERED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(file);
}

/// A descriptor opened of a file a client named. Dropped, it is closed unless its file is now
/// a registered database or companion (or cannot be told), whose descriptor then stays open
/// while it is one: a file renamed into place as the database after it was opened is one.
#[derive(Debug)]
pub struct GuardedFile(Option<File>);

impl GuardedFile {
    /// Guards `file`.
    pub fn new(file: File) -> GuardedFile {
        GuardedFile(Some(file))
    }
}

impl std::ops::Deref for GuardedFile {
    type Target = File;

    fn deref(&self) -> &File {
        self.0.as_ref().expect("a file is there until dropped")
    }
}

impl std::io::Read for GuardedFile {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        (&**self).read(buf)
    }
}

impl Drop for GuardedFile {
    fn drop(&mut self) {
        if let Some(file) = self.0.take() {
            if file.metadata().map_or(true, |meta| is_registered(&meta)) {
                keep_open(file);
            }
        }
    }
}

/// A descriptor [`copy_kept_open`] keeps.
#[cfg(unix)]
struct Kept {
    /// The path the file was copied from.
    from: PathBuf,
    /// The file's device and inode.
    id: (u64, u64),
    file: File,
}

/// The descriptors [`copy_kept_open`] keeps.
#[cfg(unix)]
static KEPT_OPEN: Mutex<Vec<Kept>> = Mutex::new(Vec::new());

/// Copies the SQLite database at `from` to `to` (created or truncated) through a descriptor
/// that stays open, so that SQLite connections of this process keep their locks on `from`:
/// closing any descriptor of a file drops every POSIX lock the process holds on it, and SQLite
/// can only guard its own descriptors. One descriptor is kept per file, reused by later copies
/// of it, until [`close_kept_open`] (a process that serves no database lets them close when it
/// exits).
pub fn copy_kept_open(from: &Path, to: &Path) -> std::io::Result<u64> {
    #[cfg(unix)]
    {
        use std::io::{Seek, SeekFrom};
        let mut kept = KEPT_OPEN.lock().unwrap_or_else(PoisonError::into_inner);
        let wanted = file_id(&fs::metadata(from)?);
        let at = match kept.iter().position(|kept| kept.id == wanted) {
            Some(at) => at,
            None => {
                let mut file = GuardedFile::new(File::open(from)?);
                // The file opened may be a newer one than the one looked at: kept as what it is.
                let id = file_id(&file.metadata()?);
                let file = file.0.take().expect("just opened");
                let from = from.to_path_buf();
                kept.push(Kept { from, id, file });
                kept.len() - 1
            }
        };
        let mut source = &kept[at].file;
        source.seek(SeekFrom::Start(0))?;
        std::io::copy(&mut source, &mut File::create(to)?)
    }
    #[cfg(not(unix))]
    {
        fs::copy(from, to)
    }
}

/// Closes the descriptors [`copy_kept_open`] kept of files copied from `path` that are no
/// longer at `path`, and those [`GuardedFile`] kept of files no longer registered: they were
/// replaced, and locks on a file no longer at its path protect nothing.
pub fn close_kept_open(path: &Path) {
    #[cfg(unix)]
    {
        let current = fs::metadata(path).ok().map(|meta| file_id(&meta));
        KEPT_OPEN
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|kept| kept.from != path || Some(kept.id) == current);
        KEPT_WHILE_REGISTERED
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|file| file.metadata().map_or(true, |meta| is_registered(&meta)));
    }
    #[cfg(not(unix))]
    let _ = path;
}

/// A file's device and inode.
#[cfg(unix)]
fn file_id(meta: &fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (meta.dev(), meta.ino())
}

/// A new SQLite database at `path` and a connection to it that keeps its shared lock, as the
/// server's read pools do.
#[cfg(all(test, target_os = "linux"))]
pub(crate) fn locked_database(path: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open(path)
        .unwrap()
        .execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (1);")
        .unwrap();
    let reader = rusqlite::Connection::open(path).unwrap();
    reader
        .execute_batch("PRAGMA locking_mode = EXCLUSIVE; SELECT * FROM t;")
        .unwrap();
    reader
}

/// Whether a process holds a lock on SQLite's shared-lock bytes of the file `file` is
/// open on (this one included: open-file-description locks conflict with its own).
#[cfg(all(test, target_os = "linux"))]
pub(crate) fn shared_lock_held(file: &File) -> bool {
    use std::os::fd::AsRawFd;
    // SAFETY: a plain struct, then filled in by the kernel from a descriptor that is open.
    let mut lock: libc::flock = unsafe { std::mem::zeroed() };
    lock.l_type = libc::F_WRLCK as i16;
    lock.l_whence = libc::SEEK_SET as i16;
    lock.l_start = 0x4000_0002;
    lock.l_len = 510;
    let asked = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_GETLK, &mut lock) };
    assert_eq!(asked, 0, "{}", std::io::Error::last_os_error());
    lock.l_type != libc::F_UNLCK as i16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn a_registered_database_and_its_companions_are_known_by_their_files() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("index.db");
        let shm = dir.path().join("index.db-shm");
        let other = dir.path().join("other.db");
        let linked = dir.path().join("linked");
        for path in [&db, &shm, &other] {
            fs::write(path, "x").unwrap();
        }
        fs::hard_link(&shm, &linked).unwrap();
        let registered = |path: &Path| is_registered(&fs::metadata(path).unwrap());
        assert!(!registered(&db));
        register(&db);
        register(&db);
        assert!(registered(&db) && registered(&shm) && registered(&linked));
        assert!(!registered(&other));
        // Known by the file now at the path: a file renamed over it is the one known.
        fs::rename(&other, &db).unwrap();
        assert!(registered(&db));
        assert_eq!(
            REGISTERED
                .lock()
                .unwrap()
                .iter()
                .filter(|p| **p == db)
                .count(),
            1
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_guarded_file_is_closed_unless_it_became_a_database() {
        let dir = tempfile::tempdir().unwrap();
        let served = dir.path().join("served.db");
        let new = dir.path().join("new.db");
        let other = dir.path().join("other.txt");
        for path in [&served, &new, &other] {
            fs::write(path, "x").unwrap();
        }
        register(&served);
        let kept = |path: &Path| {
            let id = file_id(&fs::metadata(path).unwrap());
            let kept = KEPT_WHILE_REGISTERED.lock().unwrap();
            kept.iter()
                .filter(|file| file_id(&file.metadata().unwrap()) == id)
                .count()
        };
        drop(GuardedFile::new(File::open(&other).unwrap()));
        assert_eq!(kept(&other), 0);
        // Opened, then renamed into place as the database before it is closed.
        let opened = GuardedFile::new(File::open(&new).unwrap());
        fs::rename(&new, &served).unwrap();
        drop(opened);
        assert_eq!(kept(&served), 1);
        // Once another file replaces it, it is let go.
        let replaced = fs::File::open(&served).unwrap();
        fs::write(&new, "y").unwrap();
        fs::rename(&new, &served).unwrap();
        close_kept_open(&served);
        let replaced_id = file_id(&replaced.metadata().unwrap());
        let kept = KEPT_WHILE_REGISTERED.lock().unwrap();
        assert!(kept
            .iter()
            .all(|file| file_id(&file.metadata().unwrap()) != replaced_id));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_copy_leaves_sqlites_locks_on_the_file_until_it_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let reader = locked_database(&path);
        let probe = File::open(&path).unwrap();
        assert!(shared_lock_held(&probe));

        // Read through the probe: opening and closing the file again would drop the lock.
        let original = {
            use std::io::Read;
            let mut bytes = Vec::new();
            (&probe).read_to_end(&mut bytes).unwrap();
            bytes
        };
        let copy = dir.path().join("copy");
        for _ in 0..2 {
            copy_kept_open(&path, &copy).unwrap();
            assert!(shared_lock_held(&probe), "the copy dropped SQLite's lock");
            assert_eq!(fs::read(&copy).unwrap(), original);
        }
        let kept = |from: &Path| {
            let kept = KEPT_OPEN.lock().unwrap();
            kept.iter().filter(|kept| kept.from == from).count()
        };
        assert_eq!(kept(&path), 1, "one descriptor kept, reused");
        close_kept_open(&path);
        assert_eq!(kept(&path), 1, "the file is still there");

        fs::rename(&copy, &path).unwrap();
        close_kept_open(&path);
        assert_eq!(kept(&path), 0, "the replaced file's descriptor is closed");
        drop(reader);
    }
}
