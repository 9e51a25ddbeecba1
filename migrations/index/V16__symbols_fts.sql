-- acpdb index schema, part 4 of 6: the symbols' full-text indexes (external content: rows are
-- read from `symbols` by rowid). The importer also creates these tables in a separate file,
-- fills them on a second thread while the entries load, and copies their shadow tables into the
-- index database once this migration has created them here (src/import/fts.rs).

-- Word and prefix search (`validate`, `validate*`) over symbols.
CREATE VIRTUAL TABLE symbols_fts USING fts5(
    name, qualified_name, signature, purpose, summary,
    content = 'symbols', content_rowid = 'id',
    tokenize = "unicode61 remove_diacritics 2 tokenchars '_'"
);

-- Substring candidates (`essionVal`) among simple names. It keeps only which rows hold each
-- trigram (`detail = none`: no columns, no positions, no per-row token counts), a quarter of the
-- space of a positional index: a query is an AND of single trigrams (`"ess" AND "ssi" AND ...`,
-- or `LIKE '%essionVal%'`, which SQLite turns into the same), and its candidates are checked
-- against the row (`instr(acpdb_fold(name), acpdb_fold(?))`, a function acpdb registers on its
-- connections). Qualified names have their own index, V18.
CREATE VIRTUAL TABLE symbols_name_trigram USING fts5(
    name,
    content = 'symbols', content_rowid = 'id',
    tokenize = 'trigram case_sensitive 0',
    detail = none, columnsize = 0
);
