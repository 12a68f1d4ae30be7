-- Graph retrieval (local and multi-hop questions): entity vectors for linking a question to a level's
-- graph by meaning, and a version per level so the query side can cache the level's graph matrix.

-- One vector per entity per access level and embedding model, of the text `graph/store.py`
-- (ENTITY_VECTOR_TEXT) builds from the entity's name, type and description. Kept apart from
-- graph_entities because a build swaps those rows wholesale: here a vector survives a rebuild and is
-- recomputed only when its text changed. `text_hash` is md5 of that text; a query joins it to the
-- served entity row (withdrawn_at IS NULL) and to the same hash of the entity's current text, so a
-- vector is used only for the text it was made from and never for a withdrawn entity.
CREATE TABLE graph_entity_vectors (
    tenant_id    text   NOT NULL,
    access_level text   NOT NULL,
    key          text   NOT NULL,
    embed_model  text   NOT NULL,
    text_hash    text   NOT NULL,
    embedding    vector NOT NULL,
    PRIMARY KEY (tenant_id, access_level, key, embed_model)
);

-- A level's graph version: bumped by every statement that changes its entities or relationships
-- (a build's swap, a withdrawal, a cleared level). Readers cache the level's graph matrix per version,
-- one primary-key read per question instead of reloading the graph. Statement-level triggers with
-- transition tables: a build's COPY of thousands of rows bumps each (tenant, level) once.
CREATE SEQUENCE graph_version_seq;
CREATE TABLE graph_versions (
    tenant_id    text   NOT NULL,
    access_level text   NOT NULL,
    version      bigint NOT NULL,
    PRIMARY KEY (tenant_id, access_level)
);

CREATE FUNCTION bump_graph_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO graph_versions (tenant_id, access_level, version)
    SELECT tenant_id, access_level, nextval('graph_version_seq')
    FROM (SELECT DISTINCT tenant_id, access_level FROM changed) AS levels
    ON CONFLICT (tenant_id, access_level) DO UPDATE SET version = EXCLUDED.version;
    RETURN NULL;
END $$;

CREATE TRIGGER graph_entities_version_ins AFTER INSERT ON graph_entities
    REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION bump_graph_version();
CREATE TRIGGER graph_entities_version_upd AFTER UPDATE ON graph_entities
    REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION bump_graph_version();
CREATE TRIGGER graph_entities_version_del AFTER DELETE ON graph_entities
    REFERENCING OLD TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION bump_graph_version();
CREATE TRIGGER graph_relationships_version_ins AFTER INSERT ON graph_relationships
    REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION bump_graph_version();
CREATE TRIGGER graph_relationships_version_upd AFTER UPDATE ON graph_relationships
    REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION bump_graph_version();
CREATE TRIGGER graph_relationships_version_del AFTER DELETE ON graph_relationships
    REFERENCING OLD TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION bump_graph_version();
