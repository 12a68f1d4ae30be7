"""Hosted cross-encoder rerankers over plain httpx: Voyage (POST {base}/rerank) and Cohere v2
(POST {base}/v2/rerank).

Both are on the query path with a sub-second budget, so there are no retries: one request with a
timeout, and any failure (transport error, non-200, malformed or inconsistent answer) raises
`RerankError`, after which the searcher serves the RRF order flagged degraded. Answers are untrusted:
every index and score is checked by `checked_ranking`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import httpx

from vector.search.rerank.contract import DEFAULT_TIMEOUT_S, RerankError, checked_ranking
from vector.search.hybrid import Candidate

MAX_DOCUMENT_CHARS = 4000  # about 1k tokens: chunks are ~1k chars; this only guards a pathological one


def document_text(c: Candidate) -> str:
    """What the cross-encoder sees: title and heading give a chunk the context its text lacks."""
    head = " / ".join(part for part in (c.title, c.heading) if part and part.strip())
    text = f"{head}\n\n{c.text}" if head else c.text
    return text[:MAX_DOCUMENT_CHARS]


@dataclass(frozen=True)
class RerankAPI:
    """What differs between the rerank APIs: their name, key, URL, answer list and count field."""

    name: str
    key_hint: str  # the variable that holds its key
    path: str  # under the configured base URL
    results_key: str  # the answer's list of {"index", "relevance_score"}
    count_field: str  # how many results the request asks for
    extra: tuple[tuple[str, Any], ...] = ()  # fixed request fields


# Voyage: its base already ends in /v1, as for embeddings; truncation cuts an over-long chunk rather than
# failing the whole request. Cohere rerank v2.
VOYAGE = RerankAPI("voyage", "VOYAGE_API_KEY", "/rerank", "data", "top_k", (("truncation", True),))
COHERE = RerankAPI("cohere", "COHERE_API_KEY", "/v2/rerank", "results", "top_n")


class HttpReranker:
    """A hosted reranker: {"model", "query", "documents", count} -> {results: [{"index", "relevance_score"}]}."""

    def __init__(self, api: RerankAPI, api_key: str | None, model: str, base_url: str,
                 timeout_s: float = DEFAULT_TIMEOUT_S):
        self.api, self.name, self.results_key, self.count_field = api, api.name, api.results_key, api.count_field
        if not api_key:
            raise RerankError(f"reranker {self.name!r} needs an API key: set {api.key_hint}, "
                              "or choose CROSSROADS_RERANKER=offline")
        self.model = model
        self.url = base_url.rstrip("/") + api.path
        self.timeout_s = timeout_s
        # One pooled client: a TLS handshake per query would eat a good part of the budget.
        self._client = httpx.Client(headers={"Authorization": f"Bearer {api_key}"}, timeout=httpx.Timeout(timeout_s))

    def _payload(self, query: str, documents: list[str], top_k: int) -> dict[str, Any]:
        return {"model": self.model, "query": query, "documents": documents, self.count_field: top_k,
                **dict(self.api.extra)}

    def close(self) -> None:
        self._client.close()

    def rerank(self, query: str, candidates: Sequence[Candidate], top_k: int) -> list[tuple[int, float]]:
        if not candidates or top_k <= 0:
            return []
        documents = [document_text(c) for c in candidates]
        payload = self._payload(query, documents, min(top_k, len(documents)))
        try:
            response = self._client.post(self.url, json=payload)
        except httpx.TimeoutException as exc:
            raise RerankError(f"{self.name} rerank gave no answer within {self.timeout_s:g} s "
                              f"({type(exc).__name__}); raise CROSSROADS_RERANK_TIMEOUT_S if this repeats") from exc
        except httpx.HTTPError as exc:
            raise RerankError(f"cannot reach {self.name} rerank at {self.url}: {exc}") from exc
        if response.status_code != 200:
            raise RerankError(f"{self.name} rerank answered HTTP {response.status_code}: {response.text[:300]}")
        try:
            body = response.json()
        except ValueError as exc:
            raise RerankError(f"{self.name} rerank answered something that is not JSON: "
                              f"{response.text[:200]!r}") from exc
        items = body.get(self.results_key) if isinstance(body, dict) else None
        if not isinstance(items, list):
            raise RerankError(f"{self.name} rerank answer has no {self.results_key!r} list")
        if len(items) > payload[self.count_field]:
            raise RerankError(f"{self.name} rerank returned {len(items)} results for "
                              f"{self.count_field}={payload[self.count_field]}")
        pairs = []
        for item in items:
            if not isinstance(item, dict):
                raise RerankError(f"{self.name} rerank result {item!r} is not an object")
            pairs.append((item.get("index"), item.get("relevance_score")))
        return checked_ranking(pairs, len(candidates), top_k, f"{self.name} rerank")
