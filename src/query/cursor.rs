//! Opaque pagination cursors.
//!
//! A cursor is the hex encoding of a small JSON object — the list it belongs to (query kind),
//! the query's key (pattern or name), the walk depth, the offset of the next page and a stamp
//! of the import it was issued for — followed by a 64-bit checksum. Lists are ordered totally
//! (ties broken by row id), so offsets walk them without gaps or duplicates. A cursor from
//! another list, another import, or any string that was not issued here is refused with
//! invalid params.

use rusqlite::{Connection, OptionalExtension};
use serde::{Deserialize, Serialize};

use super::{QueryError, QueryResult};

/// Format version written into every cursor.
const VERSION: u32 = 1;

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
    /// Checksum of the import the cursor was issued for.
    #[serde(rename = "s")]
    stamp: String,
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
        Ok(Cursor {
            version: VERSION,
            kind: kind.to_string(),
            query: query.to_string(),
            depth,
            offset,
            stamp: import_stamp(conn)?,
        })
    }

    /// The opaque text handed to the agent.
    pub fn encode(&self) -> String {
        let payload = serde_json::to_vec(self).unwrap_or_default();
        let mut out = String::with_capacity(payload.len() * 2 + 16);
        for byte in &payload {
            out.push_str(&format!("{byte:02x}"));
        }
        out.push_str(&format!("{:016x}", fnv1a(&payload)));
        out
    }

    /// Decodes a cursor received for a list of kind `kind`; refuses foreign, corrupted or stale
    /// cursors.
    pub fn decode(conn: &Connection, token: &str, kind: &str) -> QueryResult<Cursor> {
        let invalid = || {
            QueryError::invalid_with(
                "Invalid cursor: pass back the next_cursor value of a previous response unchanged, or omit cursor to start from the first page",
                serde_json::json!({"field": "cursor"}),
            )
        };
        let token = token.trim();
        if token.len() > MAX_CURSOR_LEN || token.len() < 18 || token.len() % 2 != 0 {
            return Err(invalid());
        }
        let bytes = hex_decode(token).ok_or_else(invalid)?;
        let (payload, sum) = bytes.split_at(bytes.len() - 8);
        let expected = u64::from_be_bytes(sum.try_into().map_err(|_| invalid())?);
        if fnv1a(payload) != expected {
            return Err(invalid());
        }
        let cursor: Cursor = serde_json::from_slice(payload).map_err(|_| invalid())?;
        if cursor.version != VERSION {
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
        if cursor.stamp != import_stamp(conn)? {
            return Err(QueryError::invalid_with(
                "Invalid cursor: the index was re-imported since it was issued; repeat the query without cursor",
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

/// A short checksum identifying the current import (empty when the database has no import
/// bookkeeping).
pub fn import_stamp(conn: &Connection) -> QueryResult<String> {
    let imported: Option<String> = conn
        .prepare_cached(
            "SELECT group_concat(value, '|') FROM meta WHERE key IN ('imported_at', 'source_sha256')",
        )?
        .query_row([], |r| r.get(0))
        .optional()?
        .flatten();
    Ok(match imported {
        Some(text) => format!("{:08x}", fnv1a(text.as_bytes()) as u32),
        None => String::new(),
    })
}

fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

fn hex_decode(text: &str) -> Option<Vec<u8>> {
    let digits = text.as_bytes();
    let mut out = Vec::with_capacity(digits.len() / 2);
    for pair in digits.chunks(2) {
        let high = (pair[0] as char).to_digit(16)?;
        let low = (pair[1] as char).to_digit(16)?;
        out.push((high * 16 + low) as u8);
    }
    Some(out)
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
}
