//! Opaque pagination cursors.
//!
//! A cursor is the hex encoding of a small JSON object — the list it belongs to (query kind),
//! the query's key (pattern or name), the walk depth and the offset of the next page —
//! followed by a 128-bit HMAC-SHA-256 tag keyed with a secret drawn at import and kept in the
//! database (`meta.cursor_secret`), so a cursor is valid for the import that issued it only. Lists are ordered
//! totally (ties broken by row id), so offsets walk them without gaps or duplicates. A cursor
//! from another list, another import, with a field beyond the limits the arguments have, or any
//! string that was not issued by this database is refused with invalid params: a client cannot
//! forge one to ask for more than its arguments could.

use rusqlite::Connection;
use serde::{Deserialize, Serialize};
use serde_json::json;
use sha2::{Digest, Sha256};

use super::{QueryError, QueryResult};
use crate::db::CURSOR_SECRET_KEY;

/// Deepest call-graph walk accepted for `depth`, in a request or in a cursor.
pub const MAX_DEPTH: u32 = 5;

/// Page size of the reference tools' long lists (a symbol's callers and callees, a domain's
/// files) when the caller gives no `limit`.
pub const DEFAULT_PAGE_SIZE: u32 = 200;

/// Largest page a request may ask for (`limit`) in any paged list.
pub const MAX_PAGE_SIZE: u32 = 1000;

/// Largest offset a cursor may carry (far beyond any list, well within SQLite's integers).
const MAX_OFFSET: u64 = 1 << 40;

/// Bytes of the authentication tag at the end of a cursor.
const TAG_BYTES: usize = 16;

/// Format version written into every cursor.
const VERSION: u32 = 2;

/// Longest cursor accepted, in characters.
const MAX_CURSOR_LEN: usize = 8192;

/// What a cursor points at: the list, the query that produced it and where the next page starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    /// Format version.
    #[serde(rename = "v")]
    version: u32,
    /// The list kind (`search`, `callers`, `file`, ...).
    #[serde(rename = "k")]
    pub kind: String,
    /// The query key: the search pattern or the name as given.
    #[serde(rename = "q")]
    pub query: String,
    /// Walk depth for call-graph lists.
    #[serde(rename = "d", default, skip_serializing_if = "Option::is_none")]
    pub depth: Option<u32>,
    /// Offset of the first item of the next page.
    #[serde(rename = "o")]
    pub offset: u64,
    /// The key its tag is made with (the database's, never written into the cursor).
    #[serde(skip)]
    key: [u8; 32],
}

impl Cursor {
    /// A cursor for the page starting at `offset` of the list `kind` answered for `query`.
    pub fn new(
        conn: &Connection,
        kind: &str,
        query: &str,
        depth: Option<u32>,
        offset: u64,
    ) -> QueryResult<Cursor> {
        let (_, key) = import_identity(conn)?;
        Ok(Cursor {
            version: VERSION,
            kind: kind.to_string(),
            query: query.to_string(),
            depth,
            offset,
            key,
        })
    }

    /// The opaque text handed to the agent.
    pub fn encode(&self) -> String {
        let payload = serde_json::to_vec(self).unwrap_or_default();
        let mut out = crate::hex::encode(&payload);
        out.push_str(&crate::hex::encode(
            &hmac_sha256(&self.key, &payload)[..TAG_BYTES],
        ));
        out
    }

