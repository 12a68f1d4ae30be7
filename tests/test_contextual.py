"""Contextual retrieval at index time, through the real anthropic SDK against a loopback Messages API."""
from __future__ import annotations

import re

import pytest

from core.llm import AnthropicLLM
from core.settings import Settings
from tests.conftest import CountingEmbedder
from tests.fakes.anthropic_server import FakeAnthropic, error, text
from tests.test_ingest_sync import LONG_EN, SHORT, write_corpus
from vector.contextualize import LLMContextualizer, TitleContextualizer, make_contextualizer
from vector.ingest import ingest_documents
from vector.sources import load_source


def situate(body: dict):
    """Answers like a model would: a context naming the chunk's heading, plus a rare marker word."""
    chunk = body["messages"][0]["content"]
    heading = re.search(r"<heading>(.*?)</heading>", chunk)
    return text(f"From the gateway handbook, section {heading.group(1) if heading else 'intro'}; zanzibarite.")


def contextualizer_for(api: FakeAnthropic) -> LLMContextualizer:
    settings = Settings(anthropic_api_key="test-key", anthropic_base_url=api.url, llm_max_retries=0, llm_timeout_s=5)
    return LLMContextualizer(AnthropicLLM(settings), settings.llm_model_fast)


def run(db, settings, embedder, tenant, root, contextualizer):
    docs, skipped = load_source(root, [], settings.max_document_bytes)
    return ingest_documents(db, embedder, settings, tenant, docs, skipped, contextualizer=contextualizer)


def test_llm_contexts_feed_vectors_and_full_text_and_are_cached(db, settings, embedder, tenant, tmp_path):
    root = tmp_path / "c"
    write_corpus(root, {"payments.md": LONG_EN})
    with FakeAnthropic(handler=situate) as api:
        report = run(db, settings, embedder, tenant, root, contextualizer_for(api))
        first_calls = api.calls
        bodies = api.bodies
        with db.connection() as conn:
            rows = conn.execute(
                "SELECT chunk_no, context, tsv @@ to_tsquery('english', 'zanzibarite') FROM chunks"
                " WHERE tenant_id = %s ORDER BY chunk_no", (tenant,)
            ).fetchall()
        assert report.clean and first_calls == len(rows) == report.chunks["added"]
        assert all("zanzibarite" in ctx and found for _, ctx, found in rows)
        # the whole document is the cached system prefix; the chunk is the user turn, escaped, as data
        system = bodies[0]["system"]
        assert system[0]["cache_control"] == {"type": "ephemeral"} and "Dana Whitfield" in system[0]["text"]
        assert "instructions" in system[1]["text"] and "<chunk>" in bodies[0]["messages"][0]["content"]

        # unchanged re-run: no LLM call, no embedding
        again = CountingEmbedder(embedder.inner)
        assert run(db, settings, again, tenant, root, contextualizer_for(api)).documents["unchanged"] == 1
        assert api.calls == first_calls and again.calls == 0

        # one paragraph edited: one new context, one new vector
        write_corpus(root, {"payments.md": LONG_EN.replace("09:00 UTC", "10:30 UTC")})
        edited = CountingEmbedder(embedder.inner)
        report = run(db, settings, edited, tenant, root, contextualizer_for(api))
        assert report.chunks["changed"] == 1 and api.calls == first_calls + 1 and edited.texts_embedded == 1
        with db.connection() as conn:
            cached = conn.execute("SELECT count(*) FROM chunk_contexts WHERE tenant_id = %s", (tenant,)).fetchone()[0]
        assert cached == len(rows)  # the edited chunk's old context was dropped, not accumulated


def test_llm_failure_fails_only_that_document(db, settings, embedder, tenant, tmp_path):
    root = tmp_path / "c"
    write_corpus(root, {"a.md": SHORT, "b.md": SHORT.replace("Status page", "Other page")})
    with FakeAnthropic(error(500, "boom"), handler=situate) as api:
        report = run(db, settings, embedder, tenant, root, contextualizer_for(api))
    assert report.documents["failed"] == 1 and report.documents["added"] == 1
    assert "could not write chunk contexts" in report.errors[0]["error"] and report.errors[0]["doc_id"] == "a.md"


def test_contextualizer_choice():
    assert isinstance(make_contextualizer(Settings(contextual_retrieval="auto"), None), TitleContextualizer)
    with pytest.raises(Exception, match="ANTHROPIC_API_KEY"):
        make_contextualizer(Settings(contextual_retrieval="llm"), None)
    assert isinstance(make_contextualizer(Settings(contextual_retrieval="title"), object()), TitleContextualizer)
