"""The worker loop behind `crossroads worker`: claim a queued job, run it, repeat.

Any number of workers, on any number of machines, share the queue in the `jobs` table
(core.jobs.claim_job: FOR UPDATE SKIP LOCKED). A job runs in a thread of its own while the main
thread watches for a stop: on SIGTERM or Ctrl-C the worker releases the job (it stops at its next
progress step, its saved work kept) and puts it back in the queue for the next worker. A job that does
not stop within the grace period is left running when the worker exits: its lease runs out and the
next worker resumes it. A worker killed outright (kill -9, out of memory) is the same case. So a job
is never lost with its worker; at worst it waits one lease.

What each kind of job does is a handler given to the loop (api/cli/worker.py): core knows nothing of
graph builds. A handler runs one claimed job to its end and records its outcome on the row itself
(a graph build does, through its heartbeat and progress).
"""
from __future__ import annotations

import logging
import signal
import threading
import time
from typing import Callable, Mapping

import psycopg

from core import jobs
from core.database import Database
from core.errors import JobStoppedError

log = logging.getLogger(__name__)

Handler = Callable[[dict], None]  # runs one claimed job (the row as core.jobs.get_job returns it)
JOIN_STEP_S = 0.2  # how often the main thread looks up from a running job for a stop request


class Worker:
    def __init__(self, db: Database, handlers: Mapping[str, Handler], *, poll_s: float, stop_grace_s: float):
        self.db, self.handlers, self.poll_s, self.stop_grace_s = db, dict(handlers), poll_s, stop_grace_s
        self.stop = threading.Event()
        self.name = jobs.worker_name()

    def run(self, max_jobs: int | None = None) -> int:
        """Claim and run jobs until `stop` is set (or `max_jobs` have run); returns how many ran."""
        ran = 0
        kinds = sorted(self.handlers)
        log.info("worker %s takes %s jobs", self.name, ", ".join(kinds))
        while not self.stop.is_set() and (max_jobs is None or ran < max_jobs):
            try:
                with self.db.connection() as conn:
                    job = jobs.claim_job(conn, kinds, self.db.job_lease_s)
            except psycopg.Error as exc:  # the database is down or failing over: keep trying, quietly bounded
                log.warning("worker %s could not look for jobs (%s); retrying in %.1f s", self.name, exc, self.poll_s)
                self.stop.wait(self.poll_s)
                continue
            if job is None:
                self.stop.wait(self.poll_s)
                continue
            ran += 1
            if not self._run_one(job):
                break  # stopped with the job still running: its lease hands it on
        log.info("worker %s stopped after %d job(s)", self.name, ran)
        return ran

    def _run_one(self, job: dict) -> bool:
        """Run a claimed job to its end, or until a stop; False when the job was left running (it would not
        stop in time), so the process must exit without touching it."""
        job_id = job["id"]
        log.info("worker %s runs job %s (%s of tenant %s, start %s)", self.name, job_id, job["kind"], job["tenant"],
                 job["attempts"])
        started = time.monotonic()
        thread = threading.Thread(target=self._handle, args=(job,), name=f"job-{job_id}", daemon=True)
        thread.start()
        deadline = None
        while thread.is_alive():
            thread.join(JOIN_STEP_S)
            if self.stop.is_set() and deadline is None:
                log.info("worker %s is stopping: job %s goes back to the queue once it has stopped (at most %.0f s)",
                         self.name, job_id, self.stop_grace_s)
                jobs.release(job_id)
                deadline = time.monotonic() + self.stop_grace_s
            if deadline is not None and time.monotonic() > deadline and thread.is_alive():
                log.error("job %s did not stop within %.0f s (CROSSROADS_WORKER_STOP_GRACE_S); the worker exits and "
                          "another resumes it once its lease (%.0f s) runs out", job_id, self.stop_grace_s,
                          self.db.job_lease_s)
                return False
        if deadline is not None:
            with self.db.connection() as conn:
                if jobs.requeue_job(conn, job_id):
                    log.info("job %s is back in the queue", job_id)
        log.info("worker %s: job %s ended after %.1f s", self.name, job_id, time.monotonic() - started)
        return True

    def _handle(self, job: dict) -> None:
        try:
            self.handlers[job["kind"]](job)
        except JobStoppedError as exc:  # cancelled, released or taken over: recorded where it applies
            log.info("job %s stopped: %s", job["id"], exc)
        except Exception:  # noqa: BLE001 - the handler recorded the failure on the row; the worker goes on
            log.exception("job %s (%s of tenant %s) failed", job["id"], job["kind"], job["tenant"])

    def stop_on_signals(self) -> None:
        """SIGTERM (a deploy, `docker stop`, Kubernetes) and SIGINT stop the worker gracefully."""
        def handler(signum, _frame) -> None:
            log.info("worker %s got %s", self.name, signal.Signals(signum).name)
            self.stop.set()

        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)
