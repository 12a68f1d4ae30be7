"""Jobs: start a graph build (role: admin), follow or cancel any job of the tenant (admin too: a job
names every access level).

The build runs `graph.indexing.runner.build_graph` in a background thread of this process; its job row
(status, stage, progress, counts, usage) is what `GET /v1/jobs/{id}` returns. One build per tenant
runs at a time: this process knows its own build threads (`Services.jobs`, each entry dropped when
its build ends), and the database (core.jobs: one running job per tenant and kind, kept alive by
heartbeats) refuses a build that another replica or the CLI runs. Both refusals are the same 409,
naming the running job in `job_id`. With CROSSROADS_JOBS_RUN_IN=worker the build is only queued
(`status: queued`) for `crossroads worker` (api/worker_jobs.py); a second start while one waits is a
409 `job-queued` naming it.

Re-index, embedding model switch and Message Batch collection are only ever queued here, for `crossroads
worker` (api/worker_jobs.py, the same enqueue functions as the CLI's `--queue`): one queued and one
running per tenant and kind, a second start being the same 409s. A re-index names a path the server
reads, so it is refused unless the operator named a folder for it (CROSSROADS_JOBS_INGEST_ROOT), and
then only inside that folder.
"""
from __future__ import annotations

import logging
import os
import threading
from pathlib import Path as FsPath

from fastapi import APIRouter, Body, Depends, Path, Query, Response

from api import usecases
from api.http.services import RunningBuild, Services, services
from api.http.auth import Principal, admin
from api.http.problems import ApiProblem, validation_problem
from api.http.routes_query import ERRORS
from api.http.schemas_jobs import (
    BatchCollectionRequest, EmbeddingsStageRequest, GraphBuildRequest, Job, JobAccepted, JobList, ReindexRequest,
)
from core import jobs
from core.errors import (CrossroadsError, JobEndedError, JobNotFoundError, JobQueuedError, JobRunningError,
                         JobStoppedError)

log = logging.getLogger("crossroads.api")

routes = APIRouter(prefix="/v1", tags=["jobs"])

@routes.post("/jobs/graph-build", response_model=JobAccepted, status_code=202,
             responses={**ERRORS, 409: {"description": "A build of this tenant is running",
                                        "content": {"application/problem+json": {}}}},
             summary="Start building the entity graph, communities and reports (all levels, or one)")
def start_graph_build(response: Response, body: GraphBuildRequest | None = Body(None),
                      principal: Principal = Depends(admin), svc: Services = Depends(services)):
    from graph.indexing.runner import create_build_job

    body = body or GraphBuildRequest()
    tenant, settings, db = principal.tenant, svc.settings, svc.db()
    try:
        plan = usecases.plan_graph_build(db, settings, tenant, body.level, max_cost_usd=body.max_cost,
                                         batch=body.batch)
    except usecases.BuildRefused as exc:
        raise validation_problem([{"loc": ("body", exc.field), "type": "value_error", "msg": str(exc)}]) from None
    pipeline, estimate, meter = plan.pipeline, plan.estimate, plan.meter

    if settings.jobs_run_in == "worker":
        return _queue_build(response, db, tenant, body.level, pipeline, estimate)

    with svc.jobs_lock:
        running = svc.jobs.get(tenant)
        if running is not None and running.thread.is_alive() and _still_running(svc, running.job_id):
            raise _build_running(running.job_id)
        try:
            job_id = create_build_job(db, tenant, body.level, pipeline.extractor, pipeline.reporter,
                                      pipeline.summarizer)
        except JobRunningError as exc:
            raise _build_running(exc.job_id) from None

        def work() -> None:
            try:
                usecases.run_graph_build(db, svc.embedder(), tenant, plan, job_id=job_id)
            except JobStoppedError as exc:  # cancelled, or taken over: build_graph logged and recorded it
                log.info("graph build %s of tenant %s stopped: %s", job_id, tenant, exc.reason)
            except BaseException:  # noqa: BLE001 - build_graph recorded the failure on the job row
                log.exception("graph build %s of tenant %s failed", job_id, tenant)
            finally:
                _forget_build(svc, tenant, job_id)
                svc.metrics.usage(meter.summary())

        thread = threading.Thread(target=work, name=f"graph-build-{tenant}", daemon=True)
        thread.start()  # its first wait for `jobs_lock` (in _forget_build) comes after the entry below
        svc.jobs[tenant] = RunningBuild(job_id, thread)
    response.headers["Location"] = f"/v1/jobs/{job_id}"
    return {"job_id": job_id, "status": "running", "href": f"/v1/jobs/{job_id}", "estimate": estimate}