    /// Decodes a cursor received for a list of kind `kind`; refuses foreign, corrupted or stale
    /// cursors.
    pub fn decode(conn: &Connection, token: &str, kind: &str) -> QueryResult<Cursor> {
        let invalid = || {
            QueryError::invalid_with(
                "Invalid cursor: pass back the next_cursor value of a previous response unchanged, or omit cursor to start from the first page (cursors end when the index is re-imported)",
                serde_json::json!({"field": "cursor"}),
            )
        };
        let token = token.trim();
        if token.len() > MAX_CURSOR_LEN
            || token.len() <= 2 * TAG_BYTES
            || !token.len().is_multiple_of(2)
        {
            return Err(invalid());
        }
        let bytes = crate::hex::decode(token).ok_or_else(invalid)?;
        let (payload, tag) = bytes.split_at(bytes.len() - TAG_BYTES);
        let (_, key) = import_identity(conn)?;
        if !constant_time_eq(&hmac_sha256(&key, payload)[..TAG_BYTES], tag) {
            return Err(invalid());
        }
        let mut cursor: Cursor = serde_json::from_slice(payload).map_err(|_| invalid())?;
        cursor.key = key;
        let depth_ok = cursor
            .depth
            .is_none_or(|depth| (1..=MAX_DEPTH).contains(&depth));
        if cursor.version != VERSION || !depth_ok || cursor.offset > MAX_OFFSET {
            return Err(invalid());
        }
        if cursor.kind != kind {
            return Err(QueryError::invalid_with(
                format!(
                    "Invalid cursor: it belongs to a '{}' query, not to a '{kind}' query",
                    cursor.kind
                ),
                serde_json::json!({"field": "cursor"}),
            ));
        }
        Ok(cursor)
    }
}

/// The window of a list one request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Page {
    /// Items to skip.
    pub offset: u64,
    /// Most items to return.
    pub limit: u32,
}

impl Page {
    /// The offset just past a page that returned `returned` items.
    pub fn next_offset(&self, returned: usize) -> u64 {
        self.offset + returned as u64
    }
}

/// Pagination facts of one page of a list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageInfo {
    /// More items follow this page.
    pub truncated: bool,
    /// Cursor of the next page, when there is one.
    pub next_cursor: Option<String>,
}

/// Pagination facts of a page: `more` says whether items follow it, `next_offset` is where the
/// next page starts.
pub fn page_info(
    conn: &Connection,
    kind: &str,
    query: &str,
    depth: Option<u32>,
    next_offset: u64,
    more: bool,
) -> QueryResult<PageInfo> {
    let next_cursor = if more {
        Some(Cursor::new(conn, kind, query, depth, next_offset)?.encode())
    } else {
        None
    };
    Ok(PageInfo {
        truncated: more,
        next_cursor,
    })
}

/// The page `limit` (default [`DEFAULT_PAGE_SIZE`], at most [`MAX_PAGE_SIZE`]) and `cursor`
/// select in list `kind` of `name` (walked to `depth`, for a walk). Cursors come from
/// [`next_cursor`] and must belong to the same list, name, depth and import.
pub(crate) fn requested_page(
    conn: &Connection,
    kind: &str,
    name: &str,
    depth: Option<u32>,
    limit: Option<u32>,
    cursor: Option<&str>,
) -> QueryResult<Page> {
    let limit = within(limit, "limit", DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)?;
    let offset = match cursor.map(str::trim).filter(|c| !c.is_empty()) {
        None => 0,
        Some(token) => {
            let cursor = Cursor::decode(conn, token, kind)?;
            if cursor.query != name {
                return Err(QueryError::invalid_with(
                    format!(
                        "Cursor does not match this query: it was issued for name '{}'. Repeat the query without cursor, or pass the cursor with the same name.",
                        cursor.query
                    ),
                    json!({"field": "cursor"}),
                ));
            }
            if depth.is_some() && cursor.depth != depth {
                return Err(depth_mismatch(cursor.depth));
            }
            cursor.offset
        }
    };
    Ok(Page { offset, limit })
}

/// `value` (`default` when absent) when it is within 1..=`max`, else an error naming `field`.
pub(crate) fn within(value: Option<u32>, field: &str, default: u32, max: u32) -> QueryResult<u32> {
    match value.unwrap_or(default) {
        n if (1..=max).contains(&n) => Ok(n),
        n => Err(QueryError::invalid_with(
            format!("Invalid {field}: {n} (must be 1-{max})"),
            json!({"field": field, "minimum": 1, "maximum": max}),
        )),
    }
}

/// The error for a cursor issued for walk depth `issued` (1 when it names none) passed with
/// another depth.
pub(crate) fn depth_mismatch(issued: Option<u32>) -> QueryError {
    QueryError::invalid_with(
        format!(
            "Cursor does not match this query: it was issued for depth {}. Repeat the query without cursor, or pass the cursor with the same depth.",
            issued.unwrap_or(1)
        ),
        json!({"field": "cursor"}),
    )
}

