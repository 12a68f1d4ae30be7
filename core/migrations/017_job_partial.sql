-- A job that finished with some of its input failed: `partial`.
--
-- A graph build whose LLM calls partly failed (errors after retries, refusals, malformed or cut
-- replies) used to end `done`, and an operator had no sign that entities were missing. It now ends
-- `partial`: what succeeded is served and cached, what failed is counted per level and stage in the
-- job's counts and errors, and the next build retries exactly that (graph/build.py).
ALTER TABLE jobs DROP CONSTRAINT jobs_status_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_status_check
    CHECK (status IN ('queued', 'running', 'done', 'partial', 'failed', 'cancelled'));
