-- Contextual retrieval: the LLM-written context of each chunk, cached by the chunk's own text so an
-- unchanged chunk never costs a second LLM call, even when another part of its document changed.
CREATE TABLE chunk_contexts (
    tenant_id  text        NOT NULL,
    doc_id     text        NOT NULL,
    chunk_key  text        NOT NULL,  -- sha256(heading, content) of the chunk, before context
    mode       text        NOT NULL,  -- e.g. llm:claude-haiku-4-5
    context    text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, doc_id, chunk_key, mode),
    FOREIGN KEY (tenant_id, doc_id) REFERENCES documents (tenant_id, doc_id) ON DELETE CASCADE
);