/// Whether a list of `len` items continues past `page`.
pub(crate) fn continues(page: Page, len: usize) -> bool {
    len as u64 > page.offset.saturating_add(u64::from(page.limit))
}

/// The items of `items` that `page` covers.
pub(crate) fn page_of<T>(page: Page, items: Vec<T>) -> Vec<T> {
    items
        .into_iter()
        .skip(usize::try_from(page.offset).unwrap_or(usize::MAX))
        .take(page.limit as usize)
        .collect()
}

/// The cursor of the page after `page` in list `kind` of `name`.
pub(crate) fn next_cursor(
    conn: &Connection,
    kind: &str,
    name: &str,
    page: Page,
) -> QueryResult<String> {
    let next = page.offset.saturating_add(u64::from(page.limit));
    Ok(Cursor::new(conn, kind, name, None, next)?.encode())
}

/// A short checksum identifying the current import (empty when the database has no import
/// bookkeeping).
pub fn import_stamp(conn: &Connection) -> QueryResult<String> {
    Ok(import_identity(conn)?.0)
}

/// The current import's stamp and the key of its cursors, from one read of `meta`. The key
/// comes from the database's secret (for a database imported before secrets were kept, from
/// the stamp alone).
fn import_identity(conn: &Connection) -> QueryResult<(String, [u8; 32])> {
    let mut imported = String::new();
    let mut secret = String::new();
    let mut stmt = conn.prepare_cached(
        "SELECT key, value FROM meta WHERE key IN ('imported_at', 'source_sha256', ?1) ORDER BY key",
    )?;
    let mut rows = stmt.query([CURSOR_SECRET_KEY])?;
    while let Some(row) = rows.next()? {
        let (key, value): (String, String) = (row.get(0)?, row.get(1)?);
        if key == CURSOR_SECRET_KEY {
            secret = value;
        } else {
            if !imported.is_empty() {
                imported.push('|');
            }
            imported.push_str(&value);
        }
    }
    let stamp = if imported.is_empty() {
        String::new()
    } else {
        crate::hex::encode(&Sha256::digest(imported.as_bytes())[..4])
    };
    let key = Sha256::new()
        .chain_update(b"acpdb cursor key\0")
        .chain_update(secret.as_bytes())
        .chain_update(b"\0")
        .chain_update(stamp.as_bytes())
        .finalize()
        .into();
    Ok((stamp, key))
}

/// HMAC-SHA-256 (RFC 2104) of `message` under a 32-byte `key`.
fn hmac_sha256(key: &[u8; 32], message: &[u8]) -> [u8; 32] {
    let mut inner_pad = [0x36u8; 64];
    let mut outer_pad = [0x5cu8; 64];
    for (i, byte) in key.iter().enumerate() {
        inner_pad[i] ^= byte;
        outer_pad[i] ^= byte;
    }
    let inner = Sha256::new()
        .chain_update(inner_pad)
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(outer_pad)
        .chain_update(inner)
        .finalize()
        .into()
}