def _queue_build(response: Response, db, tenant: str, level: str | None, pipeline, estimate: dict) -> dict:
    """CROSSROADS_JOBS_RUN_IN=worker: queue the build for `crossroads worker` (api/worker_jobs.py)."""
    from api.worker_jobs import enqueue_graph_build

    try:
        job_id = enqueue_graph_build(db, tenant, level, pipeline)
    except JobRunningError as exc:
        raise _build_running(exc.job_id) from None
    except JobQueuedError as exc:
        raise ApiProblem(409, "job-queued", "Build already queued", f"{exc}; follow it with GET /v1/jobs/{exc.job_id}.",
                         job_id=exc.job_id) from None
    response.headers["Location"] = f"/v1/jobs/{job_id}"
    return {"job_id": job_id, "status": "queued", "href": f"/v1/jobs/{job_id}", "estimate": estimate}


def _still_running(svc: Services, job_id: int) -> bool:
    """Whether the job row still says running: a build thread lives on for a moment after its build
    recorded the end, and a start in that moment must not be refused in the finished job's name."""
    db = svc.db()
    with db.connection() as conn:
        job = jobs.get_job(conn, job_id, db.job_lease_s)
    return job is not None and job["status"] == "running"


def _forget_build(svc: Services, tenant: str, job_id: int) -> None:
    """Drop the tenant's entry once its build thread ends (only this build's: never a later one)."""
    with svc.jobs_lock:
        running = svc.jobs.get(tenant)
        if running is not None and running.job_id == job_id:
            del svc.jobs[tenant]


def _build_running(job_id: int | None) -> ApiProblem:
    """The 409 for a start while a build of the tenant runs, the same whether this process knows it
    (its own thread) or only the database does (another replica, the CLI)."""
    if job_id is None:  # the database's running job ended between the refusal and the look-up
        return ApiProblem(409, "job-running", "Build already running",
                          "A graph build of this tenant was running a moment ago and has just finished; "
                          "start again.", job_id=None)
    return ApiProblem(409, "job-running", "Build already running",
                      f"A graph build of this tenant is running (job {job_id}, started through this API, another "
                      f"replica or the CLI); follow it with GET /v1/jobs/{job_id} and retry when it is done.",
                      job_id=job_id)


# --- jobs only a worker runs: re-index, embedding model switch, Message Batch collection ---------------

QUEUED_409 = {409: {"description": "A job of this kind is queued or running for the tenant, or there is nothing to do",
                    "content": {"application/problem+json": {}}}}


@routes.post("/jobs/reindex", response_model=JobAccepted, status_code=202,
             responses={**ERRORS, **QUEUED_409},
             summary="Queue a sync of a folder, file or JSONL under CROSSROADS_JOBS_INGEST_ROOT (admin)")
def queue_reindex(response: Response, body: ReindexRequest, principal: Principal = Depends(admin),
                  svc: Services = Depends(services)):
    """The path is relative to CROSSROADS_JOBS_INGEST_ROOT (or absolute inside it): the caller names what
    to read, but only where the operator allowed. Unset, the endpoint is off (409)."""
    from api.worker_jobs import REINDEX_KIND, enqueue_reindex

    path = ingest_path(svc.settings.jobs_ingest_root, body.path)
    acl = sorted(set(body.acl))
    refused = usecases.batch_ingest_refused(svc.settings) if body.batch else None
    if refused:  # checked before queueing: a worker would only fail the job hours of nothing later
        raise validation_problem([{"loc": ("body", "batch"), "type": "value_error", "msg": refused}])
    try:
        job_id = enqueue_reindex(svc.db(), principal.tenant, path, acl, body.prune, body.batch)
    except (JobQueuedError, JobRunningError) as exc:
        raise _already(exc, REINDEX_KIND) from None
    except CrossroadsError as exc:  # the path went away between the check and the queueing
        raise _path_refused(f"{exc}") from None
    return _queued(response, job_id)


