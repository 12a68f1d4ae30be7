"""Batch-work bookkeeping: the `jobs` table, shared by every process that runs or watches a job.

A job row is `running` only while some process proves it alive: every `update_job` and a
`heartbeat` thread write `heartbeat_at`. A running job whose last sign of life is older than the
lease (CROSSROADS_JOB_LEASE_S) is *abandoned*: its process was killed, ran out of memory or was
restarted. Readers report it `failed` with that reason; the next `create_job` of its tenant and
kind writes that failure and takes over. At most one job per (tenant, kind) is `running`: a partial
unique index (migration 012) enforces it across API replicas and CLI processes alike.

A job is stopped by `request_cancel` (migration 014): its process sees the request at its next
progress step or heartbeat (`JobWatch`), stops and records `cancelled`. A process that finds its row
no longer running (failed as abandoned while it was paused, say) stops too, and writes nothing to it.
"""
from __future__ import annotations

import logging
import threading
from contextlib import contextmanager
from typing import Iterator

import psycopg
from psycopg.types.json import Jsonb

from core.database import Database
from core.errors import JobEndedError, JobNotFoundError, JobRunningError, JobStoppedError

log = logging.getLogger(__name__)

HEARTBEAT_S = 30.0
# A worker beats this many times per lease, so it must miss several beats in a row (a slow
# database, a long pause) before another process may take its job over.
HEARTBEATS_PER_LEASE = 4
ONE_RUNNING_INDEX = "jobs_one_running"  # migration 012
FINAL = ("done", "partial", "failed", "cancelled")  # partial: done, but some input failed

_LAST_SIGN_OF_LIFE = "coalesce(heartbeat_at, started_at, created_at)"
_ABANDONED = f"(status = 'running' AND {_LAST_SIGN_OF_LIFE} < now() - make_interval(secs => %(lease_s)s))"
_ABANDONED_ERROR = (
    "jsonb_build_object('error', 'abandoned: no heartbeat since ' || to_char("
    f"{_LAST_SIGN_OF_LIFE} AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS') || ' UTC; the process running it "
    "stopped (killed, out of memory or restarted). Start it again: it resumes from the work it saved.')"
)
# An abandoned job is reported as failed when it stopped (its last sign of life), the same whether
# the failure was already written by `fail_abandoned_jobs` or is derived here on read.
_JOB_COLUMNS = f"""
    id, kind, tenant_id, params,
    CASE WHEN {_ABANDONED} THEN 'failed' ELSE status END,
    stage, progress, counts,
    CASE WHEN {_ABANDONED} THEN errors || jsonb_build_array({_ABANDONED_ERROR}) ELSE errors END,
    usage, created_at, started_at,
    CASE WHEN {_ABANDONED} THEN {_LAST_SIGN_OF_LIFE} ELSE finished_at END,
    heartbeat_at, cancel_requested_at
"""
_JOB_KEYS = ("id", "kind", "tenant", "params", "status", "stage", "progress", "counts", "errors", "usage",
             "created_at", "started_at", "finished_at", "heartbeat_at", "cancel_requested_at")


def fail_abandoned_jobs(conn: psycopg.Connection, tenant: str, kind: str, lease_s: float) -> list[int]:
    """Mark the tenant's abandoned jobs of this kind `failed`, with the reason; returns their ids."""
    rows = conn.execute(
        f"UPDATE jobs SET status = 'failed', finished_at = {_LAST_SIGN_OF_LIFE},"
        f" errors = errors || jsonb_build_array({_ABANDONED_ERROR})"
        f" WHERE tenant_id = %(tenant)s AND kind = %(kind)s AND {_ABANDONED} RETURNING id",
        {"tenant": tenant, "kind": kind, "lease_s": lease_s},
    ).fetchall()
    for (job_id,) in rows:
        log.warning("job %s (%s of tenant %s) was abandoned by its process; marked failed", job_id, kind, tenant)
    return [job_id for (job_id,) in rows]


