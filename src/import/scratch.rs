//! What an import writes besides the database it builds: anonymous spill files (read and
//! written at explicit offsets), and the temporary database itself, created as private as the
//! database it replaces, registered with `sqlite_locks`, and the connection settings it is
//! written with.

use std::fs;
use std::path::Path;

use anyhow::{Context, Result};
use rusqlite::Connection;

/// An anonymous temporary file in `dir` (next to the database being built) for the import's
/// data that does not stay in memory; `what` names that data in the error.
pub(super) fn spill_file(dir: &Path, what: &str) -> Result<fs::File> {
    tempfile::tempfile_in(dir).with_context(|| {
        format!(
            "cannot create a temporary file in {} for {what}",
            dir.display()
        )
    })
}

/// Reads `buf.len()` bytes of `file` at `offset`, leaving the file's position alone (a spill
/// file read and written at explicit offsets needs no shared position).
#[cfg(unix)]
pub(super) fn read_exact_at(file: &fs::File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

/// Writes all of `buf` into `file` at `offset`.
#[cfg(unix)]
pub(super) fn write_all_at(file: &fs::File, buf: &[u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(file, buf, offset)
}

#[cfg(windows)]
pub(super) fn read_exact_at(
    file: &fs::File,
    mut buf: &mut [u8],
    mut offset: u64,
) -> std::io::Result<()> {
    while !buf.is_empty() {
        match std::os::windows::fs::FileExt::seek_read(file, buf, offset)? {
            0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            n => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
        }
    }
    Ok(())
}

#[cfg(windows)]
pub(super) fn write_all_at(
    file: &fs::File,
    mut buf: &[u8],
    mut offset: u64,
) -> std::io::Result<()> {
    while !buf.is_empty() {
        match std::os::windows::fs::FileExt::seek_write(file, buf, offset)? {
            0 => return Err(std::io::ErrorKind::WriteZero.into()),
            n => {
                buf = &buf[n..];
                offset += n as u64;
            }
        }
    }
    Ok(())
}

/// Creates the temporary database `path` a full import writes in place of the database `like`
/// (removing a file a failed import left there) and opens it. The file is never more readable
/// than `like` ([`crate::replace::create_temp`]), so a database a user restricted stays so
/// while it is rebuilt. It is registered as one this process holds locks on
/// ([`crate::sqlite_locks`]): a file an agent names in a journal attempt while the server
/// re-imports is then refused instead of read, which would close a descriptor of the file and
/// drop the import's exclusive lock.
pub(super) fn open_temp_database(path: &Path, like: &Path) -> Result<Connection> {
    let _ = fs::remove_file(path);
    crate::replace::create_temp(path, like)?;
    let conn = Connection::open(path)?;
    crate::sqlite_locks::register(path);
    Ok(conn)
}

/// Connection settings while an import writes its temporary file (nothing reads it, and a
/// failed or killed import deletes it, so it needs no journal). Foreign keys are not enforced:
/// the importer assigns every id itself, and checking each edge's two nodes cost a random read
/// per reference (tests run `PRAGMA foreign_key_check` on the result instead). A full import
/// appends to every table, for which an 8 MiB page cache is as fast as 64 MiB.
pub(super) const WRITE_PRAGMAS: &str =
    "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; PRAGMA locking_mode = EXCLUSIVE;
     PRAGMA cache_size = -8192; PRAGMA temp_store = FILE; PRAGMA threads = 2;
     PRAGMA foreign_keys = OFF;";

/// Connection settings of a delta import, written in place on the served database in WAL mode:
/// `synchronous = NORMAL` keeps every commit whole after a crash (the last one may be lost, the
/// database is never a mix); foreign keys are not enforced, as in a full import (a delta removes
/// rows before the rows that referred to them are brought up to date); its commit does not
/// checkpoint, so that it returns once the new state is visible, and the checkpoint follows.
/// Its page cache is [`DELTA_CACHE_KIB`].
pub(super) const DELTA_PRAGMAS: &str = "PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = OFF;
     PRAGMA wal_autocheckpoint = 0;";

/// KiB of a delta's page cache while it compares entries. A delta updates rows anywhere in the
/// database, so it keeps a larger cache than a full import's load (32 MiB: at 1M symbols and a
/// 1 % edit, twice that was no faster); once the stored digests are freed, the cache grows by
/// the memory they took.
pub(super) const DELTA_CACHE_KIB: i64 = 32 * 1024;

/// Connection settings while an import builds its indexes: with a 4 MiB page cache, SQLite's
/// sorter cuts each index into many small runs, sorted on its two threads and merged, which
/// at 1M symbols builds the indexes in 5.7 s instead of 8.5 s with 32 MiB (and 12.4 s with
/// 128 MiB), in less memory.
pub(super) const INDEXING_PRAGMAS: &str = "PRAGMA cache_size = -4096;";

#[cfg(test)]
mod tests {
    use super::open_temp_database;

    #[cfg(unix)]
    #[test]
    fn an_imports_temporary_database_is_registered_and_as_private_as_the_database() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("acp.db");
        std::fs::write(&db, b"").unwrap();
        std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o600)).unwrap();
        let tmp = dir.path().join(".acp.db.7.tmp");
        let conn = open_temp_database(&tmp, &db).unwrap();
        conn.execute_batch("PRAGMA journal_mode = DELETE; BEGIN; CREATE TABLE t(x);")
            .unwrap();
        let mode = std::fs::metadata(&tmp).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let journal = dir.path().join(".acp.db.7.tmp-journal");
        for file in [&tmp, &journal] {
            let meta = std::fs::metadata(file).unwrap();
            assert!(
                crate::sqlite_locks::is_registered(&meta),
                "{}",
                file.display()
            );
        }
        assert!(!crate::sqlite_locks::is_registered(
            &std::fs::metadata(&db).unwrap()
        ));
    }
}