/// Equality of two byte strings in time that depends only on their length.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn() -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);
             INSERT INTO meta VALUES ('imported_at', '2026-01-01T00:00:00Z');",
        )
        .unwrap();
        conn
    }

    #[test]
    fn pages_cut_long_lists() {
        let page = Page {
            offset: 0,
            limit: 2,
        };
        assert!(continues(page, 3));
        assert!(!continues(page, 2));
        assert_eq!(page_of(page, vec![1, 2, 3]), [1, 2]);
        let next = Page {
            offset: 2,
            limit: 2,
        };
        assert_eq!(page_of(next, vec![1, 2, 3]), [3]);
        assert!(!continues(next, 3));
    }

    #[test]
    fn round_trip() {
        let conn = conn();
        let cursor = Cursor::new(&conn, "search", "valid\"ate*", Some(2), 40).unwrap();
        let decoded = Cursor::decode(&conn, &cursor.encode(), "search").unwrap();
        assert_eq!(decoded, cursor);
    }

    #[test]
    fn refuses_foreign_and_tampered_cursors() {
        let conn = conn();
        let token = Cursor::new(&conn, "callers", "f", Some(1), 20)
            .unwrap()
            .encode();
        assert!(Cursor::decode(&conn, &token, "callees").is_err());
        for bad in ["", "zz", "abc", "not a cursor at all", &token[2..]] {
            assert!(Cursor::decode(&conn, bad, "callers").is_err(), "{bad}");
        }
        let mut tampered = token.clone().into_bytes();
        tampered[4] = if tampered[4] == b'0' { b'1' } else { b'0' };
        let tampered = String::from_utf8(tampered).unwrap();
        assert!(Cursor::decode(&conn, &tampered, "callers").is_err());
    }

    #[test]
    fn refuses_cursors_of_another_import() {
        let conn = conn();
        let token = Cursor::new(&conn, "search", "x", None, 20)
            .unwrap()
            .encode();
        conn.execute("UPDATE meta SET value = 'later'", []).unwrap();
        let err = Cursor::decode(&conn, &token, "search").unwrap_err();
        assert!(err.to_string().contains("re-imported"));
    }

    #[test]
    fn cursors_are_bound_to_the_database_secret() {
        let conn = conn();
        conn.execute(
            "INSERT INTO meta VALUES (?1, ?2)",
            [
                CURSOR_SECRET_KEY,
                crate::db::new_secret(&conn).unwrap().as_str(),
            ],
        )
        .unwrap();
        let token = Cursor::new(&conn, "callers", "f", Some(1), 20)
            .unwrap()
            .encode();
        assert!(Cursor::decode(&conn, &token, "callers").is_ok());
        // Anyone can re-encode the payload; without the secret the tag cannot follow.
        let payload_end = token.len() - 2 * TAG_BYTES;
        let payload = crate::hex::decode(&token[..payload_end]).unwrap();
        let forged = String::from_utf8(payload)
            .unwrap()
            .replace("\"d\":1", "\"d\":1000");
        let forged_token = format!(
            "{}{}",
            crate::hex::encode(forged.as_bytes()),
            &token[payload_end..]
        );
        assert!(Cursor::decode(&conn, &forged_token, "callers").is_err());
        conn.execute(
            "UPDATE meta SET value = ?2 WHERE key = ?1",
            [
                CURSOR_SECRET_KEY,
                crate::db::new_secret(&conn).unwrap().as_str(),
            ],
        )
        .unwrap();
        assert!(Cursor::decode(&conn, &token, "callers").is_err());
    }

    #[test]
    fn fields_beyond_the_argument_limits_are_refused_even_when_signed() {
        let conn = conn();
        for (depth, offset) in [
            (Some(0), 0),
            (Some(MAX_DEPTH + 1), 0),
            (Some(1000), 0),
            (None, u64::MAX),
            (None, 1 << 63),
        ] {
            let token = Cursor::new(&conn, "callers", "f", depth, offset)
                .unwrap()
                .encode();
            assert!(
                Cursor::decode(&conn, &token, "callers").is_err(),
                "{depth:?} {offset}"
            );
        }
    }

    mod fuzz {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

            /// No string decodes unless this database issued it, and none panics the decoder.
            #[test]
            fn arbitrary_tokens_are_refused(token in "[0-9a-f]{0,200}|\\PC{0,80}") {
                let conn = conn();
                prop_assert!(Cursor::decode(&conn, &token, "callers").is_err());
            }

            /// Changing any digit of a real cursor makes it invalid.
            #[test]
            fn edited_tokens_are_refused(at in any::<prop::sample::Index>(), digit in 0u8..16) {
                let conn = conn();
                let token = Cursor::new(&conn, "callers", "src/a.ts:f", Some(3), 200).unwrap().encode();
                let mut bytes = token.clone().into_bytes();
                let at = at.index(bytes.len());
                bytes[at] = b"0123456789abcdef"[usize::from(digit)];
                let edited = String::from_utf8(bytes).unwrap();
                prop_assume!(edited != token);
                prop_assert!(Cursor::decode(&conn, &edited, "callers").is_err());
            }
        }
    }
}
