//! Close names for "did you mean" suggestions: a bounded set of candidates read from indexes,
//! ranked by edit distance.
//!
//! Candidates come from capped index reads, never from a scan of the names:
//!
//! * **neighbours**: the names nearest to the unknown name in the index's order, at most
//!   [`NEIGHBOURS`] on each side. The names sharing the longest prefix with it are there (a
//!   typo at position `p` leaves the prefix before `p` intact), read in two range reads;
//! * **trigram pieces**, where the names have a trigram index, while no candidate is one edit
//!   away: the last two thirds, the middle third and the last third of the name (one typo in
//!   the first third leaves the last two thirds intact; two typos leave a third intact), each
//!   read through the lists of up to [`MAX_PROBES`] of its trigrams, intersected before any
//!   name is read ([`containing`]). How many names hold a trigram is counted once per import
//!   and kept for the process ([`TrigramCounts`]), since unknown names share their common
//!   trigrams.
//!
//! Candidates within [`max_edits`] edits (optimal string alignment distance: insertions,
//! deletions, substitutions and transpositions of adjacent characters, ignoring ASCII case) are
//! ranked by distance, then by case-sensitive distance, then by name.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use rusqlite::{params, Connection, OptionalExtension};

use super::fts_text::fts_quote;
use super::QueryResult;

/// Most names read on each side of an unknown name in the index's order.
pub const NEIGHBOURS: usize = 32;

/// Most rows read for one trigram piece whose trigrams are all common.
pub const PIECE_CAP: usize = 128;

/// Rows of a trigram's list counted to tell a rare trigram from a common one.
pub const PROBE_CAP: usize = 64;

/// Most rows of a trigram's list read to narrow the rows whose names [`containing`] reads.
pub const PARTNER_ROWS: usize = 256;

/// A list expected to hold more than this many times [`PARTNER_ROWS`] of the rows to narrow
/// is not read: what it would narrow is too small a part of them.
pub const PARTNER_READ_SHARE: usize = 4;

/// Rows few enough to read their names without narrowing them further ([`containing`]):
/// reading a name costs about as much as reading another list.
const FEW_ROWS: usize = 4;

/// Most trigrams of one text probed (by [`containing`]).
pub const MAX_PROBES: usize = 8;

