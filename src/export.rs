//! `acpdb export-cache`: writes the cache (and vars) back out of the database.
//!
//! The output is JSON-equal to what was imported (key order aside): entries are rebuilt from
//! their modelled columns plus `extra`, verbatim sections are copied as stored. Output is
//! streamed, so exporting a multi-gigabyte cache needs little memory.

use std::fs;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use rusqlite::Connection;

use crate::db;
use crate::project::Project;
use crate::query::entries::{self, Section};

/// Options of `acpdb export-cache`.
#[derive(Debug, Clone, clap::Args)]
pub struct ExportArgs {
    /// Write the cache here instead of stdout.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Also write the vars file here.
    #[arg(long)]
    pub vars_out: Option<PathBuf>,
}

/// Runs `acpdb export-cache`.
pub fn run(project: &Project, args: &ExportArgs) -> Result<()> {
    let conn = db::open_read_only(&project.db)?;
    // One read transaction for the cache and the vars: an import committed meanwhile (a
    // server's) is seen by none of it, not by the sections read after it.
    db::in_snapshot(&conn, |conn| {
        match &args.out {
            Some(path) => write_to_file(path, |w| export_cache(conn, w))?,
            None => {
                let stdout = io::stdout();
                let mut out = BufWriter::new(stdout.lock());
                export_cache(conn, &mut out)?;
                out.flush()?;
            }
        }
        if let Some(path) = &args.vars_out {
            write_to_file(path, |w| export_vars(conn, w))?;
        }
        Ok(())
    })
}

fn write_to_file(path: &Path, write: impl FnOnce(&mut dyn Write) -> Result<()>) -> Result<()> {
    let file =
        fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    let mut out = BufWriter::new(file);
    write(&mut out)?;
    out.flush()?;
    Ok(())
}

/// Writes the cache document stored in `conn`.
pub fn export_cache(conn: &Connection, out: &mut dyn Write) -> Result<()> {
    let mut root = conn.prepare("SELECT key, value_json FROM cache_root ORDER BY ord")?;
    let members: Vec<(String, Option<String>)> = root
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    out.write_all(b"{")?;
    for (i, (key, value)) in members.iter().enumerate() {
        if i > 0 {
            out.write_all(b",")?;
        }
        write_key(out, key)?;
        match value {
            Some(json) => out.write_all(json.as_bytes())?,
            None => match key.as_str() {
                "source_files" => write_source_files(conn, out)?,
                "files" => write_entries(conn, out, entries::FILES, "key", "ORDER BY id")?,
                "symbols" => write_entries(conn, out, entries::SYMBOLS, "key", "ORDER BY id")?,
                "domains" => write_entries(conn, out, entries::DOMAINS, "key", "ORDER BY id")?,
                "graph" => write_graph(conn, out)?,
                "constraints" => write_constraints(conn, out)?,
                other => anyhow::bail!("the database has no content for section `{other}`"),
            },
        }
    }
    out.write_all(b"}")?;
    Ok(())
}

/// Writes the vars document stored in `conn` (an empty document when none was imported).
pub fn export_vars(conn: &Connection, out: &mut dyn Write) -> Result<()> {
    let mut root = conn.prepare("SELECT key, value_json FROM vars_root ORDER BY ord")?;
    let members: Vec<(String, Option<String>)> = root
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    out.write_all(b"{")?;
    for (i, (key, value)) in members.iter().enumerate() {
        if i > 0 {
            out.write_all(b",")?;
        }
        write_key(out, key)?;
        match value {
            Some(json) => out.write_all(json.as_bytes())?,
            None => write_entries(conn, out, entries::VARS, "name", "")?,
        }
    }
    out.write_all(b"}")?;
    Ok(())
}

fn write_key(out: &mut dyn Write, key: &str) -> Result<()> {
    serde_json::to_writer(&mut *out, key)?;
    out.write_all(b":")?;
    Ok(())
}

/// Writes `{key: entry, ...}` for the rows of `section`, keyed by column `key` (in `order`).
fn write_entries(
    conn: &Connection,
    out: &mut dyn Write,
    section: Section,
    key: &str,
    order: &str,
) -> Result<()> {
    let mut stmt = conn.prepare(&section.select(&format!("{key}, "), order))?;
    let rows = stmt.query([])?;
    write_joined(out, Brackets::Object, rows, |out, row| {
        write_key(out, &row.get::<_, String>(0)?)?;
        serde_json::to_writer(&mut *out, &section.from_row(row, 1)?)?;
        Ok(())
    })
}

fn write_source_files(conn: &Connection, out: &mut dyn Write) -> Result<()> {
    let mut stmt = conn.prepare("SELECT key, mtime, value_json FROM source_files ORDER BY id")?;
    let rows = stmt.query([])?;
    write_joined(out, Brackets::Object, rows, |out, row| {
        write_key(out, &row.get::<_, String>(0)?)?;
        match (
            row.get::<_, Option<String>>(1)?,
            row.get::<_, Option<String>>(2)?,
        ) {
            (Some(mtime), _) => serde_json::to_writer(&mut *out, &mtime)?,
            (None, Some(raw)) => out.write_all(raw.as_bytes())?,
            (None, None) => out.write_all(b"null")?,
        }
        Ok(())
    })
}

