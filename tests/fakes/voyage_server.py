"""A fake Voyage embeddings endpoint (POST /v1/embeddings) on loopback.

Vectors are derived from a hash of the text, so a test can compute the exact vector each text
must get (`fake_vector`) and check that every row landed where it belongs. Failures are scripted
as a queue consumed one per request, then it answers normally.
"""
from __future__ import annotations

import hashlib
import random
import threading
from collections import deque

import numpy as np

from tests.fakes.loopback import LoopbackServer, Reply, Request

# Scripted failure kinds (one request each):
#   "429"            rate limited, with Retry-After = `retry_after`
#   "500"            server error
#   "401", "400"     client errors (not retryable)
#   "slow"           answers after `slow_s` (to trigger a client read timeout)
#   "wrong_dimension"  a normal answer with vectors of dimension // 2
#   "missing_index"    a normal answer without the last item
#   "duplicate_index"  a normal answer whose last item repeats index 0
FAILURES = {"429", "500", "401", "400", "slow", "wrong_dimension", "missing_index", "duplicate_index"}


def fake_vector(text: str, dimension: int) -> np.ndarray:
    """The unit vector the fake returns for `text` (before `scale`)."""
    seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "little")
    v = np.random.default_rng(seed).standard_normal(dimension)
    return (v / np.linalg.norm(v)).astype(np.float32)


class FakeVoyage:
    """`with FakeVoyage(dimension=8) as fake:` then point the client at `fake.base_url`."""

    def __init__(
        self,
        dimension: int = 8,
        shuffle: bool = False,
        failures: list[str] | None = None,
        always: str | None = None,
        retry_after: str | None = "0",
        delay_s: float = 0.0,
        slow_s: float = 1.0,
        scale: float = 1.0,
        seed: int = 0,
    ):
        unknown = set(failures or []) | ({always} if always else set())
        assert unknown <= FAILURES, f"unknown failure kinds: {unknown - FAILURES}"
        self.dimension = dimension
        self.shuffle = shuffle  # answer `data` in a random order, as the API may
        self.failures = deque(failures or [])
        self.always = always  # a failure kind for every request (after the queue)
        self.retry_after = retry_after
        self.delay_s = delay_s  # per request, so concurrent requests overlap
        self.slow_s = slow_s
        self.scale = scale  # != 1 sends non-unit vectors, to check the client normalises
        self.index_orders: list[list[int]] = []  # `index` order of each 200 answer, as sent
        self.in_flight = 0
        self.max_in_flight = 0
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._server = LoopbackServer(self._respond)

    @property
    def base_url(self) -> str:
        return self._server.url + "/v1"

    @property
    def requests(self) -> list[Request]:
        return self._server.requests

    def bodies(self) -> list[dict]:
        return [r.json() for r in self.requests]

    def __enter__(self) -> "FakeVoyage":
        self._server.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._server.__exit__(*exc)

    def _respond(self, req: Request) -> Reply:
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            kind = self.failures.popleft() if self.failures else self.always
        try:
            if self.delay_s:
                threading.Event().wait(self.delay_s)
            return self._answer(req, kind)
        finally:
            with self._lock:
                self.in_flight -= 1

    def _answer(self, req: Request, kind: str | None) -> Reply:
        if req.method != "POST" or req.path != "/v1/embeddings":
            return Reply(404, {"detail": "Not Found"})
        if not req.headers.get("authorization", "").startswith("Bearer "):
            return Reply(401, {"detail": "Provided API key is invalid."})
        if kind == "429":
            headers = {"Retry-After": self.retry_after} if self.retry_after is not None else {}
            return Reply(429, {"detail": "Rate limit exceeded"}, headers)
        if kind == "500":
            return Reply(500, {"detail": "Internal server error"})
        if kind == "401":
            return Reply(401, {"detail": "Provided API key is invalid."})
        if kind == "400":
            return Reply(400, {"detail": "Request to model failed: input too long"})
        body = req.json()
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        if len(texts) > 128:
            return Reply(400, {"detail": "The batch size limit is 128."})
        dim = self.dimension // 2 if kind == "wrong_dimension" else self.dimension
        data = [
            {"object": "embedding", "embedding": (fake_vector(t, dim) * self.scale).tolist(), "index": i}
            for i, t in enumerate(texts)
        ]
        if kind == "missing_index":
            data.pop()
        if kind == "duplicate_index":
            data[-1]["index"] = 0
        if self.shuffle:
            self._rng.shuffle(data)
        with self._lock:
            self.index_orders.append([d["index"] for d in data])
        tokens = sum(len(t.split()) for t in texts)
        reply = {"object": "list", "data": data, "model": body["model"], "usage": {"total_tokens": tokens}}
        return Reply(200, reply, delay_s=self.slow_s if kind == "slow" else 0.0)
