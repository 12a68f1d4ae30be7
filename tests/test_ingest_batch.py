"""`crossroads ingest --batch`: chunk contexts as Message Batches (core.llm.batches), through the real anthropic
SDK's `client.messages.batches` against the fake's batch endpoints on loopback."""
from __future__ import annotations

import json
import re
from types import SimpleNamespace

import pytest
from pydantic import SecretStr

from api import usecases
from core.llm import batches
from core.errors import CrossroadsError
from core.llm.usage import Usage, UsageMeter
from core.settings import Settings
from tests.fakes.anthropic_server import FakeAnthropic, error, expired
from tests.test_contextual import UnitEmbedder, situate, stored_contexts
from tests.test_ingest_sync import SHORT, write_corpus
from vector.ingest.sources import load_source

# three one-chunk documents: one context request each
FILES = {name: SHORT.replace("Status page", f"{title} page").replace("status.", f"{title.lower()}.")
         for name, title in (("a.md", "Alpha"), ("b.md", "Bravo"), ("c.md", "Charlie"))}


def index(db, settings, embedder, tenant, root, api: FakeAnthropic, batch: bool = True
          ) -> tuple[usecases.Indexed, UsageMeter]:
    """What `crossroads ingest ROOT --tenant T --batch` runs (without `batch`: `crossroads ingest` with a key)."""
    online = settings.model_copy(update=dict(anthropic_api_key=SecretStr("test-key"), anthropic_base_url=api.url,
                                             llm_max_retries=0, llm_timeout_s=5.0, llm_batch_poll_s=0.01))
    docs, skipped = load_source(root, [], settings.max_document_bytes)
    meter = UsageMeter()
    indexed = usecases.index_documents(db, UnitEmbedder(embedder), online, tenant, docs, skipped, meter=meter,
                                       batch=batch)
    return indexed, meter


def pending_rows(db, tenant) -> int:
    with db.connection() as conn:
        return conn.execute("SELECT count(*) FROM llm_batch_requests WHERE tenant_id = %s", (tenant,)).fetchone()[0]


def cached_docs(db, tenant) -> list[str]:
    with db.connection() as conn:
        return [d for (d,) in conn.execute("SELECT DISTINCT doc_id FROM chunk_contexts WHERE tenant_id = %s ORDER BY 1",
                                           (tenant,)).fetchall()]


def test_an_ingest_sends_its_contexts_in_one_batch_at_half_the_price(db, settings, embedder, tenant, tmp_path):
    # c.md of several chunks: all of them in the first batch, not the first chunk first (a second batch)
    longer = FILES["c.md"] + "\n## Escalation\n\n" + "Escalations go to the on-call engineer first. " * 20
    write_corpus(tmp_path, FILES | {"c.md": longer})
    with FakeAnthropic(handler=situate, batch_polls=2) as api:
        indexed, meter = index(db, settings, embedder, tenant, tmp_path, api)
        again, _ = index(db, settings, embedder, tenant, tmp_path, api)  # unchanged: no batch, no call
    report = indexed.report
    chunks = report.chunks["added"]
    assert report.clean and report.documents["added"] == 3 and chunks >= 5, report
    assert api.calls == 0 and api.batch_creates == 1 and api.paid == chunks
    # the document is the cacheable prefix of every request, as sent one by one
    assert all(b["params"]["system"][0]["cache_control"] == {"type": "ephemeral"} for b in api.batch_bodies)
    assert all("zanzibarite" in c for c in stored_contexts(db, tenant).values())
    assert cached_docs(db, tenant) == ["a.md", "b.md", "c.md"] and pending_rows(db, tenant) == 0
    interactive = sum((Usage.priced(model, input_tokens=u.input_tokens, output_tokens=u.output_tokens,
                                    cache_read_tokens=u.cache_read_tokens, cache_write_tokens=u.cache_write_tokens,
                                    calls=u.calls) for model, u in meter.by_model.items()), Usage())
    assert meter.summary()["llm_calls"] == chunks
    assert meter.summary()["cost_usd"] == pytest.approx(interactive.cost_usd / 2, abs=1e-6)
    assert again.report.documents["unchanged"] == 3 and api.batch_creates == 1


def test_an_ingest_killed_while_its_batch_runs_is_collected_by_the_next_without_paying_twice(
        db, settings, embedder, tenant, tmp_path, monkeypatch):
    write_corpus(tmp_path, FILES)

    def killed(seconds: float) -> None:
        raise KeyboardInterrupt  # the process dies while its batch is in progress

    with FakeAnthropic(handler=situate) as api:
        api.hold_batches = True
        with monkeypatch.context() as patched:
            patched.setattr(batches, "time", SimpleNamespace(sleep=killed))
            with pytest.raises(KeyboardInterrupt):
                index(db, settings, embedder, tenant, tmp_path, api)
        assert api.batch_creates == 1 and pending_rows(db, tenant) == 3  # sent and recorded
        assert stored_contexts(db, tenant) == {}  # nothing indexed before its contexts are in
        api.hold_batches = False
        indexed, meter = index(db, settings, embedder, tenant, tmp_path, api)
    assert indexed.report.clean and indexed.report.documents["added"] == 3, indexed.report
    assert api.batch_creates == 1 and api.paid == 3 and api.calls == 0  # collected, not sent again
    assert meter.summary()["llm_calls"] == 3  # counted once, by the ingest that used them
    assert all("zanzibarite" in c for c in stored_contexts(db, tenant).values())
    assert pending_rows(db, tenant) == 0


