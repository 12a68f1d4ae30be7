-- One GIN index over text and groups (006) answers every condition the two single-column ones from
-- 001 did: a multi-column GIN keeps each column's keys apart, so a scan for lexemes alone, or for
-- groups alone, reads the same posting lists as the single-column index would. Keeping them cost a
-- second copy of every chunk's lexemes (305 MB at 1M chunks, as large as the combined index) and
-- twice the GIN work on every insert and every ACL change (a new row version re-enters all of its
-- lexemes in each GIN index).
DROP INDEX IF EXISTS chunks_tsv_gin;
DROP INDEX IF EXISTS chunks_acl_gin;
