-- acpdb index schema: the word indexes of symbols and files declared the way Datasette (and
-- sqlite-utils) find a table's full-text index: the text `content="symbols"` in the table's
-- declaration, double quotes and no spaces. The trigram indexes keep `content = 'symbols'`, so
-- that they are never taken for the word index. The columns, tokenizer and options are V16's
-- and V17's: the shadow tables the importer builds in its separate file (src/import/fts.rs) fit
-- these declarations as they fit those.
DROP TABLE symbols_fts;
CREATE VIRTUAL TABLE symbols_fts USING fts5(
    name, qualified_name, signature, purpose, summary,
    content="symbols", content_rowid="id",
    tokenize = "unicode61 remove_diacritics 2 tokenchars '_'"
);

DROP TABLE files_fts;
CREATE VIRTUAL TABLE files_fts USING fts5(
    path, module, summary, purpose,
    content="files", content_rowid="id",
    tokenize = "unicode61 remove_diacritics 2 tokenchars '_'"
);
