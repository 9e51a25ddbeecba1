-- The symbols' full-text indexes (external content: rows are read from `symbols` by rowid).
-- Part of the index schema (docs/schema.md); the importer creates them in a separate file,
-- fills them on a second thread while the entries load, and copies their shadow tables into the
-- index database after migration V9.

-- Word and prefix search (`validate`, `validate*`) over symbols.
CREATE VIRTUAL TABLE symbols_fts USING fts5(
    name, qualified_name, signature, purpose, summary,
    content = 'symbols', content_rowid = 'id',
    tokenize = "unicode61 remove_diacritics 2 tokenchars '_'"
);

-- Substring search (`essionVal`) over symbol names. Its hits are ranked by name length, never
-- by bm25, so it keeps no per-row token counts (`columnsize = 0`: no `_docsize` table).
CREATE VIRTUAL TABLE symbols_trigram USING fts5(
    name, qualified_name,
    content = 'symbols', content_rowid = 'id',
    tokenize = 'trigram case_sensitive 0',
    columnsize = 0
);
