-- A tenant's own HNSW graph beside the model's shared one.
--
-- One graph per model spans every tenant. Under the tenant filter, pgvector walks that shared graph
-- and skips other tenants' rows; when the tenants' texts form separate regions of the embedding
-- space (different corpora do), the greedy walk can settle in another tenant's region and return
-- the tenant's rows nearest to *that* region instead of its true neighbours. Measured on the eval
-- tenants (bench/tenant_recall.py): ANN recall@10 of a 5,000-chunk tenant at ef_search 400 was 0.95
-- with a question at 0.0, and at ef_search 100 0.84-0.90; on the tenant's own graph 1.00 at
-- ef_search 40. A tenant of at least CROSSROADS_TENANT_VECTOR_INDEX_MIN_ROWS chunks that shares a
-- model with other tenants therefore gets a partial index `WHERE embed_model = M AND tenant_id = T`
-- (vector/tenant_index.py), registered here once it is valid; the vector leg names the tenant as a
-- literal so the planner can match that predicate.
CREATE TABLE tenant_vector_indexes (
    tenant_id   text        NOT NULL,
    embed_model text        NOT NULL,
    dimension   integer     NOT NULL CHECK (dimension > 0),
    index_name  text        NOT NULL UNIQUE,
    built_rows  bigint      NOT NULL,
    built_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, embed_model)
);
