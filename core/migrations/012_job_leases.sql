-- Job leases: a `running` job must prove that the process running it is alive.
--
-- A process killed mid-build (kill -9, out of memory, a replica restart) could not mark its job
-- failed, so the row said `running` forever; and "one build per tenant" was checked only inside the
-- API process that started it, so another replica or the CLI could start a second build of the same
-- tenant (twice the LLM bill, two writers racing). Now the running process writes heartbeat_at
-- (core/jobs.py); a job silent for longer than the lease (CROSSROADS_JOB_LEASE_S) is abandoned and
-- the next start of its tenant and kind fails it and takes over; and the database, which every
-- process shares, admits one running job per tenant and kind.

ALTER TABLE jobs ADD COLUMN heartbeat_at timestamptz;

-- Rows left `running` before this migration may be several per tenant and kind, which the index
-- below cannot hold. The newest keeps its chance (without a heartbeat it is judged by started_at,
-- so a dead one is failed by the lease at the next start); the older ones were overtaken by it.
UPDATE jobs j
   SET status = 'failed',
       finished_at = coalesce(j.finished_at, now()),
       errors = j.errors || jsonb_build_array(jsonb_build_object('error',
           'superseded: job ' || newest.id || ' of the same tenant and kind started after it, so this one was '
           || 'abandoned (failed when job leases came in, migration 012). Nothing to do: follow job ' || newest.id
           || ', or start a new build if that one failed too.'))
  FROM (SELECT tenant_id, kind, max(id) AS id FROM jobs WHERE status = 'running' GROUP BY tenant_id, kind) newest
 WHERE j.status = 'running' AND j.tenant_id = newest.tenant_id AND j.kind = newest.kind AND j.id < newest.id;

CREATE UNIQUE INDEX jobs_one_running ON jobs (tenant_id, kind) WHERE status = 'running';
