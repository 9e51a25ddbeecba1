-- Overview figures, computed once after the load (the importer applies this migration after
-- V2, on the complete data), so that the overview tools (architecture, stats, primer, explore)
-- read a few rows instead of scanning files, symbols and constraints on every call. The
-- database is rebuilt, never updated in place, so these figures cannot drift from the tables.

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
INSERT INTO index_summary
SELECT 1,
    (SELECT count(*) FROM files),
    (SELECT count(*) FROM symbols),
    (SELECT coalesce(sum(lines), 0) FROM files),
    (SELECT count(*) FROM domains),
    (SELECT count(DISTINCT layer) FROM files WHERE layer IS NOT NULL),
    (SELECT count(*) FROM call_edges),
    (SELECT count(*) FROM files WHERE
        path_field LIKE '%main.rs' OR path_field LIKE '%main.ts' OR path_field LIKE '%main.py'
        OR path_field LIKE '%index.ts' OR path_field LIKE '%index.js' OR path_field LIKE '%app.ts'
        OR path_field LIKE '%app.py' OR path_field LIKE '%mod.rs'
        OR (path_field LIKE '%/src/%' AND path_field LIKE '%.rs'));

-- Files per language (the cache's language id, e.g. 'typescript').
CREATE TABLE file_languages (
    language TEXT PRIMARY KEY,
    files    INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO file_languages
SELECT language, count(*) FROM files WHERE language IS NOT NULL GROUP BY language;

-- Files per strictest lock level: for each file, the most restrictive `lock_level` among the
-- constraints on its path ('normal' when it has none; levels outside the spec's list count as
-- 'normal'). `rank` orders the levels from frozen (0) to experimental (7).
CREATE TABLE file_lock_levels (
    rank       INTEGER PRIMARY KEY,
    lock_level TEXT NOT NULL,
    files      INTEGER NOT NULL
);
WITH per_file(rank) AS (
    SELECT coalesce((SELECT min(CASE c.lock_level
                                    WHEN 'frozen' THEN 0 WHEN 'restricted' THEN 1
                                    WHEN 'approval-required' THEN 2 WHEN 'tests-required' THEN 3
                                    WHEN 'docs-required' THEN 4 WHEN 'review-required' THEN 5
                                    WHEN 'experimental' THEN 7 ELSE 6 END)
                     FROM constraints c WHERE c.path = f.path), 6)
    FROM files f)
INSERT INTO file_lock_levels
SELECT rank,
       CASE rank WHEN 0 THEN 'frozen' WHEN 1 THEN 'restricted' WHEN 2 THEN 'approval-required'
                 WHEN 3 THEN 'tests-required' WHEN 4 THEN 'docs-required'
                 WHEN 5 THEN 'review-required' WHEN 6 THEN 'normal' ELSE 'experimental' END,
       count(*)
FROM per_file GROUP BY rank;

-- `constraints.by_file` entries per acp-cli `mutation.level` as written (NULL: entries without a
-- `mutation` object; 'normal' when the object has no level).
CREATE TABLE constraint_mutation_levels (
    level   TEXT,
    entries INTEGER NOT NULL
);
INSERT INTO constraint_mutation_levels
SELECT CASE WHEN json_type(raw_json, '$.mutation') = 'object'
            THEN CAST(coalesce(json_extract(raw_json, '$.mutation.level'), 'normal') AS TEXT) END,
       count(*)
FROM constraints GROUP BY 1;

-- Lengths of each domain's files and symbols lists.
ALTER TABLE domains ADD COLUMN file_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE domains ADD COLUMN symbol_count INTEGER NOT NULL DEFAULT 0;
UPDATE domains SET file_count = coalesce(json_array_length(files_json), 0),
                   symbol_count = coalesce(json_array_length(symbols_json), 0);

-- Most-imported files first (explore's key files).
CREATE INDEX files_imported_by_count
    ON files(coalesce(json_array_length(imported_by_json), 0) DESC, key);

-- Case-insensitive name ranges for globs with a literal prefix (`validate*`, `src/auth/*`).
CREATE INDEX symbols_lower_name ON symbols(lower(name));
CREATE INDEX symbols_lower_qualified_name ON symbols(lower(coalesce(qualified_name, key)));

-- The project view reads its counts from the summary.
DROP VIEW project;
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