def running_job(conn: psycopg.Connection, tenant: str, kind: str, lease_s: float) -> dict | None:
    """The live (not abandoned) running job of this tenant and kind, if any."""
    row = conn.execute(
        f"SELECT {_JOB_COLUMNS} FROM jobs WHERE tenant_id = %(tenant)s AND kind = %(kind)s AND status = 'running'",
        {"tenant": tenant, "kind": kind, "lease_s": lease_s},
    ).fetchone()
    job = dict(zip(_JOB_KEYS, row)) if row else None
    return job if job and job["status"] == "running" else None


def create_job(conn: psycopg.Connection, kind: str, tenant: str, params: dict, lease_s: float) -> int:
    """A new `running` job; first fails the abandoned ones of this tenant and kind. Raises
    `JobRunningError` when a live one holds the slot, whichever process runs it."""
    try:
        with conn.transaction():
            fail_abandoned_jobs(conn, tenant, kind, lease_s)
            return conn.execute(
                "INSERT INTO jobs (kind, tenant_id, params, status, started_at, heartbeat_at)"
                " VALUES (%s, %s, %s, 'running', now(), now()) RETURNING id",
                (kind, tenant, Jsonb(params)),
            ).fetchone()[0]
    except psycopg.errors.UniqueViolation as exc:
        if exc.diag.constraint_name != ONE_RUNNING_INDEX:
            raise
    holder = running_job(conn, tenant, kind, lease_s)
    raise JobRunningError(kind, tenant, holder["id"] if holder else None,
                          holder["heartbeat_at"] if holder else None, lease_s)


def update_job(conn: psycopg.Connection, job_id: int, **fields) -> str:
    """Set any of stage, progress, counts, errors, usage, status; `finished_at` when status is final.
    Every update is also a heartbeat. Only a running row is written: a process whose job was failed as
    abandoned, or has ended, must not overwrite what happened since. Returns "running", "cancelling"
    (an operator asked it to stop) or "stopped" (nothing written: the row is not running)."""
    sets, values = ["heartbeat_at = now()"], []
    for name, value in fields.items():
        sets.append(f"{name} = %s")
        values.append(Jsonb(value) if isinstance(value, (dict, list)) else value)
    if fields.get("status") in FINAL:
        sets.append("finished_at = now()")
    row = conn.execute(f"UPDATE jobs SET {', '.join(sets)} WHERE id = %s AND status = 'running'"
                       " RETURNING cancel_requested_at IS NOT NULL", (*values, job_id)).fetchone()
    return "stopped" if row is None else ("cancelling" if row[0] else "running")


def request_cancel(conn: psycopg.Connection, job_id: int, tenant: str, lease_s: float) -> dict:
    """Ask the process running the tenant's job to stop (it records `cancelled` at its next progress
    step or heartbeat); an abandoned job, whose process is gone, is cancelled at once. Returns the job
    as it now is (`running` with cancel_requested_at set, or `cancelled`). Raises JobNotFoundError
    when the tenant has no such job, JobEndedError when it had already ended otherwise."""
    params = {"id": job_id, "tenant": tenant, "lease_s": lease_s}
    with conn.transaction():
        conn.execute(
            f"UPDATE jobs SET status = 'cancelled', finished_at = {_LAST_SIGN_OF_LIFE},"
            " errors = errors || jsonb_build_array(jsonb_build_object('error', 'cancelled on request after its "
            "process had stopped'))"
            f" WHERE id = %(id)s AND tenant_id = %(tenant)s AND {_ABANDONED}", params)
        conn.execute("UPDATE jobs SET cancel_requested_at = coalesce(cancel_requested_at, now())"
                     " WHERE id = %(id)s AND tenant_id = %(tenant)s AND status = 'running'", params)
    job = get_job(conn, job_id, lease_s)
    if job is None or job["tenant"] != tenant:
        raise JobNotFoundError(f"no job {job_id} in tenant {tenant!r}")
    if job["status"] not in ("running", "cancelled"):
        raise JobEndedError(f"job {job_id} has already ended ({job['status']}): nothing to cancel")
    if job["status"] == "running":
        log.info("cancel of job %s (%s of tenant %s) requested", job_id, job["kind"], tenant)
    return job


