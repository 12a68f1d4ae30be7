"""`graph build --batch`: extraction, summaries and reports as Message Batches (core.llm.batches), through the
real anthropic SDK's `client.messages.batches` against the fake's batch endpoints on loopback."""
from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

from core.llm import batches
from core.llm.client import make_llm
from core.llm.usage import Usage, UsageMeter
from core.settings import Settings
from graph.indexing.contracts import BuildSettings
from graph.indexing.parts import make_pipeline
from graph.indexing.runner import build_graph
from tests.fakes.anthropic_server import FakeAnthropic, error, expired
from tests.test_graph_summaries import ANSWER, FAST, Api, ingest

# Extraction of the 3 chunks, the one entity summary, the reports of the level's one community.
STAGES = 3
REQUESTS = 3 + 1 + 1


def llm_settings(api: FakeAnthropic) -> Settings:
    return Settings(anthropic_api_key="test-key", anthropic_base_url=api.url, llm_model_fast=FAST,
                    llm_model_answer=ANSWER, llm_max_retries=0, llm_timeout_s=5.0, llm_batch_poll_s=0.01,
                    graph_extract_claims=True)


def build(db, tenant, api: FakeAnthropic, *, batch: bool = True) -> tuple[dict, UsageMeter]:
    """A build as `crossroads graph build [--batch]` makes it: without batches, it collects what one left."""
    settings, meter = llm_settings(api), UsageMeter()
    pipeline = make_pipeline(settings, make_llm(settings, meter), batch_for=(db, tenant) if batch else None,
                             collect_for=None if batch else (db, tenant))
    job = build_graph(db, tenant, "all", pipeline.extractor, pipeline.reporter, None, BuildSettings(),
                      usage=meter.summary, summarizer=pipeline.summarizer)
    return job, meter


def pending_rows(db, tenant) -> int:
    with db.connection() as conn:
        return conn.execute("SELECT count(*) FROM llm_batch_requests WHERE tenant_id = %s", (tenant,)).fetchone()[0]


def test_a_batch_build_runs_end_to_end_at_half_the_price(db, settings, local_embedder, tenant):
    ingest(db, settings, local_embedder, tenant)
    with FakeAnthropic(handler=Api(), batch_polls=2) as api:
        job, meter = build(db, tenant, api)
        again, _ = build(db, tenant, api)  # nothing changed: everything is cached, no batch is sent
    [level] = job["counts"]["levels"]
    assert job["status"] == "done" and job["params"]["batch"] is True, job["errors"]
    assert (level["extracted"], level["summaries_computed"], level["reports_generated"]) == (3, 1, 1)
    assert level["claims"] == 1 and level["report_fallbacks"] == 0
    assert api.calls == 0  # nothing sent one by one
    assert api.batch_creates == STAGES and api.paid == REQUESTS
    ids = [r["custom_id"] for r in api.batch_bodies]
    assert len(set(ids)) == REQUESTS and all(re.fullmatch(r"[0-9a-f]{64}", i) for i in ids)
    # every reply priced at the batch price: half what the same tokens cost sent one by one
    interactive = sum((Usage.priced(model, input_tokens=u.input_tokens, output_tokens=u.output_tokens,
                                    cache_read_tokens=u.cache_read_tokens, cache_write_tokens=u.cache_write_tokens,
                                    calls=u.calls) for model, u in meter.by_model.items()), Usage())
    assert job["usage"]["llm_calls"] == REQUESTS
    assert job["usage"]["cost_usd"] == pytest.approx(interactive.cost_usd / 2, abs=1e-6)
    assert again["status"] == "done" and api.batch_creates == STAGES and again["usage"]["llm_calls"] == 0
    assert pending_rows(db, tenant) == 0  # collected and cached: nothing left to collect
    with db.connection() as conn:  # what the batch results' usage measured, for the next estimate
        measured = dict(conn.execute("SELECT stage, sum(calls) FROM llm_call_stats WHERE tenant_id = %s GROUP BY 1",
                                     (tenant,)).fetchall())
    assert measured == {"extraction": 3, "summaries": 1, "reports": 1}



def build_killed_in_its_first_batch(db, tenant: str, api: FakeAnthropic, monkeypatch) -> None:
    """A batch build whose process dies while its first batch is in progress (the fake holds batches)."""
    def killed(seconds: float) -> None:
        raise KeyboardInterrupt

    api.hold_batches = True
    with monkeypatch.context() as patched:
        patched.setattr(batches, "time", SimpleNamespace(sleep=killed))
        with pytest.raises(KeyboardInterrupt):
            build(db, tenant, api)

def test_a_build_killed_after_submitting_is_collected_by_the_next_without_paying_twice(
        db, settings, local_embedder, tenant, monkeypatch):
    ingest(db, settings, local_embedder, tenant)

    with FakeAnthropic(handler=Api()) as api:
        build_killed_in_its_first_batch(db, tenant, api, monkeypatch)
        assert api.batch_creates == 1 and pending_rows(db, tenant) == 3  # the extraction batch, recorded
        with db.connection() as conn:  # what `graph status` shows
            assert [(b["batch_id"], b["requests"]) for b in batches.waiting(conn, tenant)] == [("msgbatch_fake_0001", 3)]
        api.hold_batches = False
        job, meter = build(db, tenant, api)
    assert job["status"] == "done", job["errors"]
    assert api.batch_creates == STAGES  # the extraction batch was collected, not sent again
    ids = [r["custom_id"] for r in api.batch_bodies]
    assert len(ids) == len(set(ids)) == REQUESTS and api.paid == REQUESTS
    assert job["usage"]["llm_calls"] == REQUESTS
    assert pending_rows(db, tenant) == 0