/// Writes `{key: raw, ...}` from a query returning `key, raw_json`.
fn write_raw_map(conn: &Connection, out: &mut dyn Write, sql: &str) -> Result<()> {
    let mut stmt = conn.prepare(sql)?;
    let rows = stmt.query([])?;
    write_joined(out, Brackets::Object, rows, |out, row| {
        write_key(out, &row.get::<_, String>(0)?)?;
        out.write_all(row.get::<_, String>(1)?.as_bytes())?;
        Ok(())
    })
}

/// Writes `[raw, ...]` from a query returning `raw_json`.
fn write_raw_list(conn: &Connection, out: &mut dyn Write, sql: &str) -> Result<()> {
    let mut stmt = conn.prepare(sql)?;
    let rows = stmt.query([])?;
    write_joined(out, Brackets::Array, rows, |out, row| {
        out.write_all(row.get::<_, String>(0)?.as_bytes())?;
        Ok(())
    })
}

/// The brackets around a JSON collection.
#[derive(Clone, Copy)]
enum Brackets {
    Object,
    Array,
}

/// Writes a JSON object or array with one member per row of `rows`, comma-separated, each
/// written by `member`.
fn write_joined(
    out: &mut dyn Write,
    brackets: Brackets,
    mut rows: rusqlite::Rows<'_>,
    mut member: impl FnMut(&mut dyn Write, &rusqlite::Row<'_>) -> Result<()>,
) -> Result<()> {
    let (open, close) = match brackets {
        Brackets::Object => (b"{", b"}"),
        Brackets::Array => (b"[", b"]"),
    };
    out.write_all(open)?;
    let mut first = true;
    while let Some(row) = rows.next()? {
        if !first {
            out.write_all(b",")?;
        }
        first = false;
        member(out, row)?;
    }
    out.write_all(close)?;
    Ok(())
}

fn write_graph(conn: &Connection, out: &mut dyn Write) -> Result<()> {
    write_scope(conn, out, "graph_root", |conn, out, key| match key {
        "forward" => write_graph_lists(conn, out, false),
        "reverse" => write_graph_lists(conn, out, true),
        other => anyhow::bail!("the database has no content for graph.{other}"),
    })
}

/// Writes `graph.forward` (or `graph.reverse`) in document order, each list rebuilt exactly.
fn write_graph_lists(conn: &Connection, out: &mut dyn Write, reverse: bool) -> Result<()> {
    let mut stmt = conn.prepare(
        "SELECT n.name, l.items FROM graph_lists l JOIN graph_nodes n ON n.id = l.node_id
         WHERE l.reverse = ?1 ORDER BY l.id",
    )?;
    let rows = stmt.query([reverse])?;
    write_joined(out, Brackets::Object, rows, |out, row| {
        write_key(out, &row.get::<_, String>(0)?)?;
        serde_json::to_writer(&mut *out, &db::graph_list_value(conn, row.get_ref(1)?)?)?;
        Ok(())
    })
}

fn write_constraints(conn: &Connection, out: &mut dyn Write) -> Result<()> {
    write_scope(conn, out, "constraints_root", |conn, out, key| match key {
        "by_file" => write_raw_map(
            conn,
            out,
            "SELECT key, raw_json FROM constraints ORDER BY id",
        ),
        "by_lock_level" => write_raw_map(conn, out, "SELECT key, items_json FROM lock_level_lists"),
        "hacks" => write_raw_list(conn, out, "SELECT raw_json FROM cache_hacks ORDER BY ord"),
        "debug_sessions" => write_raw_list(
            conn,
            out,
            "SELECT raw_json FROM cache_debug_sessions ORDER BY ord",
        ),
        other => anyhow::bail!("the database has no content for constraints.{other}"),
    })
}

type SectionWriter = fn(&Connection, &mut dyn Write, &str) -> Result<()>;

fn write_scope(
    conn: &Connection,
    out: &mut dyn Write,
    table: &str,
    streamed: SectionWriter,
) -> Result<()> {
    let mut stmt = conn.prepare(&format!("SELECT key, value_json FROM {table} ORDER BY ord"))?;
    let members: Vec<(String, Option<String>)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    out.write_all(b"{")?;
    for (i, (key, value)) in members.iter().enumerate() {
        if i > 0 {
            out.write_all(b",")?;
        }
        write_key(out, key)?;
        match value {
            Some(json) => out.write_all(json.as_bytes())?,
            None => streamed(conn, out, key)?,
        }
    }
    out.write_all(b"}")?;
    Ok(())
}
