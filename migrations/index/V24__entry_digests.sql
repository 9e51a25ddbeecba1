-- acpdb index schema: the digests of file and symbol entries in row id order. A delta import
-- reads every stored digest before it reads the cache; from these indexes it reads a tenth of
-- the bytes of the tables' rows, and a changed entry's digest stays on the index page its row
-- id is on. (Call-graph list rows are barely larger than such an index entry and have none.)
CREATE INDEX files_digest ON files(id, digest);
CREATE INDEX symbols_digest ON symbols(id, digest);
