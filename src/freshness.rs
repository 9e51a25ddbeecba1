//! Is the database up to date with the cache? Compares the size, mtime and hash recorded at
//! import with the files on disk.

use std::fs;
use std::path::Path;

use anyhow::{Context, Result};
use rusqlite::{Connection, OptionalExtension};

use crate::config;
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
    /// The project config's SHA-256, `none` or `ignored` (`none` when not recorded).
    pub config: String,
    /// The project directory the import ran for, under which the source files' staleness is
    /// judged.
    pub project_dir: Option<String>,
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
        config: get(config::SHA256_META_KEY)?.unwrap_or_else(|| config::NO_CONFIG.to_string()),
        project_dir: get(crate::db::PROJECT_DIR_KEY)?,
    })
}

/// How closely the files on disk are compared with what the import recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compare {
    /// Size and mtime, then the SHA-256 when only the mtime differs: a file touched but not
    /// changed is fresh.
    Content,
    /// Size and mtime only: cheap at any size, but a touched file counts as changed.
    Metadata,
}

/// Compares the project's cache and vars files with what the database recorded, by content.
pub fn check(project: &Project) -> Result<Freshness> {
    check_with(project, Compare::Content)
}

/// Warns on stderr when the database is older than the project's cache or vars (by size and
/// mtime) or has another schema version, so that an answer from it may be out of date.
/// Without a cache there is nothing to compare with, and no warning.
pub fn warn_if_outdated(project: &Project) {
    if project.cache.is_none() {
        return;
    }
    match check_with(project, Compare::Metadata) {
        Ok(Freshness::Stale(reason) | Freshness::Incompatible(reason)) => tracing::warn!(
            "the database is older than the cache: {reason}; answers come from the last import \
             (run `acpdb import` to update it)"
        ),
        Ok(Freshness::Fresh | Freshness::Missing) => {}
        Err(err) => tracing::debug!("cannot compare the database with the cache: {err:#}"),
    }
}

/// Compares the project's cache and vars files with what the database recorded.
pub fn check_with(project: &Project, compare: Compare) -> Result<Freshness> {
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
        if let Some(reason) = differs(cache, recorded.cache.as_ref(), "the cache", compare)? {
            return Ok(Freshness::Stale(reason));
        }
    }
    match (&project.vars, &recorded.vars) {
        (Some(vars), _) => {
            if let Some(reason) = differs(vars, recorded.vars.as_ref(), "the vars file", compare)? {
                return Ok(Freshness::Stale(reason));
            }
        }
        (None, Some(_)) => return Ok(Freshness::Stale("the vars file was removed".into())),
        (None, None) => {}
    }
    if let Some(reason) = config_differs(project, &recorded.config)? {
        return Ok(Freshness::Stale(reason));
    }
    // A database served for a project copied or moved elsewhere would judge the source files'
    // staleness in the old directory: imported again, it records the new one.
    let served = project.root_text();
    let elsewhere = |dir: &String| {
        // The same directory spelled another way (through a link, with `..`) is not elsewhere.
        *dir != served
            && std::fs::canonicalize(dir).ok() != std::fs::canonicalize(&project.root).ok()
    };
    if let Some(dir) = recorded.project_dir.filter(elsewhere) {
        return Ok(Freshness::Stale(format!(
            "the database was imported for the project at {dir}, not {served}"
        )));
    }
    Ok(Freshness::Fresh)
}

/// Whether the project config was added, removed or changed since the import (never when the
/// import ignored it).
fn config_differs(project: &Project, recorded: &str) -> Result<Option<String>> {
    if recorded == config::IGNORED {
        return Ok(None);
    }
    let current = config::file_sha256(&project.config)?;
    if current == recorded {
        return Ok(None);
    }
    let path = project.config.display();
    Ok(Some(if recorded == config::NO_CONFIG {
        format!("the project config {path} was added since the last import")
    } else if current == config::NO_CONFIG {
        format!("the project config {path} was removed since the last import")
    } else {
        format!("the project config {path} changed since the last import")
    }))
}

fn differs(
    path: &Path,
    recorded: Option<&(String, String, String)>,
    what: &str,
    compare: Compare,
) -> Result<Option<String>> {
    let Some((size, mtime, hash)) = recorded else {
        return Ok(Some(format!("{what} was not part of the last import")));
    };
    let meta = fs::metadata(path)?;
    if meta.len().to_string() == *size && mtime_text(&meta) == *mtime {
        return Ok(None);
    }
    if compare == Compare::Content && meta.len().to_string() == *size && sha256_file(path)? == *hash
    {
        return Ok(None);
    }
    Ok(Some(format!(
        "{what} {} changed since the last import",
        path.display()
    )))
}

/// SHA-256 of a file, hex.
pub fn sha256_file(path: &Path) -> Result<String> {
    let file = crate::regular_file::open(path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    Ok(crate::cache::reader::ReadOutcome::of_bytes(file)?.sha256)
}

/// A cheap signature of a file (size and mtime) for change polling.
pub fn quick_signature(path: &Path) -> Option<(u64, String)> {
    fs::metadata(path).ok().map(|m| (m.len(), mtime_text(&m)))
}

/// Modification time of a file as nanoseconds since the Unix epoch.
pub fn mtime_text(meta: &fs::Metadata) -> String {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::SystemTime::UNIX_EPOCH).ok())
        .map(|d| d.as_nanos().to_string())
        .unwrap_or_default()
}
