-- acpdb index schema, part 2 of 6: secondary indexes, summaries and views.
-- The summary tables are filled by src/import/summaries.sql, which every import (full or delta)
-- runs after this migration.
-- The importer applies this after the bulk load, so indexes are built once over sorted data
-- instead of row by row. docs/schema.md lists every index with the queries it serves; an index
-- no query reads is not built (the unique ones also state that a key is unique).
CREATE UNIQUE INDEX files_key ON files(key);
CREATE UNIQUE INDEX symbols_key ON symbols(key);
CREATE UNIQUE INDEX source_files_key ON source_files(key);
CREATE UNIQUE INDEX graph_lists_node ON graph_lists(node_id, reverse);
CREATE INDEX files_path ON files(path);
-- Case-insensitive, so that one index serves exact lookups (`name = ?1 COLLATE NOCASE AND
-- name = ?1`) and the case-insensitive prefix ranges of globs (`validate*`, `src/auth/*`) and
-- of names a few typos away.
CREATE INDEX symbols_qualified_name ON symbols(coalesce(qualified_name, key) COLLATE NOCASE);
CREATE INDEX symbols_name ON symbols(name COLLATE NOCASE);
CREATE INDEX symbols_file_path ON symbols(file_path, line_start);
CREATE UNIQUE INDEX graph_nodes_name ON graph_nodes(name);
CREATE INDEX call_edges_callee ON call_edges(callee_id, caller_id);
CREATE INDEX domain_files_path ON domain_files(path);
CREATE INDEX constraints_path ON constraints(path);

-- Most-imported files first (explore's key files).
CREATE INDEX files_imported_by_count
    ON files(coalesce(json_array_length(imported_by_json), 0) DESC, key);

-- The full-text indexes are V16 (symbols), V17 (files) and V18 (qualified names): the importer
-- builds them on a second thread (src/import/fts.rs).

-- One row of entry counts.
CREATE TABLE index_summary (
    id                INTEGER PRIMARY KEY CHECK (id = 1),
    files             INTEGER NOT NULL,   -- rows of files
    symbols           INTEGER NOT NULL,   -- rows of symbols
    lines             INTEGER NOT NULL,   -- sum of files.lines
    domains           INTEGER NOT NULL,   -- rows of domains
    layers            INTEGER NOT NULL,   -- distinct non-null files.layer
    call_edges        INTEGER NOT NULL,   -- rows of call_edges
    entry_point_files INTEGER NOT NULL    -- files whose own path looks like an entry point
                                          -- (main.rs, main.ts, main.py, index.ts, index.js,
                                          -- app.ts, app.py, mod.rs, or a .rs file under src/)
);

-- The longest `graph.reverse` lists, longest first, ties by name: the candidates of
-- acp_get_hotpaths (as many rows as its HOTPATH_SLOTS, src/query/hotpaths.rs).
CREATE TABLE hot_nodes (
    rank        INTEGER PRIMARY KEY,  -- 1 for the longest list
    name        TEXT NOT NULL,        -- graph_nodes.name
    reverse_len INTEGER NOT NULL      -- graph_nodes.reverse_len, > 0
);

-- Files per language (the cache's language id, e.g. 'typescript').
CREATE TABLE file_languages (
    language TEXT PRIMARY KEY,
    files    INTEGER NOT NULL
) WITHOUT ROWID;

-- The spec's lock levels from most (0) to least (7) restrictive; a level outside this list
-- counts as 'normal'. The one ranking both `file_lock_levels` and `file_overview` use.
CREATE TABLE lock_levels (
    rank       INTEGER PRIMARY KEY,
    lock_level TEXT NOT NULL UNIQUE
);
INSERT INTO lock_levels VALUES (0, 'frozen'), (1, 'restricted'), (2, 'approval-required'),
    (3, 'tests-required'), (4, 'docs-required'), (5, 'review-required'), (6, 'normal'),
    (7, 'experimental');

-- Files per strictest lock level: for each file, the most restrictive `lock_level` among the
-- constraints on its path ('normal' when it has none; levels outside the spec's list count as
-- 'normal'). `rank` orders the levels from frozen (0) to experimental (7).
CREATE TABLE file_lock_levels (
    rank       INTEGER PRIMARY KEY REFERENCES lock_levels(rank),
    lock_level TEXT NOT NULL,
    files      INTEGER NOT NULL
);

-- `constraints.by_file` entries per acp-cli `mutation.level` as written (NULL: entries without a
-- `mutation` object; 'normal' when the object has no level).
CREATE TABLE constraint_mutation_levels (
    level   TEXT,
    entries INTEGER NOT NULL
);


-- Project metadata as one row (counts from the summary).
CREATE VIEW project AS
SELECT
    json_extract((SELECT value_json FROM cache_root WHERE key = 'project'), '$.name')        AS name,
    json_extract((SELECT value_json FROM cache_root WHERE key = 'project'), '$.root')        AS root,
    json_extract((SELECT value_json FROM cache_root WHERE key = 'project'), '$.description') AS description,
    json_extract((SELECT value_json FROM cache_root WHERE key = 'version'), '$')             AS cache_version,
    json_extract((SELECT value_json FROM cache_root WHERE key = 'generated_at'), '$')        AS generated_at,
    json_extract((SELECT value_json FROM cache_root WHERE key = 'git_commit'), '$')          AS git_commit,
    (SELECT value FROM meta WHERE key = 'imported_at')                                      AS imported_at,
    s.files, s.symbols, s.call_edges
FROM index_summary s;

-- Symbols with their file and call-graph degree.
CREATE VIEW symbol_overview AS
SELECT
    s.id, s.key, s.name, s.qualified_name, s.type, s.file_path, s.line_start, s.line_end,
    s.exported, s.visibility, s.signature, coalesce(s.purpose, s.summary) AS description,
    coalesce((SELECT sum(n.callers) FROM graph_nodes n WHERE n.symbol_id = s.id), 0) AS callers,
    coalesce((SELECT sum(n.callees) FROM graph_nodes n WHERE n.symbol_id = s.id), 0) AS callees
FROM symbols s;

-- Files with their lock level, domains and symbol count.
CREATE VIEW file_overview AS
SELECT
    f.id, f.key, f.path, f.language, f.lines, f.module, coalesce(f.purpose, f.summary) AS description,
    f.layer, f.owner,
    (SELECT l.lock_level FROM lock_levels l
     WHERE l.rank = coalesce((SELECT min(coalesce(r.rank, 6)) FROM constraints c
                              LEFT JOIN lock_levels r ON r.lock_level = c.lock_level
                              WHERE c.path = f.path), 6)) AS lock_level,
    (SELECT group_concat(domain, ', ') FROM (SELECT DISTINCT d.domain FROM domain_files d WHERE d.path = f.path ORDER BY d.domain)) AS domains,
    (SELECT count(*) FROM symbols s WHERE s.file_path = f.path) AS symbols
FROM files f;

-- The call graph with endpoint names and resolved qualified names.
CREATE VIEW call_graph AS
SELECT
    a.name AS caller, b.name AS callee,
    sa.qualified_name AS caller_qualified_name, sb.qualified_name AS callee_qualified_name,
    e.count
FROM call_edges e
JOIN graph_nodes a ON a.id = e.caller_id
JOIN graph_nodes b ON b.id = e.callee_id
LEFT JOIN symbols sa ON sa.id = a.symbol_id
LEFT JOIN symbols sb ON sb.id = b.symbol_id;
