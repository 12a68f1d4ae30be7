-- BM25 statistics kept at write time. The full-text leg needs, for the rows its reader may see, the
-- number of rows (N), their mean length and each query lexeme's document frequency. Counting them
-- at query time costs a pass over the posting lists (bench-search at 1M chunks: p50 114 ms for the
-- counts alone). Rows with the same ACL array share their statistics, and a tenant has few distinct
-- ACL arrays, so per-(tenant, acl) counts summed over `acl && reader_groups` are exact for every
-- reader and never include a row the reader cannot see.
--
-- Both tables are append-only deltas written by triggers (no upsert: concurrent
-- writers to one tenant never wait on, or deadlock over, a shared counter row); readers sum them.
-- `compact_fulltext_stats(tenant)` folds a tenant's deltas into one row per key; the sync runs it
-- when enough deltas have piled up.

CREATE TABLE fulltext_acl_stats (
    tenant_id text    NOT NULL,
    acl       text[]  NOT NULL,
    chunks    bigint  NOT NULL,   -- rows added minus rows removed
    lexemes   bigint  NOT NULL,   -- sum of length(tsv) (distinct lexemes per row) over those rows
    compacted boolean NOT NULL DEFAULT false
);
CREATE INDEX fulltext_acl_stats_tenant ON fulltext_acl_stats (tenant_id);

CREATE TABLE fulltext_lexeme_stats (
    tenant_id text    NOT NULL,
    lexeme    text    NOT NULL,
    acl       text[]  NOT NULL,
    df        bigint  NOT NULL,   -- rows containing the lexeme, added minus removed
    compacted boolean NOT NULL DEFAULT false
);
CREATE INDEX fulltext_lexeme_stats_key ON fulltext_lexeme_stats (tenant_id, lexeme);
CREATE INDEX fulltext_lexeme_stats_pending ON fulltext_lexeme_stats (tenant_id) WHERE NOT compacted;

-- Rows added or removed by a statement, from its transition table. Transition tables are visible
-- only to queries run by the trigger function itself (not to a function it calls), hence the
-- dynamic query here.
CREATE FUNCTION chunks_fulltext_stats() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
    delta text := CASE TG_OP WHEN 'INSERT' THEN 'SELECT tenant_id, acl, tsv, 1 AS sign FROM new_rows'
                             ELSE 'SELECT tenant_id, acl, tsv, -1 AS sign FROM old_rows' END;
BEGIN
    EXECUTE format($q$
        WITH delta AS MATERIALIZED (%s),
        per_acl AS (
            INSERT INTO fulltext_acl_stats (tenant_id, acl, chunks, lexemes)
            SELECT tenant_id, acl, sum(sign), sum(sign * length(tsv)) FROM delta GROUP BY tenant_id, acl
            RETURNING 1
        )
        INSERT INTO fulltext_lexeme_stats (tenant_id, lexeme, acl, df)
        SELECT d.tenant_id, x.lexeme, d.acl, sum(d.sign)
          FROM delta d, unnest(tsvector_to_array(d.tsv)) AS x(lexeme)
         GROUP BY d.tenant_id, x.lexeme, d.acl
    $q$, delta);
    RETURN NULL;
END
$fn$;

CREATE TRIGGER chunks_fulltext_stats_insert AFTER INSERT ON chunks
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION chunks_fulltext_stats();
CREATE TRIGGER chunks_fulltext_stats_delete AFTER DELETE ON chunks
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION chunks_fulltext_stats();

-- Updates, row by row and only when the tenant, ACL or text changed. A statement trigger with
-- transition tables would capture every updated row whatever changed, and the one bulk UPDATE of
-- chunks (`embeddings switch` swapping vectors) would copy the whole tenant into them.
CREATE FUNCTION chunks_fulltext_stats_update() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    INSERT INTO fulltext_acl_stats (tenant_id, acl, chunks, lexemes)
    VALUES (OLD.tenant_id, OLD.acl, -1, -length(OLD.tsv)), (NEW.tenant_id, NEW.acl, 1, length(NEW.tsv));
    INSERT INTO fulltext_lexeme_stats (tenant_id, lexeme, acl, df)
    SELECT OLD.tenant_id, x, OLD.acl, -1 FROM unnest(tsvector_to_array(OLD.tsv)) AS x
    UNION ALL
    SELECT NEW.tenant_id, x, NEW.acl, 1 FROM unnest(tsvector_to_array(NEW.tsv)) AS x;
    RETURN NULL;
