-- What LLM calls measured, for the estimate printed before a graph build (graph/build/estimate.py):
-- per tenant, model, stage (extraction, summaries, reports, ...), language of the input (by script)
-- and thinking budget, the sums of what the API's `usage` reported. Sums, not rows: a build of
-- thousands of calls adds a handful of rows. The squares give the spread of the per-call ratios,
-- printed as the estimate's range. No text is kept, only counts.
CREATE TABLE llm_call_stats (
    tenant_id      text             NOT NULL,
    model          text             NOT NULL,
    stage          text             NOT NULL,
    lang           text             NOT NULL,
    thinking       integer          NOT NULL,  -- the thinking budget the calls were sent with (0: none)
    calls          bigint           NOT NULL,
    input_chars    bigint           NOT NULL,  -- characters of the prompt as the model reads it
    message_chars  bigint           NOT NULL,  -- ... of them in the messages (the rest: system, tools)
    input_tokens   bigint           NOT NULL,  -- input + cache read + cache write tokens
    output_tokens  bigint           NOT NULL,  -- thinking included, as billed
    cpt_sum        double precision NOT NULL,  -- sum of per-call characters per token
    cpt_squares    double precision NOT NULL,
    input_squares  double precision NOT NULL,  -- sum of per-call input tokens squared
    output_squares double precision NOT NULL,  -- sum of per-call output tokens squared
    updated_at     timestamptz      NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, model, stage, lang, thinking)
);

-- A finished Message Batch's result, downloaded by `graph status` or by a build that is not sending
-- batches, kept with its request until a build uses it: collected once, never paid for twice.
ALTER TABLE llm_batch_requests ADD COLUMN result jsonb;
