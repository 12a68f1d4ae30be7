-- Keep a chunk's small columns inline. Since `tsv` (009) and the vector (010) are MAIN, a row's
-- inline part is already past the 2 KB TOAST target, so PostgreSQL moved every EXTENDED column of
-- more than a few bytes out of line, the small ones too: on the eval tenants `acl`, `embed_model`
-- and `content_hash` were TOAST pointers in 73-100% of rows. Any check of them on the heap then
-- cost a TOAST index lookup plus a chunk read: the ACL test of every row an HNSW walk or a
-- full-text candidate scan filters, the model test of an exact vector scan. MAIN keeps them inline
-- (a few hundred bytes a row); only `content`, which search reads for the final hits alone, stays
-- EXTENDED and is the column that moves out of line. Rows written before this migration keep
-- their layout until rewritten (re-ingest, or `VACUUM FULL chunks` in a maintenance window).
ALTER TABLE chunks
    ALTER COLUMN tenant_id SET STORAGE MAIN,
    ALTER COLUMN doc_id SET STORAGE MAIN,
    ALTER COLUMN heading SET STORAGE MAIN,
    ALTER COLUMN context SET STORAGE MAIN,
    ALTER COLUMN acl SET STORAGE MAIN,
    ALTER COLUMN content_hash SET STORAGE MAIN,
    ALTER COLUMN lang SET STORAGE MAIN,
    ALTER COLUMN embed_model SET STORAGE MAIN;