END
$fn$;

CREATE TRIGGER chunks_fulltext_stats_update
    AFTER UPDATE OF tenant_id, acl, lang, heading, context, content ON chunks FOR EACH ROW
    WHEN ((OLD.tenant_id, OLD.acl, OLD.tsv) IS DISTINCT FROM (NEW.tenant_id, NEW.acl, NEW.tsv))
    EXECUTE FUNCTION chunks_fulltext_stats_update();

-- TRUNCATE fires no row or statement DELETE trigger: empty the statistics with the table.
CREATE FUNCTION chunks_fulltext_stats_truncate() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    TRUNCATE fulltext_acl_stats, fulltext_lexeme_stats;
    RETURN NULL;
END
$fn$;
CREATE TRIGGER chunks_fulltext_stats_truncate AFTER TRUNCATE ON chunks
    FOR EACH STATEMENT EXECUTE FUNCTION chunks_fulltext_stats_truncate();

-- Fold a tenant's deltas into one row per key. Rows written by transactions that commit meanwhile
-- are not visible to the DELETE and stay as deltas, so nothing is lost or counted twice; two
-- concurrent compactions delete each row once.
CREATE FUNCTION compact_fulltext_stats(tenant text) RETURNS void LANGUAGE sql AS $fn$
    SELECT pg_advisory_xact_lock(hashtextextended('crossroads.fulltext_stats.' || tenant, 0));
    WITH gone AS (DELETE FROM fulltext_acl_stats WHERE tenant_id = tenant RETURNING acl, chunks, lexemes)
    INSERT INTO fulltext_acl_stats (tenant_id, acl, chunks, lexemes, compacted)
    SELECT tenant, acl, sum(chunks), sum(lexemes), true FROM gone GROUP BY acl HAVING sum(chunks) <> 0;
    WITH gone AS (DELETE FROM fulltext_lexeme_stats WHERE tenant_id = tenant RETURNING lexeme, acl, df)
    INSERT INTO fulltext_lexeme_stats (tenant_id, lexeme, acl, df, compacted)
    SELECT tenant, lexeme, acl, sum(df), true FROM gone GROUP BY lexeme, acl HAVING sum(df) <> 0;
$fn$;

-- Recompute a tenant's statistics from its chunks (`crossroads fulltext-stats --rebuild`): after a
-- restore or replication that skipped triggers. Each statement deletes and recounts under one
-- snapshot, so writes committed meanwhile keep their deltas and are counted once; the advisory
-- lock keeps a compaction (whose new rows this snapshot could not see) from running meanwhile.
CREATE FUNCTION rebuild_fulltext_stats(tenant text) RETURNS void LANGUAGE sql AS $fn$
    SELECT pg_advisory_xact_lock(hashtextextended('crossroads.fulltext_stats.' || tenant, 0));
    WITH gone AS (DELETE FROM fulltext_acl_stats WHERE tenant_id = tenant)
    INSERT INTO fulltext_acl_stats (tenant_id, acl, chunks, lexemes, compacted)
    SELECT tenant, acl, count(*), sum(length(tsv)), true FROM chunks WHERE tenant_id = tenant GROUP BY acl;
    WITH gone AS (DELETE FROM fulltext_lexeme_stats WHERE tenant_id = tenant)
    INSERT INTO fulltext_lexeme_stats (tenant_id, lexeme, acl, df, compacted)
    SELECT tenant, x.lexeme, c.acl, count(*), true
      FROM chunks c, unnest(tsvector_to_array(c.tsv)) AS x(lexeme)
     WHERE c.tenant_id = tenant GROUP BY x.lexeme, c.acl;
$fn$;

-- The chunks already stored.
SELECT rebuild_fulltext_stats(tenant_id) FROM (SELECT DISTINCT tenant_id FROM chunks) AS t;
