"""CLI: `crossroads worker`, a process that runs queued jobs (core/worker.py), and `crossroads graph
collect`, which queues the collection of a tenant's Message Batches for it."""
from __future__ import annotations

import logging
from typing import Callable, Optional

import typer

from api.cli.common import JsonOption, TenantOption, announce_queued, app, database, fail, out
from api.cli.graph import graph_app
from core.errors import CrossroadsError
from core.settings import Settings, get_settings


@app.command("worker")
def worker(
    max_jobs: Optional[int] = typer.Option(None, "--max-jobs", min=1, help="Exit after this many jobs (default: run "
                                           "until SIGTERM or Ctrl-C)."),
) -> None:
    """Run queued jobs (graph builds, re-index, embedding switches, Message Batch collection) until stopped.
    Start any number, on any machines, against the same database; the API queues builds for them with
    CROSSROADS_JOBS_RUN_IN=worker. SIGTERM hands the running job back to the queue; a worker killed
    outright leaves it to the next one after its lease."""
    from api import worker_jobs
    from core.embeddings import make_embedder
    from core.worker import Worker
    from graph.status import BUILD_KIND

    settings = get_settings()
    # an operator's process: its log is its output (which jobs it takes, resumes and hands back)
    logging.getLogger().setLevel(logging.INFO)
    with database(settings) as db:
        handlers = {BUILD_KIND: worker_jobs.graph_build_handler(db, settings),
                    worker_jobs.REINDEX_KIND: worker_jobs.reindex_handler(db, settings, make_embedder(settings)),
                    worker_jobs.EMBEDDINGS_KIND: worker_jobs.embeddings_handler(db, settings),
                    worker_jobs.BATCHES_KIND: worker_jobs.batch_collection_handler(db, settings)}
        runner = Worker(db, handlers, poll_s=settings.worker_poll_s, stop_grace_s=settings.worker_stop_grace_s)
        runner.stop_on_signals()
        ran = runner.run(max_jobs)
    out.print(f"worker ran {ran} job(s)")


@graph_app.command("collect")
def collect(tenant: str = TenantOption, json_out: bool = JsonOption) -> None:
    """Queue, for `crossroads worker`, the collection of the tenant's Message Batches that a stopped batch
    build left running: the worker waits for them, then queues the build that collects their results."""
    from api.worker_jobs import enqueue_batch_collection

    queued(get_settings(), lambda db: enqueue_batch_collection(db, tenant), json_out)


def queued(settings: Settings, enqueue: Callable, json_out: bool) -> None:
    """Run an enqueue function of api.worker_jobs and say what was queued (or why not)."""
    with database(settings) as db:
        try:
            job_id = enqueue(db)
        except CrossroadsError as exc:  # JobQueuedError and JobRunningError are ones: one job per tenant and kind
            fail(exc)
    announce_queued(job_id, json_out, f"`GET /v1/jobs/{job_id}`")