# Reads derive an abandoned job's failure instead of writing it: a read (a reader's GET, possibly
# on a read replica) must not write, and the next `create_job` of that tenant and kind writes it
# anyway, with the same reason and time, because it needs the running slot.


def get_job(conn: psycopg.Connection, job_id: int, lease_s: float) -> dict | None:
    row = conn.execute(f"SELECT {_JOB_COLUMNS} FROM jobs WHERE id = %(id)s", {"id": job_id, "lease_s": lease_s}).fetchone()
    return dict(zip(_JOB_KEYS, row)) if row else None


def recent_jobs(conn: psycopg.Connection, tenant: str, kind: str, lease_s: float, limit: int = 10) -> list[dict]:
    """The tenant's latest jobs of this kind, newest first."""
    rows = conn.execute(
        f"SELECT {_JOB_COLUMNS} FROM jobs WHERE tenant_id = %(tenant)s AND kind = %(kind)s ORDER BY id DESC"
        " LIMIT %(limit)s",
        {"tenant": tenant, "kind": kind, "lease_s": lease_s, "limit": limit},
    ).fetchall()
    return [dict(zip(_JOB_KEYS, r)) for r in rows]


def finished_counts(conn: psycopg.Connection, tenant: str, kind: str, limit: int = 20) -> list[tuple[int, str, dict]]:
    """(id, status, counts) of the tenant's jobs of this kind that ran to their end (`done` or
    `partial`), newest first: what the last complete run of each part left behind."""
    return conn.execute(
        "SELECT id, status, counts FROM jobs WHERE tenant_id = %s AND kind = %s AND status IN ('done', 'partial')"
        " ORDER BY id DESC LIMIT %s",
        (tenant, kind, limit),
    ).fetchall()


class JobWatch:
    """What the running process has learned about its job row: whether it must stop, and why."""

    def __init__(self, job_id: int):
        self.job_id = job_id
        self.reason: str | None = None  # "cancelled" or "lost" (see JobStoppedError)

    def note(self, state: str) -> None:
        """Take in what `update_job` returned."""
        if self.reason is None and state != "running":
            self.reason = "cancelled" if state == "cancelling" else "lost"

    def raise_if_stopped(self) -> None:
        if self.reason is not None:
            raise JobStoppedError(self.job_id, self.reason)

    def update(self, conn: psycopg.Connection, **fields) -> None:
        """`update_job`, then stop (raise) if the job must."""
        self.note(update_job(conn, self.job_id, **fields))
        self.raise_if_stopped()


@contextmanager
def heartbeat(db: Database, job_id: int, every_s: float = HEARTBEAT_S) -> Iterator[JobWatch]:
    """While the block runs, a daemon thread sets the job's heartbeat_at every `every_s` seconds, so
    work that records no progress for a while (one long LLM stage) still proves its process alive.
    The yielded watch learns from each beat whether the job must stop (a cancel request, or the row no
    longer running); the work checks it at its progress steps. The thread stops, and is joined, when
    the block exits; after a cancel request it keeps beating, so the job holds its slot until the work
    has stopped and recorded `cancelled`."""
    stop = threading.Event()
    watch = JobWatch(job_id)

    def beat() -> None:
        while not stop.wait(every_s):
            try:
                with db.connection() as conn:
                    state = update_job(conn, job_id)
            except psycopg.Error:
                log.warning("could not record the heartbeat of job %s; retrying in %.0f s", job_id, every_s,
                            exc_info=True)
                continue
            watch.note(state)
            if state == "stopped":
                log.warning("job %s is no longer running in the database (finished, or failed as abandoned after "
                            "missing its lease); its heartbeat stops and its work stops at its next step", job_id)
                return

    thread = threading.Thread(target=beat, name=f"job-heartbeat-{job_id}", daemon=True)
    thread.start()
    try:
        yield watch
    finally:
        stop.set()
        thread.join()
