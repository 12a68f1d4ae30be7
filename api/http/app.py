"""The HTTP API: `create_app(settings)` builds the FastAPI app (`crossroads serve` runs it with uvicorn).

Routes live in `api/routes_*.py`; auth in `api/http/auth.py`; errors in `api/http/problems.py`. Everything the
routes share sits on one `Services` object (api/http/services.py), made lazily: the process starts and
answers `/healthz` even while PostgreSQL is down, and `/v1` calls then answer 503 problem details
(within CROSSROADS_DATABASE_WAIT_S) until it is back.
"""
from __future__ import annotations

import logging
import threading
from contextlib import asynccontextmanager

from fastapi import FastAPI

from api.http import problems
from api.http.metrics import MetricsMiddleware
from api.http.read_routing import ReadRoutingMiddleware
from api.http.services import Services
from core.database import Database
from core.settings import Settings, get_settings

log = logging.getLogger("crossroads.api")


def create_app(settings: Settings | None = None, db: Database | None = None, *, embedder=None, router=None) -> FastAPI:
    """The API. `db`, `embedder` and `router` default to what `settings` configures (tests pass their own)."""
    from api.http import routes_chat, routes_documents, routes_graph, routes_jobs, routes_ops, routes_query

    settings = settings or get_settings()
    shared = Services(settings, db, embedder=embedder, router=router)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        threading.Thread(target=shared.warm_up, name="warm-up", daemon=True).start()
        yield
        shared.close()

    app = FastAPI(
        title="Crossroads",
        version="0.1.0",
        summary="Question answering over a private, access-controlled corpus.",
        description="Every `/v1` call needs `Authorization: Bearer <token>` (`crossroads token create`). "
        "Errors are RFC 9457 problem details (`application/problem+json`).",
        lifespan=lifespan,
        docs_url=None,  # api/http/web.py serves /docs and /redoc from vendored files (FastAPI's load from a CDN)
        redoc_url=None,
        openapi_tags=[
            {"name": "query", "description": "Ask, route and search (reader)."},
            {"name": "chat", "description": "OpenAI-compatible chat completions over /v1/ask (reader; the same tokens)."},
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
    app.add_middleware(ReadRoutingMiddleware, services=shared)  # outside the catch-all: a replica's 500 is retried
    app.add_middleware(problems.BodyLimitMiddleware, max_bytes=settings.api_max_body_bytes,
                       reshape={routes_chat.CHAT_PATH: routes_chat.openai_error})
    app.add_middleware(MetricsMiddleware, metrics=shared.metrics)
    for module in (routes_query, routes_chat, routes_documents, routes_graph, routes_jobs, routes_ops):
        app.include_router(module.routes)
    from api.http.web import mount_web

    mount_web(app)  # the analysts' page at `/`
    return app
