"""Communities, entities and relationships (role: reader), only ever from the caller's access level;
the graph's status (reader: its own level; admin: every level and the recent builds).

The level is the one `graph.levels.choose_level` picks (or, for relationships, one the caller names
among the `eligible` ones): all of its groups are among the token's groups, so every chunk behind
its graph is readable by the caller. No level outside those is consulted, so
an entity found only in `hr` documents never reaches a caller without `hr`, and a level's name,
groups and counts reach only its readers and the tenant's admins.
"""
from __future__ import annotations

import json

from fastapi import APIRouter, Depends, Path, Query

from api.http.services import Services, services
from api.http.auth import Principal, reader
from api.http.problems import ApiProblem
from api.http.routes_query import ERRORS
from api.http.schemas_graph import CommunityDetail, CommunityList, EntityList, GraphStatus, RelationshipList
from graph import browse_store, store
from graph.levels import choose_level, eligible
from graph.status import level_statuses, recent_builds

routes = APIRouter(prefix="/v1", tags=["graph"])


def _level(conn, principal: Principal):
    return choose_level(store.list_levels(conn, principal.tenant), set(principal.groups))


# every list pages the same way: `limit` bounded (422 above), `offset`, and the whole list's `total`
MAX_OFFSET = 10_000_000


@routes.get("/communities", response_model=CommunityList, responses=ERRORS,
            summary="Communities (with report titles) of the caller's access level, a page at a time")
def list_communities(level: int | None = Query(None, ge=0, le=100, description="Only this hierarchy level (0 = root)."),
                     limit: int = Query(100, ge=1, le=1000, description="Communities per page (1..1000)."),
                     offset: int = Query(0, ge=0, le=MAX_OFFSET, description="Communities to skip."),
                     principal: Principal = Depends(reader), svc: Services = Depends(services)):
    with svc.db().connection() as conn:
        access = _level(conn, principal)
        reports = store.list_reports(conn, principal.tenant, access.name) if access else []
    # list_reports orders by hierarchy level, then id: a stable order for paging
    rows = [{"id": r["id"], "level": r["level"], "parent": r["parent"], "title": r["title"],
             "rating": float(r["rating"]), "summary": r["summary"], "size": len(r["members"])}
            for r in reports if level is None or r["level"] == level]
    return {"access_level": access.name if access else None, "communities": rows[offset:offset + limit],
            "total": len(rows), "limit": limit, "offset": offset}


@routes.get("/communities/{community_id}", response_model=CommunityDetail, responses=ERRORS,
            summary="One community's report, member entities and the relationships among them")
def get_community(community_id: int = Path(..., ge=0, le=2**31 - 1), principal: Principal = Depends(reader),
                  svc: Services = Depends(services)):
    with svc.db().connection() as conn:
        access = _level(conn, principal)
        report = None
        if access is not None:
            report = next(iter(store.list_reports(conn, principal.tenant, access.name, community_id)), None)
        if report is None:
            raise ApiProblem(404, "community-not-found", "Community not found",
                             f"No community {community_id} in the graph this token is served from.")
        members = browse_store.entities_by_key(conn, principal.tenant, access.name, list(report["members"]))
        relationships = browse_store.relationships_among(conn, principal.tenant, access.name, list(report["members"]))
        documents = browse_store.readable_documents_of_chunks(conn, principal.tenant, list(principal.groups),
                                                           list(report["source_chunk_ids"]))
    return {"access_level": access.name, "id": report["id"], "level": report["level"], "parent": report["parent"],
            "title": report["title"], "summary": report["summary"], "rating": float(report["rating"]),
            "rating_explanation": report["rating_explanation"], "findings": report["findings"],
            "model": report["model"], "members": members, "relationships": relationships, "documents": documents}


@routes.get("/entities", response_model=EntityList, responses=ERRORS,
            summary="Entities of the caller's access level whose name contains `q`, a page at a time")
def list_entities(q: str | None = Query(None, max_length=200, description="Part of the name (case-insensitive)."),
                  limit: int = Query(50, ge=1, le=500, description="Entities per page (1..500)."),
                  offset: int = Query(0, ge=0, le=MAX_OFFSET, description="Entities to skip."),
                  principal: Principal = Depends(reader), svc: Services = Depends(services)):
    if q is not None and "\x00" in q:
        q = q.replace("\x00", "")
    entities, total = [], 0
    with svc.db().connection() as conn:
        access = _level(conn, principal)
        if access is not None:
            entities = browse_store.find_entities(conn, principal.tenant, access.name, q, limit, offset)
            total = browse_store.count_entities(conn, principal.tenant, access.name, q)
    return {"access_level": access.name if access else None, "entities": entities, "total": total, "limit": limit,
            "offset": offset}


@routes.get("/relationships", response_model=RelationshipList, responses={**ERRORS, 404: {
                "description": "No access level of that name that this token may read",
                "content": {"application/problem+json": {}}}},
            summary="Relationships of the caller's access level (those touching `entity`), a page at a time")
def list_relationships(level: str | None = Query(None, pattern=r"^[A-Za-z0-9_.-]{1,64}$",
                                                 description="An access level all of whose groups the token holds "
                                                             "(default: the one /v1/entities reads)."),
                       entity: str | None = Query(None, min_length=1, max_length=200, pattern=r"^[^\x00]+$",
                                                  description="Only relationships with this entity key at one end."),
                       limit: int = Query(100, ge=1, le=1000, description="Relationships per page (1..1000)."),
                       offset: int = Query(0, ge=0, le=MAX_OFFSET, description="Relationships to skip."),
                       principal: Principal = Depends(reader), svc: Services = Depends(services)):
    relationships, total = [], 0
    with svc.db().connection() as conn:
        levels = store.list_levels(conn, principal.tenant)
        if level is None:
            access = choose_level(levels, set(principal.groups))
        else:
            # an unknown level and one the token may not read answer alike: a level's name reaches only its readers
            readable = eligible(levels, set(principal.groups))
            access = next((lvl for lvl in readable if lvl.name == level), None)
            if access is None:
                names = ", ".join(lvl.name for lvl in readable) or "none"
                raise ApiProblem(404, "access-level-not-found", "Access level not found",
                                 f"No access level {level!r} that this token may read (readable: {names}); "
                                 "leave `level` out to get the one its groups are served from.")
        if access is not None:
            relationships = browse_store.find_relationships(conn, principal.tenant, access.name, entity, limit, offset)
            total = browse_store.count_relationships(conn, principal.tenant, access.name, entity)
    return {"access_level": access.name if access else None, "relationships": relationships, "total": total,
            "limit": limit, "offset": offset}


@routes.get("/graph/status", response_model=GraphStatus, responses=ERRORS,
            summary="Per access level: groups, chunks, communities, served and withdrawn text, whether a build is due")
def graph_status(principal: Principal = Depends(reader), svc: Services = Depends(services)):
    """A reader (or writer) sees only the level its groups are served from; an admin sees every level
    of the tenant and its latest graph builds, whose stages and errors name levels."""
    is_admin = principal.can("admin")
    db = svc.db()
    with db.connection() as conn:
        levels = store.list_levels(conn, principal.tenant)
        access = choose_level(levels, set(principal.groups))
        shown = levels if is_admin else [access] if access else []
        statuses = level_statuses(conn, principal.tenant, shown,
                                  lambda level: f"POST /v1/jobs/graph-build {json.dumps({'level': level})}")
        builds = recent_builds(conn, principal.tenant, db.job_lease_s) if is_admin else None
    return {"access_level": access.name if access else None, "levels": statuses, "jobs": builds}
