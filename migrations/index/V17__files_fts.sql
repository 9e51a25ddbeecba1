-- acpdb index schema, part 5 of 6: the files' full-text indexes (external content: rows are read
-- from `files` by rowid). Like the symbols' (V16), the importer also creates these tables in a
-- separate file, fills them on a second thread once the entries are loaded (while the other
-- indexes are built), and copies their shadow tables into the index database once this
-- migration has created them here (src/import/fts.rs).

-- Word search over files.
CREATE VIRTUAL TABLE files_fts USING fts5(
    path, module, summary, purpose,
    content = 'files', content_rowid = 'id',
    tokenize = "unicode61 remove_diacritics 2 tokenchars '_'"
);

-- Substring search over file paths (ranked by path length, never by bm25: no `_docsize`).
CREATE VIRTUAL TABLE files_trigram USING fts5(
    path,
    content = 'files', content_rowid = 'id',
    tokenize = 'trigram case_sensitive 0',
    columnsize = 0
);
