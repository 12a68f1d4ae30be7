"""Fake Voyage (POST /v1/rerank) and Cohere v2 (POST /v2/rerank) rerank endpoints on loopback.

Both score a document by how many distinct query words it contains (so a test knows which document
must come first), answer best first in the provider's own wire format, and can be scripted to
misbehave. Every request is recorded for assertions on bodies and headers.

    with FakeRerank("voyage") as api:
        reranker = HttpReranker(VOYAGE, api_key="k", model="rerank-2.5", base_url=api.base_url)
"""
from __future__ import annotations

import re
from typing import Literal

from tests.fakes.loopback import LoopbackServer, Reply, Request

# Scripted behaviours (for every request):
#   "ok"             a correct answer, best first
#   "reversed"       a correct answer, worst first (the client must not trust the order)
#   "out_of_range"   the best result's index is len(documents)
#   "duplicate"      the second result repeats the first one's index
#   "missing_score"  the best result lacks relevance_score
#   "too_many"       more results than top_k / top_n asked for
#   "500"            an internal server error
#   "slow"           a correct answer after `slow_s` seconds
BEHAVIOURS = {"ok", "reversed", "out_of_range", "duplicate", "missing_score", "too_many", "500", "slow"}

Flavour = Literal["voyage", "cohere"]
_WORD = re.compile(r"\w+")


def word_overlap(query: str, document: str) -> float:
    """The fake's relevance: share of distinct query words present in the document."""
    words = set(_WORD.findall(query.lower()))
    return len(words & set(_WORD.findall(document.lower()))) / max(len(words), 1)


class FakeRerank:
    def __init__(self, flavour: Flavour, behaviour: str = "ok", slow_s: float = 2.0):
        assert behaviour in BEHAVIOURS, f"unknown behaviour {behaviour!r}"
        self.flavour = flavour
        self.behaviour = behaviour
        self.slow_s = slow_s
        self._server = LoopbackServer(self._respond)

    @property
    def base_url(self) -> str:
        # as configured in settings: Voyage's root includes /v1, Cohere's is the bare host
        return self._server.url + ("/v1" if self.flavour == "voyage" else "")

    @property
    def path(self) -> str:
        return "/v1/rerank" if self.flavour == "voyage" else "/v2/rerank"

    @property
    def requests(self) -> list[Request]:
        return self._server.requests

    def __enter__(self) -> "FakeRerank":
        self._server.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._server.__exit__(*exc)

    def _error(self, status: int, message: str) -> Reply:
        return Reply(status, {"detail": message} if self.flavour == "voyage" else {"message": message})

    def _respond(self, req: Request) -> Reply:
        if req.method != "POST" or req.path != self.path:
            return self._error(404, f"no route {req.method} {req.path}")
        if not req.headers.get("authorization", "").startswith("Bearer "):
            return self._error(401, "invalid api token")
        if self.behaviour == "500":
            return self._error(500, "internal server error")
        body = req.json()
        count_field = "top_k" if self.flavour == "voyage" else "top_n"
        documents = body["documents"]
        order = sorted(range(len(documents)), key=lambda i: (-word_overlap(body["query"], documents[i]), i))
        limit = len(documents) if self.behaviour == "too_many" else body.get(count_field) or len(documents)
        results = [{"index": i, "relevance_score": round(word_overlap(body["query"], documents[i]), 4)}
                   for i in order[:limit]]
        if self.behaviour == "reversed":
            results.reverse()
        elif self.behaviour == "out_of_range":
            results[0]["index"] = len(documents)
        elif self.behaviour == "duplicate" and len(results) > 1:
            results[1]["index"] = results[0]["index"]
        elif self.behaviour == "missing_score":
            del results[0]["relevance_score"]
        delay = self.slow_s if self.behaviour == "slow" else 0.0
        if self.flavour == "voyage":
            reply = {"object": "list", "data": results, "model": body["model"], "usage": {"total_tokens": 42}}
        else:
            reply = {"id": "fake-rerank-1", "results": results,
                     "meta": {"api_version": {"version": "2"}, "billed_units": {"search_units": 1}}}
        return Reply(200, reply, delay_s=delay)
