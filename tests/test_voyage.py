"""VoyageEmbedder against a fake Voyage endpoint on loopback: real httpx, real sockets."""
from __future__ import annotations

import time

import numpy as np
import pytest

from core.embeddings import Embedder
from core.errors import CrossroadsError, EmbeddingError
from core.settings import Settings
from core.voyage import VoyageEmbedder
from tests.fakes.voyage_server import FakeVoyage, fake_vector

DIM = 8
_open: list[VoyageEmbedder] = []


@pytest.fixture(autouse=True)
def _close_embedders():
    yield
    while _open:
        _open.pop().close()


def make(fake: FakeVoyage, **kw) -> VoyageEmbedder:
    opts = dict(api_key="test-key", dimension=DIM, base_url=fake.base_url, backoff_base_s=0.001, timeout_s=5.0)
    opts.update(kw)
    _open.append(VoyageEmbedder(**opts))
    return _open[-1]


def expected(texts: list[str]) -> np.ndarray:
    return np.stack([fake_vector(t, DIM) for t in texts])


def test_rows_follow_index_not_response_order():
    texts = [f"passage number {i}" for i in range(40)]
    with FakeVoyage(dimension=DIM, shuffle=True) as fake:
        emb = make(fake)
        out = emb.embed_documents(texts)
    assert fake.index_orders[0] != sorted(fake.index_orders[0])  # the answer really was out of order
    assert out.shape == (40, DIM) and out.dtype == np.float32
    np.testing.assert_allclose(out, expected(texts), atol=1e-6)
    assert isinstance(emb, Embedder) and emb.model_id == "voyage/voyage-3.5"


def test_300_texts_go_in_three_document_batches():
    texts = [f"t{i}" for i in range(300)]
    with FakeVoyage(dimension=DIM) as fake:
        emb = make(fake)
        out = emb.embed_documents(texts)
    bodies = fake.bodies()
    assert sorted(len(b["input"]) for b in bodies) == [44, 128, 128]
    assert all(b["input_type"] == "document" and b["model"] == "voyage-3.5" for b in bodies)
    assert "output_dimension" not in bodies[0]  # only sent when asked for
    np.testing.assert_allclose(out, expected(texts), atol=1e-6)
    assert emb.calls == 3 and emb.total_tokens == 300


def test_query_sends_input_type_query_and_bearer_key():
    with FakeVoyage(dimension=DIM) as fake:
        vec = make(fake, api_key="secret-123").embed_query("what is the retry limit?")
    (req,) = fake.requests
    assert req.path == "/v1/embeddings"
    assert req.headers["authorization"] == "Bearer secret-123"
    assert req.json()["input_type"] == "query" and req.json()["input"] == ["what is the retry limit?"]
    assert vec.shape == (DIM,)
    np.testing.assert_allclose(vec, fake_vector("what is the retry limit?", DIM), atol=1e-6)


def test_429_honours_retry_after_then_succeeds():
    # A huge backoff base: only honouring Retry-After: 0 keeps this test fast.
    with FakeVoyage(dimension=DIM, failures=["429"], retry_after="0") as fake:
        emb = make(fake, backoff_base_s=30.0)
        t0 = time.monotonic()
        out = emb.embed_documents(["a", "b"])
    assert time.monotonic() - t0 < 5
    assert len(fake.requests) == 2 and emb.calls == 2
    np.testing.assert_allclose(out, expected(["a", "b"]), atol=1e-6)


def test_read_timeout_is_retried():
    with FakeVoyage(dimension=DIM, failures=["slow"], slow_s=1.0) as fake:
        out = make(fake, timeout_s=0.2).embed_documents(["a"])
    assert len(fake.requests) == 2
    np.testing.assert_allclose(out, expected(["a"]), atol=1e-6)


def test_500_forever_gives_up_after_max_retries():
    with FakeVoyage(dimension=DIM, always="500") as fake:
        with pytest.raises(EmbeddingError) as err:
            make(fake, max_retries=3).embed_documents(["a"])
    assert len(fake.requests) == 1 + 3
    msg = str(err.value)
    assert "HTTP 500" in msg and "after 4 attempts" in msg and "batch 1/1" in msg
    assert "voyage_max_retries" in msg  # says what to do next
    assert isinstance(err.value, CrossroadsError)


@pytest.mark.parametrize("status", ["400", "401"])
def test_other_4xx_is_not_retried(status):
    with FakeVoyage(dimension=DIM, failures=[status]) as fake:
        with pytest.raises(EmbeddingError, match=f"HTTP {status}"):
            make(fake).embed_documents(["a"])
    assert len(fake.requests) == 1


def test_wrong_dimension_names_both_dimensions():
    with FakeVoyage(dimension=DIM, failures=["wrong_dimension"]) as fake:
        with pytest.raises(EmbeddingError) as err:
            make(fake).embed_documents(["a", "b"])
    msg = str(err.value)
    assert f"{DIM // 2}-d" in msg and f"voyage_dimension is {DIM}" in msg
    assert "CROSSROADS_VOYAGE_DIMENSION" in msg


@pytest.mark.parametrize("kind", ["missing_index", "duplicate_index"])
def test_missing_or_duplicate_index_is_an_error(kind):
    with FakeVoyage(dimension=DIM, failures=[kind]) as fake:
        with pytest.raises(EmbeddingError, match="exactly once"):
            make(fake).embed_documents(["a", "b", "c"])


def test_at_most_concurrency_requests_in_flight():
    texts = [f"t{i}" for i in range(12)]
    with FakeVoyage(dimension=DIM, delay_s=0.15) as fake:
        out = make(fake, concurrency=3, batch_size=1).embed_documents(texts)
    assert len(fake.requests) == 12
    assert fake.max_in_flight == 3  # bounded, and actually parallel
    np.testing.assert_allclose(out, expected(texts), atol=1e-6)


def test_vectors_are_normalised_and_empty_input_costs_nothing():
    with FakeVoyage(dimension=DIM, scale=7.0) as fake:
        emb = make(fake)
        out = emb.embed_documents(["x", "y"])
        empty = emb.embed_documents([])
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-6)
    assert empty.shape == (0, DIM) and len(fake.requests) == 1


def test_no_key_tells_the_user_to_set_it(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # no .env or crossroads.toml to pick a key up from
    for name in ("VOYAGE_API_KEY", "CROSSROADS_VOYAGE_API_KEY", "CROSSROADS_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(EmbeddingError, match="VOYAGE_API_KEY"):
        VoyageEmbedder.from_settings(Settings(embed_provider="voyage"))


def test_from_settings_reads_the_voyage_fields(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("VOYAGE_API_KEY", "env-key")
    s = Settings(voyage_model="voyage-3-large", voyage_dimension=DIM, voyage_concurrency=2, voyage_max_retries=1)
    with FakeVoyage(dimension=DIM) as fake:
        s = s.model_copy(update={"voyage_base_url": fake.base_url})
        with VoyageEmbedder.from_settings(s) as emb:
            emb.embed_query("q")
    assert emb.model_id == "voyage/voyage-3-large" and emb.concurrency == 2 and emb.max_retries == 1
    assert fake.requests[0].headers["authorization"] == "Bearer env-key"
