"""The fixtures graph built through an API stand-in having a bad day (tests/fakes/anthropic_server.py):
overloaded, rate limited, refusals, tool calls cut at max_tokens, thinking blocks, on a share of the
calls. Nothing may be lost silently: the build ends `partial` (exit 3) with every failure counted,
nothing failed is cached, and the next build with a healthy API retries exactly the failed chunks."""
from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys

import pytest

from core.llm.client import make_llm
from core.settings import Settings
from graph import store
from graph.indexing.contracts import BuildSettings
from graph.indexing.runner import build_graph
from graph.indexing.extract_offline import OfflineExtractor
from graph.indexing.parts import make_pipeline
from graph.status import level_statuses
from graph.types import ChunkInput
from tests.conftest import ROOT
from tests.fakes.anthropic_server import FakeAnthropic, Misbehave, Script, text, tool_use

# A dated model id keeps this test's extractions apart in the cache, which every tenant shares.
FAST, ANSWER = "claude-haiku-4-5-20251001", "claude-sonnet-5"
EXTRACT_TOOL = "record_graph"
LEVEL = "bad_day"


def healthy(body: dict) -> Script:
    """A polite model: the offline extractor's entities for an extraction, a small valid report, a summary."""
    tool = body["tools"][0]["name"] if body.get("tools") else None
    message = body["messages"][0]["content"]
    if tool == EXTRACT_TOOL:
        chunk_text = html.unescape(re.search(r"<text>\n(.*)\n</text>", message, re.S).group(1))
        found = OfflineExtractor().extract(ChunkInput(0, "doc", "", "", chunk_text, "english", "h"))
        entities = [{"name": e.name, "type": "concept", "description": e.description or e.name}
                    for e in found.entities[:8]]
        names = {e["name"] for e in entities}
        relationships = [{"source": r.source, "target": r.target, "description": r.description or "related",
                          "strength": 5} for r in found.relationships if {r.source, r.target} <= names][:8]
        return tool_use(EXTRACT_TOOL, {"entities": entities, "relationships": relationships})
    if tool == "write_report":
        return tool_use("write_report", {
            "title": "A community", "summary": "What the community is about.", "rating": 5,
            "rating_explanation": "It matters somewhat.",
            "findings": [{"summary": "The main entity", "explanation": "It is central.", "entity_ids": [1],
                          "relationship_ids": []}]})
    return text("One merged description of the entity.")


def extraction_calls(api: FakeAnthropic) -> int:
    return sum(1 for b in api.bodies if b.get("tools") and b["tools"][0]["name"] == EXTRACT_TOOL)


@pytest.fixture
def bad_day_level(db, demo_tenant):
    """A level of the shared fixtures tenant reading every chunk, as `all` does, with a graph of its own
    (the offline graph of `all` and `staff`, which other tests read, stays as it is); removed after."""
    with db.connection() as conn:
        groups = sorted({g for lvl in store.list_levels(conn, demo_tenant) for g in lvl.groups})
        store.set_level(conn, demo_tenant, LEVEL, groups)
    yield demo_tenant
    with db.connection() as conn:
        store.delete_level(conn, demo_tenant, LEVEL)


def test_bad_day_build_is_partial_and_the_healthy_rebuild_retries_exactly_the_failed_chunks(
    db, bad_day_level, tmp_path
):
    tenant = bad_day_level
    with db.connection() as conn:
        level_groups = next(lvl for lvl in store.list_levels(conn, tenant) if lvl.name == LEVEL).groups
        chunks = store.level_chunks(conn, tenant, level_groups)
    hashes = sorted({c.content_hash for c in chunks})

    with FakeAnthropic(handler=healthy, misbehave=Misbehave(share=0.3, seed=18)) as api:
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and not k.startswith("CROSSROADS_")}
        env.update(CROSSROADS_DATABASE_URL=db.url, CROSSROADS_STATE_DIR=str(tmp_path), ANTHROPIC_API_KEY="test-key",
                   CROSSROADS_ANTHROPIC_BASE_URL=api.url, CROSSROADS_LLM_MODEL_FAST=FAST,
                   CROSSROADS_LLM_MODEL_ANSWER=ANSWER, CROSSROADS_LLM_MAX_RETRIES="0")
        proc = subprocess.run([sys.executable, "-m", "api.cli.main", "graph", "build", "--tenant", tenant, "--level", LEVEL,
                               "--no-claims", "--json"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        habits = {habit for _, habit in api.misbehaved}
    assert proc.returncode == 3, proc.stderr  # done, but some input failed
    job = json.loads(proc.stdout)
    [level] = job["counts"]["levels"]
    assert habits == {"overloaded", "rate_limited", "refusal", "max_tokens", "thinking"}
    assert job["status"] == "partial" and job["errors"][0]["level"] == LEVEL
    assert level["extracted"] == len(hashes) and level["extraction_cached"] == 0
    assert 0 < level["extraction_errors"] < len(hashes) and level["entities"] > 0
    assert level["refusals"]["extract"] > 0 and level["failures"]
    # no chunk silently lost: each is cached as extracted, or counted as failed and not cached
    with db.connection() as conn:
        cached = store.cached_extractions(conn, hashes, "llm-tooluse", _extractor_version(), FAST)
        failed_rows = conn.execute("SELECT count(*) FROM extraction_cache WHERE model = %s AND errors <> '{}'",
                                   (FAST,)).fetchone()[0]
        status = {lvl["level"]: lvl for lvl in level_statuses(conn, tenant, store.list_levels(conn, tenant),
                                                              lambda name: f"build {name}")}
    assert len(cached) + level["extraction_errors"] == len(hashes) and failed_rows == 0
    assert status[LEVEL]["state"] == "partial" and status[LEVEL]["rebuild"] == f"build {LEVEL}"
    assert {k: status[LEVEL]["failures"][k] for k in ("extraction_errors", "summary_errors", "report_fallbacks")} == {
        k: level[k] for k in ("extraction_errors", "summary_errors", "report_fallbacks")}

    with FakeAnthropic(handler=healthy) as api:
        settings = Settings(anthropic_api_key="test-key", anthropic_base_url=api.url, llm_model_fast=FAST,
                            llm_model_answer=ANSWER, llm_max_retries=0, llm_timeout_s=5.0)
        pipeline = make_pipeline(settings, make_llm(settings), claims=False)
        # no embedder: resolution and report vectors are not what this test is about, and cost seconds
        again = build_graph(db, tenant, LEVEL, pipeline.extractor, pipeline.reporter, None, BuildSettings(),
                            summarizer=pipeline.summarizer)
        assert extraction_calls(api) == level["extraction_errors"]  # exactly the failed chunks, each once
    [rebuilt] = again["counts"]["levels"]
    assert again["status"] == "done" and again["errors"] == []
    assert (rebuilt["extraction_cached"], rebuilt["extraction_errors"]) == (len(hashes) - level["extraction_errors"], 0)
    assert rebuilt["entities"] > level["entities"] and rebuilt["report_fallbacks"] == 0
    with db.connection() as conn:
        status = {lvl["level"]: lvl for lvl in level_statuses(conn, tenant, store.list_levels(conn, tenant),
                                                              lambda name: f"build {name}")}
    assert status[LEVEL]["state"] == "built" and status[LEVEL]["failures"]["job"] == again["id"]


def _extractor_version() -> str:
    settings = Settings(anthropic_api_key="test-key", llm_model_fast=FAST, llm_model_answer=ANSWER)
    return make_pipeline(settings, make_llm(settings), claims=False).extractor.version
