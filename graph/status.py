"""What a tenant's graph holds per access level, and its recent builds: one answer for
`crossroads graph status` and `GET /v1/graph/status`. The SQL lives in graph/store.py and core/jobs.py.

A level's state says whether a build would change it:
- `empty`: no chunk readable at the level and no graph stored; a build has nothing to do.
- `emptied`: no chunk readable any more, but graph rows are left (withdrawn); a build clears them.
- `unbuilt`: chunks to read and no graph stored yet; a build writes it.
- `withdrawn`: some text is withdrawn (its sources were deleted or narrowed); a build writes it anew.
- `partial`: the last build of the level left failures (LLM errors, refusals, malformed or cut
  replies: `failures` counts them); nothing failed was cached, and a build retries exactly those.
- `built`: the graph serves what it was built from.
"""
from __future__ import annotations

from typing import Callable, Sequence

import psycopg

from core import jobs
from graph import store
from graph.levels import AccessLevel

GRAPH_TEXT_KINDS = ("entities", "relationships", "reports")
BUILD_KIND = "graph-build"  # the jobs.kind of a graph build (graph.indexing.runner writes it)
STATES_NEEDING_A_BUILD = ("emptied", "unbuilt", "withdrawn", "partial")
# what a level's last build could not do (graph.indexing.runner.LevelReport), shown per level by `graph status`
FAILURE_COUNTS = ("extraction_errors", "summary_errors", "report_fallbacks")
# What a status shows of a build job (its counts, one LevelReport per level, are in GET /v1/jobs/{id}).
BUILD_FIELDS = ("id", "status", "stage", "created_at", "started_at", "finished_at", "heartbeat_at", "usage", "errors")


def level_state(chunks: int, served: dict[str, int], withdrawn: dict[str, int], communities: int,
                failed: int = 0) -> str:
    stored = sum(served.values()) + sum(withdrawn.values()) + communities
    if chunks == 0:
        return "emptied" if stored else "empty"
    if not stored and not failed:  # a build whose every call failed stored nothing, but it did run
        return "unbuilt"
    if any(withdrawn.values()):
        return "withdrawn"
    return "partial" if failed else "built"


def last_build_failures(conn: psycopg.Connection, tenant: str) -> dict[str, dict]:
    """level -> what its latest complete build failed to do: `job`, FAILURE_COUNTS and `refusals`
    per stage (zeros after a clean build; levels never built are absent)."""
    found: dict[str, dict] = {}
    for job_id, _, counts in jobs.finished_counts(conn, tenant, BUILD_KIND):
        for lvl in (counts or {}).get("levels", []):
            found.setdefault(lvl["level"], {"job": job_id, **{k: lvl.get(k, 0) for k in FAILURE_COUNTS},
                                            "refusals": lvl.get("refusals", {})})
    return found


def level_statuses(conn: psycopg.Connection, tenant: str, levels: Sequence[AccessLevel],
                   build_command: Callable[[str], str]) -> list[dict]:
    """Per level (only these): groups, chunks read, communities, served and withdrawn text per kind,
    state, and `rebuild`: `build_command(level)` (how the caller's user starts a build) when a build
    would change the level, else None."""
    text_counts = store.graph_text_counts(conn, tenant)
    communities = store.community_counts(conn, tenant)
    failures = last_build_failures(conn, tenant)
    statuses = []
    for level in levels:
        kinds = text_counts.get(level.name, {})
        served = {k: kinds.get(k, {}).get("served", 0) for k in GRAPH_TEXT_KINDS}
        withdrawn = {k: kinds.get(k, {}).get("withdrawn", 0) for k in GRAPH_TEXT_KINDS}
        clustered = communities.get(level.name, 0)
        failed = failures.get(level.name)
        state = level_state(level.chunks, served, withdrawn, clustered,
                            sum(failed[k] for k in FAILURE_COUNTS) if failed else 0)
        statuses.append({"level": level.name, "groups": list(level.groups), "chunks": level.chunks,
                         "communities": clustered, "served": served, "withdrawn": withdrawn, "state": state,
                         "failures": failed,
                         "rebuild": build_command(level.name) if state in STATES_NEEDING_A_BUILD else None})
    return statuses


def recent_builds(conn: psycopg.Connection, tenant: str, lease_s: float) -> list[dict]:
    """The tenant's latest graph builds, newest first (an abandoned one reads `failed`, see core.jobs)."""
    return [{key: job[key] for key in BUILD_FIELDS} for job in jobs.recent_jobs(conn, tenant, BUILD_KIND, lease_s)]
