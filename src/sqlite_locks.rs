//! Keeping the POSIX locks of this process's SQLite connections. POSIX ties a lock to the
//! process and the file, not to the descriptor it was taken through, so closing any
//! descriptor of a file drops every lock the process holds on it; SQLite guards only the
//! descriptors it opened itself. The index database and the journal are held that way (the
//! read pools keep a shared lock on the index, the journal's connection locks its database
//! and its `-shm` file for as long as it is open; a process that can lock them exclusively
//! takes itself for the last user and may checkpoint and delete the journal's WAL). So:
//!
//! * the databases this process opens are registered ([`register`]) where their locks are
//!   taken (the read pools, the journal, an import's temporary databases);
//! * a descriptor of a file the process opens outside SQLite is held as a [`GuardedFile`],
//!   which, dropped, keeps it open while its file is a registered database or companion
//!   ([`is_registered`]), until [`release_replaced`] finds the file replaced: locks on a file
//!   no longer at its path protect nothing;
//! * code that opens a file a client named (the journal's snapshots of the files an attempt
//!   touches) refuses a registered one.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

/// The SQLite files that come with a database file, its own name first.
const COMPANIONS: [&str; 4] = ["", "-wal", "-shm", "-journal"];

/// The database files registered, as absolute paths.
static REGISTERED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Descriptors of registered files, kept open while their files are registered ones.
static KEPT: Mutex<Vec<Arc<File>>> = Mutex::new(Vec::new());

/// Registers the SQLite database at `path` as one this process holds locks on.
pub fn register(path: &Path) {
    let path = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut registered = REGISTERED.lock().unwrap_or_else(PoisonError::into_inner);
    if !registered.contains(&path) {
        registered.push(path);
    }
}

/// The path of the file SQLite keeps with the database at `db` under `suffix` (`-wal`, `-shm`,
/// `-journal`; `""` names the database itself).
pub fn companion(db: &Path, suffix: &str) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Removes the database at `db` with its companion files, those that are there: one this
/// process built and no longer opens (an import's temporary database, which a read-only
/// connection leaves with a `-wal` and a `-shm` file).
pub fn remove_database(db: &Path) -> std::io::Result<()> {
    for suffix in COMPANIONS {
        match fs::remove_file(companion(db, suffix)) {
            Err(err) if err.kind() != std::io::ErrorKind::NotFound => return Err(err),
            _ => {}
        }
    }
    Ok(())
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
                fs::metadata(companion(db, suffix)).is_ok_and(|meta| file_id(&meta) == wanted)
            })
        })
    }
    #[cfg(not(unix))]
    {
        let _ = (meta, &REGISTERED, COMPANIONS);
        false
    }
}

/// A descriptor of a file opened outside SQLite. Dropped, it is closed unless its file is now
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
                KEPT.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(Arc::new(file));
            }
        }
    }
}

/// Closes the kept descriptors of files that are no longer registered ones: a database
/// replaced by a new file (an import renamed over it) is no longer at its path.
pub fn release_replaced() {
    KEPT.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .retain(|file| file.metadata().map_or(true, |meta| is_registered(&meta)));
}

