"""The jobs `crossroads worker` runs (core/worker.py), and how each is queued.

- graph builds: the API and `crossroads graph build --queue` (CROSSROADS_JOBS_RUN_IN=worker);
- re-index (`reindex`): `crossroads ingest PATH --queue`, a sync of a folder or JSONL on storage every
  worker mounts; a stopped one resumes by syncing again (what was written is unchanged, so free);
- embedding model switch (`embeddings_switch`): `crossroads embeddings stage --queue [--switch]`,
  the new model's vectors staged (resumable batches), then served when asked;
- Message Batch collection (`llm_batches`): `crossroads graph collect`, for a tenant whose batch build
  stopped (cancelled, killed) with Message Batches still running: it downloads their results as they
  end (core.llm.batches.collect_finished) without holding an embedding model or a build's memory, then
  queues the build that uses them (matched by custom_id: not paid for twice).

Every kind runs under the job's heartbeat, stops at its next progress step when its worker is stopping
(the worker puts it back in the queue) or an operator cancels it, and records its outcome on its row.

A queued build records which extractor, model and summarizer it was estimated and approved for; a
worker builds with its own settings, so it refuses a job its settings would build differently (no
Anthropic key where the job expected the LLM, another model) rather than silently build another graph.
"""
from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Callable

from core import jobs
from core.database import Database
from core.errors import CrossroadsError, JobQueuedError, JobRunningError, JobStoppedError
from core.settings import Settings

log = logging.getLogger(__name__)

REINDEX_KIND = "reindex"
EMBEDDINGS_KIND = "embeddings_switch"
BATCHES_KIND = "llm_batches"
PROGRESS_EVERY_S = 1.0  # progress is written at most this often (each write is also a heartbeat)


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
    from core.llm.client import make_llm
    from core.llm.usage import UsageMeter
    from graph.indexing.contracts import BuildSettings
    from graph.indexing.parts import make_pipeline
    from graph.indexing.runner import build_graph

    embedder = make_embedder(settings)

    def run(job: dict) -> None:
        wanted = job["params"]
        meter = UsageMeter()
        try:
            pipeline = make_pipeline(settings, make_llm(settings, meter), claims=wanted.get("claims"),
                                     batch_for=(db, job["tenant"]) if wanted.get("batch") else None,
                                     collect_for=None if wanted.get("batch") else (db, job["tenant"]))
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


# --- re-index, embedding switch, batch collection ---------------------------------------------------

Work = Callable[[jobs.JobWatch], tuple[str, dict, list]]  # -> (final status, counts, errors)


def _record(db: Database, job: dict, work: Work) -> None:
    """Run `work` under the job's heartbeat and write its outcome on the row: its status and counts, or
    `failed` with the reason, or `cancelled` on request. A job released by its stopping worker writes
    nothing (the worker requeues it); one that lost its row writes nothing either."""
    job_id = job["id"]
    try:
        with jobs.heartbeat(db, job_id) as watch:
            with db.connection() as conn:
                watch.update(conn, stage="running")
            status, counts, errors = work(watch)
    except JobStoppedError as exc:
        if exc.reason == "cancelled":
            with db.connection() as conn:
                jobs.update_job(conn, job_id, status="cancelled", stage="cancelled", errors=[{"error": str(exc)}])
        raise
    except Exception as exc:
        with db.connection() as conn:
            jobs.update_job(conn, job_id, status="failed", stage="failed", errors=[{"error": str(exc)}])
        raise
    with db.connection() as conn:
        jobs.update_job(conn, job_id, status=status, stage=status, counts=counts, errors=errors)


def _progress(db: Database, watch: jobs.JobWatch) -> Callable[..., None]:
    """A runner's progress hook ((stage, done, total) or (done, total)) that writes the job's progress,
    at most every PROGRESS_EVERY_S, and stops the work (raises) as soon as the job must stop."""
    last = [0.0]

    def step(*args) -> None:
        stage, done, total = args if len(args) == 3 else ("embed", *args)
        now = time.monotonic()
        if now - last[0] >= PROGRESS_EVERY_S or done == total:
            last[0] = now
            with db.connection() as conn:
                watch.update(conn, progress={"stage": stage, "done": done, "total": total})
        watch.raise_if_stopped()

    return step


def _wait(watch: jobs.JobWatch, seconds: float) -> None:
    """Sleep, in steps short enough that a stopping worker's release is seen well within its grace."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        time.sleep(min(left, 0.2))
        watch.raise_if_stopped()


def enqueue_reindex(db: Database, tenant: str, path: Path, acl: list[str], prune: bool, batch: bool = False) -> int:
    """Queue a sync of `path` (a folder, file or JSONL) into the tenant. The path is resolved here and must
    be where every worker finds it (shared storage): a worker without it fails the job saying so. `batch`:
    the chunk contexts go as Message Batches (`crossroads ingest --batch`); the job waits for them."""
    path = path.expanduser().resolve()
    if not path.exists():
        raise CrossroadsError(f"{path} does not exist: queue a path on storage the workers mount")
    params = {"path": str(path), "acl": acl, "prune": prune}
    if batch:
        params["batch"] = True
    with db.connection() as conn:
        return jobs.enqueue_job(conn, REINDEX_KIND, tenant, params, db.job_lease_s)


def reindex_handler(db: Database, settings: Settings, embedder):
    """The worker's handler for re-index jobs, with the configured embedder (loaded once, for every job)."""
    from api.usecases import index_documents
    from vector.ingest.sources import load_source

    def run(job: dict) -> None:
        wanted = job["params"]

        def work(watch: jobs.JobWatch) -> tuple[str, dict, list]:
            try:
                documents, skipped = load_source(Path(wanted["path"]), wanted["acl"], settings.max_document_bytes)
            except FileNotFoundError as exc:
                raise CrossroadsError(f"{exc} on worker {jobs.worker_name()}: put the folder on storage every worker "
                                      "mounts at the same path, then queue it again") from None
            report = index_documents(db, embedder, settings, job["tenant"], documents, skipped,
                                     prune=wanted["prune"], progress=_progress(db, watch),
                                     batch=wanted.get("batch", False), job_id=job["id"]).report
            errors = [{"error": f"skipped {s['where']}: {s['reason']}"} for s in report.skipped]
            errors += [{"error": f"failed {e['doc_id']}: {e['error']}"} for e in report.errors]
            counts = {"documents": report.documents, "chunks": report.chunks,
                      "embeddings_computed": report.embeddings_computed, "vectors_reused": report.vectors_reused}
            return ("done" if report.clean else "partial"), counts, errors

        _record(db, job, work)

    return run


