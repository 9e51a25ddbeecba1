//! Close names for "did you mean" suggestions: a bounded set of candidates read from indexes,
//! ranked by edit distance.
//!
//! Candidates come from capped index reads, never from a scan of the names:
//!
//! * **prefix ranges**: names starting with the first `L` characters of the unknown name, longest
//!   `L` first (a typo at position `p` leaves the prefix before `p` intact), at most
//!   [`RANGE_CAP`] names per range, stopping at the first full range or after
//!   [`MAX_PREFIX_READS`] ranges;
//! * **trigram pieces**, where the names have a trigram index: the last two thirds, the middle
//!   third and the last third of the name (one typo in the first third leaves the last two
//!   thirds intact; two typos leave a third intact), at most [`PIECE_CAP`] rows per piece.
//!
//! Candidates within [`max_edits`] edits (optimal string alignment distance: insertions,
//! deletions, substitutions and transpositions of adjacent characters, ignoring ASCII case) are
//! ranked by distance, then by case-sensitive distance, then by name.

use std::collections::HashSet;

use rusqlite::{params, Connection};

use super::names::trigram_query;
use super::QueryResult;

/// Most names read from one prefix range.
pub const RANGE_CAP: usize = 50;

/// Most prefix ranges read for one unknown name.
pub const MAX_PREFIX_READS: usize = 32;

/// Most rows read for one trigram piece.
pub const PIECE_CAP: usize = 200;

/// Where candidate names are read from.
#[derive(Debug, Clone, Copy)]
pub struct NameIndex {
    /// A range read (parameters: prefix, limit) returning names that start with the prefix.
    pub prefix_sql: &'static str,
    /// Whether `prefix_sql` compares ASCII-lower-cased names (then the prefix is lower-cased).
    pub folded: bool,
    /// A trigram read (parameters: [`trigram_query`] of a piece, the piece, limit) returning
    /// names that contain the piece among at most `limit` candidates; `None` when the names
    /// have no trigram index.
    pub trigram_sql: Option<&'static str>,
}

/// Simple names of symbols: the case-insensitive name index and the name trigram index.
pub const SYMBOL_NAMES: NameIndex = NameIndex {
    prefix_sql: "SELECT name FROM symbols WHERE name COLLATE NOCASE >= ?1 AND name COLLATE NOCASE < ?1 || char(1114111) ORDER BY name COLLATE NOCASE LIMIT ?2",
    folded: true,
    trigram_sql: Some(
        "SELECT s.name FROM (SELECT rowid AS id FROM symbols_name_trigram
                             WHERE symbols_name_trigram MATCH ?1 LIMIT ?3) t
         JOIN symbols s ON s.id = t.id WHERE instr(acpdb_fold(s.name), acpdb_fold(?2)) > 0",
    ),
};

/// Canonical file paths: the path index and the path trigram index.
pub const FILE_PATHS: NameIndex = NameIndex {
    prefix_sql:
        "SELECT path FROM files WHERE path >= ?1 AND path < ?1 || char(1114111) ORDER BY path LIMIT ?2",
    folded: false,
    trigram_sql: Some(
        "SELECT f.path FROM (SELECT rowid AS id FROM files_trigram WHERE files_trigram MATCH ?1 LIMIT ?3) t
         JOIN files f ON f.id = t.id WHERE instr(acpdb_fold(f.path), acpdb_fold(?2)) > 0",
    ),
};

/// Variable names: the primary key.
pub const VARIABLE_NAMES: NameIndex = NameIndex {
    prefix_sql:
        "SELECT name FROM vars WHERE name >= ?1 AND name < ?1 || char(1114111) ORDER BY name LIMIT ?2",
    folded: false,
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
    let width = b.len() + 1;
    let mut rows = vec![0usize; (a.len() + 1) * width];
    for (j, cell) in rows.iter_mut().take(width).enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        rows[i * width] = i;
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (rows[(i - 1) * width + j] + 1)
                .min(rows[i * width + j - 1] + 1)
                .min(rows[(i - 1) * width + j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(rows[(i - 2) * width + j - 2] + 1);
            }
            rows[i * width + j] = best;
        }
    }
    rows[a.len() * width + b.len()]
}

/// Up to `max` names of `index` within [`max_edits`] of `name`, closest first.
pub fn similar_names(
    conn: &Connection,
    index: NameIndex,
    name: &str,
    max: usize,
) -> QueryResult<Vec<String>> {
    let chars: Vec<char> = name.chars().collect();
    let allowed = max_edits(chars.len());
    if allowed == 0 || max == 0 {
        return Ok(Vec::new());
    }
    let candidates = candidates(conn, index, &chars)?;
    let folded: Vec<char> = name.to_ascii_lowercase().chars().collect();
    let mut ranked: Vec<(usize, usize, String)> = candidates
        .into_iter()
        .filter_map(|candidate| {
            let other: Vec<char> = candidate.chars().collect();
            if other.len().abs_diff(chars.len()) > allowed {
                return None;
            }
            let lower: Vec<char> = candidate.to_ascii_lowercase().chars().collect();
            let d = distance(&folded, &lower);
            (d <= allowed).then(|| (d, distance(&chars, &other), candidate))
        })
        .collect();
    ranked.sort();
    Ok(ranked.into_iter().take(max).map(|(_, _, n)| n).collect())
}

/// The distinct candidate names of `index` for `chars` (at most
/// `MAX_PREFIX_READS * RANGE_CAP + 3 * PIECE_CAP` rows read).
fn candidates(conn: &Connection, index: NameIndex, chars: &[char]) -> QueryResult<HashSet<String>> {
    let mut found = HashSet::new();
    let mut range = conn.prepare_cached(index.prefix_sql)?;
    for length in (1..=chars.len()).rev().take(MAX_PREFIX_READS) {
        let prefix: String = chars[..length].iter().collect();
        let prefix = if index.folded {
            prefix.to_ascii_lowercase()
        } else {
            prefix
        };
        let mut read = 0;
        for row in range.query_map(params![prefix, RANGE_CAP as i64], |r| {
            r.get::<_, Option<String>>(0)
        })? {
            read += 1;
            found.extend(row?);
        }
        if read == RANGE_CAP {
            break;
        }
    }
    if let Some(sql) = index.trigram_sql {
        let mut pieces = conn.prepare_cached(sql)?;
        let third = chars.len() / 3;
        for piece in [
            &chars[third..],
            &chars[third..chars.len() - third],
            &chars[chars.len() - third..],
        ] {
            if piece.len() < 3 {
                continue;
            }
            let piece: String = piece.iter().collect();
            let candidates = trigram_query([piece.as_str()]);
            for row in pieces.query_map(params![candidates, piece, PIECE_CAP as i64], |r| {
                r.get::<_, Option<String>>(0)
            })? {
                found.extend(row?);
            }
        }
    }
    Ok(found)
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
    fn short_names_get_no_fuzzy_suggestions() {
        assert_eq!(max_edits(3), 0);
        assert_eq!(max_edits(4), 1);
        assert_eq!(max_edits(12), 3);
    }
}
