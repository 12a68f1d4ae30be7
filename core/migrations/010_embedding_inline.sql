-- Keep each chunk's vector inline. pgvector's `vector` type defaults to EXTERNAL storage, so the
-- 1.5 KB of a 384-d vector lived out of line in TOAST, and every distance computed from the heap
-- (the exact scan for small readers, the score of each HNSW candidate) paid a TOAST index lookup
-- plus chunk reads. Vectors barely compress, so MAIN stores them inline as they are; the text
-- column is what moves out of line when a row is too wide. Rows written before this migration
-- keep their layout until rewritten (re-ingest, or `VACUUM FULL chunks` in a maintenance window).
ALTER TABLE chunks ALTER COLUMN embedding SET STORAGE MAIN;
