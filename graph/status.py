"""What a tenant's graph holds per access level, and its recent builds: one answer for
`crossroads graph status` and `GET /v1/graph/status`. The SQL lives in graph/store.py and core/jobs.py.

A level's state says whether a build would change it:
- `empty`: no chunk readable at the level and no graph stored; a build has nothing to do.
- `emptied`: no chunk readable any more, but graph rows are left (withdrawn); a build clears them.
- `unbuilt`: chunks to read and no graph stored yet; a build writes it.
- `withdrawn`: some text is withdrawn (its sources were deleted or narrowed); a build writes it anew.
- `built`: the graph serves what it was built from.
"""
from __future__ import annotations

from typing import Callable, Sequence

import psycopg

from core import jobs
from graph import store
from graph.levels import AccessLevel

GRAPH_TEXT_KINDS = ("entities", "relationships", "reports")
BUILD_KIND = "graph-build"  # the jobs.kind of a graph build (graph.build writes it)
STATES_NEEDING_A_BUILD = ("emptied", "unbuilt", "withdrawn")
# What a status shows of a build job (its counts, one LevelReport per level, are in GET /v1/jobs/{id}).
BUILD_FIELDS = ("id", "status", "stage", "created_at", "started_at", "finished_at", "heartbeat_at", "usage", "errors")


def level_state(chunks: int, served: dict[str, int], withdrawn: dict[str, int], communities: int) -> str:
    stored = sum(served.values()) + sum(withdrawn.values()) + communities
    if chunks == 0:
        return "emptied" if stored else "empty"
    if not stored:
        return "unbuilt"
    return "withdrawn" if any(withdrawn.values()) else "built"


def level_statuses(conn: psycopg.Connection, tenant: str, levels: Sequence[AccessLevel],
                   build_command: Callable[[str], str]) -> list[dict]:
    """Per level (only these): groups, chunks read, communities, served and withdrawn text per kind,
    state, and `rebuild`: `build_command(level)` (how the caller's user starts a build) when a build
    would change the level, else None."""
    text_counts = store.graph_text_counts(conn, tenant)
    communities = store.community_counts(conn, tenant)
    statuses = []
    for level in levels:
        kinds = text_counts.get(level.name, {})
        served = {k: kinds.get(k, {}).get("served", 0) for k in GRAPH_TEXT_KINDS}
        withdrawn = {k: kinds.get(k, {}).get("withdrawn", 0) for k in GRAPH_TEXT_KINDS}
        clustered = communities.get(level.name, 0)
        state = level_state(level.chunks, served, withdrawn, clustered)
        statuses.append({"level": level.name, "groups": list(level.groups), "chunks": level.chunks,
                         "communities": clustered, "served": served, "withdrawn": withdrawn, "state": state,
                         "rebuild": build_command(level.name) if state in STATES_NEEDING_A_BUILD else None})
    return statuses


def recent_builds(conn: psycopg.Connection, tenant: str, lease_s: float) -> list[dict]:
    """The tenant's latest graph builds, newest first (an abandoned one reads `failed`, see core.jobs)."""
    return [{key: job[key] for key in BUILD_FIELDS} for job in jobs.recent_jobs(conn, tenant, BUILD_KIND, lease_s)]
