"""GET /healthz (the process runs), /readyz (database reachable, migrations applied), /metrics (Prometheus)."""
from __future__ import annotations

import logging

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from api.app import Services, services
from api.problems import problem_response
from core.database import load_migrations
from core.errors import CrossroadsError

log = logging.getLogger("crossroads.api")

router = APIRouter(tags=["operations"])


@router.get("/healthz", summary="Liveness: the process answers")
def healthz():
    return {"status": "ok"}


@router.get("/readyz", summary="Readiness: the database answers and every migration is applied",
            responses={503: {"description": "Not ready", "content": {"application/problem+json": {}}}})
def readyz(request: Request, svc: Services = Depends(services)):
    expected = sorted(m.version for m in load_migrations())
    try:
        with svc.db().connection() as conn:
            conn.execute("SELECT 1")
            applied = {r[0] for r in conn.execute("SELECT version FROM schema_migrations")}
    except (CrossroadsError, Exception) as exc:  # noqa: BLE001 - any failure means "not ready"
        log.warning("not ready: %s", exc)
        return problem_response(503, "Not ready", "The database cannot be reached.", request.url.path,
                                slug="not-ready", checks={"database": "unreachable"}, headers={"Retry-After": "5"})
    missing = [v for v in expected if v not in applied]
    if missing:
        return problem_response(503, "Not ready", f"Migrations not applied: {missing}.", request.url.path,
                                slug="not-ready", checks={"database": "ok", "migrations": "missing"},
                                headers={"Retry-After": "5"})
    return {"status": "ready", "checks": {"database": "ok", "migrations": "ok"}, "schema_version": max(expected)}


@router.get("/metrics", summary="Prometheus metrics", response_class=Response,
            responses={200: {"content": {"text/plain": {}}, "description": "Prometheus text exposition"}})
def metrics(svc: Services = Depends(services)):
    content, media_type = svc.metrics.exposition()
    return Response(content, media_type=media_type)
