-- Keep each chunk's tsvector inline (compressed) rather than out of line in TOAST. BM25 reads the
-- tsvector of every candidate row; out of line, each read is a TOAST index lookup plus chunk reads
-- (bench-search at 100k: 3.1 buffer reads per candidate). Inline, BM25 scoring p50 went from 22.9
-- to 10.1 ms and the full-text leg from 28 to 15 ms; the heap grows by a fifth. Rows written
-- before this migration keep their layout until rewritten (re-ingest, or `VACUUM FULL chunks`
-- in a maintenance window).
ALTER TABLE chunks ALTER COLUMN tsv SET STORAGE MAIN;
