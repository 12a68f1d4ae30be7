-- Withdrawal of graph text whose sources a level may no longer read (invariant 2).
--
-- A level's entities, relationships and community reports are written from the chunks its groups
-- could read when it was built. A chunk deleted, moved to another tenant or narrowed to groups the
-- level lacks must take the text written from it out of service at once, not at the next
-- `crossroads graph build` (which may be hours away, or costs an LLM bill). Rows are marked rather
-- than deleted: a report is a whole that cannot be rewritten in SQL, the next build replaces them
-- anyway, and `crossroads graph status` can say how much is waiting for it. Every read that serves
-- graph text (graph/store.py) skips marked rows.

ALTER TABLE graph_entities ADD COLUMN withdrawn_at timestamptz;
ALTER TABLE graph_relationships ADD COLUMN withdrawn_at timestamptz;
-- source_chunk_ids is what the findings cite, capped per finding, so it cannot tell whether a report
-- drew on a chunk; input_chunk_ids is every chunk behind what the reporter was given.
ALTER TABLE community_reports ADD COLUMN withdrawn_at timestamptz,
    ADD COLUMN input_chunk_ids bigint[] NOT NULL DEFAULT '{}';

-- Reports written before this migration: their members' entities, the relationships among them and
-- what the findings cite. Claims live only in the extraction cache, so a claim drawn from a chunk
-- outside its entity's chunks is missed here; the next build sees that input as new and rewrites
-- the report with it.
UPDATE community_reports r SET input_chunk_ids = ARRAY(
    SELECT x FROM graph_communities c
      JOIN graph_entities e ON e.tenant_id = c.tenant_id AND e.access_level = c.access_level AND e.key = ANY (c.members)
     CROSS JOIN unnest(e.chunk_ids) AS x
     WHERE c.tenant_id = r.tenant_id AND c.access_level = r.access_level AND c.community_id = r.community_id
    UNION
    SELECT x FROM graph_communities c
      JOIN graph_relationships g ON g.tenant_id = c.tenant_id AND g.access_level = c.access_level
                                AND g.source_key = ANY (c.members) AND g.target_key = ANY (c.members)
     CROSS JOIN unnest(g.chunk_ids) AS x
     WHERE c.tenant_id = r.tenant_id AND c.access_level = r.access_level AND c.community_id = r.community_id
    UNION
    SELECT unnest(r.source_chunk_ids)
    ORDER BY 1
);

-- Chunk ids are unique across tenants, so "which rows cite these chunks" is one lookup per array.
CREATE INDEX graph_entities_chunk_ids ON graph_entities USING gin (chunk_ids);
CREATE INDEX graph_relationships_chunk_ids ON graph_relationships USING gin (chunk_ids);
CREATE INDEX community_reports_input_chunk_ids ON community_reports USING gin (input_chunk_ids);

-- The three kinds of graph text with the chunks behind each: one place to ask "is anything served
-- from these chunks" and "how much is withdrawn" (a UNION ALL view; filters reach each table's index).
CREATE VIEW graph_text AS
    SELECT 'entities' AS kind, tenant_id, access_level, chunk_ids, withdrawn_at FROM graph_entities
    UNION ALL
    SELECT 'relationships', tenant_id, access_level, chunk_ids, withdrawn_at FROM graph_relationships
    UNION ALL
    SELECT 'reports', tenant_id, access_level, input_chunk_ids, withdrawn_at FROM community_reports;

-- Whether a level may serve text drawn from a chunk with this ACL. The default level `all` (no row,
-- or groups IS NULL) stands for every group present in the tenant, which includes each group on any
-- of its chunks, so it reads every chunk that has a group at all.
CREATE FUNCTION graph_level_reads(tenant text, level_name text, chunk_acl text[]) RETURNS boolean
LANGUAGE sql STABLE AS $fn$
    SELECT coalesce(chunk_acl && (SELECT groups FROM access_levels WHERE tenant_id = tenant AND name = level_name),
                    cardinality(chunk_acl) > 0)
$fn$;

