-- acpdb index schema, part 1 of 6: the tables the importer loads (V14 to V18 add indexes, full-text
-- search, views and summaries after the load).
-- Everything here is rebuilt by `acpdb import`, never migrated in place: a database of another
-- schema version is rebuilt from the cache. Earlier versions (V1-V5) are therefore not kept.
-- The debug/hack journal lives in its own database file (see migrations/journal) and is never
-- touched by an import.
--
-- Conventions used by every entry table:
--   * `key` is the entry's map key exactly as it appears in the cache.
--   * A modelled column holds a field's value when the field is present with the expected JSON
--     type; SQL NULL means "absent". Columns ending in `_json` hold any JSON value as text.
--   * `extra` is a JSON object with every field of the entry that no column models (unknown
--     fields, alternative spellings, values of an unexpected type), verbatim.
--   * Export = modelled columns + `extra`, so every entry round-trips losslessly.
--   * `digest` (files, symbols, graph_lists) fingerprints the entry as written in the cache: a
--     64-bit fixed-seed foldhash, as a signed integer, of the section code, the key and the
--     entry's raw JSON bytes, see src/cache/digest.rs (stable for one build of acpdb; another
--     build rebuilds the database). A delta import skips entries whose digest the database
--     holds.

-- Import bookkeeping: acpdb version, source cache path/size/mtime/sha256, import time.
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT
) WITHOUT ROWID;

-- Top-level members of the cache that are not streamed into their own tables
-- ($schema, version, generated_at, git_commit, project, stats, provenance, bridge,
-- conventions, documentation, unknown keys), as JSON text. The streamed sections
-- (source_files, files, symbols, graph, domains, constraints) appear here with
-- value_json NULL when present as objects, or with their literal JSON when not objects.
CREATE TABLE cache_root (
    key        TEXT PRIMARY KEY,
    ord        INTEGER NOT NULL,
    value_json TEXT
) WITHOUT ROWID;

-- `source_files`: path -> mtime.
CREATE TABLE source_files (
    id         INTEGER PRIMARY KEY,
    key        TEXT NOT NULL,          -- unique (index built after the load)
    path       TEXT NOT NULL,          -- canonical path
    mtime      TEXT,                   -- the value when it is a string
    value_json TEXT                    -- the value when it is not a string
);

-- `files`: one row per file entry.
CREATE TABLE files (
    id              INTEGER PRIMARY KEY,
    key             TEXT NOT NULL,         -- original map key (./x, absolute, backslashes); unique
    path            TEXT NOT NULL,         -- canonical relative path (forward slashes, no ./)
    path_field      TEXT,                  -- the entry's own `path` value
    lines           INTEGER,
    language        TEXT,
    module          TEXT,
    summary         TEXT,
    purpose         TEXT,
    owner           TEXT,
    layer           TEXT,
    stability       TEXT,
    exports_json    TEXT,
    imports_json    TEXT,
    imported_by_json TEXT,
    domains_json    TEXT,
    inline_json     TEXT,
    extra           TEXT NOT NULL DEFAULT '{}',
    digest          INTEGER NOT NULL
);

-- `symbols`: one row per symbol entry.
CREATE TABLE symbols (
    id               INTEGER PRIMARY KEY,
    key              TEXT NOT NULL,        -- original map key (simple name in acp-cli caches); unique
    name             TEXT,
    qualified_name   TEXT,
    type             TEXT,
    file             TEXT,                 -- the entry's own `file` value
    file_path        TEXT,                 -- canonical path of `file`
    line_start       INTEGER,
    line_end         INTEGER,
    exported         INTEGER,
    signature        TEXT,
    summary          TEXT,
    purpose          TEXT,
    async            INTEGER,
    visibility       TEXT,
    calls_json       TEXT,
    called_by_json   TEXT,
    constraints_json TEXT,
    extra            TEXT NOT NULL DEFAULT '{}',
    digest           INTEGER NOT NULL
);

-- `graph.forward` / `graph.reverse`, one row per list in document order. A list of strings is
-- stored as the `graph_nodes` ids of its items (LEB128 varints, in order, duplicates kept; an
-- empty blob for `[]`), from which `acpdb::db::graph_list` rebuilds it exactly; any other value
-- is kept verbatim as JSON text.
CREATE TABLE graph_lists (
    id      INTEGER PRIMARY KEY,
    node_id INTEGER NOT NULL REFERENCES graph_nodes(id),  -- the list's key
    reverse INTEGER NOT NULL CHECK (reverse IN (0, 1)),   -- 1 for graph.reverse; unique with node_id
    items   NOT NULL,                                     -- BLOB of ids, or TEXT (JSON)
    digest  INTEGER NOT NULL
);

-- Every distinct call-graph endpoint name, resolved to a symbol when possible
-- (exact key, then qualified name, then a globally unique simple name).
CREATE TABLE graph_nodes (
    id        INTEGER PRIMARY KEY,
    name      TEXT NOT NULL,          -- unique (index built after the load)
    symbol_id INTEGER REFERENCES symbols(id), -- NULL when dangling or ambiguous
    callers   INTEGER NOT NULL DEFAULT 0,  -- distinct callers
    callees   INTEGER NOT NULL DEFAULT 0,  -- distinct callees
    reverse_len INTEGER NOT NULL DEFAULT 0 -- length of graph.reverse[name], duplicates included
);

