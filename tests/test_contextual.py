"""Contextual retrieval at index time, through the real anthropic SDK against a loopback Messages API."""
from __future__ import annotations

import re

import numpy as np
import pytest

from core.llm.client import AnthropicLLM
from core.settings import Settings
from tests.conftest import CountingEmbedder
from core.llm.prompting import MalformedReply
from tests.fakes.anthropic_server import FakeAnthropic, error, refusal, text
from tests.test_ingest_sync import LONG_EN, SHORT, write_corpus
from vector.ingest.contextualize import (LLMContextualizer, TitleContextualizer, checked_context, document_location,
                                  document_prefix, make_contextualizer)
from vector.ingest.runner import ingest_documents
from vector.search.hybrid import HybridSearcher
from vector.ingest.sources import SourceDocument, load_source


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


class UnitEmbedder:
    """The same unit vector for every text, under the local model's id: for tests about the texts, not
    the vectors (the local model takes seconds on a long document); only this test's tenant holds them."""

    def __init__(self, like):
        self.model_id, self.dimension = like.model_id, like.dimension

    def embed_documents(self, texts):
        return np.full((len(texts), self.dimension), self.dimension ** -0.5, dtype=np.float32)


def stored_contexts(db, tenant) -> dict[str, str]:
    with db.connection() as conn:
        return dict(conn.execute("SELECT doc_id, context FROM chunks WHERE tenant_id = %s", (tenant,)).fetchall())


@pytest.mark.parametrize("failure", [
    [refusal()],
    [error(500, "boom")],
    [text("From the gateway", stop_reason="max_tokens"), text("From the gateway handbook", stop_reason="max_tokens")],
    [text("I'm sorry, I can't help with that."), text("Here is the context: " + "A long preamble. " * 40)],
], ids=["refused", "api-error", "cut-twice", "malformed-twice"])
def test_a_failed_context_is_indexed_offline_flagged_not_cached_and_retried_next_ingest(
    db, settings, embedder, tenant, tmp_path, failure
):
    root = tmp_path / "c"
    other = SHORT.replace("Status page", "Other page").replace("status.example.org", "other.example.org")
    write_corpus(root, {"a.md": SHORT, "b.md": other})
    unit = UnitEmbedder(embedder)
    with FakeAnthropic(*failure, handler=situate) as api:
        report = run(db, settings, unit, tenant, root, contextualizer_for(api))
    # nothing lost: both documents landed, a.md's chunk with the offline context, counted and named
    assert report.documents["added"] == 2 and report.documents["failed"] == 0 and report.errors == []
    assert report.contexts_failed == 1 and not report.clean  # `crossroads ingest` exits 3 (partial)
    assert "a.md" in report.notes[-1] and "b.md" not in report.notes[-1]
    assert stored_contexts(db, tenant) == {"a.md": "Status page", "b.md": stored_contexts(db, tenant)["b.md"]}
    with db.connection() as conn:
        cached = conn.execute("SELECT doc_id FROM chunk_contexts WHERE tenant_id = %s", (tenant,)).fetchall()
    assert cached == [("b.md",)]  # the fallback is not cached as if the LLM had written it

    # the API is healthy again: exactly the failed chunk is asked for and embedded again
    with FakeAnthropic(handler=situate) as api:
        again = CountingEmbedder(unit)
        report = run(db, settings, again, tenant, root, contextualizer_for(api))
        assert api.calls == 1 and again.texts_embedded == 1
    assert report.clean and report.documents["changed"] == 1 and report.documents["unchanged"] == 1
    assert "zanzibarite" in stored_contexts(db, tenant)["a.md"]
    with FakeAnthropic(handler=situate) as api:
        assert run(db, settings, unit, tenant, root, contextualizer_for(api)).documents["unchanged"] == 2
        assert api.calls == 0


def test_a_document_over_the_context_window_is_contextualised_from_an_excerpt(db, settings, embedder, tenant, tmp_path):
    sections = "".join(f"## Step {i}\n\n" + f"Operators of region {i} rotate the ledger keys weekly. " * 10 + "\n\n"
                       for i in range(5))
    root = tmp_path / "c"
    write_corpus(root, {"long.md": f"---\ntitle: Ledger runbook\nacl: [public]\n---\n{sections}"})
    with FakeAnthropic(handler=situate, context_window=900) as api:
        report = run(db, settings, UnitEmbedder(embedder), tenant, root, contextualizer_for(api))
        bodies = api.bodies
    assert report.clean and report.contexts_failed == 0
    assert api.calls == report.chunks["added"] + 1  # one 400 "prompt is too long", then one call per chunk
    assert "cache_control" in str(bodies[0]["system"])  # the whole document was tried first
    for body in bodies[1:]:
        message = body["messages"][0]["content"]
        excerpt = message[message.index("<excerpt>"):message.index("</excerpt>")]
        chunk = message[message.index("<chunk>"):]
        assert re.search(r"Step \d", chunk).group(0) in excerpt  # the excerpt is around the chunk
    assert all("zanzibarite" in context for context in stored_contexts_by_chunk(db, tenant))


