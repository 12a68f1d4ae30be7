"""Jobs: start a graph build (role: admin), follow any job of the tenant (reader).

The build runs `graph.build.build_graph` in a background thread of this process; its job row
(status, stage, progress, counts, usage) is what `GET /v1/jobs/{id}` returns. One build per tenant
runs at a time in a process.
"""
from __future__ import annotations

import logging
import threading
import time

from fastapi import APIRouter, Body, Depends, Path, Response

from api import store as api_store
from api.app import Services, services
from api.auth import Principal, admin, reader
from api.problems import ApiProblem, validation_problem
from api.routes_query import ERRORS
from api.schemas import GraphBuildRequest, Job, JobAccepted
from graph import store

log = logging.getLogger("crossroads.api")

router = APIRouter(prefix="/v1", tags=["jobs"])

KIND = "graph-build"
JOB_ROW_WAIT_S = 30.0
PROGRESS_EVERY_S = 1.0


class _BuildRun:
    def __init__(self):
        self.job_id: int | None = None
        self.error: BaseException | None = None
        self.finished = threading.Event()
        self._last_progress = 0.0

    def progress(self, svc: Services, stage: str, done: int, total: int) -> None:
        now = time.monotonic()
        if self.job_id is None or (now - self._last_progress < PROGRESS_EVERY_S and done < total):
            return
        self._last_progress = now
        try:
            with svc.db().connection() as conn:
                store.update_job(conn, self.job_id, progress={"stage": stage, "done": done, "total": total})
        except Exception:  # noqa: BLE001 - progress is informative; the build goes on
            log.warning("could not record the progress of job %s", self.job_id, exc_info=True)


def _estimate(svc: Services, tenant: str, levels, extractor, reporter, llm) -> dict:
    """What the LLM work would cost (0 offline), as `crossroads graph build` prints it."""
    from graph.build import communities_to_report, estimate_extraction, estimate_reports

    db = svc.db()
    extraction = estimate_extraction(db, tenant, levels, extractor)
    to_report = communities_to_report(db, tenant, levels, reporter.model, extraction["to_extract"] > 0) if llm else 0
    reports = estimate_reports(to_report, reporter.model)
    return {**extraction, "reports": reports, "cost_usd": round(extraction["cost_usd"] + reports["cost_usd"], 4)}


@router.post("/jobs/graph-build", response_model=JobAccepted, status_code=202,
             responses={**ERRORS, 409: {"description": "A build of this tenant is running",
                                        "content": {"application/problem+json": {}}}},
             summary="Start building the entity graph, communities and reports (all levels, or one)")
def start_graph_build(response: Response, body: GraphBuildRequest | None = Body(None),
                      principal: Principal = Depends(admin), svc: Services = Depends(services)):
    from core.llm import UsageMeter, make_llm
    from graph.build import BuildSettings, OfflineReporter, build_graph
    from graph.extract_llm import LLMExtractor
    from graph.extract_offline import OfflineExtractor
    from graph.reports_llm import LLMReporter

    body = body or GraphBuildRequest()
    tenant, settings, db = principal.tenant, svc.settings, svc.db()
    with db.connection() as conn:
        levels = store.list_levels(conn, tenant)
    chosen = [lvl for lvl in levels if body.level in (None, lvl.name)]
    if not chosen:
        names = ", ".join(lvl.name for lvl in levels)
        raise validation_problem([{"loc": ("body", "level"), "type": "value_error",
                                   "msg": f"no access level {body.level!r} in this tenant (levels: {names})"}])
    meter = UsageMeter()
    llm = make_llm(settings, meter)
    extractor = LLMExtractor(llm, settings.llm_model_fast) if llm else OfflineExtractor()
    reporter = LLMReporter(llm, settings.llm_model_answer) if llm else OfflineReporter()
    estimate = _estimate(svc, tenant, chosen, extractor, reporter, llm)
    if estimate["cost_usd"] > body.max_cost:
        raise validation_problem([{"loc": ("body", "max_cost"), "type": "less_than_equal",
                                   "msg": f"the build is estimated at ${estimate['cost_usd']}, over max_cost "
                                          f"{body.max_cost}; raise max_cost to proceed"}])

    run = _BuildRun()

    def usage() -> dict:
        total = meter.total
        return {"calls": total.calls, "input_tokens": total.input_tokens, "output_tokens": total.output_tokens,
                "cache_read_tokens": total.cache_read_tokens, "cache_write_tokens": total.cache_write_tokens,
                "cost_usd": round(total.cost_usd, 6)}

    def work() -> None:
        try:
            build_graph(db, tenant, body.level, extractor, reporter, svc.embedder(), BuildSettings(),
                        lambda stage, done, total: run.progress(svc, stage, done, total), usage)
        except BaseException as exc:  # noqa: BLE001 - recorded on the job row by build_graph; logged here
            run.error = exc
            log.exception("graph build of tenant %s failed", tenant)
        finally:
            svc.metrics.usage(usage())
            run.finished.set()

    with svc.jobs_lock:
        running = svc.jobs.get(tenant)
        if running is not None and running.is_alive():
            raise ApiProblem(409, "job-running", "Build already running",
                             "A graph build of this tenant is running; follow it with GET /v1/jobs/{id} and retry "
                             "when it is done.")
        with db.connection() as conn:
            before = api_store.last_job_id(conn, tenant, KIND)
        thread = threading.Thread(target=work, name=f"graph-build-{tenant}", daemon=True)
        svc.jobs[tenant] = thread
        thread.start()

    # build_graph creates its job row first thing: wait for it to hand out its id
    deadline = time.monotonic() + JOB_ROW_WAIT_S
    while run.job_id is None and time.monotonic() < deadline:
        with db.connection() as conn:
            run.job_id = api_store.job_after(conn, tenant, KIND, before)
        if run.job_id is None:
            if run.finished.is_set():
                break
            time.sleep(0.05)
    if run.job_id is None:
        if run.error is not None and isinstance(run.error, Exception):
            raise run.error
        raise ApiProblem(503, "job-not-started", "Job not started",
                         "The graph build did not start in time; see the server log and try again.")
    response.headers["Location"] = f"/v1/jobs/{run.job_id}"
    with db.connection() as conn:
        job = store.get_job(conn, run.job_id)
    return {"job_id": run.job_id, "status": job["status"] if job else "running", "href": f"/v1/jobs/{run.job_id}",
            "estimate": estimate}


@router.get("/jobs/{job_id}", response_model=Job, responses=ERRORS,
            summary="A job's status, stage, progress, counts and LLM usage")
def get_job(job_id: int = Path(..., ge=1, le=2**63 - 1), principal: Principal = Depends(reader),
            svc: Services = Depends(services)):
    with svc.db().connection() as conn:
        job = store.get_job(conn, job_id)
    if job is None or job["tenant"] != principal.tenant:
        raise ApiProblem(404, "job-not-found", "Job not found", f"No job {job_id} in this tenant.")
    job.pop("tenant")
    return job
