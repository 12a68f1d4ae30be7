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

The queue (migration 018): `enqueue_job` inserts a `queued` row that any worker (`crossroads worker`,
core/worker.py) takes with `claim_job` (FOR UPDATE SKIP LOCKED, so workers on any number of machines
share it). A queued job whose worker died is not failed but resumed in place by the next worker to
claim (same id, so whoever follows it keeps following), up to MAX_ATTEMPTS starts; readers see it
`queued` meanwhile. Each row names the process holding it (`worker`) and every update checks it:
a paused process whose job was taken over cannot write over the new holder's work. A stopping
worker `release`s its job: the build stops at its next step and `requeue_job` puts the row back.
"""
from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
from contextlib import contextmanager
from typing import Iterator

import psycopg
from psycopg.types.json import Jsonb

from core.database import Database
from core.errors import JobEndedError, JobNotFoundError, JobQueuedError, JobRunningError, JobStoppedError

log = logging.getLogger(__name__)

HEARTBEAT_S = 30.0
# A worker beats this many times per lease, so it must miss several beats in a row (a slow
# database, a long pause) before another process may take its job over.
HEARTBEATS_PER_LEASE = 4
ONE_RUNNING_INDEX = "jobs_one_running"  # migration 012
ONE_QUEUED_INDEX = "jobs_one_queued"  # migration 018
# Starts of a queued job by workers: a job that killed this many workers (out of memory, say) is
# failed rather than handed to the next one.
MAX_ATTEMPTS = 3
FINAL = ("done", "partial", "failed", "cancelled")  # partial: done, but some input failed

_LAST_SIGN_OF_LIFE = "coalesce(heartbeat_at, started_at, created_at)"
_ABANDONED = f"(status = 'running' AND {_LAST_SIGN_OF_LIFE} < now() - make_interval(secs => %(lease_s)s))"
# A queued job whose worker died waits for the next worker, which resumes it (claim_job).
_RESUMABLE = f"({_ABANDONED} AND queued_at IS NOT NULL AND attempts < {MAX_ATTEMPTS})"
_ABANDONED_ERROR = (
    "jsonb_build_object('error', 'abandoned: no heartbeat since ' || to_char("
    f"{_LAST_SIGN_OF_LIFE} AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS') || ' UTC; the process running it "
    "stopped (killed, out of memory or restarted). Start it again: it resumes from the work it saved.')"
)
# An abandoned job is reported as failed when it stopped (its last sign of life), the same whether
# the failure was already written by `fail_abandoned_jobs` or is derived here on read; a resumable
# one as queued.
_JOB_COLUMNS = f"""
    id, kind, tenant_id, params,
    CASE WHEN {_RESUMABLE} THEN 'queued' WHEN {_ABANDONED} THEN 'failed' ELSE status END,
    stage, progress, counts,
    CASE WHEN {_ABANDONED} AND NOT {_RESUMABLE} THEN errors || jsonb_build_array({_ABANDONED_ERROR}) ELSE errors END,
    usage, created_at, started_at,
    CASE WHEN {_ABANDONED} AND NOT {_RESUMABLE} THEN {_LAST_SIGN_OF_LIFE} ELSE finished_at END,
    heartbeat_at, cancel_requested_at, queued_at, worker, attempts