-- The call graph: union of forward, reverse and symbol calls/called_by, de-duplicated.
CREATE TABLE call_edges (
    caller_id     INTEGER NOT NULL REFERENCES graph_nodes(id),
    callee_id     INTEGER NOT NULL REFERENCES graph_nodes(id),
    count         INTEGER NOT NULL,   -- max multiplicity seen in any one source
    forward_count INTEGER NOT NULL,
    reverse_count INTEGER NOT NULL,
    PRIMARY KEY (caller_id, callee_id)
) WITHOUT ROWID;

-- `domains`.
CREATE TABLE domains (
    id           INTEGER PRIMARY KEY,
    key          TEXT NOT NULL UNIQUE,
    name         TEXT,
    description  TEXT,
    -- The counts come before the lists: a row's columns are read in order, and reading a column
    -- after a list of thousands of files walks the list's overflow pages (2.9 MB at 1M symbols
    -- for the domains of acp_get_architecture).
    file_count   INTEGER NOT NULL DEFAULT 0,  -- length of the files list (set after the load)
    symbol_count INTEGER NOT NULL DEFAULT 0,  -- length of the symbols list (set after the load)
    files_json   TEXT,
    symbols_json TEXT,
    extra        TEXT NOT NULL DEFAULT '{}'
);

-- Domain membership, derived from domains[*].files/symbols and files[*].domains.
CREATE TABLE domain_files (
    domain TEXT NOT NULL,
    path   TEXT NOT NULL,      -- canonical path
    source TEXT NOT NULL CHECK (source IN ('domain', 'file')),
    PRIMARY KEY (domain, path, source)
) WITHOUT ROWID;

CREATE TABLE domain_symbols (
    domain TEXT NOT NULL,
    symbol TEXT NOT NULL,      -- as written in domains[*].symbols
    PRIMARY KEY (domain, symbol)
) WITHOUT ROWID;

-- `constraints.by_file`: both the spec's flat shape and acp-cli's nested `mutation` shape.
CREATE TABLE constraints (
    id           INTEGER PRIMARY KEY,
    key          TEXT NOT NULL UNIQUE,
    path         TEXT NOT NULL,   -- canonical path
    lock_level   TEXT NOT NULL,   -- normalised: lock_level ?? mutation.level ?? 'normal'
    lock_reason  TEXT,            -- lock_reason ?? mutation.reason
    directive    TEXT,
    style        TEXT,            -- style (string) ?? style.guide
    behavior     TEXT,            -- behavior (string) ?? behavior.approach
    quality_json TEXT NOT NULL,   -- normalised quality list (JSON array of strings)
    raw_json     TEXT NOT NULL    -- the entry verbatim
);

-- `constraints.by_lock_level`, verbatim.
CREATE TABLE lock_level_lists (
    key        TEXT PRIMARY KEY,   -- as written (acp-cli writes e.g. 'testsrequired')
    lock_level TEXT NOT NULL,      -- normalised spelling
    items_json TEXT NOT NULL
) WITHOUT ROWID;

-- `constraints.hacks` and `constraints.debug_sessions`, verbatim, in order.
CREATE TABLE cache_hacks (
    ord        INTEGER PRIMARY KEY,
    id         TEXT,
    path       TEXT,               -- canonical path of `file`
    line       INTEGER,
    expires    TEXT,
    raw_json   TEXT NOT NULL
);

CREATE TABLE cache_debug_sessions (
    ord      INTEGER PRIMARY KEY,
    raw_json TEXT NOT NULL
);

-- Members of `constraints` other than the four known lists, and how the known ones were written
-- when they were not of the expected type.
CREATE TABLE constraints_root (
    key        TEXT PRIMARY KEY,
    ord        INTEGER NOT NULL,
    value_json TEXT
) WITHOUT ROWID;

-- Members of `graph` other than forward/reverse (and forward/reverse when not objects).
CREATE TABLE graph_root (
    key        TEXT PRIMARY KEY,
    ord        INTEGER NOT NULL,
    value_json TEXT
) WITHOUT ROWID;

-- Inline annotations, derived from files[*].inline.
CREATE TABLE inline_annotations (
    id             INTEGER PRIMARY KEY,
    file_id        INTEGER NOT NULL REFERENCES files(id),
    ord            INTEGER NOT NULL,
    line           INTEGER,
    type           TEXT,
    directive      TEXT,
    value          TEXT,
    ticket         TEXT,
    expires        TEXT,
    auto_generated INTEGER NOT NULL DEFAULT 0
);

-- Conventions (RFC-0015): file naming rules, derived from cache_root['conventions'].
CREATE TABLE conventions (
    id         INTEGER PRIMARY KEY,
    kind       TEXT NOT NULL,      -- 'file_naming' or 'imports'
    directory  TEXT,
    pattern    TEXT,
    confidence REAL,
    value_json TEXT NOT NULL
);

-- The variables file (acp.vars.json).
CREATE TABLE vars (
    name        TEXT PRIMARY KEY,
    type        TEXT,
    value       TEXT,
    description TEXT,
    refs_json   TEXT,
    source      TEXT,
    lines_json  TEXT,
    extra       TEXT NOT NULL DEFAULT '{}'
) WITHOUT ROWID;

-- Top-level members of the vars file other than `variables` ($schema, version, unknown keys).
CREATE TABLE vars_root (
    key        TEXT PRIMARY KEY,
    ord        INTEGER NOT NULL,
    value_json TEXT
) WITHOUT ROWID;

-- Warnings raised while importing (unknown enum values, dangling references, duplicates, ...).
CREATE TABLE import_warnings (
    id      INTEGER PRIMARY KEY,
    path    TEXT NOT NULL,    -- JSON path in the source document
    message TEXT NOT NULL
);
