"""Errors a user can act on.

Every `CrossroadsError` message says what went wrong and what to do next, so the CLI and the API
can show it as is (no stack trace). Anything else escaping is a bug.
"""
from __future__ import annotations


class CrossroadsError(Exception):
    """Base for user-facing errors whose message says what to do next."""


class EmbeddingError(CrossroadsError):
    """An embedding provider failed or answered something we cannot trust."""


class EngineUnavailableError(EmbeddingError):
    """A local embedding engine could not load (its runtime, graph or model image); nothing was embedded."""


class DatabaseError(CrossroadsError):
    """The database is unreachable, too old, or missing an extension."""


class ModelNotServedError(CrossroadsError):
    """A search embedded its query with a model the tenant has no vectors of (e.g. after a switch).

    Raised instead of returning an empty vector leg: comparing nothing would silently turn a
    hybrid search into full-text only.
    """


class SearchUnavailableError(CrossroadsError, RuntimeError):
    """Every leg of a search failed, or its results could not be read: no result to give, degraded or not."""


class JobRunningError(CrossroadsError):
    """A job of this kind already runs for the tenant, in this process or another: one at a time."""

    def __init__(self, kind: str, tenant: str, job_id: int | None, heartbeat_at, lease_s: float):
        self.kind, self.tenant, self.job_id = kind, tenant, job_id
        if job_id is None:
            message = (f"a {kind} job of tenant {tenant!r} was running a moment ago and has just finished; "
                       "start again")
        else:
            alive = f"last heartbeat {heartbeat_at:%Y-%m-%d %H:%M:%S %Z}" if heartbeat_at else "no heartbeat yet"
            message = (f"a {kind} job of tenant {tenant!r} is already running (job {job_id}, {alive}); one runs "
                       f"at a time. Wait for job {job_id} to finish, then start again (if its process has died, it "
                       f"counts as abandoned {lease_s:g} s after its last heartbeat and the next start takes over)")
        super().__init__(message)


class JobQueuedError(CrossroadsError):
    """A job of this kind already waits for a worker for the tenant: a second would repeat it."""

    def __init__(self, kind: str, tenant: str, job_id: int | None):
        self.kind, self.tenant, self.job_id = kind, tenant, job_id
        super().__init__(f"a {kind} job of tenant {tenant!r} is already queued (job {job_id}) and will run when a "
                         f"worker (`crossroads worker`) takes it; follow job {job_id} instead of starting another")


class JobStoppedError(CrossroadsError):
    """The running job must stop: an operator cancelled it, or its row is no longer running (its lease
    ran out and another process took the tenant's slot over), or its worker is stopping and hands it back
    to the queue. `reason`: "cancelled", "released" or "lost"."""

    def __init__(self, job_id: int, reason: str):
        self.job_id, self.reason = job_id, reason
        if reason == "cancelled":
            message = f"job {job_id} was cancelled on request; what it saved so far is kept and a new start resumes from it"
        elif reason == "released":
            message = (f"job {job_id} goes back to the queue: this worker is stopping; the next worker resumes it "
                       "from the work it saved")
        else:
            message = (f"job {job_id} is no longer running in the database (it missed its lease and was failed as "
                       "abandoned, or another process took over): this process stops writing")
        super().__init__(message)


class JobNotFoundError(CrossroadsError):
    """No job of this id in the tenant (another tenant's job is reported the same way)."""


class JobEndedError(CrossroadsError):
    """The job has already ended: there is nothing left to stop."""


class BadDocument(ValueError):
    """One source document cannot be indexed, and why; ingest turns it into a `Skipped` entry and goes on."""
