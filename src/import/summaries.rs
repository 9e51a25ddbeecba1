//! The summary tables of migration V14 (`index_summary`, `hot_nodes`, `file_languages`,
//! `file_lock_levels`, `constraint_mutation_levels`, the domains' counts): the one place these
//! counts are defined.
//!
//! A full import fills them from every row ([`fill`]). A delta import brings them up to date
//! from what it changed ([`ChangeLog`]): temporary triggers, living only on the delta's
//! connection, log the files it writes, the delta counts the symbols and call edges, and the
//! counts move by the differences; `hot_nodes` is ranked again among its previous rows and the
//! nodes whose `graph.reverse` list changed, and from every node only when that cannot be
//! exact. The tables filled from the sections a delta rewrites whole (constraints, domains) are
//! small and refilled by both.

use anyhow::Result;
use rusqlite::{params, Connection};

use crate::db::HOTPATH_SLOTS;

use super::delta::DeltaCounts;

/// A file whose own path (`path_field`, as the cache writes it) looks like an entry point. The
/// predicate of `index_summary.entry_point_files`.
const ENTRY_POINT: &str = "(path_field LIKE '%main.rs' OR path_field LIKE '%main.ts'
    OR path_field LIKE '%main.py' OR path_field LIKE '%index.ts' OR path_field LIKE '%index.js'
    OR path_field LIKE '%app.ts' OR path_field LIKE '%app.py' OR path_field LIKE '%mod.rs'
    OR (path_field LIKE '%/src/%' AND path_field LIKE '%.rs'))";

/// `index_summary` and `file_languages` from every row.
const ENTRY_SUMMARIES_SQL: &str = "
DELETE FROM index_summary;
DELETE FROM file_languages;
INSERT INTO index_summary
SELECT 1,
    (SELECT count(*) FROM files),
    (SELECT count(*) FROM symbols),
    (SELECT coalesce(sum(lines), 0) FROM files),
    0, -- domains and layers: SECTION_SUMMARIES_SQL
    0,
    (SELECT count(*) FROM call_edges),
    (SELECT count(*) FROM files WHERE {entry_point});
INSERT INTO file_languages
SELECT language, count(*) FROM files WHERE language IS NOT NULL GROUP BY language;";

/// The `hot_nodes` ranking: the [`HOTPATH_SLOTS`] nodes with the longest `graph.reverse` lists
/// `{among}` the nodes, longest first, then by name. The candidates are chosen first (a top-N
/// sort), so that the ranking numbers N rows, not every node.
const HOT_NODES_SQL: &str = "
INSERT INTO hot_nodes
SELECT row_number() OVER (ORDER BY reverse_len DESC, name), name, reverse_len
FROM (SELECT name, reverse_len FROM graph_nodes WHERE reverse_len > 0 AND {among}
      ORDER BY reverse_len DESC, name LIMIT {slots})";

/// The counts of the sections a delta rewrites whole and of the files' layers (through the
/// `files_layer` index), after the rest of `index_summary` (the files not under any constraint
/// are counted from it).
const SECTION_SUMMARIES_SQL: &str = "
UPDATE index_summary SET
    domains = (SELECT count(*) FROM domains),
    layers = (SELECT count(DISTINCT layer) FROM files WHERE layer IS NOT NULL);
DELETE FROM file_lock_levels;
DELETE FROM constraint_mutation_levels;
-- Each file's strictest level among the constraints on its path; files under none are 'normal'.
INSERT INTO file_lock_levels
WITH constrained AS (
    SELECT f.id, min(coalesce(r.rank, 6)) AS rank
    FROM constraints c JOIN files f ON f.path = c.path
    LEFT JOIN lock_levels r ON r.lock_level = c.lock_level
    GROUP BY f.id),
ranked AS (
    SELECT rank, count(*) AS files FROM constrained GROUP BY rank
    UNION ALL
    SELECT 6, (SELECT files FROM index_summary) - (SELECT count(*) FROM constrained))