@routes.post("/jobs/embeddings-stage", response_model=JobAccepted, status_code=202,
             responses={**ERRORS, **QUEUED_409},
             summary="Queue staging another embedding model's vectors, and serving them with `switch` (admin)")
def queue_embeddings_stage(response: Response, body: EmbeddingsStageRequest, principal: Principal = Depends(admin),
                           svc: Services = Depends(services)):
    from api.worker_jobs import EMBEDDINGS_KIND, enqueue_embedding_switch
    from core.embeddings import model_id_for

    try:  # checked apart from the queueing so that a typo is the caller's 422, not a 409
        model_id_for(svc.settings, body.to)
    except CrossroadsError as exc:
        raise validation_problem([{"loc": ("body", "to"), "type": "value_error", "msg": str(exc)}]) from None
    try:
        job_id = enqueue_embedding_switch(svc.db(), svc.settings, principal.tenant, body.to, body.switch)
    except (JobQueuedError, JobRunningError) as exc:
        raise _already(exc, EMBEDDINGS_KIND) from None
    except CrossroadsError as exc:  # the tenant has no chunks yet
        raise ApiProblem(409, "nothing-to-stage", "Nothing to stage", f"{exc}.") from None
    return _queued(response, job_id)


@routes.post("/jobs/batch-collection", response_model=JobAccepted, status_code=202,
             responses={**ERRORS, **QUEUED_409},
             summary="Queue collecting the Message Batches a stopped batch build left running (admin)")
def queue_batch_collection(response: Response, body: BatchCollectionRequest | None = Body(None),
                           principal: Principal = Depends(admin), svc: Services = Depends(services)):
    from api.worker_jobs import BATCHES_KIND, enqueue_batch_collection

    try:
        job_id = enqueue_batch_collection(svc.db(), principal.tenant)
    except (JobQueuedError, JobRunningError) as exc:
        raise _already(exc, BATCHES_KIND) from None
    except CrossroadsError as exc:  # no Message Batches wait for the tenant
        raise ApiProblem(409, "nothing-to-collect", "Nothing to collect", f"{exc}.") from None
    return _queued(response, job_id)


def ingest_path(root: FsPath | None, given: str) -> FsPath:
    """The real path `given` names under the ingest root, or a 422 naming `path` when it is not inside it
    (`..`, an absolute path elsewhere, a link out of the root), does not exist or cannot be looked at.
    Absolute paths elsewhere are refused before the filesystem is touched, so the answer tells nothing
    of what exists outside the root. Inside the folder, ingest follows no link (vector/ingest/sources.py)."""
    if root is None:
        raise ApiProblem(409, "reindex-off", "Re-index over HTTP is off",
                         "This server reads no folder for a remote caller: set CROSSROADS_JOBS_INGEST_ROOT to the "
                         "folder (on storage every worker mounts) that re-index jobs may read and restart the API, or "
                         "queue it from a shell with `crossroads ingest PATH --tenant T --queue`.")
    base = root.resolve()
    if not base.is_dir():
        raise ApiProblem(409, "ingest-root-missing", "Ingest root missing",
                         "CROSSROADS_JOBS_INGEST_ROOT is not a folder on this server: the operator must create it "
                         "(or mount the workers' shared storage there) and restart the API.")
    wanted = FsPath(given)
    if ".." in wanted.parts:
        raise _path_refused("must not contain `..`: name the path below CROSSROADS_JOBS_INGEST_ROOT")
    if wanted.is_absolute() and not (wanted.is_relative_to(os.path.abspath(root)) or wanted.is_relative_to(base)):
        raise _path_refused("is outside CROSSROADS_JOBS_INGEST_ROOT: send a path relative to it")
    try:
        target = (base / wanted).resolve()  # an absolute `wanted` replaces `base`
        if not target.is_relative_to(base):
            raise _path_refused("leads out of CROSSROADS_JOBS_INGEST_ROOT through a symbolic link: name a path "
                                "whose files are inside it")
        if not target.exists():
            raise _path_refused("does not exist under CROSSROADS_JOBS_INGEST_ROOT: put the folder there first")
    except (OSError, RuntimeError) as exc:  # a name too long, a link loop, a folder this server may not read
        raise _path_refused(f"cannot be looked at ({getattr(exc, 'strerror', None) or 'a link loop'})") from None
    return target


