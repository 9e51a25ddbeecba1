-- acpdb index schema: where names end, in their trigram indexes. A glob that ends with literal
-- text (`*init`) matches names that end with it, but the trigrams of `init` select every name
-- holding it anywhere (at 1M symbols, 30,890 candidates read for 466 matches). So each trigram
-- index of names gets a second column: the last two characters of the text, as `substr(text,
-- -2)` reads them, and U+001F. That is one more trigram per row (`it` and U+001F for `init`),
-- held only by texts that end with those two characters, so a search adds it to its `MATCH`
-- and reads the names that end as the glob does. The first column and its `LIKE` are as before.
-- Like V16 and V18, the importer builds these tables in a separate file on a second thread and
-- copies their shadow tables in once this migration has created them here; src/import/fts.rs
-- computes the same texts (`crate::db::trigram_text_end`), and the import and delta tests check
-- the indexes against these views with FTS5's `integrity-check`.
DROP TABLE symbols_name_trigram;
DROP TABLE symbols_qname_trigram;
DROP VIEW symbols_qname_terms;

-- What `symbols_name_trigram` indexes for each symbol: its simple name and how the name ends.
CREATE VIEW symbols_name_terms AS
SELECT id, name, substr(name, -2) || char(31) AS name_end
FROM symbols;

-- Substring candidates among simple names (V16), and names ending with a text.
CREATE VIRTUAL TABLE symbols_name_trigram USING fts5(
    name, name_end,
    content = 'symbols_name_terms', content_rowid = 'id',
    tokenize = 'trigram case_sensitive 0',
    detail = none, columnsize = 0
);

-- What `symbols_qname_trigram` indexes (V18's terms), and how a qualified name not of the
-- `path:name` shape ends (one of that shape ends as its simple name, which the index above
-- holds).
CREATE VIEW symbols_qname_terms AS
SELECT id,
       CASE WHEN qualified_name = file_path || ':' || name
            THEN substr(file_path, -2) || ':' || substr(name, 1, 2)
            ELSE qualified_name END AS terms,
       CASE WHEN qualified_name = file_path || ':' || name
            THEN NULL
            ELSE substr(qualified_name, -2) || char(31) END AS terms_end
FROM symbols;

-- Substring candidates among qualified names (V18), and those of other shapes ending with a text.
CREATE VIRTUAL TABLE symbols_qname_trigram USING fts5(
    terms, terms_end,
    content = 'symbols_qname_terms', content_rowid = 'id',
    tokenize = 'trigram case_sensitive 0',
    detail = none, columnsize = 0
);