SELECT l.rank, l.lock_level, sum(ranked.files)
FROM ranked JOIN lock_levels l ON l.rank = ranked.rank
GROUP BY l.rank HAVING sum(ranked.files) > 0;
INSERT INTO constraint_mutation_levels
SELECT CASE WHEN json_type(raw_json, '$.mutation') = 'object'
            THEN CAST(coalesce(json_extract(raw_json, '$.mutation.level'), 'normal') AS TEXT) END,
       count(*)
FROM constraints GROUP BY 1;
-- Lengths of each domain's files and symbols lists.
-- (Only where they differ: a domain's row holds its file list, which a rewrite would copy.)
UPDATE domains SET file_count = coalesce(json_array_length(files_json), 0),
                   symbol_count = coalesce(json_array_length(symbols_json), 0)
WHERE file_count IS NOT coalesce(json_array_length(files_json), 0)
   OR symbol_count IS NOT coalesce(json_array_length(symbols_json), 0);";

/// The triggers of a delta's [`ChangeLog`]: each file row written logs its old values with
/// sign -1 and its new ones with sign +1. (Symbols and call edges are counted by the delta
/// itself: a trigger on a table makes each statement on it open a savepoint, on which the
/// full-text tables write out their pending rows, so that a trigger on `symbols` doubled the
/// cost of adding and removing symbols.)
const LOG_SQL: &str = "
CREATE TEMP TABLE summary_file_changes (
    sign INTEGER NOT NULL, lines, language TEXT, entry_point INTEGER NOT NULL);
CREATE TEMP TRIGGER summary_file_added AFTER INSERT ON main.files BEGIN
    INSERT INTO summary_file_changes
    SELECT 1, NEW.lines, NEW.language, coalesce({entry_point}, 0)
    FROM (SELECT NEW.path_field AS path_field);
END;
CREATE TEMP TRIGGER summary_file_removed AFTER DELETE ON main.files BEGIN
    INSERT INTO summary_file_changes
    SELECT -1, OLD.lines, OLD.language, coalesce({entry_point}, 0)
    FROM (SELECT OLD.path_field AS path_field);
END;
CREATE TEMP TRIGGER summary_file_changed
AFTER UPDATE OF lines, language, path_field ON main.files BEGIN
    INSERT INTO summary_file_changes
    SELECT -1, OLD.lines, OLD.language, coalesce({entry_point}, 0)
    FROM (SELECT OLD.path_field AS path_field);
    INSERT INTO summary_file_changes
    SELECT 1, NEW.lines, NEW.language, coalesce({entry_point}, 0)
    FROM (SELECT NEW.path_field AS path_field);
END;";

/// `index_summary` moved by the logged differences and by the symbols (`?1`) and call edges
/// (`?2`) the delta added less those it removed.
const APPLY_COUNTS_SQL: &str = "
UPDATE index_summary SET
    files = files + (SELECT coalesce(sum(sign), 0) FROM summary_file_changes),
    symbols = symbols + ?1,
    lines = lines + (SELECT coalesce(sum(sign * lines), 0) FROM summary_file_changes),
    call_edges = call_edges + ?2,
    entry_point_files = entry_point_files
        + (SELECT coalesce(sum(sign * entry_point), 0) FROM summary_file_changes)";

/// `file_languages` moved by the logged differences.
const APPLY_LOG_SQL: &str = "
INSERT INTO file_languages(language, files)
SELECT language, sum(sign) FROM summary_file_changes WHERE language IS NOT NULL
GROUP BY language HAVING sum(sign) <> 0
ON CONFLICT (language) DO UPDATE SET files = files + excluded.files;
DELETE FROM file_languages
WHERE language IN (SELECT language FROM summary_file_changes) AND files = 0;
DROP TABLE summary_file_changes;";

/// Fills every summary table from every row (a full import, once the entries are final).
pub(super) fn fill(conn: &Connection) -> Result<()> {
    conn.execute_batch(&ENTRY_SUMMARIES_SQL.replace("{entry_point}", ENTRY_POINT))?;
    rank_hot_nodes(conn, "1")?;
    conn.execute_batch(SECTION_SUMMARIES_SQL)?;
    Ok(())
}

/// Ranks `hot_nodes` among the nodes `among` (an SQL condition on `graph_nodes`).
fn rank_hot_nodes(conn: &Connection, among: &str) -> Result<()> {
    conn.execute("DELETE FROM hot_nodes", [])?;
    conn.execute(
        &HOT_NODES_SQL
            .replace("{among}", among)
            .replace("{slots}", &HOTPATH_SLOTS.to_string()),
        [],
    )?;
    Ok(())
}

/// The differences a delta makes to the counts of the summary tables, logged on its
/// connection from before its first write to the files, symbols or call edges.
pub(super) struct ChangeLog<'c> {
    conn: &'c Connection,
}

