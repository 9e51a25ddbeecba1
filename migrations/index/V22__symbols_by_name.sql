-- acpdb index schema: symbols by simple name, then qualified name. The candidates of an
-- ambiguous name and the symbols behind a suggestion are listed by qualified name; with the
-- simple name alone in the index, listing the first five read every symbol of that name
-- (3,680 for `main` in a million-symbol cache) and sorted them. The index still serves the
-- case-insensitive lookups and prefix ranges V14's did.
DROP INDEX symbols_name;
CREATE INDEX symbols_name ON symbols(name COLLATE NOCASE, qualified_name);
