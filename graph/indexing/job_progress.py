"""A graph build's link to its job row while it runs: progress recorded at most once a second, and
the points where a build stops when its job must (cancel request, or a row no longer running)."""
from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Callable, Iterable, Iterator, Mapping

from core import jobs
from core.database import Database

log = logging.getLogger(__name__)

Progress = Callable[[str, int, int], None]  # (stage, done, total)


@contextmanager
def dropping_pool(workers: int) -> Iterator[ThreadPoolExecutor]:
    """A thread pool whose queued calls are dropped when the block ends early (a stopped job, an
    error): `map` submits every call up front, and each may be a paid LLM request."""
    pool = ThreadPoolExecutor(max_workers=workers)
    try:
        yield pool
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def not_cached(items: Iterable, found: Mapping[str, object]) -> dict:
    """content hash -> the first item with it, for items whose hash is not in the cache's `found`:
    what a step still has to compute (extractions, summaries)."""
    todo: dict = {}
    for item in items:
        if item.content_hash not in found:
            todo.setdefault(item.content_hash, item)
    return todo


class JobProgress:
    """Records (stage, done, total) on the job row, at most once a second, and passes it on. Each call
    is also where the build stops when its job must (core.jobs.JobWatch: a cancel request, or a row
    that is no longer running): the stage's remaining work is dropped, what was saved stays."""

    def __init__(self, db: Database, job_id: int, forward: Progress | None, watch: jobs.JobWatch,
                 every_s: float = 1.0):
        self.db, self.job_id, self.forward, self.watch, self.every_s = db, job_id, forward, watch, every_s
        self._last = 0.0

    def __call__(self, stage: str, done: int, total: int) -> None:
        self.watch.raise_if_stopped()
        if self.forward:
            self.forward(stage, done, total)
        now = time.monotonic()
        if now - self._last < self.every_s and done < total:
            return
        self._last = now
        try:
            with self.db.connection() as conn:
                state = jobs.update_job(conn, self.job_id, progress={"stage": stage, "done": done, "total": total})
        except Exception:  # noqa: BLE001 - progress is informative; the build goes on
            log.warning("could not record the progress of job %s", self.job_id, exc_info=True)
            return
        self.watch.note(state)
        self.watch.raise_if_stopped()
