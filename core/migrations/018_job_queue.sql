-- A job queue: builds that wait for a worker (`crossroads worker`) instead of running in the process
-- that accepted them.
--
-- A build ran in a thread of whichever API replica accepted it: a rolling deploy killed it and a big
-- rebuild took CPU from questions. With CROSSROADS_JOBS_RUN_IN=worker the API and `graph build
-- --queue` insert the job `queued` (queued_at set) and any worker on any machine claims it with
-- FOR UPDATE SKIP LOCKED (core/jobs.py). `worker` names the process that holds a running row: every
-- update from a process checks it, so a process whose row another took over can no longer write to
-- it. `attempts`: how often a worker started the job; a job whose workers keep dying (it runs them
-- out of memory, say) is failed after a few takeovers instead of killing every worker in turn.
ALTER TABLE jobs ADD COLUMN queued_at timestamptz,
                 ADD COLUMN worker text,
                 ADD COLUMN attempts integer NOT NULL DEFAULT 0;

-- One waiting job per tenant and kind: a second enqueue would only repeat the same build. With
-- migration 012's index (one running) a tenant has at most one job running and one waiting, and a
-- worker claims a waiting job only while none of its tenant and kind runs. No row was `queued`
-- before (the status was allowed but never written), so nothing here can conflict.
CREATE UNIQUE INDEX jobs_one_queued ON jobs (tenant_id, kind) WHERE status = 'queued';

-- What a worker's claim scans: the few live rows, not the whole history.
CREATE INDEX jobs_live ON jobs (id) WHERE status IN ('queued', 'running');
