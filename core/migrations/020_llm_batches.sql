-- Requests sent in Anthropic Message Batches (`crossroads graph build --batch`), by tenant and custom_id
-- (the sha256 of the request's parameters: core/batches.py).
--
-- A batch takes minutes to hours. A build that dies or is cancelled meanwhile leaves its rows here, and
-- the next build that needs the same request collects that batch instead of paying for it again. Rows
-- go when their results are in the build's caches (the build ended) or when the request failed (errored,
-- expired: sent again by the next build).
CREATE TABLE llm_batch_requests (
    tenant_id    text        NOT NULL,
    custom_id    text        NOT NULL,
    batch_id     text        NOT NULL,
    job_id       bigint      REFERENCES jobs (id) ON DELETE SET NULL,  -- the build that sent it
    submitted_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, custom_id)
);
CREATE INDEX llm_batch_requests_batch ON llm_batch_requests (tenant_id, batch_id);
