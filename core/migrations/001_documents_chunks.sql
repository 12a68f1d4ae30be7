-- Documents and their chunks: the hybrid index. One row per chunk carries its text, its ACL
-- (copied from the document so the search filter never joins), a generated full-text vector in the
-- chunk's language, and one embedding together with the model that produced it.

CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE documents (
    tenant_id    text        NOT NULL,
    doc_id       text        NOT NULL,
    title        text        NOT NULL DEFAULT '',
    source       text        NOT NULL DEFAULT '',
    lang         text        NOT NULL CHECK (lang IN ('russian', 'english', 'simple')),
    acl          text[]      NOT NULL CHECK (cardinality(acl) > 0),
    content_hash text        NOT NULL,
    -- fingerprint of what shaped the chunks (chunker settings, embedding model): when it changes,
    -- the document is re-chunked even though its text did not change
    index_key    text        NOT NULL,
    version      integer     NOT NULL DEFAULT 1,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, doc_id)
);

-- The text-search configuration is chosen per row. to_tsvector(regconfig, text) is immutable only
-- with a constant configuration, so the language is mapped to constants here.
CREATE FUNCTION chunk_tsv(lang text, head text, body text) RETURNS tsvector
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT setweight(to_tsvector(cfg, head), 'B') || setweight(to_tsvector(cfg, body), 'A')
    FROM (SELECT CASE lang
                     WHEN 'russian' THEN 'russian'::regconfig
                     WHEN 'english' THEN 'english'::regconfig
                     ELSE 'simple'::regconfig
                 END AS cfg) AS c
$$;

CREATE TABLE chunks (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id    text        NOT NULL,
    doc_id       text        NOT NULL,
    chunk_no     integer     NOT NULL,
    heading      text        NOT NULL DEFAULT '',
    context      text        NOT NULL DEFAULT '',
    content      text        NOT NULL,
    acl          text[]      NOT NULL,
    -- hash of the exact text that was embedded (context + heading + content)
    content_hash text        NOT NULL,
    lang         text        NOT NULL,
    tsv          tsvector    GENERATED ALWAYS AS (chunk_tsv(lang, heading || ' ' || context, content)) STORED,
    -- dimension-free column: each model gets its own partial HNSW index over a cast to its dimension
    embedding    vector,
    embed_model  text,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, doc_id, chunk_no),
    FOREIGN KEY (tenant_id, doc_id) REFERENCES documents (tenant_id, doc_id) ON DELETE CASCADE
);

CREATE INDEX chunks_tenant ON chunks (tenant_id);
CREATE INDEX chunks_tsv_gin ON chunks USING gin (tsv);
CREATE INDEX chunks_acl_gin ON chunks USING gin (acl);
-- vector reuse: a chunk whose exact text already has a vector in the tenant is not embedded again
CREATE INDEX chunks_tenant_hash ON chunks (tenant_id, content_hash);

-- One row per (model, dimension) that has vectors: search uses it to find the index to hit.
CREATE TABLE embedding_models (
    embed_model text PRIMARY KEY,
    dimension   integer NOT NULL CHECK (dimension > 0),
    index_name  text    NOT NULL UNIQUE,
    created_at  timestamptz NOT NULL DEFAULT now()
);