def _path_refused(message: str) -> ApiProblem:
    return validation_problem([{"loc": ("body", "path"), "type": "value_error", "msg": message}])


def _already(exc: JobQueuedError | JobRunningError, kind: str) -> ApiProblem:
    """The 409 for a second start of a kind that is queued or running for the tenant, naming that job."""
    then = f"; follow it with GET /v1/jobs/{exc.job_id}" if exc.job_id is not None else ""
    if isinstance(exc, JobQueuedError):
        return ApiProblem(409, "job-queued", "Job already queued", f"{exc}{then}.", job_id=exc.job_id, kind=kind)
    return ApiProblem(409, "job-running", "Job already running", f"{exc}{then}.", job_id=exc.job_id, kind=kind)


def _queued(response: Response, job_id: int) -> dict:
    response.headers["Location"] = f"/v1/jobs/{job_id}"
    return {"job_id": job_id, "status": "queued", "href": f"/v1/jobs/{job_id}", "estimate": {}}


@routes.get("/jobs", response_model=JobList, responses=ERRORS, summary="The tenant's jobs, newest first (admin)")
def list_jobs(limit: int = Query(20, ge=1, le=200, description="Jobs per page (1..200)."),
              offset: int = Query(0, ge=0, le=10_000_000, description="Jobs to skip."),
              principal: Principal = Depends(admin), svc: Services = Depends(services)):
    """Admin only, as each job is: a build's params, stage and counts name every access level."""
    db = svc.db()
    with db.connection() as conn:
        page, total = jobs.list_jobs(conn, principal.tenant, db.job_lease_s, limit, offset)
    for job in page:
        job.pop("tenant")
    return {"jobs": page, "total": total, "limit": limit, "offset": offset}


# admin only, as starting one is: a build's params, stage and counts name every access level and its
# groups, which a reader must not learn beyond the level it is served from (GET /v1/graph/status)
@routes.get("/jobs/{job_id}", response_model=Job, responses=ERRORS,
            summary="A job's status, stage, progress, counts and LLM usage (admin)")
def get_job(job_id: int = Path(..., ge=1, le=2**63 - 1), principal: Principal = Depends(admin),
            svc: Services = Depends(services)):
    db = svc.db()
    with db.connection() as conn:
        job = jobs.get_job(conn, job_id, db.job_lease_s)
    if job is None or job["tenant"] != principal.tenant:
        raise ApiProblem(404, "job-not-found", "Job not found", f"No job {job_id} in this tenant.")
    job.pop("tenant")
    return job


@routes.post("/jobs/{job_id}/cancel", response_model=Job, status_code=202,
             responses={**ERRORS, 409: {"description": "The job has already ended",
                                        "content": {"application/problem+json": {}}}},
             summary="Stop a running job, in whichever process runs it (admin)")
def cancel_job(job_id: int = Path(..., ge=1, le=2**63 - 1), principal: Principal = Depends(admin),
               svc: Services = Depends(services)):
    """The job stops at its next progress step and records `cancelled` (GET /v1/jobs/{id} shows when);
    what it saved so far is kept, and the next build resumes from it."""
    db = svc.db()
    try:
        with db.connection() as conn:
            job = jobs.request_cancel(conn, job_id, principal.tenant, db.job_lease_s)
    except JobNotFoundError:
        raise ApiProblem(404, "job-not-found", "Job not found", f"No job {job_id} in this tenant.") from None
    except JobEndedError as exc:
        raise ApiProblem(409, "job-ended", "Job already ended", f"{exc}.") from None
    job.pop("tenant")
    return job
