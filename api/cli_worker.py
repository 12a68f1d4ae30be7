"""CLI: `crossroads worker`, a process that runs queued jobs (core/worker.py)."""
from __future__ import annotations

import logging
from typing import Optional

import typer

from api.cli_common import app, database, out
from core.settings import get_settings


@app.command("worker")
def worker(
    max_jobs: Optional[int] = typer.Option(None, "--max-jobs", min=1, help="Exit after this many jobs (default: run "
                                           "until SIGTERM or Ctrl-C)."),
) -> None:
    """Run queued jobs (graph builds) until stopped. Start any number, on any machines, against the same
    database; the API queues builds for them with CROSSROADS_JOBS_RUN_IN=worker. SIGTERM hands the running
    job back to the queue; a worker killed outright leaves it to the next one after its lease."""
    from api.worker_jobs import graph_build_handler
    from core.worker import Worker
    from graph.status import BUILD_KIND

    settings = get_settings()
    # an operator's process: its log is its output (which jobs it takes, resumes and hands back)
    logging.getLogger().setLevel(logging.INFO)
    with database(settings) as db:
        runner = Worker(db, {BUILD_KIND: graph_build_handler(db, settings)}, poll_s=settings.worker_poll_s,
                        stop_grace_s=settings.worker_stop_grace_s)
        runner.stop_on_signals()
        ran = runner.run(max_jobs)
    out.print(f"worker ran {ran} job(s)")
