-- Stopping a job: a cancel request, and a `cancelled` end.
--
-- A graph build can run for hours and spend real money on LLM calls; an operator needs to stop it
-- without killing the process that runs it (an API replica serves other users too). A request sets
-- cancel_requested_at; the running process sees it at its next progress step or heartbeat (core/
-- jobs.py), stops, and records `cancelled`. Until then the job keeps its running slot (migration
-- 012), so no second build of the tenant starts while the first is still writing.
ALTER TABLE jobs ADD COLUMN cancel_requested_at timestamptz;
ALTER TABLE jobs DROP CONSTRAINT jobs_status_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_status_check
    CHECK (status IN ('queued', 'running', 'done', 'failed', 'cancelled'));
