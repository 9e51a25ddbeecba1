-- acpdb index schema, part 6 of 6: substring search over qualified names. Most qualified names
-- are their symbol's file path, a colon and its simple name (`src/auth/session.ts:validate`,
-- the shape acp-cli writes): such a name contains a text when its path does, when its simple
-- name does (`symbols_name_trigram`, V16), or when the text spans the colon. So the index of
-- qualified names holds, for those, only the characters around the colon, and the paths are
-- indexed once each instead of once per symbol; every other qualified name is indexed whole.
-- Like V16 and V17, the importer builds `symbols_qname_trigram` in a separate file on a second
-- thread and copies it in once this migration has created it here; `symbol_files` and its index
-- are filled after that (src/import/fts.rs).

-- What `symbols_qname_trigram` indexes for each symbol: the two characters before the colon, the
-- colon and the two after it when the qualified name is `file_path || ':' || name`, else the
-- qualified name. (src/import/fts.rs computes the same text while importing, and the import
-- tests check the index against this view.)
CREATE VIEW symbols_qname_terms AS
SELECT id,
       CASE WHEN qualified_name = file_path || ':' || name
            THEN substr(file_path, -2) || ':' || substr(name, 1, 2)
            ELSE qualified_name END AS terms
FROM symbols;

-- Substring candidates among qualified names (checked against the row like those of V16).
CREATE VIRTUAL TABLE symbols_qname_trigram USING fts5(
    terms,
    content = 'symbols_qname_terms', content_rowid = 'id',
    tokenize = 'trigram case_sensitive 0',
    detail = none, columnsize = 0
);

-- The distinct file paths of symbols (`symbols.file_path`), each once.
CREATE TABLE symbol_files (
    id   INTEGER PRIMARY KEY,
    path TEXT NOT NULL UNIQUE
);

-- Substring candidates among the symbols' file paths: with `symbols_file_path` (V14), the symbols
-- whose qualified name contains a text in its path part.
CREATE VIRTUAL TABLE symbol_files_trigram USING fts5(
    path,
    content = 'symbol_files', content_rowid = 'id',
    tokenize = 'trigram case_sensitive 0',
    detail = none, columnsize = 0
);