def enqueue_embedding_switch(db: Database, settings: Settings, tenant: str, to: str, then_switch: bool) -> int:
    """Queue staging the vectors of model `to` for the tenant (and serving them once complete, with
    `then_switch`); the spec is checked here, so a typo fails now, not in a worker."""
    from core.embeddings import model_id_for

    model_id_for(settings, to)
    with db.connection() as conn:
        if conn.execute("SELECT NOT EXISTS (SELECT 1 FROM chunks WHERE tenant_id = %s)", (tenant,)).fetchone()[0]:
            raise CrossroadsError(f"tenant {tenant!r} has no chunks: ingest its documents first")
        return jobs.enqueue_job(conn, EMBEDDINGS_KIND, tenant, {"to": to, "switch": then_switch}, db.job_lease_s)


def embeddings_handler(db: Database, settings: Settings):
    """The worker's handler for embedding model switches: the job's model is loaded per job."""
    from core.embeddings import embedder_for
    from vector.model_switch.runner import stage_vectors, switch

    def run(job: dict) -> None:
        wanted, tenant = job["params"], job["tenant"]

        def work(watch: jobs.JobWatch) -> tuple[str, dict, list]:
            embedder = embedder_for(settings, wanted["to"])
            report = stage_vectors(db, embedder, tenant, progress=_progress(db, watch))
            counts = report.to_dict()
            if not report.complete:
                return "partial", counts, [{"error": f"{report.remaining} chunks still lack a {report.target_model} "
                                                     "vector (added or changed during the run): queue it again"}]
            if wanted["switch"]:
                counts["switch"] = switch(db, tenant, embedder.model_id, spec=wanted["to"],
                                          tenant_graph_min_rows=settings.tenant_vector_index_min_rows)
            return "done", counts, []

        _record(db, job, work)

    return run


def enqueue_batch_collection(db: Database, tenant: str) -> int:
    """Queue the collection of the tenant's Message Batches that no build has collected yet."""
    from core.llm import batches

    with db.connection() as conn:
        if not batches.waiting(conn, tenant):
            raise CrossroadsError(f"tenant {tenant!r} has no Message Batches waiting to be collected "
                                  "(`crossroads graph status` lists them)")
        return jobs.enqueue_job(conn, BATCHES_KIND, tenant, {}, db.job_lease_s)


def batch_collection_handler(db: Database, settings: Settings):
    """The worker's handler for Message Batch collection: every CROSSROADS_LLM_BATCH_POLL_S, download the
    results of the tenant's batches that have ended (core.llm.batches.collect_finished: kept on their rows),
    until none is still running; then queue the batch build that uses them, with the parameters of the
    build that sent them."""
    from core.llm import batches
    from core.llm.client import make_llm
    from graph.status import BUILD_KIND

    def run(job: dict) -> None:
        tenant = job["tenant"]

        def work(watch: jobs.JobWatch) -> tuple[str, dict, list]:
            llm = make_llm(settings)
            if llm is None:
                raise CrossroadsError("collecting Message Batches needs the Anthropic API key of the build that sent "
                                      "them: set ANTHROPIC_API_KEY for the workers, then queue it again")
            while True:
                batches.collect_finished(llm, db, tenant)
                with db.connection() as conn:
                    waiting = batches.waiting(conn, tenant)
                    running = [w for w in waiting if w["collected"] < w["requests"]]
                    watch.update(conn, progress={"batches": len(waiting), "open": len(running)})
                if not running:
                    break
                _wait(watch, settings.llm_batch_poll_s)
            counts = {"batches": len({w["batch_id"] for w in waiting}),
                      "requests": sum(w["collected"] for w in waiting)}
            if not waiting:  # nothing left to use: gone (sent again by the next build), or all failed
                return "done", counts | {"build_job": None}, []
            sent_by = [w["job_id"] for w in waiting if w["job_id"] is not None]
            with db.connection() as conn:
                build = jobs.get_job(conn, sent_by[-1], db.job_lease_s) if sent_by else None
                params = dict(build["params"]) if build else {"level": None}
                try:
                    counts["build_job"] = jobs.enqueue_job(conn, BUILD_KIND, tenant, params | {"batch": True},
                                                           db.job_lease_s)
                except (JobRunningError, JobQueuedError) as exc:  # that build uses them
                    counts["build_job"] = None
                    return "done", counts, [{"error": f"no build queued: {exc}"}]
            return "done", counts, []

        _record(db, job, work)

    return run
