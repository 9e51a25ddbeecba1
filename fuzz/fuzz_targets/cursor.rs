//! The cursor decoder on arbitrary text: nothing decodes that this database did not issue.
#![no_main]

use acpdb::query::cursor::Cursor;
use libfuzzer_sys::fuzz_target;
use rusqlite::Connection;

fuzz_target!(|data: &[u8]| {
    let Ok(token) = std::str::from_utf8(data) else {
        return;
    };
    let conn = Connection::open_in_memory().unwrap();
    conn.execute_batch(
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);
         INSERT INTO meta VALUES ('imported_at', '2026-01-01T00:00:00Z'),
                                 ('cursor_secret', '00112233445566778899aabbccddeeff');",
    )
    .unwrap();
    for kind in ["search", "callers", "resource"] {
        assert!(Cursor::decode(&conn, token, kind).is_err());
    }
});