def test_a_plain_build_and_graph_status_collect_a_batch_a_killed_build_left_without_paying_twice(
        db, settings, local_embedder, tenant, monkeypatch):
    ingest(db, settings, local_embedder, tenant)

    with FakeAnthropic(handler=Api()) as api:
        build_killed_in_its_first_batch(db, tenant, api, monkeypatch)
        status_llm = make_llm(llm_settings(api))
        batches.collect_finished(status_llm, db, tenant)  # `graph status` while the batch runs: looks, no wait
        with db.connection() as conn:
            assert [(b["requests"], b["collected"]) for b in batches.waiting(conn, tenant)] == [(3, 0)]
        api.hold_batches = False
        batches.collect_finished(status_llm, db, tenant)  # ended: downloaded once, kept on the rows
        with db.connection() as conn:
            assert [(b["requests"], b["collected"]) for b in batches.waiting(conn, tenant)] == [(3, 3)]
        assert api.results_downloads == 1
        job, meter = build(db, tenant, api, batch=False)  # no --batch: the batch's 3 requests are not sent again
    assert job["status"] == "done", job["errors"]
    assert "batch" not in job["params"]
    assert api.batch_creates == 1 and api.paid == 3 and api.results_downloads == 1
    assert api.calls == REQUESTS - 3  # the summary and the report, sent one by one
    sent_alone = {b.get("tools", [{}])[0].get("name") for b in api.bodies}
    assert "record_graph" not in sent_alone
    assert job["usage"]["llm_calls"] == REQUESTS  # the collected ones counted once, at the batch price
    assert pending_rows(db, tenant) == 0


def test_errored_and_expired_entries_end_the_build_partial_and_are_sent_again(db, settings, local_embedder, tenant):
    ingest(db, settings, local_embedder, tenant)
    healthy = Api()
    down = {"Alpha": error(500, "internal error"), "Bravo": expired()}
    failing = True

    def handler(body: dict):
        marker = re.search(r"(Alpha|Bravo|Charlie) \[", body["messages"][0]["content"])
        if failing and body.get("tools") and body["tools"][0]["name"] == "record_graph" and marker[1] in down:
            return down[marker[1]]
        return healthy(body)

    with FakeAnthropic(handler=handler) as api:
        first, _ = build(db, tenant, api)
        [level] = first["counts"]["levels"]
        assert first["status"] == "partial" and level["extraction_errors"] == 2
        assert any("api_error" in f for f in level["failures"]) and any("expired" in f for f in level["failures"])
        assert "run `crossroads graph build" in first["errors"][0]["error"]
        assert pending_rows(db, tenant) == 0  # the failed requests are not waiting to be collected
        sent = len(api.batch_bodies)
        failing = False
        second, _ = build(db, tenant, api)
    [level] = second["counts"]["levels"]
    assert second["status"] == "done", second["errors"]
    assert (level["extracted"], level["extraction_cached"], level["extraction_errors"]) == (2, 1, 0)
    retried = [b["params"]["messages"][0]["content"] for b in api.batch_bodies[sent:]
               if b["params"].get("tools", [{}])[0].get("name") == "record_graph"]
    assert sorted(re.search(r"(\w+) \[", t)[1] for t in retried) == ["Alpha", "Bravo"]


def test_a_batch_build_needs_an_api_key(db, tenant):
    with pytest.raises(Exception, match="ANTHROPIC_API_KEY"):
        make_pipeline(Settings(anthropic_api_key=None), None, batch_for=(db, tenant))


def test_the_api_starts_a_batch_build(db, settings, local_embedder, tenant):
    from fastapi.testclient import TestClient

    from api import tokens
    from api.http.app import create_app
    from tests.conftest import wait_for_job

    ingest(db, settings, local_embedder, tenant)
    with db.connection() as conn:
        admin = {"Authorization": f"Bearer {tokens.create_token(conn, tenant, ['staff'], 'admin', 'batch')[0]}"}
    offline = create_app(settings, db, embedder=local_embedder)
    with TestClient(offline, raise_server_exceptions=False) as client:  # no API key: nothing to batch
        refused = client.post("/v1/jobs/graph-build", json={"batch": True}, headers=admin)
    assert refused.status_code == 422 and "ANTHROPIC_API_KEY" in refused.text
    with FakeAnthropic(handler=Api()) as api:
        online = settings.model_copy(update=llm_settings(api).model_dump(include={
            "anthropic_api_key", "anthropic_base_url", "llm_model_fast", "llm_model_answer", "llm_max_retries",
            "llm_batch_poll_s", "graph_extract_claims"}))
        with TestClient(create_app(online, db, embedder=local_embedder), raise_server_exceptions=False) as client:
            started = client.post("/v1/jobs/graph-build", json={"batch": True, "level": "all"}, headers=admin)
            assert started.status_code == 202, started.text
            job = wait_for_job(client, admin, started.json()["job_id"], timeout_s=30)
    assert job["status"] == "done" and job["params"]["batch"] is True, job
    assert api.calls == 0 and api.batch_creates == STAGES and job["usage"]["llm_calls"] == REQUESTS
