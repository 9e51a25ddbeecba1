//! One importer at a time per database: an advisory lock on a file beside it, holding the pid
//! of the import that owns it. A second import waits for the first, saying which process it
//! waits for. The lock goes with the process, so a killed import never leaves it held.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// The import lock of a database, held until dropped.
pub(super) struct ImportLock {
    _file: File,
}

/// The lock file of the database at `db`: `<db>.import-lock`.
pub(super) fn lock_path(db: &Path) -> PathBuf {
    let mut name = db.file_name().unwrap_or_default().to_os_string();
    name.push(".import-lock");
    db.with_file_name(name)
}

impl ImportLock {
    /// Takes the lock of the database at `db`, waiting while another import holds it.
    pub(super) fn acquire(db: &Path) -> Result<ImportLock> {
        let path = lock_path(db);
        // Never through a link: a link planted here would have the pid written over its target.
        let mut file = crate::regular_file::open_own(
            &path,
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false),
        )
        .with_context(|| {
            format!(
                "cannot open the import lock {} (remove it if it is a link or no file)",
                path.display()
            )
        })?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                let holder = holder.trim();
                let holder = if holder.is_empty() { "unknown" } else { holder };
                tracing::warn!(
                    "another import (pid {holder}) is writing {}; waiting for it to finish",
                    db.display()
                );
                file.lock()
                    .with_context(|| format!("cannot lock {}", path.display()))?;
            }
            Err(TryLockError::Error(err)) => {
                return Err(err).with_context(|| format!("cannot lock {}", path.display()))
            }
        }
        file.set_len(0)?;
        file.rewind()?;
        write!(file, "{}", std::process::id())?;
        Ok(ImportLock { _file: file })
    }
}