/// A descriptor of the registered database or companion file at `path`, open while it is one
/// (as a dropped [`GuardedFile`] is): the same descriptor on every call for the same file, so a
/// process that asks at each delta holds one, not one per delta. `None` when the file is not
/// there, cannot be opened or is not a registered one.
pub fn kept_descriptor(path: &Path) -> Option<Arc<File>> {
    #[cfg(unix)]
    {
        let mut kept = KEPT.lock().unwrap_or_else(PoisonError::into_inner);
        let wanted = file_id(&fs::metadata(path).ok()?);
        if let Some(file) = kept
            .iter()
            .find(|file| file.metadata().is_ok_and(|meta| file_id(&meta) == wanted))
        {
            return Some(file.clone());
        }
        // The file at `path` may have been replaced since: what was opened is what is checked,
        // and kept when it cannot be told, as a dropped `GuardedFile` is. Anything but a
        // regular file is refused without blocking (a FIFO put in its place would hang `open`).
        let file = crate::regular_file::open_own(path, fs::OpenOptions::new().read(true)).ok()?;
        if !file.metadata().map_or(true, |meta| is_registered(&meta)) {
            return None;
        }
        let file = Arc::new(file);
        kept.push(file.clone());
        Some(file)
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        None
    }
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

    /// Files of one byte with these names in `dir`.
    fn files_in<const N: usize>(dir: &Path, names: [&str; N]) -> [PathBuf; N] {
        names.map(|name| {
            let path = dir.join(name);
            fs::write(&path, "x").unwrap();
            path
        })
    }

    /// How many descriptors are kept of the file `meta` describes.
    #[cfg(unix)]
    fn kept(meta: &fs::Metadata) -> usize {
        let kept = KEPT.lock().unwrap();
        kept.iter()
            .filter(|file| file_id(&file.metadata().unwrap()) == file_id(meta))
            .count()
    }

    #[cfg(unix)]
    #[test]
    fn a_registered_file_has_one_kept_descriptor_and_another_file_none() {
        let dir = tempfile::tempdir().unwrap();
        let [db, other] = files_in(dir.path(), ["kept.db", "not-registered.db"]);
        register(&db);
        let first = kept_descriptor(&db).expect("a descriptor of a registered file");
        let again = kept_descriptor(&db).expect("a descriptor of a registered file");
        assert!(Arc::ptr_eq(&first, &again));
        assert_eq!(kept(&fs::metadata(&db).unwrap()), 1);
        assert!(kept_descriptor(&other).is_none());
        assert_eq!(kept(&fs::metadata(&other).unwrap()), 0);
        assert!(kept_descriptor(&dir.path().join("absent.db")).is_none());
        // Replaced by another file: that file gets a descriptor of its own.
        fs::rename(&other, &db).unwrap();
        let replaced = kept_descriptor(&db).expect("a descriptor of the file now there");
        assert!(!Arc::ptr_eq(&first, &replaced));
    }

    #[cfg(unix)]
    #[test]
    fn a_registered_database_and_its_companions_are_known_by_their_files() {
        let dir = tempfile::tempdir().unwrap();
        let [db, shm, other] = files_in(dir.path(), ["index.db", "index.db-shm", "other.db"]);
        let linked = dir.path().join("linked");
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
        let [served, new, other] = files_in(dir.path(), ["served.db", "new.db", "other.txt"]);
        register(&served);
        drop(GuardedFile::new(File::open(&other).unwrap()));
        assert_eq!(kept(&fs::metadata(&other).unwrap()), 0);
        // Opened, then renamed into place as the database before it is closed.
        let opened = GuardedFile::new(File::open(&new).unwrap());
        fs::rename(&new, &served).unwrap();
        drop(opened);
        let renamed = fs::metadata(&served).unwrap();
        assert_eq!(kept(&renamed), 1);
        // Once another file replaces it, it is let go.
        fs::write(&new, "y").unwrap();
        fs::rename(&new, &served).unwrap();
        release_replaced();
        assert_eq!(kept(&renamed), 0);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_guarded_read_leaves_sqlites_locks_on_the_file_until_it_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let reader = locked_database(&path);
        // As the read pools do.
        register(&path);
        let probe = File::open(&path).unwrap();
        let database = probe.metadata().unwrap();
        assert!(shared_lock_held(&probe));
        for _ in 0..2 {
            use std::io::Read;
            let mut guarded = GuardedFile::new(File::open(&path).unwrap());
            guarded.read_to_end(&mut Vec::new()).unwrap();
            drop(guarded);
            assert!(
                shared_lock_held(&probe),
                "closing a descriptor dropped SQLite's lock"
            );
        }
        assert_eq!(kept(&database), 2, "the descriptors are kept open");
        release_replaced();
        assert_eq!(kept(&database), 2, "the file is still there");

        let new = dir.path().join("new");
        fs::write(&new, "x").unwrap();
        fs::rename(&new, &path).unwrap();
        release_replaced();
        assert_eq!(
            kept(&database),
            0,
            "the replaced file's descriptors are closed"
        );
        drop(reader);
    }
}
