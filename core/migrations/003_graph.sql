-- The entity graph. Extraction is cached per chunk text and shared by every access level; everything
-- else is per (tenant, access level), rebuilt from the cache by `crossroads graph build`.

-- A named set of groups. A level's graph is built only from chunks whose ACL overlaps its groups,
-- and a user is served from a level only when all of its groups are among the user's groups.
-- groups IS NULL marks the default level `all`: every group present in the tenant.
CREATE TABLE access_levels (
    tenant_id  text        NOT NULL,
    name       text        NOT NULL CHECK (name ~ '^[A-Za-z0-9_.-]{1,64}$'),
    groups     text[]      CHECK (groups IS NULL OR cardinality(groups) > 0),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, name)
);

CREATE TABLE extraction_cache (
    content_hash text        NOT NULL,
    extractor    text        NOT NULL,
    version      text        NOT NULL,
    model        text        NOT NULL,
    result       jsonb       NOT NULL,
    errors       text[]      NOT NULL DEFAULT '{}',
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (content_hash, extractor, version, model)
);

CREATE TABLE graph_entities (
    tenant_id    text     NOT NULL,
    access_level text     NOT NULL,
    key          text     NOT NULL,  -- normalised name: the merge key
    name         text     NOT NULL,
    type         text     NOT NULL,
    description  text     NOT NULL,
    degree       integer  NOT NULL DEFAULT 0,
    chunk_ids    bigint[] NOT NULL,
    PRIMARY KEY (tenant_id, access_level, key)
);

CREATE TABLE graph_relationships (
    tenant_id    text     NOT NULL,
    access_level text     NOT NULL,
    source_key   text     NOT NULL,
    target_key   text     NOT NULL,
    description  text     NOT NULL,
    weight       real     NOT NULL,
    chunk_ids    bigint[] NOT NULL,
    PRIMARY KEY (tenant_id, access_level, source_key, target_key)
);

CREATE TABLE graph_communities (
    tenant_id       text    NOT NULL,
    access_level    text    NOT NULL,
    community_id    integer NOT NULL,
    level           integer NOT NULL,  -- 0 = root of the hierarchy
    parent          integer,
    members         text[]  NOT NULL,  -- entity keys
    membership_hash text    NOT NULL,
    PRIMARY KEY (tenant_id, access_level, community_id)
);

CREATE TABLE community_reports (
    tenant_id          text        NOT NULL,
    access_level       text        NOT NULL,
    community_id       integer     NOT NULL,
    title              text        NOT NULL,
    summary            text        NOT NULL,
    rating             real        NOT NULL,
    rating_explanation text        NOT NULL DEFAULT '',
    findings           jsonb       NOT NULL,  -- [{summary, explanation, entity_keys, chunk_ids}]
    source_chunk_ids   bigint[]    NOT NULL,
    input_hash         text        NOT NULL,  -- members, their descriptions and relations: regenerate when it changes
    model              text        NOT NULL,  -- "" for the offline extractive report
    generated_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, access_level, community_id)
);

-- Batch work: resumable, observable, with its token usage and cost.
CREATE TABLE jobs (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind        text        NOT NULL,
    tenant_id   text        NOT NULL,
    params      jsonb       NOT NULL DEFAULT '{}',
    status      text        NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'running', 'done', 'failed')),
    stage       text        NOT NULL DEFAULT '',
    progress    jsonb       NOT NULL DEFAULT '{}',
    counts      jsonb       NOT NULL DEFAULT '{}',
    errors      jsonb       NOT NULL DEFAULT '[]',
    usage       jsonb       NOT NULL DEFAULT '{}',
    created_at  timestamptz NOT NULL DEFAULT now(),
    started_at  timestamptz,
    finished_at timestamptz
);
CREATE INDEX jobs_tenant_kind ON jobs (tenant_id, kind, created_at DESC);
