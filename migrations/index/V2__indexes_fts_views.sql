-- Secondary indexes, full-text indexes and views. The importer applies this migration after
-- the bulk load, so indexes are built once over sorted data instead of row by row.

CREATE UNIQUE INDEX files_key ON files(key);
CREATE UNIQUE INDEX symbols_key ON symbols(key);
CREATE UNIQUE INDEX source_files_key ON source_files(key);
CREATE UNIQUE INDEX graph_lists_key ON graph_lists(direction, key);
CREATE INDEX files_path ON files(path);
CREATE INDEX source_files_path ON source_files(path);
CREATE INDEX symbols_qualified_name ON symbols(qualified_name);
CREATE INDEX symbols_name ON symbols(name);
CREATE INDEX symbols_file_path ON symbols(file_path, line_start);
CREATE UNIQUE INDEX graph_nodes_name ON graph_nodes(name);
CREATE INDEX graph_nodes_symbol ON graph_nodes(symbol_id);
CREATE INDEX graph_nodes_reverse_len ON graph_nodes(reverse_len DESC, name);
CREATE INDEX call_edges_callee ON call_edges(callee_id, caller_id);
CREATE INDEX domain_files_path ON domain_files(path);
CREATE INDEX constraints_path ON constraints(path);
CREATE INDEX constraints_lock_level ON constraints(lock_level);
CREATE INDEX inline_annotations_file ON inline_annotations(file_id, ord);
CREATE INDEX cache_hacks_path ON cache_hacks(path);

-- Word and prefix search (`validate`, `validate*`) over symbols.
CREATE VIRTUAL TABLE symbols_fts USING fts5(
    name, qualified_name, signature, purpose, summary,
    content = 'symbols', content_rowid = 'id',
    tokenize = "unicode61 remove_diacritics 2 tokenchars '_'"
);
INSERT INTO symbols_fts(symbols_fts) VALUES ('rebuild');

-- Substring search (`essionVal`) over symbol names.
CREATE VIRTUAL TABLE symbols_trigram USING fts5(
    name, qualified_name,
    content = 'symbols', content_rowid = 'id',
    tokenize = 'trigram case_sensitive 0'
);
INSERT INTO symbols_trigram(symbols_trigram) VALUES ('rebuild');

-- Word search over files.
CREATE VIRTUAL TABLE files_fts USING fts5(
    path, module, summary, purpose,
    content = 'files', content_rowid = 'id',
    tokenize = "unicode61 remove_diacritics 2 tokenchars '_'"
);
INSERT INTO files_fts(files_fts) VALUES ('rebuild');

-- Substring search over file paths.
CREATE VIRTUAL TABLE files_trigram USING fts5(
    path,
    content = 'files', content_rowid = 'id',
    tokenize = 'trigram case_sensitive 0'
);
INSERT INTO files_trigram(files_trigram) VALUES ('rebuild');

-- Project metadata as one row.
CREATE VIEW project AS
SELECT
    json_extract((SELECT value_json FROM cache_root WHERE key = 'project'), '$.name')        AS name,
    json_extract((SELECT value_json FROM cache_root WHERE key = 'project'), '$.root')        AS root,
    json_extract((SELECT value_json FROM cache_root WHERE key = 'project'), '$.description') AS description,
    json_extract((SELECT value_json FROM cache_root WHERE key = 'version'), '$')             AS cache_version,
    json_extract((SELECT value_json FROM cache_root WHERE key = 'generated_at'), '$')        AS generated_at,
    json_extract((SELECT value_json FROM cache_root WHERE key = 'git_commit'), '$')          AS git_commit,
    (SELECT value FROM meta WHERE key = 'imported_at')                                      AS imported_at,
    (SELECT count(*) FROM files)                                                            AS files,
    (SELECT count(*) FROM symbols)                                                          AS symbols,
    (SELECT count(*) FROM call_edges)                                                       AS call_edges;

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
    coalesce((SELECT c.lock_level FROM constraints c WHERE c.path = f.path LIMIT 1), 'normal') AS lock_level,
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