def test_a_plain_ingest_after_a_killed_batch_ingest_collects_its_batch_without_paying_twice(
        db, settings, embedder, tenant, tmp_path, monkeypatch):
    write_corpus(tmp_path, FILES)
    with FakeAnthropic(handler=situate) as api:
        api.hold_batches = True
        with monkeypatch.context() as patched:
            patched.setattr(batches, "time", SimpleNamespace(sleep=lambda seconds: _kill()))
            with pytest.raises(KeyboardInterrupt):
                index(db, settings, embedder, tenant, tmp_path, api)
        assert api.batch_creates == 1 and pending_rows(db, tenant) == 3
        api.hold_batches = False
        indexed, meter = index(db, settings, embedder, tenant, tmp_path, api, batch=False)  # no --batch
    assert indexed.report.clean and indexed.report.documents["added"] == 3, indexed.report
    # answered from the batch the killed run sent: no interactive call, no second batch, each context paid once
    assert api.calls == 0 and api.batch_creates == 1 and api.paid == 3 and api.results_downloads == 1
    assert meter.summary()["llm_calls"] == 3
    assert all("zanzibarite" in c for c in stored_contexts(db, tenant).values())
    assert pending_rows(db, tenant) == 0


def test_an_http_ingest_does_not_wait_for_a_batch_still_running(db, settings, embedder, tenant, tmp_path,
                                                                 monkeypatch):
    write_corpus(tmp_path, {"a.md": FILES["a.md"]})
    with FakeAnthropic(handler=situate) as api:
        api.hold_batches = True  # the killed run's batch runs for hours
        with monkeypatch.context() as patched:
            patched.setattr(batches, "time", SimpleNamespace(sleep=lambda seconds: _kill()))
            with pytest.raises(KeyboardInterrupt):
                index(db, settings, embedder, tenant, tmp_path, api)
            # what PUT /v1/documents runs: the context is sent now (a wait would raise, as sleep is patched)
            online = settings.model_copy(update=dict(anthropic_api_key=SecretStr("test-key"),
                                                     anthropic_base_url=api.url, llm_max_retries=0))
            docs, _ = load_source(tmp_path, [], settings.max_document_bytes)
            indexed = usecases.index_documents(db, UnitEmbedder(embedder), online, tenant, docs,
                                               wait_for_batches=False)
    assert indexed.report.clean and indexed.report.documents["added"] == 1 and api.calls == 1


def _kill() -> None:
    raise KeyboardInterrupt  # the process dies while its batch is in progress


def test_errored_and_expired_contexts_fall_back_flagged_and_are_sent_again(db, settings, embedder, tenant, tmp_path):
    write_corpus(tmp_path, FILES)
    down = {"Alpha": error(500, "internal error"), "Bravo": expired()}
    failing = True

    def handler(body: dict):
        title = re.search(r"<title>(\w+) page</title>", body["system"][0]["text"])[1]
        return down[title] if failing and title in down else situate(body)

    with FakeAnthropic(handler=handler) as api:
        indexed, _ = index(db, settings, embedder, tenant, tmp_path, api)
        report = indexed.report
        # nothing lost: every document landed, the two failed contexts offline, counted and named
        assert report.documents["added"] == 3 and report.errors == [] and report.contexts_failed == 2
        assert not report.clean  # `crossroads ingest` exits 3 (partial)
        assert "a.md" in report.notes[-1] and "b.md" in report.notes[-1] and "api_error" in report.notes[-1]
        assert stored_contexts(db, tenant)["a.md"] == "Alpha page" and cached_docs(db, tenant) == ["c.md"]
        assert pending_rows(db, tenant) == 0
        sent = len(api.batch_bodies)
        failing = False
        again, _ = index(db, settings, embedder, tenant, tmp_path, api)
    assert again.report.clean and again.report.documents["changed"] == 2, again.report
    assert api.batch_creates == 2 and len(api.batch_bodies) - sent == 2  # exactly the two failed ones
    assert cached_docs(db, tenant) == ["a.md", "b.md", "c.md"]


def test_a_document_over_the_context_window_is_asked_again_as_excerpts_in_the_next_batch(
        db, settings, embedder, tenant, tmp_path):
    sections = "".join(f"## Step {i}\n\n" + f"Operators of region {i} rotate the ledger keys weekly. " * 10 + "\n\n"
                       for i in range(5))
    write_corpus(tmp_path, {"long.md": f"---\ntitle: Ledger runbook\nacl: [public]\n---\n{sections}"})
    with FakeAnthropic(handler=situate, context_window=900) as api:
        indexed, _ = index(db, settings, embedder, tenant, tmp_path, api)
    chunks = indexed.report.chunks["added"]
    assert indexed.report.clean and chunks > 1, indexed.report
    # the whole document for every chunk (each a 400 "prompt is too long"), then an excerpt around each
    assert api.batch_creates == 2 and len(api.batch_bodies) == 2 * chunks and api.paid == chunks
    assert all("<excerpt>" in b["params"]["messages"][0]["content"] for b in api.batch_bodies[chunks:])
    assert all("zanzibarite" in c for c in stored_contexts(db, tenant).values())