impl<'c> ChangeLog<'c> {
    /// Starts logging on `conn` (in the delta's transaction; the log is temporary, so a delta
    /// that fails or is killed leaves nothing of it).
    pub(super) fn start(conn: &'c Connection) -> Result<ChangeLog<'c>> {
        conn.execute_batch(&LOG_SQL.replace("{entry_point}", ENTRY_POINT))?;
        Ok(ChangeLog { conn })
    }

    /// Brings every summary table up to date once the delta's entries are final, given what it
    /// changed and the new `graph.reverse` lengths of the nodes whose list changed; stops
    /// logging.
    pub(super) fn apply(self, counts: &DeltaCounts, reverse_lengths: &[(u32, i64)]) -> Result<()> {
        let added_less_removed = |added: u64, removed: u64| added as i64 - removed as i64;
        let symbols = added_less_removed(counts.symbols_added, counts.symbols_removed);
        let call_edges = added_less_removed(counts.edges_added, counts.edges_removed);
        let conn = self.conn;
        conn.execute(APPLY_COUNTS_SQL, params![symbols, call_edges])?;
        conn.execute_batch(APPLY_LOG_SQL)?;
        rerank_hot_nodes(conn, reverse_lengths)?;
        conn.execute_batch(SECTION_SUMMARIES_SQL)?;
        for trigger in ["file_added", "file_removed", "file_changed"] {
            conn.execute(&format!("DROP TRIGGER temp.summary_{trigger}"), [])?;
        }
        Ok(())
    }
}

/// A `hot_nodes` row: a node's name and `graph.reverse` length.
type Hot = (String, i64);

/// Whether `a` ranks at or above `b` in `hot_nodes` (longer list, then name).
fn ranks_at_or_above(a: &Hot, b: &Hot) -> bool {
    a.1 > b.1 || (a.1 == b.1 && a.0 <= b.0)
}

/// Ranks `hot_nodes` again after a delta changed the `graph.reverse` lengths of some nodes.
/// A node outside the previous ranking whose length did not change ranks below its last row,
/// so the ranking among the previous rows and the changed nodes that reach the last row's
/// length is exact when its last row still ranks at or above the previous last row (or the
/// previous ranking held every node with a list). Otherwise every node is ranked again.
fn rerank_hot_nodes(conn: &Connection, reverse_lengths: &[(u32, i64)]) -> Result<()> {
    let read = |conn: &Connection| -> Result<Vec<Hot>> {
        let mut stmt = conn.prepare("SELECT name, reverse_len FROM hot_nodes ORDER BY rank")?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    };
    let before = read(conn)?;
    let complete = before.len() < HOTPATH_SLOTS;
    let floor = if complete {
        1
    } else {
        before.last().map_or(1, |last| last.1)
    };
    conn.execute_batch("CREATE TEMP TABLE hot_candidates (id INTEGER PRIMARY KEY)")?;
    {
        let mut by_name = conn.prepare(
            "INSERT OR IGNORE INTO hot_candidates SELECT id FROM graph_nodes WHERE name = ?1",
        )?;
        for (name, _) in &before {
            by_name.execute([name])?;
        }
        let mut by_id = conn.prepare("INSERT OR IGNORE INTO hot_candidates VALUES (?1)")?;
        for &(node, _) in reverse_lengths.iter().filter(|(_, len)| *len >= floor) {
            by_id.execute(params![node])?;
        }
    }
    rank_hot_nodes(conn, "id IN (SELECT id FROM hot_candidates)")?;
    conn.execute_batch("DROP TABLE hot_candidates")?;
    if complete {
        return Ok(());
    }
    let after = read(conn)?;
    let exact = after.len() == HOTPATH_SLOTS
        && match (after.last(), before.last()) {
            (Some(last), Some(previous)) => ranks_at_or_above(last, previous),
            _ => false,
        };
    if !exact {
        rank_hot_nodes(conn, "1")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use rusqlite::{params, Connection};

    use super::{fill, rank_hot_nodes, rerank_hot_nodes, HOTPATH_SLOTS};

    /// The `hot_nodes` rows.
    fn hot(conn: &Connection) -> Vec<(String, i64)> {
        let mut stmt = conn
            .prepare("SELECT name, reverse_len FROM hot_nodes ORDER BY rank")
            .unwrap();
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
        rows.collect::<rusqlite::Result<_>>().unwrap()
    }

    /// Sets the `graph.reverse` lengths of `changes` (node id, length) as a delta would, ranks
    /// again from them and checks the ranking against one from every node.
    fn change(conn: &Connection, changes: &[(u32, i64)]) -> Vec<(String, i64)> {
        for &(id, len) in changes {
            conn.execute(
                "UPDATE graph_nodes SET reverse_len = ?2 WHERE id = ?1",
                params![id, len],
            )
            .unwrap();
        }
        rerank_hot_nodes(conn, changes).unwrap();
        let reranked = hot(conn);
        rank_hot_nodes(conn, "1").unwrap();
        assert_eq!(reranked, hot(conn), "after {changes:?}");
        reranked
    }

    #[test]
    fn hot_nodes_ranked_again_from_the_changed_nodes_match_a_ranking_of_every_node() {
        let mut conn = Connection::open_in_memory().unwrap();
        crate::db::migrate(&mut conn, None).unwrap();
        // Node i has a list of length i (ties at 7 and 8 are broken by name).
        for i in 1..=60u32 {
            conn.execute(
                "INSERT INTO graph_nodes(id, name, reverse_len) VALUES (?1, ?2, ?3)",
                params![i, format!("n{i:02}"), i64::from(i.min(40) / 5 * 5)],
            )
            .unwrap();
        }
        conn.execute(
            "INSERT INTO index_summary VALUES (1, 0, 0, 0, 0, 0, 0, 0)",
            [],
        )
        .unwrap();
        fill(&conn).unwrap();
        assert_eq!(hot(&conn).len(), HOTPATH_SLOTS);
        // A node of the ranking grows, a node outside it enters, one of it shrinks but stays,
        // one falls out (others, unchanged, must take its place), ties move by name.
        change(&conn, &[(60, 100)]);
        change(&conn, &[(3, 90), (59, 39)]);
        change(&conn, &[(58, 0)]);
        change(&conn, &[(57, 1), (56, 2), (55, 3), (54, 0), (53, 0)]);
        change(&conn, &[(2, 35), (1, 36)]);
        // Fewer nodes with a list than rows: every node is in the ranking.
        conn.execute("UPDATE graph_nodes SET reverse_len = 0 WHERE id > 10", [])
            .unwrap();
        rank_hot_nodes(&conn, "1").unwrap();
        assert!(hot(&conn).len() < HOTPATH_SLOTS);
        change(&conn, &[(40, 4), (5, 0)]);
        let last = change(&conn, &[(11, 1), (12, 1)]);
        assert!(last.iter().any(|(name, _)| name == "n12"));
    }
}
