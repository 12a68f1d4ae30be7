-- Embedding model migration. Vectors of different models are not comparable, so a model change is a
-- full re-embedding done beside the served vectors: `chunks.embedding` keeps serving search while the
-- new model's vectors accumulate here; `crossroads embeddings switch` swaps the two in one transaction
-- and parks the old served vectors here, so switching back costs no embedding call.

CREATE TABLE chunk_vectors_staged (
    chunk_id     bigint      NOT NULL REFERENCES chunks (id) ON DELETE CASCADE,
    embed_model  text        NOT NULL,
    -- the chunk's content_hash when the vector was computed: a different one means a stale vector
    content_hash text        NOT NULL,
    embedding    vector      NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (chunk_id, embed_model)
);

-- Like embedding_models, for the partial HNSW indexes on the staging table: the staged vector leg
-- (evaluation before a switch) reads the dimension to cast to from here.
CREATE TABLE staged_embedding_models (
    embed_model text PRIMARY KEY,
    dimension   integer NOT NULL CHECK (dimension > 0),
    index_name  text    NOT NULL UNIQUE,
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- One row per (tenant, target model): what `embeddings status` shows and what a re-run resumes.
CREATE TABLE embedding_migrations (
    tenant_id    text        NOT NULL,
    target_model text        NOT NULL,
    source_model text,                 -- the model served when the migration started
    dimension    integer     NOT NULL CHECK (dimension > 0),
    status       text        NOT NULL CHECK (status IN ('running', 'complete', 'switched', 'dropped')),
    counts       jsonb       NOT NULL DEFAULT '{}',
    error        text,
    started_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    switched_at  timestamptz,
    PRIMARY KEY (tenant_id, target_model)
);
