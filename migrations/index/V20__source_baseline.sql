-- acpdb index schema: what each indexed file looked like on disk when the index was imported,
-- the baseline against which answers tell a file edited since (its size or modification time
-- differ) from one that is merely newer than the cache says (every file after a fresh clone).
-- Every import, full or delta, looks at each indexed file under the project directory once
-- (`lstat`, never followed) and writes only the rows that differ; a path that would leave the
-- project directory gets no row. A file missing on disk at import has a row of NULLs.
CREATE TABLE source_baseline (
    path TEXT PRIMARY KEY,  -- canonical path, as `files.path`
    size INTEGER,           -- bytes; NULL when the file was not on disk
    mtime_ns INTEGER        -- modification time, ns since the Unix epoch; NULL when not on disk
) WITHOUT ROWID;