"""
_JOB_KEYS = ("id", "kind", "tenant", "params", "status", "stage", "progress", "counts", "errors", "usage",
             "created_at", "started_at", "finished_at", "heartbeat_at", "cancel_requested_at", "queued_at", "worker",
             "attempts")
_identity: tuple[int, str] | None = None


def worker_name() -> str:
    """This process as a job's holder: host, pid and a random part (a pid is reused after a restart).
    Made per pid, so a forked server worker gets its own."""
    global _identity
    if _identity is None or _identity[0] != os.getpid():
        _identity = (os.getpid(), f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}")
    return _identity[1]


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
                "INSERT INTO jobs (kind, tenant_id, params, status, started_at, heartbeat_at, worker)"
                " VALUES (%s, %s, %s, 'running', now(), now(), %s) RETURNING id",
                (kind, tenant, Jsonb(params), worker_name()),
            ).fetchone()[0]
    except psycopg.errors.UniqueViolation as exc:
        if exc.diag.constraint_name != ONE_RUNNING_INDEX:
            raise
    holder = running_job(conn, tenant, kind, lease_s)
    raise JobRunningError(kind, tenant, holder["id"] if holder else None,
                          holder["heartbeat_at"] if holder else None, lease_s)


def update_job(conn: psycopg.Connection, job_id: int, **fields) -> str:
    """Set any of stage, progress, counts, errors, usage, status; `finished_at` when status is final.
    Every update is also a heartbeat. Only a running row this process holds is written: a process whose
    job was failed as abandoned, taken over by another worker, or has ended, must not overwrite what
    happened since. Returns "running", "cancelling" (an operator asked it to stop), "released" (this
    worker is stopping: only the heartbeat is written, so the job keeps its lease until `requeue_job`)
    or "stopped" (nothing written: the row is not running, or not this process's)."""
    released = job_id in _released
    sets, values = ["heartbeat_at = now()"], []
    for name, value in ({} if released else fields).items():
        sets.append(f"{name} = %s")
        values.append(Jsonb(value) if isinstance(value, (dict, list)) else value)
    if not released and fields.get("status") in FINAL:
        sets.append("finished_at = now()")
    row = conn.execute(f"UPDATE jobs SET {', '.join(sets)} WHERE id = %s AND status = 'running'"
                       " AND (worker IS NULL OR worker = %s) RETURNING cancel_requested_at IS NOT NULL",
                       (*values, job_id, worker_name())).fetchone()
    if row is None:
        return "stopped"
    return "released" if released else ("cancelling" if row[0] else "running")


def request_cancel(conn: psycopg.Connection, job_id: int, tenant: str, lease_s: float) -> dict:
    """Ask the process running the tenant's job to stop (it records `cancelled` at its next progress
    step or heartbeat); an abandoned or queued job, which no process runs, is cancelled at once. Returns the job
    as it now is (`running` with cancel_requested_at set, or `cancelled`). Raises JobNotFoundError
    when the tenant has no such job, JobEndedError when it had already ended otherwise."""
    params = {"id": job_id, "tenant": tenant, "lease_s": lease_s}
    with conn.transaction():
        conn.execute(
            f"UPDATE jobs SET status = 'cancelled', finished_at = {_LAST_SIGN_OF_LIFE},"
            " errors = errors || jsonb_build_array(jsonb_build_object('error', 'cancelled on request after its "
            "process had stopped'))"
            f" WHERE id = %(id)s AND tenant_id = %(tenant)s AND {_ABANDONED}", params)
        conn.execute(
            "UPDATE jobs SET status = 'cancelled', finished_at = now(), errors = errors || jsonb_build_array("
            "jsonb_build_object('error', 'cancelled on request while queued: no worker had started it'))"
            " WHERE id = %(id)s AND tenant_id = %(tenant)s AND status = 'queued'", params)
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


def list_jobs(conn: psycopg.Connection, tenant: str, lease_s: float, limit: int, offset: int = 0) -> tuple[list[dict], int]:
    """A page of the tenant's jobs of every kind, newest first (ids are unique: a stable order), and their total."""
    params = {"tenant": tenant, "lease_s": lease_s, "limit": limit, "offset": offset}
    rows = conn.execute(f"SELECT {_JOB_COLUMNS} FROM jobs WHERE tenant_id = %(tenant)s ORDER BY id DESC"
                        " LIMIT %(limit)s OFFSET %(offset)s", params).fetchall()
    total = conn.execute("SELECT count(*) FROM jobs WHERE tenant_id = %(tenant)s", params).fetchone()[0]
    return [dict(zip(_JOB_KEYS, r)) for r in rows], total


def finished_counts(conn: psycopg.Connection, tenant: str, kind: str, limit: int = 20) -> list[tuple[int, str, dict]]:
    """(id, status, counts) of the tenant's jobs of this kind that ran to their end (`done` or
    `partial`), newest first: what the last complete run of each part left behind."""
    return conn.execute(
        "SELECT id, status, counts FROM jobs WHERE tenant_id = %s AND kind = %s AND status IN ('done', 'partial')"
        " ORDER BY id DESC LIMIT %s",
        (tenant, kind, limit),
    ).fetchall()


# --- the queue (migration 018) -------------------------------------------------------------------

# Jobs this process is letting go of (a stopping worker): their work stops at its next step
# (JobWatch), and their rows take only heartbeats until `requeue_job` hands them back.
_released: set[int] = set()


def enqueue_job(conn: psycopg.Connection, kind: str, tenant: str, params: dict, lease_s: float) -> int:
    """A new `queued` job for a worker to claim. Raises `JobRunningError` while a job of this tenant and
    kind runs and `JobQueuedError` while one waits: one build at a time, as when it runs in place."""
    try:
        with conn.transaction():
            holder = running_job(conn, tenant, kind, lease_s)
            if holder is not None:
                raise JobRunningError(kind, tenant, holder["id"], holder["heartbeat_at"], lease_s)
            waiting = queued_job(conn, tenant, kind, lease_s)
            if waiting is not None:
                raise JobQueuedError(kind, tenant, waiting)
            job_id = conn.execute(
                "INSERT INTO jobs (kind, tenant_id, params, status, queued_at) VALUES (%s, %s, %s, 'queued', now())"
                " RETURNING id", (kind, tenant, Jsonb(params))).fetchone()[0]
    except psycopg.errors.UniqueViolation as exc:  # another enqueue of the tenant won the race
        if exc.diag.constraint_name != ONE_QUEUED_INDEX:
            raise
        raise JobQueuedError(kind, tenant, queued_job(conn, tenant, kind, lease_s)) from None
    log.info("job %s (%s of tenant %s) queued", job_id, kind, tenant)
    return job_id


def queued_job(conn: psycopg.Connection, tenant: str, kind: str, lease_s: float) -> int | None:
    """The id of the tenant's job of this kind waiting for a worker (queued, or left by a dead one)."""
    row = conn.execute(
        f"SELECT id FROM jobs WHERE tenant_id = %(tenant)s AND kind = %(kind)s AND (status = 'queued' OR {_RESUMABLE})"
        " ORDER BY id LIMIT 1", {"tenant": tenant, "kind": kind, "lease_s": lease_s}).fetchone()
    return row[0] if row else None


def claim_job(conn: psycopg.Connection, kinds: list[str], lease_s: float) -> dict | None:
    """Take the oldest job a worker may run now, or None: first one whose worker died (resumed in place:
    its saved work is kept, and its id is what clients follow), else a queued one whose tenant has no
    job of its kind running. FOR UPDATE SKIP LOCKED: concurrent workers never take the same row nor
    wait on each other. The row becomes `running`, held by this process."""
    me = {"kinds": kinds, "lease_s": lease_s, "me": worker_name()}
    with conn.transaction():
        while (dead := conn.execute(
                f"SELECT id, tenant_id, kind, attempts, worker FROM jobs WHERE kind = ANY(%(kinds)s)"
                f" AND queued_at IS NOT NULL AND {_ABANDONED} ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED",
                me).fetchone()) is not None:
            job_id, tenant, kind, attempts, previous = dead
            if attempts >= MAX_ATTEMPTS:
                conn.execute(
                    "UPDATE jobs SET status = 'failed', finished_at = now(), errors = errors || jsonb_build_array("
                    "jsonb_build_object('error', %s::text)) WHERE id = %s",
                    (f"abandoned {attempts} times: each worker that ran it stopped without a word (killed, out of "
                     "memory?). Check the workers' logs and memory, then start it again: it resumes from the work "
                     "it saved.", job_id))
                log.error("job %s (%s of tenant %s) failed: its worker died %s times", job_id, kind, tenant, attempts)
                continue
            conn.execute("UPDATE jobs SET worker = %(me)s, heartbeat_at = now(), attempts = attempts + 1"
                         " WHERE id = %(id)s", {**me, "id": job_id})
            log.warning("job %s (%s of tenant %s): its worker %s stopped without a heartbeat for %g s; resuming it "
                        "here (start %s of %s)", job_id, kind, tenant, previous, lease_s, attempts + 1, MAX_ATTEMPTS)
            break
        else:
            # a dead process's job run in place (CLI, API thread) holds its tenant's slot until failed
            conn.execute(
                f"UPDATE jobs SET status = 'failed', finished_at = {_LAST_SIGN_OF_LIFE},"
                f" errors = errors || jsonb_build_array({_ABANDONED_ERROR})"
                f" WHERE queued_at IS NULL AND kind = ANY(%(kinds)s) AND {_ABANDONED} AND EXISTS (SELECT 1 FROM jobs q"
                " WHERE q.status = 'queued' AND q.tenant_id = jobs.tenant_id AND q.kind = jobs.kind)", me)
            row = conn.execute(
                "SELECT id FROM jobs q WHERE status = 'queued' AND kind = ANY(%(kinds)s) AND NOT EXISTS (SELECT 1"
                " FROM jobs r WHERE r.tenant_id = q.tenant_id AND r.kind = q.kind AND r.status = 'running')"
                " ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED", me).fetchone()
            if row is None:
                return None
            job_id = row[0]
            try:
                with conn.transaction():
                    conn.execute("UPDATE jobs SET status = 'running', started_at = coalesce(started_at, now()),"
                                 " heartbeat_at = now(), worker = %(me)s, attempts = attempts + 1 WHERE id = %(id)s",
                                 {**me, "id": job_id})
            except psycopg.errors.UniqueViolation as exc:  # a job of the tenant started in place meanwhile
                if exc.diag.constraint_name != ONE_RUNNING_INDEX:
                    raise
                return None
        return get_job(conn, job_id, lease_s)  # inside: the caller's connection is left with no transaction open


def release(job_id: int) -> None:
    """Let go of a job this process runs (the worker is stopping): its work stops at the next progress
    step or heartbeat (JobStoppedError "released"); then `requeue_job` hands it back."""
    _released.add(job_id)


def requeue_job(conn: psycopg.Connection, job_id: int) -> bool:
    """Put a released job, whose work has stopped, back in the queue for another worker, keeping its
    saved work (a graceful stop is not counted as an attempt). False when the row is no longer this
    process's to hand back."""
    _released.discard(job_id)
    try:
        with conn.transaction():
            row = conn.execute(
                "UPDATE jobs SET status = 'queued', worker = NULL, heartbeat_at = NULL, attempts = greatest(attempts - 1, 0)"
                " WHERE id = %s AND status = 'running' AND worker = %s RETURNING id", (job_id, worker_name())).fetchone()
    except psycopg.errors.UniqueViolation as exc:
        if exc.diag.constraint_name != ONE_QUEUED_INDEX:
            raise
        # a build of the tenant was queued after this one began (possible only while this one counted as
        # abandoned); it does the same work, resuming from what this one saved
        update_job(conn, job_id, status="cancelled", errors=[{"error": "released by a stopping worker while another "
                   "build of the tenant was queued; that build resumes from this one's saved work"}])
        return False
    return row is not None


class JobWatch:
    """What the running process has learned about its job row: whether it must stop, and why."""

    def __init__(self, job_id: int):
        self.job_id = job_id
        self.reason: str | None = None  # "cancelled", "released" or "lost" (see JobStoppedError)

    def note(self, state: str) -> None:
        """Take in what `update_job` returned."""
        if self.reason is None and state != "running":
            self.reason = {"cancelling": "cancelled", "released": "released"}.get(state, "lost")

    def raise_if_stopped(self) -> None:
        if self.reason is None and self.job_id in _released:  # at once, not at the next database write
            self.reason = "released"
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