def stored_contexts_by_chunk(db, tenant) -> list[str]:
    with db.connection() as conn:
        return [r[0] for r in conn.execute("SELECT context FROM chunks WHERE tenant_id = %s", (tenant,))]


@pytest.mark.parametrize("reply, context", [
    ("Here is the context: The chunk covers key rotation.", "The chunk covers key rotation."),
    ("Context:  The chunk covers\n key rotation. ", "The chunk covers key rotation."),
    ('"The chunk covers key rotation."', "The chunk covers key rotation."),
    ("I'm sorry, but I can't help with that.", None), ("I cannot situate this chunk.", None), ("", None),
    ("A sentence. " * 50, None),
])
def test_a_context_reply_is_checked_before_it_is_indexed(reply, context):
    if context is None:
        with pytest.raises(MalformedReply):
            checked_context(reply)
    else:
        assert checked_context(reply) == context


def test_contextualizer_choice():
    assert isinstance(make_contextualizer(Settings(contextual_retrieval="auto"), None), TitleContextualizer)
    with pytest.raises(Exception, match="ANTHROPIC_API_KEY"):
        make_contextualizer(Settings(contextual_retrieval="llm"), None)
    assert isinstance(make_contextualizer(Settings(contextual_retrieval="title"), object()), TitleContextualizer)


@pytest.mark.parametrize("doc_id, title, location", [
    ("https://docs.example.com/en/use-cases/classification#3-run-your-eval", "3. Run your eval",
     ["en", "use cases", "classification"]),
    ("runbooks/payments_gateway.md", "Payments Gateway", ["runbooks"]),  # the file name repeats the title
    ("runbooks/on-call%20rota.markdown", "Rota", ["runbooks", "on call rota"]),
    ("handbook/leave.md#carry-over", "Leave", ["handbook"]),
    ("4380635", "", []), ("<dbpedia:Oceanic_Airlines>", "Oceanic Airlines", []), ("xq00_0", "Super Bowl", []),
    ("<dbpedia:McDonnell_Douglas_F/A-18_Hornet>", "McDonnell Douglas F/A-18 Hornet", []),  # the title's slash
    ("wiki/AC_DC/AC/DC.html", "AC/DC", ["wiki", "AC DC"]),
])
def test_document_location_is_the_path_an_id_names(doc_id, title, location):
    assert document_location(doc_id, title) == location


def test_llm_prompt_carries_the_location_escaped():
    doc = SourceDocument(doc_id="a&b/eval-tool.md", title="Tips", text="Use <b>it</b>.", acl=("x",), lang="en", source="")
    assert document_prefix(doc).startswith("<document>\n<location>a&amp;b / eval tool</location>\n<title>Tips</title>")
    bare = SourceDocument(doc_id="42", title="Tips", text="t", acl=("x",), lang="en", source="")
    assert "<location>" not in document_prefix(bare)


PUBLIC = "---\nacl: [public]\n---\n"


def test_offline_context_lets_both_legs_find_a_section_by_its_page(db, settings, local_embedder, tenant, tmp_path):
    """A section that never names its page is found by the page's name, which only its location holds."""
    root = tmp_path / "c"
    write_corpus(root, {
        "use-cases/classification/run-your-eval.md": f"{PUBLIC}# Run your eval\n\nPress the run button once the test cases are ready.\n",
        "use-cases/summarization/style.md": f"{PUBLIC}# Style\n\nKeep the summary short and neutral.\n",
    })
    report = run(db, settings, local_embedder, tenant, root, TitleContextualizer())
    assert report.clean
    with db.connection() as conn:
        contexts = dict(conn.execute("SELECT doc_id, context FROM chunks WHERE tenant_id = %s", (tenant,)).fetchall())
    assert contexts["use-cases/classification/run-your-eval.md"] == "use cases > classification > Run your eval"
    with HybridSearcher(db, local_embedder) as searcher:
        for mode in ("bm25", "dense"):
            hits = searcher.search(tenant, ["public"], "how do I run a classification evaluation", k=1, mode=mode).hits
            assert [h.doc_id for h in hits] == ["use-cases/classification/run-your-eval.md"], mode
