-- The debug/hack journal (RFC-0013 `acp_debug` and `acp_hack`). It lives in its own database
-- file (`.acp/acp.journal.db`) that index imports never touch. Timestamps are RFC 3339 UTC
-- strings with whole seconds (`2025-12-27T10:30:00Z`), dates are `YYYY-MM-DD`.

-- Journal-wide settings and bookkeeping of the attempts file: `version`, `schema`, `root_extra`
-- and `updated_at` of the exported document, and `attempts_md5` / `attempts_len` of the file
-- content last imported or written (to notice when someone else rewrote it).
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) STRICT;

-- Debug sessions. `id` = `debug-<day>-<day_seq as 3+ digits>`; rowid order = creation order.
CREATE TABLE sessions (
    id          TEXT PRIMARY KEY,
    day         TEXT NOT NULL,
    day_seq     INTEGER NOT NULL,
    status      TEXT NOT NULL CHECK (status IN ('active', 'resolved')),
    problem     TEXT NOT NULL,
    hypothesis  TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    resolution  TEXT,
    resolved_at TEXT,
    UNIQUE (day, day_seq)
) STRICT;

CREATE INDEX sessions_by_status ON sessions (status);

-- Attempts logged in a session. `id` = `attempt-<seq as 3+ digits>`, numbered per session.
CREATE TABLE attempts (
    session_id  TEXT NOT NULL REFERENCES sessions (id),
    seq         INTEGER NOT NULL,
    id          TEXT NOT NULL,
    description TEXT NOT NULL,
    status      TEXT NOT NULL CHECK (status IN ('pending', 'succeeded', 'failed', 'reverted')),
    success     INTEGER CHECK (success IN (0, 1)),
    notes       TEXT,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    result_at   TEXT,
    reverted_at TEXT,
    PRIMARY KEY (session_id, id),
    UNIQUE (session_id, seq)
) STRICT;

-- Files named by an attempt (canonical root-relative paths), with MD5 hashes of their content
-- when the attempt was logged and at its latest result/revert, and a snapshot of small files.
CREATE TABLE attempt_files (
    session_id       TEXT NOT NULL,
    attempt_id       TEXT NOT NULL,
    ord              INTEGER NOT NULL,
    path             TEXT NOT NULL,
    original_hash    TEXT NOT NULL,
    original_content TEXT,
    modified_hash    TEXT NOT NULL,
    PRIMARY KEY (session_id, attempt_id, ord),
    FOREIGN KEY (session_id, attempt_id) REFERENCES attempts (session_id, id)
) STRICT;

-- Hack markers set through `acp_hack mark`. `id` = `hack-<seq as 3+ digits>`; a reverted marker
-- keeps its row (so its id is never handed out again) and disappears from every listing.
CREATE TABLE hacks (
    seq         INTEGER PRIMARY KEY,
    id          TEXT NOT NULL UNIQUE,
    file        TEXT NOT NULL,
    line        INTEGER,
    reason      TEXT NOT NULL,
    ticket      TEXT,
    expires     TEXT,
    created_at  TEXT NOT NULL,
    reverted_at TEXT
) STRICT;

-- The attempts file's `history`, in order. `entry` is the exported JSON object. `origin` says
-- whether the journal produced it (`journal`) or it was found in the attempts file (`file`).
CREATE TABLE history (
    seq      INTEGER PRIMARY KEY AUTOINCREMENT,
    entry_id TEXT NOT NULL,
    origin   TEXT NOT NULL CHECK (origin IN ('journal', 'file')),
    entry    TEXT NOT NULL
) STRICT;

CREATE INDEX history_by_entry_id ON history (entry_id);

-- Records of the attempts file written by others (acp-cli, people), kept verbatim apart from
-- `null` members and re-emitted by every export.
CREATE TABLE external_attempts (
    key   TEXT PRIMARY KEY,
    entry TEXT NOT NULL
) STRICT;

CREATE TABLE external_checkpoints (
    key   TEXT PRIMARY KEY,
    entry TEXT NOT NULL
) STRICT;
