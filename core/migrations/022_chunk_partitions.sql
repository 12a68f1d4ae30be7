-- Partitioning `chunks` by tenant, an option (`crossroads db partition-chunks`, vector/partitions.py):
-- the default schema is unchanged; this migration only adds what the partitioned layout needs.
--
-- A partitioned table's primary key must include the partition key, so it is (tenant_id, id) there,
-- and chunk_vectors_staged's foreign key to chunks (id) cannot exist (nothing unique on id alone).
-- Its ON DELETE CASCADE is carried by this statement trigger instead, attached only to a partitioned
-- `chunks`: the staged vectors of deleted chunks go in the same statement, as with the foreign key.
CREATE FUNCTION chunks_delete_staged_vectors() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    DELETE FROM chunk_vectors_staged s USING old_rows o WHERE s.chunk_id = o.id;
    RETURN NULL;
END
$fn$;
