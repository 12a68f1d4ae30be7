"""GET /healthz (the process runs), /readyz (database reachable, migrations applied), /metrics (Prometheus).

None of them waits behind the requests: `/healthz` and `/metrics` run on the event loop and never touch
the database; `/readyz` checks it on threads of its own and answers within READY_TIMEOUT_S whatever
the database does, so a load balancer's probe gets its answer while every request thread is stuck.
"""
from __future__ import annotations

import logging

import anyio
from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from api.http.services import Services, services
from api.http.problems import RETRY_AFTER_S, problem_response
from core.database import load_migrations

log = logging.getLogger("crossroads.api")

routes = APIRouter(tags=["operations"])

READY_TIMEOUT_S = 1.0
# half the budget each to get a connection and to run the queries: a table locked by a migration
# running elsewhere must not hold the probe either
READY_WAIT_S, READY_STATEMENT_TIMEOUT_MS = READY_TIMEOUT_S / 2, int(READY_TIMEOUT_S * 500)


@routes.get("/healthz", summary="Liveness: the process answers")
async def healthz():
    return {"status": "ok"}


def _applied_migrations(svc: Services) -> set[int]:
    with svc.db().connection(timeout=READY_WAIT_S) as conn:
        conn.execute(f"SET LOCAL statement_timeout = {READY_STATEMENT_TIMEOUT_MS}")
        return {r[0] for r in conn.execute("SELECT version FROM schema_migrations")}


def _not_ready(request: Request, detail: str, **checks: str):
    return problem_response(503, "Not ready", detail, request.url.path, slug="not-ready", checks=checks,
                            headers={"Retry-After": RETRY_AFTER_S})


@routes.get("/readyz", summary="Readiness: the database answers and every migration is applied",
            responses={503: {"description": "Not ready", "content": {"application/problem+json": {}}}})
async def readyz(request: Request, svc: Services = Depends(services)):
    expected = sorted(m.version for m in load_migrations())
    try:
        with anyio.fail_after(READY_TIMEOUT_S):
            # abandon_on_cancel: a check stuck past the deadline finishes (within the pool's and the
            # statement's timeouts) on its own thread; the probe has its answer already
            applied = await anyio.to_thread.run_sync(_applied_migrations, svc, limiter=svc.readiness_threads,
                                                     abandon_on_cancel=True)
    except Exception as exc:  # noqa: BLE001 - any failure means "not ready"
        log.warning("not ready: %s: %s", type(exc).__name__, exc)
        return _not_ready(request, f"The database cannot be reached or did not answer within "
                          f"{READY_TIMEOUT_S:g} s.", database="unreachable")
    missing = [v for v in expected if v not in applied]
    if missing:
        return _not_ready(request, f"Migrations not applied: {missing}.", database="ok", migrations="missing")
    return {"status": "ready", "checks": {"database": "ok", "migrations": "ok"}, "schema_version": max(expected)}


@routes.get("/metrics", summary="Prometheus metrics", response_class=Response,
            responses={200: {"content": {"text/plain": {}}, "description": "Prometheus text exposition"}})
async def metrics(svc: Services = Depends(services)):
    content, media_type = svc.metrics.exposition()
    return Response(content, media_type=media_type)
