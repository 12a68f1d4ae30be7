"""Graph builds through the job queue: enqueue one (API and `crossroads graph build --queue`, with
CROSSROADS_JOBS_RUN_IN=worker) and run one in a worker (`crossroads worker`, core/worker.py).

A queued build records which extractor, model and summarizer it was estimated and approved for; a
worker builds with its own settings, so it refuses a job its settings would build differently (no
Anthropic key where the job expected the LLM, another model) rather than silently build another graph.
"""
from __future__ import annotations

import logging

from core import jobs
from core.database import Database
from core.errors import CrossroadsError
from core.settings import Settings

log = logging.getLogger(__name__)


def build_params(level: str | None, pipeline, claims: bool | None) -> dict:
    """The job's params: the level, and the parts the build was approved with (as create_build_job's)."""
    params = {"level": level, "extractor": pipeline.extractor.name,
              "model": pipeline.extractor.model or pipeline.reporter.model}
    if pipeline.summarizer is not None:
        params["summarizer"] = pipeline.summarizer.name
    if claims is not None:
        params["claims"] = claims
    if pipeline.batch is not None:
        params["batch"] = True
    return params


def enqueue_graph_build(db: Database, tenant: str, level: str | None, pipeline, claims: bool | None = None) -> int:
    """Queue a build of the tenant (one level, or all); raises CrossroadsError for an unknown level,
    JobRunningError / JobQueuedError while a build of the tenant runs or waits."""
    from graph import store
    from graph.levels import levels_to_build
    from graph.status import BUILD_KIND

    with db.connection() as conn:
        levels_to_build(store.list_levels(conn, tenant), level, tenant)
        return jobs.enqueue_job(conn, BUILD_KIND, tenant, build_params(level, pipeline, claims), db.job_lease_s)


def graph_build_handler(db: Database, settings: Settings):
    """The worker's handler for graph builds; the embedding model is loaded once, for every job."""
    from core.embeddings import make_embedder
    from core.llm import UsageMeter, make_llm
    from graph.build.contracts import BuildSettings
    from graph.build.parts import make_pipeline
    from graph.build.runner import build_graph

    embedder = make_embedder(settings)

    def run(job: dict) -> None:
        wanted = job["params"]
        meter = UsageMeter()
        try:
            pipeline = make_pipeline(settings, make_llm(settings, meter), claims=wanted.get("claims"),
                                     batch_for=(db, job["tenant"]) if wanted.get("batch") else None)
        except CrossroadsError as exc:  # a batch build queued for the LLM, and this worker has no key
            with db.connection() as conn:
                jobs.update_job(conn, job["id"], status="failed", stage="failed", errors=[{"error": str(exc)}])
            return
        mine = build_params(wanted.get("level"), pipeline, wanted.get("claims"))
        if mine != wanted:
            message = (f"this worker would build with {mine} but the job was queued for {wanted}: give the workers "
                       "the settings of the API that queues builds (ANTHROPIC_API_KEY, CROSSROADS_LLM_MODEL_*), then "
                       "queue the build again")
            log.error("job %s refused: %s", job["id"], message)
            with db.connection() as conn:
                jobs.update_job(conn, job["id"], status="failed", stage="failed", errors=[{"error": message}])
            return
        result = build_graph(db, job["tenant"], wanted.get("level"), pipeline.extractor, pipeline.reporter, embedder,
                             BuildSettings.from_settings(settings), usage=meter.summary, summarizer=pipeline.summarizer,
                             job_id=job["id"])
        log.info("graph build %s of tenant %s: %s; LLM usage %s", job["id"], job["tenant"], result["status"],
                 result["usage"])

    return run
