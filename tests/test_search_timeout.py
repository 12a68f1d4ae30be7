"""A search never waits without bound: each of its statements is cancelled past
`search_statement_timeout_ms`. The stall here is real: another session holds an ACCESS EXCLUSIVE
lock (as a migration or VACUUM FULL would), released by a timer well after the test's deadline,
so without the timeout the search would wait for it and the timing assertions fail."""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager

import psycopg
import pytest
from fastapi.testclient import TestClient

from api import tokens
from api.http.app import create_app
from core.errors import SearchUnavailableError
from tests.conftest import ingest_corpus
from tests.test_search import CORPUS
from vector.search.hybrid import HybridSearcher

TIMEOUT_MS = 300
HELD_S = 8.0  # how long the lock is held when nothing cancels the search


@pytest.fixture(scope="module")
def corpus_tenant(db, settings, local_embedder, tmp_path_factory) -> str:
    return ingest_corpus(db, settings, local_embedder, tmp_path_factory.mktemp("timeout_corpus"), CORPUS,
                         "t_search_timeout")


@contextmanager
def locked(db, table: str):
    """`table` locked ACCESS EXCLUSIVE by another session until the block ends (or HELD_S passes)."""
    conn = psycopg.connect(db.url, autocommit=False)
    conn.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
    release = threading.Timer(HELD_S, conn.rollback)
    release.start()
    try:
        yield
    finally:
        release.cancel()
        conn.rollback()
        conn.close()


def test_a_blocked_full_text_leg_is_cancelled_and_hybrid_answers_from_vectors(db, local_embedder, corpus_tenant):
    with HybridSearcher(db, local_embedder, statement_timeout_ms=TIMEOUT_MS) as searcher:
        searcher.search(corpus_tenant, ["staff"], "warm-up", mode="hybrid")  # the model loaded
        with locked(db, "fulltext_lexeme_stats"):  # read by the full-text leg alone
            started = time.perf_counter()
            result = searcher.search(corpus_tenant, ["staff"], "ERR_2043 carrier rate limit", mode="hybrid")
            elapsed = time.perf_counter() - started
        assert elapsed < HELD_S / 2
        assert result.degraded and "fts leg failed" in result.degraded_reason
        assert "statement timeout" in result.degraded_reason and "vector leg" not in result.degraded_reason
        assert result.hits and result.trace["stages"]["fts"] == []
        # the lock gone, the same searcher (and its pooled connections) searches normally again
        again = searcher.search(corpus_tenant, ["staff"], "ERR_2043 carrier rate limit", mode="hybrid")
        assert not again.degraded and again.hits[0].doc_id == "payments.md"


def test_a_search_with_every_leg_blocked_fails_clearly_and_the_api_answers_503(db, settings, local_embedder,
                                                                             corpus_tenant):
    with HybridSearcher(db, local_embedder, statement_timeout_ms=TIMEOUT_MS) as searcher:
        searcher.search(corpus_tenant, ["staff"], "warm-up", mode="hybrid")
        with locked(db, "chunks"):
            started = time.perf_counter()
            with pytest.raises(SearchUnavailableError, match="(?s)statement timeout.*SEARCH_STATEMENT_TIMEOUT_MS"):
                searcher.search(corpus_tenant, ["staff"], "ERR_2043 carrier rate limit", mode="hybrid")
            assert time.perf_counter() - started < HELD_S / 2

    app_settings = settings.model_copy(update={"search_statement_timeout_ms": TIMEOUT_MS})
    with db.connection() as conn:
        token = tokens.create_token(conn, corpus_tenant, ["staff"], "reader", "timeout-test")[0]
    with TestClient(create_app(app_settings, db, embedder=local_embedder), raise_server_exceptions=False) as client:
        headers = {"Authorization": f"Bearer {token}"}
        assert client.post("/v1/search", json={"query": "carrier rate limit"}, headers=headers).status_code == 200
        with locked(db, "chunks"):
            started = time.perf_counter()
            r = client.post("/v1/search", json={"query": "ERR_2043 carrier rate limit"}, headers=headers)
            ask = client.post("/v1/ask", json={"question": "What does ERR_2043 mean?", "route": "local"},
                              headers=headers)
            assert time.perf_counter() - started < HELD_S / 2
        assert ask.status_code == 503 and ask.json()["type"].endswith("search-unavailable")
        assert r.status_code == 503 and r.headers["retry-after"] == "5"
        body = r.json()
        assert body["type"].endswith("search-unavailable") and "timed out" in body["detail"]
        assert "QueryCanceled" not in body["detail"]  # the cause stays in the log