-- A build and the withdrawals of its tenant take turns. A build (exclusive) writes its rows and then
-- checks the chunks behind them before it commits; a withdrawal (shared) looks for rows citing the
-- chunks it changed. Without the turn, a chunk deleted between a build's check and its commit would
-- be missed by both: the build saw it still there, the deletion could not see the uncommitted rows.
CREATE FUNCTION lock_graph_sources(tenant text, exclusive boolean) RETURNS void LANGUAGE plpgsql AS $fn$
BEGIN
    IF exclusive THEN
        PERFORM pg_advisory_xact_lock(hashtextextended('crossroads.graph.' || tenant, 0));
    ELSE
        PERFORM pg_advisory_xact_lock_shared(hashtextextended('crossroads.graph.' || tenant, 0));
    END IF;
END
$fn$;

-- Mark the served rows of `tenant` citing any of `chunk_set`: of every level when `chunk_acl` is NULL
-- (the chunks are gone), else of the levels that cannot read `chunk_acl`; `only_level` keeps it to
-- one level. Looked for first, so that the common change (touching no served text, or an ACL
-- broadened) takes no lock. Withdrawing transactions then go one at a time per tenant: each marks
-- rows in several statements (a row trigger runs once per chunk), and two of them marking
-- overlapping rows in different orders would deadlock.
CREATE FUNCTION withdraw_graph_text(tenant text, chunk_set bigint[], chunk_acl text[] DEFAULT NULL,
                                    only_level text DEFAULT NULL) RETURNS void LANGUAGE plpgsql AS $fn$
BEGIN
    IF NOT EXISTS (
        SELECT FROM graph_text g
         WHERE g.tenant_id = tenant AND g.chunk_ids && chunk_set AND g.withdrawn_at IS NULL
           AND (only_level IS NULL OR g.access_level = only_level)
           AND (chunk_acl IS NULL OR NOT graph_level_reads(tenant, g.access_level, chunk_acl))
    ) THEN
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended('crossroads.graph.withdraw.' || tenant, 0));
    UPDATE graph_entities g SET withdrawn_at = now()
     WHERE g.tenant_id = tenant AND g.chunk_ids && chunk_set AND g.withdrawn_at IS NULL
       AND (only_level IS NULL OR g.access_level = only_level)
       AND (chunk_acl IS NULL OR NOT graph_level_reads(tenant, g.access_level, chunk_acl));
    UPDATE graph_relationships g SET withdrawn_at = now()
     WHERE g.tenant_id = tenant AND g.chunk_ids && chunk_set AND g.withdrawn_at IS NULL
       AND (only_level IS NULL OR g.access_level = only_level)
       AND (chunk_acl IS NULL OR NOT graph_level_reads(tenant, g.access_level, chunk_acl));
    UPDATE community_reports g SET withdrawn_at = now()
     WHERE g.tenant_id = tenant AND g.input_chunk_ids && chunk_set AND g.withdrawn_at IS NULL
       AND (only_level IS NULL OR g.access_level = only_level)
       AND (chunk_acl IS NULL OR NOT graph_level_reads(tenant, g.access_level, chunk_acl));
END
$fn$;

-- The chunks among `chunk_set` that a level can no longer read (gone, moved, or narrowed) withdraw
-- the level's rows citing them. A build calls it after writing rows from chunks it read minutes or
-- hours before; a change of the level's groups calls it for everything the level serves.
CREATE FUNCTION withdraw_unreadable_graph_text(tenant text, level_name text, chunk_set bigint[])
RETURNS void LANGUAGE plpgsql AS $fn$
DECLARE
    unreadable bigint[] := ARRAY(
        SELECT x FROM unnest(chunk_set) AS x
         WHERE NOT EXISTS (SELECT FROM chunks c
                            WHERE c.id = x AND c.tenant_id = tenant AND graph_level_reads(tenant, level_name, c.acl)));
BEGIN
    IF cardinality(unreadable) > 0 THEN
        PERFORM withdraw_graph_text(tenant, unreadable, NULL, level_name);
    END IF;
END
$fn$;

-- Deleted chunks, from the statement's transition table (shared with the full-text statistics
-- trigger of migration 008, so capturing it costs nothing more). Deleting a document cascades here.
CREATE FUNCTION chunks_withdraw_graph_text_delete() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
    gone record;
