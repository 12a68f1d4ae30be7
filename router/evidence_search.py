"""The agentic loop's `Searcher` over the hybrid index: one tenant, one reader's groups, one mode.

`HybridSearcher.search` returns `Candidate`s with scores and per-leg ranks; the loop only needs the
passages, so each hit becomes a `Passage` (kind "chunk", id = chunk id). Tenant and ACL filtering
stay inside `HybridSearcher` (in SQL); this adapter never widens them. A degraded search (a leg or
the reranker failed) still returns its hits: the flag and reason are recorded per search, so the
caller can mark the whole answer degraded.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Sequence

from answers.types import Passage
from vector.search.hybrid import HybridSearcher, Mode, SearchResult


@dataclass
class SearchRecord:
    query: str
    k: int
    hits: list[int]  # chunk ids, best first
    degraded: bool
    degraded_reason: str | None
    latency_ms: float
    trace: dict = field(default_factory=dict)


class HybridPassageSearcher:
    """`router.agentic.Searcher` over `HybridSearcher` for one reader (tenant + groups)."""

    def __init__(self, searcher: HybridSearcher, tenant: str, groups: Sequence[str], mode: Mode = "hybrid+rerank",
                 *, keep_traces: bool = True, apply_threshold: bool = False):
        self.searcher, self.tenant, self.groups, self.mode = searcher, tenant, list(groups), mode
        # Off by default: the rerank cut is calibrated for "does this answer the question", but a hop's
        # evidence often only names the bridge (measured: evidence recall@10 0.79 without, 0.70 with).
        self.apply_threshold = apply_threshold
        self.keep_traces = keep_traces  # search traces hold every stage's ranking: large, but what a trace is for
        self.records: list[SearchRecord] = []
        self.last_result: SearchResult | None = None  # the latest search's whole result (the graph leg's seeds)

    def search(self, query: str, k: int) -> list[Passage]:
        started = time.perf_counter()
        result = self.searcher.search(self.tenant, self.groups, query, k=k, mode=self.mode,
                                      apply_threshold=self.apply_threshold)
        self.last_result = result
        self.records.append(SearchRecord(
            query=query, k=k, hits=[h.id for h in result.hits], degraded=result.degraded,
            degraded_reason=result.degraded_reason, latency_ms=(time.perf_counter() - started) * 1000,
            trace=result.trace if self.keep_traces else {},
        ))
        return [Passage.of_chunk(h) for h in result.hits]

    # --- for the caller ------------------------------------------------------------------------
    @property
    def degraded(self) -> bool:
        return any(r.degraded for r in self.records)

    @property
    def degraded_reasons(self) -> list[str]:
        reasons: list[str] = []
        for r in self.records:
            if r.degraded_reason and r.degraded_reason not in reasons:
                reasons.append(r.degraded_reason)
        return reasons

    def reset(self) -> None:
        """Forget recorded searches (one adapter reused across questions)."""
        self.records = []

    def trace(self) -> list[dict]:
        return [{"query": r.query, "k": r.k, "hits": r.hits, "degraded": r.degraded,
                 "degraded_reason": r.degraded_reason, "latency_ms": round(r.latency_ms, 1),
                 **({"search": r.trace} if r.trace else {})} for r in self.records]