/// Where candidate names are read from.
#[derive(Debug, Clone, Copy)]
pub struct NameIndex {
    /// Range reads of the names nearest to a text in the index's order (parameters: the text,
    /// limit): those from the text on, in order, and those before it, nearest first.
    pub neighbours_sql: [&'static str; 2],
    /// A trigram read (parameters: an FTS5 query, the piece, limit) returning names that
    /// contain the piece among at most `limit` rows matching the query, and the count of at
    /// most `limit` rows matching a query (parameters: query, limit); `None` when the names
    /// have no trigram index.
    pub trigram_sql: Option<TrigramSql>,
}

/// The statements of a trigram index (see [`NameIndex::trigram_sql`]).
#[derive(Debug, Clone, Copy)]
pub struct TrigramSql {
    /// Row ids matching a query (an FTS5 query), in order, from one row id to another, up to a
    /// limit (parameters: query, first, last, limit).
    pub rows: &'static str,
    /// The names of rows (a JSON array of row ids) that contain a piece (parameters: ids,
    /// piece). The row ids come first (`CROSS JOIN`): plans do not depend on the values bound
    /// ([`crate::db::configure_query_connection`]), so the planner cannot know how few they
    /// are and could otherwise read the whole table.
    pub names: &'static str,
    /// The number of rows matching a query counted up to a limit, and the row id of the last
    /// of them (parameters: query, limit).
    pub count: &'static str,
}

/// Simple names of symbols: the case-insensitive name index and the name trigram index.
pub const SYMBOL_NAMES: NameIndex = NameIndex {
    neighbours_sql: [
        "SELECT name FROM symbols WHERE name COLLATE NOCASE >= ?1 ORDER BY name COLLATE NOCASE LIMIT ?2",
        "SELECT name FROM symbols WHERE name COLLATE NOCASE < ?1 ORDER BY name COLLATE NOCASE DESC LIMIT ?2",
    ],
    trigram_sql: Some(SYMBOL_NAME_TRIGRAMS),
};

/// The statements of the trigram index `$fts` over `$table` (rows `t`): `$listed` of the rows
/// whose `$column` contains the piece.
macro_rules! trigram_sql {
    ($fts:literal, $table:literal, $listed:literal, $column:literal) => {
        TrigramSql {
            rows: concat!(
                "SELECT rowid FROM ",
                $fts,
                " WHERE ",
                $fts,
                " MATCH ?1 AND rowid BETWEEN ?2 AND ?3 ORDER BY rowid LIMIT ?4"
            ),
            names: concat!(
                "SELECT ",
                $listed,
                " FROM json_each(?1) j CROSS JOIN ",
                $table,
                " t ON t.id = j.value WHERE instr(acpdb_fold(t.",
                $column,
                "), acpdb_fold(?2)) > 0"
            ),
            count: concat!(
                "SELECT count(*), max(id) FROM (SELECT rowid AS id FROM ",
                $fts,
                " WHERE ",
                $fts,
                " MATCH ?1 LIMIT ?2)"
            ),
        }
    };
}
pub(crate) use trigram_sql;

/// The name trigram index of symbols: simple names containing a text.
pub const SYMBOL_NAME_TRIGRAMS: TrigramSql =
    trigram_sql!("symbols_name_trigram", "symbols", "t.name", "name");

/// Canonical file paths: the path index and the path trigram index.
pub const FILE_PATHS: NameIndex = NameIndex {
    neighbours_sql: [
        "SELECT path FROM files WHERE path >= ?1 ORDER BY path LIMIT ?2",
        "SELECT path FROM files WHERE path < ?1 ORDER BY path DESC LIMIT ?2",
    ],
    trigram_sql: Some(trigram_sql!("files_trigram", "files", "t.path", "path")),
};

/// Variable names: the primary key.
pub const VARIABLE_NAMES: NameIndex = NameIndex {
    neighbours_sql: [
        "SELECT name FROM vars WHERE name >= ?1 ORDER BY name LIMIT ?2",
        "SELECT name FROM vars WHERE name < ?1 ORDER BY name DESC LIMIT ?2",
    ],
    trigram_sql: None,
};

/// Edits allowed between a name of `chars` characters and a suggestion for it: none below 4
/// characters (everything is close to a short name), 1 up to 5, 2 up to 11, then 3.
pub fn max_edits(chars: usize) -> usize {
    match chars {
        0..=3 => 0,
        4..=5 => 1,
        6..=11 => 2,
        _ => 3,
    }
}

/// Optimal string alignment distance between `a` and `b`, counted in characters.
pub fn distance(a: &[char], b: &[char]) -> usize {
    bounded_distance(a, b, usize::MAX)
}

/// A lower bound of [`distance`] between `a` (ASCII-lower-cased) and `b` ignoring ASCII case,
/// cheap enough to skip most candidates before the distance is computed: the characters of one
/// text missing from the other, counted with their multiplicity (the larger of the two counts;
/// each edit removes at most one from each side). Characters outside ASCII all count as one.
fn bag_distance(a: &[char], b: impl IntoIterator<Item = char>) -> usize {
    let slot = |c: char| {
        let c = c.to_ascii_lowercase();
        if c.is_ascii() {
            c as usize
        } else {
            128
        }
    };
    let mut balance = [0i32; 129];
    for &c in a {
        balance[slot(c)] += 1;
    }
    for c in b {
        balance[slot(c)] -= 1;
    }
    let (only_a, only_b) = balance.iter().fold((0, 0), |(plus, minus), &n| {
        (plus + n.max(0) as usize, minus + (-n).max(0) as usize)
    });
    only_a.max(only_b)
}

/// [`distance`] when it is at most `bound`, else any value above `bound` (the computation
/// stops as soon as every alignment has passed it).
fn bounded_distance(a: &[char], b: &[char], bound: usize) -> usize {
    let width = b.len() + 1;
    // Three rows: two before the current one, for transpositions.
    let mut rows = vec![0usize; 3 * width];
    for (j, cell) in rows[2 * width..].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        rows.copy_within(width.., 0);
        let (before, current) = rows.split_at_mut(2 * width);
        let (two_up, up) = before.split_at(width);
        current[0] = i;
        let mut smallest = i;
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (up[j] + 1).min(current[j - 1] + 1).min(up[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(two_up[j - 2] + 1);
            }
            current[j] = best;
            smallest = smallest.min(best);
        }
        if smallest > bound {
            return smallest;
        }
    }
    rows[2 * width + b.len()]
}