BEGIN
    FOR gone IN SELECT tenant_id, array_agg(id) AS ids FROM old_rows GROUP BY tenant_id ORDER BY tenant_id LOOP
        PERFORM lock_graph_sources(gone.tenant_id, false);
        PERFORM withdraw_graph_text(gone.tenant_id, gone.ids);
    END LOOP;
    RETURN NULL;
END
$fn$;
CREATE TRIGGER chunks_withdraw_graph_text_delete AFTER DELETE ON chunks
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION chunks_withdraw_graph_text_delete();

-- ACL or tenant changes, row by row for the reason given in migration 008: an UPDATE statement
-- trigger with transition tables would copy every updated row whatever changed, and `embeddings
-- switch` updates a whole tenant's vectors in one statement. A chunk moved to another tenant is gone
-- from its old one; a broadened ACL is still read by every level that read it, so marks nothing.
CREATE FUNCTION chunks_withdraw_graph_text_update() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM lock_graph_sources(OLD.tenant_id, false);
    PERFORM withdraw_graph_text(OLD.tenant_id, ARRAY[OLD.id],
                                CASE WHEN NEW.tenant_id = OLD.tenant_id THEN NEW.acl END);
    RETURN NULL;
END
$fn$;
CREATE TRIGGER chunks_withdraw_graph_text_update AFTER UPDATE OF tenant_id, acl ON chunks FOR EACH ROW
    WHEN ((OLD.tenant_id, OLD.acl) IS DISTINCT FROM (NEW.tenant_id, NEW.acl))
    EXECUTE FUNCTION chunks_withdraw_graph_text_update();

-- TRUNCATE fires no DELETE trigger: every chunk is gone, so is every source of graph text.
CREATE FUNCTION chunks_withdraw_graph_text_truncate() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    UPDATE graph_entities SET withdrawn_at = now() WHERE withdrawn_at IS NULL;
    UPDATE graph_relationships SET withdrawn_at = now() WHERE withdrawn_at IS NULL;
    UPDATE community_reports SET withdrawn_at = now() WHERE withdrawn_at IS NULL;
    RETURN NULL;
END
$fn$;
CREATE TRIGGER chunks_withdraw_graph_text_truncate AFTER TRUNCATE ON chunks
    FOR EACH STATEMENT EXECUTE FUNCTION chunks_withdraw_graph_text_truncate();

-- A level whose groups change is served to the users holding the new groups, at once; what it
-- serves was written from chunks the old groups read. (A level created with graph rows already
-- there is `all` given groups of its own.)
CREATE FUNCTION access_levels_withdraw_graph_text() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM lock_graph_sources(NEW.tenant_id, false);
    PERFORM withdraw_unreadable_graph_text(NEW.tenant_id, NEW.name, ARRAY(
        SELECT DISTINCT x FROM graph_text g CROSS JOIN unnest(g.chunk_ids) AS x
         WHERE g.tenant_id = NEW.tenant_id AND g.access_level = NEW.name AND g.withdrawn_at IS NULL));
    RETURN NULL;
END
$fn$;
CREATE TRIGGER access_levels_withdraw_graph_text_insert AFTER INSERT ON access_levels
    FOR EACH ROW EXECUTE FUNCTION access_levels_withdraw_graph_text();
CREATE TRIGGER access_levels_withdraw_graph_text_update AFTER UPDATE OF groups ON access_levels FOR EACH ROW
    WHEN (OLD.groups IS DISTINCT FROM NEW.groups) EXECUTE FUNCTION access_levels_withdraw_graph_text();

-- Text already served from chunks deleted or narrowed before this migration.
SELECT withdraw_unreadable_graph_text(l.tenant_id, l.access_level, ARRAY(
           SELECT DISTINCT x FROM graph_text g CROSS JOIN unnest(g.chunk_ids) AS x
            WHERE g.tenant_id = l.tenant_id AND g.access_level = l.access_level))
  FROM (SELECT DISTINCT tenant_id, access_level FROM graph_text) AS l;
