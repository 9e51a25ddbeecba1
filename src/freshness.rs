//! Is the database up to date with the cache? Compares the size, mtime and hash recorded at
//! import with the files on disk.

use std::fs;
use std::io::Read;
use std::path::Path;

use anyhow::Result;
use rusqlite::{Connection, OptionalExtension};
use sha2::{Digest, Sha256};

use crate::import::mtime_text;
use crate::project::Project;

/// How the database relates to the cache on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Freshness {
    /// The database reflects the current cache (and vars).
    Fresh,
    /// The cache or vars changed since the import; the reason says which.
    Stale(String),
    /// There is no database yet.
    Missing,
    /// The database has another schema version than this build reads; it must be rebuilt
    /// before it can answer. The reason says which versions.
    Incompatible(String),
}

/// The source signature recorded in the database's `meta` table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recorded {
    /// Size, mtime and sha256 of the cache.
    pub cache: Option<(String, String, String)>,
    /// Size, mtime and sha256 of the vars file.
    pub vars: Option<(String, String, String)>,
}

/// Reads the recorded source signature from a database.
pub fn recorded(conn: &Connection) -> Result<Recorded> {
    let get = |key: &str| -> Result<Option<String>> {
        Ok(conn
            .query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
            .optional()?)
    };
    let triple = |prefix: &str| -> Result<Option<(String, String, String)>> {
        Ok(
            match (
                get(&format!("{prefix}_size"))?,
                get(&format!("{prefix}_mtime"))?,
                get(&format!("{prefix}_sha256"))?,
            ) {
                (Some(size), Some(mtime), Some(hash)) => Some((size, mtime, hash)),
                _ => None,
            },
        )
    };
    Ok(Recorded {
        cache: triple("source")?,
        vars: triple("vars")?,
    })
}

/// Compares the project's cache and vars files with what the database recorded.
pub fn check(project: &Project) -> Result<Freshness> {
    if !project.db.is_file() {
        return Ok(Freshness::Missing);
    }
    let conn = crate::db::open_read_only(&project.db)?;
    let built_with = crate::db::schema_version(&conn)?;
    let current = crate::db::current_schema_version();
    if built_with != Some(current) {
        return Ok(Freshness::Incompatible(format!(
            "the database has index schema {}, this acpdb reads schema {current}",
            built_with.map_or("(none)".to_string(), |v| v.to_string())
        )));
    }
    let recorded = recorded(&conn)?;
    if let Some(cache) = &project.cache {
        if let Some(reason) = differs(cache, recorded.cache.as_ref(), "the cache")? {
            return Ok(Freshness::Stale(reason));
        }
    }
    match (&project.vars, &recorded.vars) {
        (Some(vars), _) => {
            if let Some(reason) = differs(vars, recorded.vars.as_ref(), "the vars file")? {
                return Ok(Freshness::Stale(reason));
            }
        }
        (None, Some(_)) => return Ok(Freshness::Stale("the vars file was removed".into())),
        (None, None) => {}
    }
    Ok(Freshness::Fresh)
}

fn differs(
    path: &Path,
    recorded: Option<&(String, String, String)>,
    what: &str,
) -> Result<Option<String>> {
    let Some((size, mtime, hash)) = recorded else {
        return Ok(Some(format!("{what} was not part of the last import")));
    };
    let meta = fs::metadata(path)?;
    if meta.len().to_string() == *size && mtime_text(&meta) == *mtime {
        return Ok(None);
    }
    if meta.len().to_string() == *size && sha256_file(path)? == *hash {
        return Ok(None);
    }
    Ok(Some(format!(
        "{what} {} changed since the last import",
        path.display()
    )))
}

/// SHA-256 of a file, hex.
pub fn sha256_file(path: &Path) -> Result<String> {
    let mut file = fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// A cheap signature of a file (size and mtime) for change polling.
pub fn quick_signature(path: &Path) -> Option<(u64, String)> {
    fs::metadata(path).ok().map(|m| (m.len(), mtime_text(&m)))
}