def test_a_batch_ingest_needs_an_api_key_and_llm_contexts():
    for settings in (Settings(anthropic_api_key=None),
                     Settings(anthropic_api_key="k", contextual_retrieval="title")):
        with pytest.raises(CrossroadsError, match="ANTHROPIC_API_KEY"):
            usecases.index_documents(None, None, settings, "t", [], batch=True)


def test_requests_over_a_batch_limit_go_in_several_batches(monkeypatch):
    requests = {f"{i:02d}": {"model": "m", "n": i} for i in range(5)}
    assert [list(p) for p in batches.batch_parts(requests)] == [list(requests)]
    monkeypatch.setattr(batches, "MAX_BATCH_REQUESTS", 2)
    assert [list(p) for p in batches.batch_parts(requests)] == [["00", "01"], ["02", "03"], ["04"]]
    monkeypatch.setattr(batches, "MAX_BATCH_REQUESTS", 100)
    monkeypatch.setattr(batches, "MAX_BATCH_BYTES", 100)  # room for one request of ~60 bytes, not two
    assert [len(p) for p in batches.batch_parts(requests)] == [1] * 5


def test_the_cli_ingests_with_batch_and_exits_partial_on_a_failed_context(db, settings, embedder, tenant, tmp_path,
                                                                          monkeypatch):
    from typer.testing import CliRunner

    from api.cli import main as cli

    write_corpus(tmp_path, FILES)
    monkeypatch.setattr(cli, "make_embedder", lambda _settings: UnitEmbedder(embedder))  # no model to load

    def handler(body: dict):
        alpha = "<title>Alpha page</title>" in body["system"][0]["text"]
        return error(500, "internal error") if alpha else situate(body)

    with FakeAnthropic(handler=handler) as api:
        env = dict(CROSSROADS_DATABASE_URL=db.url, CROSSROADS_STATE_DIR=str(settings.state_dir),
                   CROSSROADS_CHUNK_MAX_CHARS="600", ANTHROPIC_API_KEY="test-key", CROSSROADS_ANTHROPIC_BASE_URL=api.url,
                   CROSSROADS_LLM_MAX_RETRIES="0", CROSSROADS_LLM_BATCH_POLL_S="0.01")
        ran = CliRunner().invoke(cli.app, ["ingest", str(tmp_path), "--tenant", tenant, "--yes", "--batch", "--json"],
                                 env=env)
    assert ran.exit_code == 3, ran.output  # partial: one context fell back, flagged for the next ingest
    out = json.loads(ran.stdout)
    assert out["documents"]["added"] == 3 and out["contexts_failed"] == 1 and out["errors"] == []
    assert out["llm"]["llm_calls"] == 2 and api.batch_creates == 1 and api.calls == 0


def test_a_dry_run_estimates_the_contexts_still_to_write_and_sends_nothing(db, settings, embedder, tenant, tmp_path,
                                                                           monkeypatch):
    from typer.testing import CliRunner

    from api.cli import main as cli

    write_corpus(tmp_path, FILES)
    with FakeAnthropic(handler=situate) as api:
        env = dict(CROSSROADS_DATABASE_URL=db.url, CROSSROADS_STATE_DIR=str(settings.state_dir),
                   CROSSROADS_CHUNK_MAX_CHARS=str(settings.chunk_max_chars), ANTHROPIC_API_KEY="test-key",
                   CROSSROADS_ANTHROPIC_BASE_URL=api.url)
        ran = CliRunner().invoke(cli.app, ["ingest", str(tmp_path), "--tenant", tenant, "--batch", "--dry-run",
                                           "--json"], env=env)
        assert ran.exit_code == 0, ran.output
        before = json.loads(ran.stdout)["estimate"]
        # three one-chunk documents far below Haiku 4.5's 4096-token minimum: no caching counted
        assert (before["calls"], before["documents"], before["documents_cached"]) == (3, 3, 0), before
        assert before["cache_read_tokens"] == before["cache_write_tokens"] == 0 and before["batch"] is True
        assert 0 < before["cost_usd_range"][0] <= before["cost_usd"] <= before["cost_usd_range"][1]
        assert api.calls == 0 and api.batch_creates == 0 and stored_contexts(db, tenant) == {}  # nothing sent, nothing written
        index(db, settings, embedder, tenant, tmp_path, api)
        online = settings.model_copy(update=dict(anthropic_api_key=SecretStr("test-key"), anthropic_base_url=api.url))
        docs, _ = load_source(tmp_path, [], settings.max_document_bytes)
        after = usecases.estimate_ingest(db, online, tenant, docs)
    assert (after["calls"], after["cost_usd"]) == (0, 0.0)  # every context cached with its chunk