/// The trigram counts one search for close names has read, so that the pieces of a name (and
/// the name itself, when it is also searched as a substring) never count a trigram twice; and,
/// through the counts kept for the process, those earlier answers read from the same import.
#[derive(Debug, Default)]
pub struct TrigramCounts {
    read: HashMap<(&'static str, String), Probe>,
    /// The import this answer reads ([`crate::db::import_identity`]), once asked; `None`
    /// inside when the database has none (nothing is kept then).
    import: Option<Option<String>>,
}

/// How many rows hold each trigram (counted up to [`PROBE_CAP`]), kept for the process per
/// import: a fact of one import's index, which every unknown name asks again (`ing`, `_id`,
/// `ser`) and which the next import (full or delta, with its new identity) replaces whole.
static KEPT_COUNTS: Mutex<Option<KeptCounts>> = Mutex::new(None);

/// Trigram counts of one import.
type KeptCounts = (String, HashMap<(&'static str, String), Probe>);

/// What counting the rows that hold a trigram found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Probe {
    /// Rows counted, up to [`PROBE_CAP`].
    rows: usize,
    /// The row id of the last row counted (rows come in row id order).
    last: i64,
}

impl Probe {
    /// Whether every row holding the trigram was counted.
    fn is_whole(self) -> bool {
        self.rows < PROBE_CAP
    }

    /// About how many rows from row id `first` to `last` hold the trigram: all of them for a
    /// list counted whole, else as many as its first [`PROBE_CAP`] rows' spread gives.
    fn expected_between(self, first: i64, last: i64) -> usize {
        if self.is_whole() {
            return self.rows;
        }
        let span = (i128::from(last) - i128::from(first) + 1).max(1);
        let expected = span * PROBE_CAP as i128 / i128::from(self.last).max(1);
        usize::try_from(expected).unwrap_or(usize::MAX)
    }
}

/// Trigram counts kept at most (about 100 bytes each).
const COUNTS_KEPT: usize = 65_536;

impl TrigramCounts {
    /// The rows of `sql`'s index holding `trigram` (an FTS5 query), counted up to
    /// [`PROBE_CAP`]: from this answer, else from [`KEPT_COUNTS`] for the same import, else
    /// counted (and kept).
    fn probe(&mut self, conn: &Connection, sql: TrigramSql, trigram: &str) -> QueryResult<Probe> {
        let key = (sql.count, trigram.to_string());
        if let Some(&probe) = self.read.get(&key) {
            return Ok(probe);
        }
        if self.import.is_none() {
            self.import = Some(crate::db::import_identity(conn).optional()?);
        }
        let import = self.import.as_ref().and_then(Option::as_deref);
        let kept = import.and_then(|import| {
            let kept = KEPT_COUNTS.lock().unwrap_or_else(PoisonError::into_inner);
            kept.as_ref()
                .filter(|(of, _)| of == import)
                .and_then(|(_, counts)| counts.get(&key).copied())
        });
        let probe = match kept {
            Some(probe) => probe,
            None => {
                let mut count = conn.prepare_cached(sql.count)?;
                let (rows, last): (i64, Option<i64>) = count
                    .query_row(params![trigram, PROBE_CAP as i64], |r| {
                        Ok((r.get(0)?, r.get(1)?))
                    })?;
                let probe = Probe {
                    rows: usize::try_from(rows).unwrap_or(0),
                    last: last.unwrap_or(0),
                };
                if let Some(import) = import {
                    let mut kept = KEPT_COUNTS.lock().unwrap_or_else(PoisonError::into_inner);
                    let kept = kept.get_or_insert_with(|| (import.to_string(), HashMap::new()));
                    if kept.0 != import || kept.1.len() >= COUNTS_KEPT {
                        *kept = (import.to_string(), HashMap::new());
                    }
                    kept.1.insert(key.clone(), probe);
                }
                probe
            }
        };
        self.read.insert(key, probe);
        Ok(probe)
    }
}

/// Up to `max` names of `index` within [`max_edits`] of `name`, closest first.
pub fn similar_names(
    conn: &Connection,
    index: NameIndex,
    name: &str,
    max: usize,
    counts: &mut TrigramCounts,
) -> QueryResult<Vec<String>> {
    let chars: Vec<char> = name.chars().collect();
    let allowed = max_edits(chars.len());
    if allowed == 0 || max == 0 {
        return Ok(Vec::new());
    }
    let folded: Vec<char> = name.to_ascii_lowercase().chars().collect();
    let mut ranked: Vec<(usize, usize, String)> = Vec::new();
    // A name read twice is ranked twice and listed once.
    let measure = |found: Vec<String>, ranked: &mut Vec<(usize, usize, String)>| {
        for candidate in found {
            if let Some((d, exact)) = closeness(&chars, &folded, allowed, &candidate) {
                ranked.push((d, exact, candidate));
            }
        }
        ranked.sort();
        ranked.dedup();
    };
    measure(neighbours(conn, index, name)?, &mut ranked);
    // A name one edit away is as close as an unknown name gets: the pieces can add no closer,
    // and the next piece is read only while no candidate is close enough.
    if let Some(sql) = index.trigram_sql {
        for piece in pieces(&chars) {
            if ranked.first().is_some_and(|(d, _, _)| *d <= 1) {
                break;
            }
            measure(
                containing(conn, sql, &piece, PIECE_CAP, counts)?,
                &mut ranked,
            );
        }
    }
    Ok(ranked.into_iter().take(max).map(|(_, _, n)| n).collect())
}

/// The distance between `candidate` and a name of `chars` ignoring ASCII case (`folded`: the
/// name ASCII-lower-cased) and the exact distance, when the first is at most `allowed`; the
/// cheap bounds (length, then the bag of characters) first, on the text as it is.
fn closeness(
    chars: &[char],
    folded: &[char],
    allowed: usize,
    candidate: &str,
) -> Option<(usize, usize)> {
    if candidate.chars().count().abs_diff(chars.len()) > allowed
        || bag_distance(folded, candidate.chars()) > allowed
    {
        return None;
    }
    let other: Vec<char> = candidate.chars().collect();
    let lower: Vec<char> = other.iter().map(char::to_ascii_lowercase).collect();
    let d = bounded_distance(folded, &lower, allowed);
    (d <= allowed).then(|| (d, distance(chars, &other)))
}

/// Up to `max` of `candidates` (a text compared with `name`, the text listed for it) within
/// [`max_edits`] of `name`, closest first, ranked as [`similar_names`] ranks.
pub fn closest(
    name: &str,
    candidates: impl IntoIterator<Item = (String, String)>,
    max: usize,
) -> Vec<String> {
    let chars: Vec<char> = name.chars().collect();
    let folded: Vec<char> = name.to_ascii_lowercase().chars().collect();
    let allowed = max_edits(chars.len());
    let mut ranked: Vec<(usize, usize, String)> = candidates
        .into_iter()
        .filter_map(|(compared, listed)| {
            closeness(&chars, &folded, allowed, &compared).map(|(d, exact)| (d, exact, listed))
        })
        .collect();
    ranked.sort();
    ranked.dedup();
    ranked.into_iter().take(max).map(|(_, _, n)| n).collect()
}

/// The names of `index` nearest to `name` in the index's order, up to [`NEIGHBOURS`] on each
/// side: the names sharing the longest prefixes with `name` are next to where it would be.
fn neighbours(conn: &Connection, index: NameIndex, name: &str) -> QueryResult<Vec<String>> {
    let mut found = Vec::with_capacity(2 * NEIGHBOURS);
    for sql in index.neighbours_sql {
        let mut range = conn.prepare_cached(sql)?;
        let names = range.query_map(params![name, NEIGHBOURS as i64], |r| {
            r.get::<_, Option<String>>(0)
        })?;
        for name in names {
            found.extend(name?);
        }
    }
    Ok(found)
}

/// The pieces of a name of `chars` that one typo (in its first third) or two typos leave
/// intact: the last two thirds, the middle third, the last third; those of 3 characters or
/// more.
fn pieces(chars: &[char]) -> Vec<String> {
    let third = chars.len() / 3;
    [
        &chars[third..],
        &chars[third..chars.len() - third],
        &chars[chars.len() - third..],
    ]
    .into_iter()
    .filter(|piece| piece.len() >= 3)
    .map(|piece| piece.iter().collect())
    .collect()
}

/// Names of the trigram index `sql` that contain `text` (3 characters or more): all of them
/// when one of its trigrams is rare, else those among the first `cap` rows of its rarest
/// trigram (the one whose first rows spread over the most row ids).
///
/// Before any name is read, those rows are narrowed by the lists of the other trigrams
/// probed, over the same row ids, rarest first: every text containing `text` holds each of
/// its trigrams, and a list of row ids costs much less to read than names spread over as many
/// pages of their table. At most [`PARTNER_ROWS`] of a list are read; when that is not the
/// whole list over those row ids, only the rows up to the last one read are narrowed by it.
/// A list expected to hold [`PARTNER_READ_SHARE`] times as many is not read. (An FTS5 query joining the
/// trigrams with AND steps through the whole lists of common ones when nothing matches,
/// whatever row ids it is limited to.) At most `MAX_PROBES * PROBE_CAP + cap` rows of the
/// index, `(MAX_PROBES - 1) * PARTNER_ROWS` more, and `cap` names are read, whatever its
/// size.
pub fn containing(
    conn: &Connection,
    sql: TrigramSql,
    text: &str,
    cap: usize,
    counts: &mut TrigramCounts,
) -> QueryResult<Vec<String>> {
    let Some(probes) = probe_trigrams(conn, sql, text, counts)? else {
        return Ok(Vec::new());
    };
    let Some(((base, _), others)) = probes.split_first() else {
        return Ok(Vec::new());
    };
    let mut ids = row_ids(conn, sql, base, (i64::MIN, i64::MAX), cap)?;
    for (trigram, probe) in others {
        let (Some(&first), Some(&last)) = (ids.first(), ids.last()) else {
            break;
        };
        if ids.len() <= FEW_ROWS {
            break;
        }
        if probe.expected_between(first, last) > PARTNER_ROWS * PARTNER_READ_SHARE {
            continue;
        }
        // The rows after the last one read, if the list goes on, are kept as they are.
        let held = row_ids(conn, sql, trigram, (first, last), PARTNER_ROWS)?;
        let read_up_to = if held.len() < PARTNER_ROWS {
            last
        } else {
            held.last().copied().unwrap_or(last)
        };
        let covered = ids.partition_point(|id| *id <= read_up_to);
        ids.retain(|id| *id > read_up_to || held.binary_search(id).is_ok());
        // A list holding most of the rows it covers holds them with the text, most likely
        // (the text's own pieces are common): the others would not narrow them either.
        if ids.partition_point(|id| *id <= read_up_to) * 2 > covered {
            break;
        }
    }
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut read = conn.prepare_cached(sql.names)?;
    let names = read.query_map(params![serde_json::to_string(&ids)?, text], |r| {
        r.get::<_, Option<String>>(0)
    })?;
    Ok(names
        .filter_map(|name| name.transpose())
        .collect::<rusqlite::Result<_>>()?)
}

/// Up to `limit` row ids of `sql`'s index holding `trigram` (an FTS5 query), in order, within
/// `bounds` (first and last row id).
fn row_ids(
    conn: &Connection,
    sql: TrigramSql,
    trigram: &str,
    (first, last): (i64, i64),
    limit: usize,
) -> QueryResult<Vec<i64>> {
    let mut read = conn.prepare_cached(sql.rows)?;
    let ids = read.query_map(params![trigram, first, last, limit as i64], |r| r.get(0))?;
    Ok(ids.collect::<rusqlite::Result<_>>()?)
}

/// Up to [`MAX_PROBES`] trigrams of `text` (quoted for FTS5) with what counting their rows
/// found, the rarest first: fewest rows counted, then the first rows spread over the most row
/// ids (none for a `text` without trigrams). `None` when one of them no row holds. The
/// trigrams probed are those of the rarest letters (`letter_rarity`).
fn probe_trigrams(
    conn: &Connection,
    sql: TrigramSql,
    text: &str,
    counts: &mut TrigramCounts,
) -> QueryResult<Option<Vec<(String, Probe)>>> {
    let chars: Vec<char> = text.chars().flat_map(char::to_lowercase).collect();
    let mut windows: Vec<&[char]> = chars.windows(3).collect();
    let rarity = |window: &[char]| window.iter().map(|&c| letter_rarity(c)).sum::<u32>();
    // Rarest first; equal trigrams side by side, so that each is probed once.
    windows.sort_by_cached_key(|window| (std::cmp::Reverse(rarity(window)), *window));
    windows.dedup();
    let mut probes = Vec::new();
    for window in windows.into_iter().take(MAX_PROBES) {
        let trigram = fts_quote(&window.iter().collect::<String>());
        let probe = counts.probe(conn, sql, &trigram)?;
        if probe.rows == 0 {
            return Ok(None);
        }
        probes.push((trigram, probe));
    }
    // A stable sort: trigrams alike in both keep the order of their letters' rarity.
    probes.sort_by_key(|(_, probe)| (probe.rows, std::cmp::Reverse(probe.last)));
    Ok(Some(probes))
}

/// How rare a (lower-case) character is in identifiers and paths, higher for rarer: letters by
/// their frequency in English text, anything else (digits, punctuation, other scripts) as
/// rare as the rarest letters.
fn letter_rarity(c: char) -> u32 {
    const BY_FREQUENCY: &str = "etaoinsrhldcumfpgwybvkxjqz";
    BY_FREQUENCY
        .find(c)
        .map_or(BY_FREQUENCY.len() as u32, |at| at as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(a: &str, b: &str) -> usize {
        distance(
            &a.chars().collect::<Vec<_>>(),
            &b.chars().collect::<Vec<_>>(),
        )
    }

    #[test]
    fn distances() {
        assert_eq!(d("", ""), 0);
        assert_eq!(d("abc", ""), 3);
        assert_eq!(d("validateSesion", "validateSession"), 1);
        assert_eq!(d("computeTaxes", "computeTax"), 2);
        assert_eq!(d("tset", "test"), 1);
        assert_eq!(d("kitten", "sitting"), 3);
        assert_eq!(d("日本語", "日本"), 1);
    }

    #[test]
    fn a_bounded_distance_is_exact_up_to_its_bound() {
        let words = [
            "", "a", "ab", "ba", "abc", "acb", "validate", "vlaidate", "valid", "xyz",
        ];
        for a in words {
            for b in words {
                let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
                let exact = distance(&a, &b);
                for bound in 0..4 {
                    let bounded = bounded_distance(&a, &b, bound);
                    if exact <= bound {
                        assert_eq!(bounded, exact, "{a:?} {b:?} bound {bound}");
                    } else {
                        assert!(bounded > bound, "{a:?} {b:?} bound {bound}");
                    }
                }
            }
        }
    }

    #[test]
    fn the_bag_distance_never_exceeds_the_distance() {
        let words = [
            "",
            "a",
            "ab",
            "ba",
            "abc",
            "ACB",
            "validate",
            "vlaidate",
            "Valid",
            "日本語",
        ];
        for a in words {
            for b in words {
                let a_lower: Vec<char> = a.to_ascii_lowercase().chars().collect();
                let b_lower: Vec<char> = b.to_ascii_lowercase().chars().collect();
                assert!(bag_distance(&a_lower, b.chars()) <= distance(&a_lower, &b_lower));
            }
        }
    }

    #[test]
    fn short_names_get_no_fuzzy_suggestions() {
        assert_eq!(max_edits(3), 0);
        assert_eq!(max_edits(4), 1);
        assert_eq!(max_edits(12), 3);
    }
}
