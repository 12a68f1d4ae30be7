"""The graph leg of retrieval: personalized PageRank passages beside hybrid search, for one reader.

`HybridGraphSearcher.search` runs hybrid search (dense + BM25, reranked), then walks the graph from
HippoRAG 2's reset vector (the question's linked entities and every passage's dense score) plus
hybrid's top passage as the first hop (graph.query.ppr.HEAD_SHARE of the restart mass): the walk
goes "query -> passage -> entity -> passage", so the second hop's passage, which shares the bridge
entity with the first but not the question's words, collects mass. Fusion keeps hybrid's confident
head: the passages the reranker scores at or above its calibrated cut ("this answers the question",
the threshold shipped with the reranker, not fitted here) come first in hybrid's order; the rest of
hybrid's ranking and the walk's passages are fused by Reciprocal Rank Fusion (k = 60, the usual
constant: no weight is fitted, so neither is trusted over the other). A single-hop question whose
answer hybrid already found keeps it on top; the walk fills the places hybrid was unsure of. It is an
`router.agentic.Searcher`, so the multi-hop route's every round gets the PPR candidates too.
`graph_only` ranks by PPR alone, the dense leg's top passage its first hop.

Measured on the dev split (docs/benchmarks.md, issue 20), one search, top 10 of each leg fused:
multihop evidence recall@10 0.63 for plain RRF with HippoRAG 2's seeds over only the dense leg's 50
candidates, 0.64 with every passage's dense score, 0.78 with the first hop as a seed (hybrid+rerank
0.65); xquad_ru nDCG@10 0.891 for plain RRF, 0.979 with the confident head (hybrid+rerank 0.979).

Tenant and ACL stay inside both searchers (SQL); this module never widens them.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Sequence

from graph.query.graph_search import GraphResult, GraphSearcher
from router.agentic import Limits
from router.evidence_search import HybridPassageSearcher
from answers.types import Passage
from vector.search.hybrid import HybridSearcher, Mode, SearchResult

RRF_K = 60  # Cormack et al.'s constant, as vector/search/fusion's RRF
# The first hop: the reranker's single most confident passage. More of hybrid's head spreads the seed
# over passages that are often the question's distractors (measured: 3 passages 0.75, 5 0.68, 10 0.65
# evidence recall@10 fused on multihop dev, against 0.78 for one).
FIRST_HOP = 1


def rrf(rankings: Sequence[Sequence[int]], k: int = RRF_K) -> list[int]:
    """Ids by summed 1 / (k + rank) over the rankings; ties keep the first ranking's order."""
    scores: dict[int, float] = {}
    first_seen: dict[int, int] = {}
    for ranking in rankings:
        for rank, pid in enumerate(ranking, start=1):
            scores[pid] = scores.get(pid, 0.0) + 1.0 / (k + rank)
            first_seen.setdefault(pid, len(first_seen))
    return sorted(scores, key=lambda pid: (-scores[pid], first_seen[pid]))


def confident_cut(searcher: HybridSearcher) -> float | None:
    """The rerank score at or above which a passage answers the question: the searcher's own cut, else
    the reranker's calibrated one for this embedder (a searcher built for ranking evaluation applies
    none, but its reranker still has one). None: no calibrated cut, so no passage counts as confident."""
    if searcher.rerank_threshold is not None:
        return searcher.rerank_threshold
    reranker = searcher.reranker
    calibrated_for = str(getattr(reranker, "provenance", {}).get("embedder", ""))
    if calibrated_for and searcher.embedder.model_id.startswith(calibrated_for):
        return getattr(reranker, "suggested_threshold", None)
    return None


def question_as_deep_as_context(limits: Limits) -> Limits:
    """The agentic loop's limits over the graph leg: the question's own search as deep as the answer's
    context (unless `first_k` is set). The fused ranking's ranks k+1..max_context hold the walk's
    second-hop passages, which `agentic.select_context` alternates with the hops' hits; a 5-deep first
    search lost them (multihop dev, agentic+graph evidence recall@10: 0.82 at depth 5, 0.87 at 10;
    bridge questions 0.912 -> 0.971, as one hybrid+graph search). Over hybrid search alone those ranks
    hold no gold and push out the hops' passages (0.79 at depth 5, 0.77 at 10), so a reader without a
    graph keeps depth k."""
    if limits.first_k is not None:
        return limits
    return dataclasses.replace(limits, first_k=max(limits.k, limits.max_context))


def merge_passages(first: Sequence[Passage], then: Sequence[Passage], limit: int) -> list[Passage]:
    """`first`, then the passages of `then` not among them, at most `limit`."""
    seen = {p.id for p in first}
    return (list(first) + [p for p in then if p.id not in seen])[:limit]


@dataclass
class GraphRecord:
    query: str
    graph_hits: list[int]
    links: list[dict]
    bridges: list[str]
    trace: dict = field(default_factory=dict)


class HybridGraphSearcher(HybridPassageSearcher):
    """Hybrid search fused with the graph leg (or the graph leg alone), for one reader."""

    def __init__(self, searcher: HybridSearcher, graph: GraphSearcher, tenant: str, groups: Sequence[str],
                 mode: Mode = "hybrid+rerank", *, graph_only: bool = False, keep_traces: bool = True,
                 apply_threshold: bool = False):
        super().__init__(searcher, tenant, groups, mode, keep_traces=keep_traces, apply_threshold=apply_threshold)
        self.graph, self.graph_only = graph, graph_only
        self.graph_records: list[GraphRecord] = []
        self._level = True  # the reader's access level, chosen at the first walk (True: not yet)
        self._cut = confident_cut(searcher)

    def serves_graph(self) -> bool:
        """Whether a graph level serves this reader (else the walk finds nothing: hybrid search alone)."""
        if self._level is True:
            self._level = self.graph.level(self.tenant, self.groups)
        return self._level is not None

    def loop_limits(self, limits: Limits) -> Limits:
        """The agentic loop's limits for this reader: the question's search as deep as the context when a
        graph serves it (`question_as_deep_as_context`), else `limits` as they are."""
        return question_as_deep_as_context(limits) if self.serves_graph() else limits

    def walk(self, query: str, k: int, first_hop: SearchResult) -> GraphResult:
        """PPR from the question (entities, every passage's dense score) and `first_hop`'s top passage."""
        self.serves_graph()  # chooses the reader's level once
        result = self.graph.search(self.tenant, self.groups, query, k, level=self._level,
                                   head=[h.id for h in first_hop.hits[:FIRST_HOP]])
        self.graph_records.append(GraphRecord(query, [h.id for h in result.hits],
                                              result.trace.get("links", []), [b for b, _ in result.bridges],
                                              result.trace if self.keep_traces else {}))
        return result

    def search(self, query: str, k: int) -> list[Passage]:
        if self.graph_only:
            # the dense leg's top passage is the walk's first hop; its ranking is not used
            dense = self.searcher.search(self.tenant, self.groups, query, k=FIRST_HOP, mode="dense")
            return [Passage.of_chunk(h) for h in self.walk(query, k, dense).hits]
        hybrid_passages = super().search(query, k)
        result = self.last_result
        graph = self.walk(query, k, result)
        by_id = {p.id: p for p in hybrid_passages} | {h.id: Passage.of_chunk(h) for h in graph.hits
                                                      if h.id not in {p.id for p in hybrid_passages}}
        # reranker scores only: a degraded search's scores are fused ones, on another scale
        cut = self._cut if self.mode == "hybrid+rerank" and not result.degraded else None
        confident = [h.id for h in result.hits if cut is not None and h.score >= cut]
        fused = rrf([[p.id for p in hybrid_passages if p.id not in confident],
                     [h.id for h in graph.hits if h.id not in confident]])
        return [by_id[pid] for pid in (confident + fused)[:k]]

    def reset(self) -> None:
        super().reset()
        self.graph_records = []

    def graph_trace(self) -> list[dict]:
        """One entry per walk, in search order (beside `trace()`, the hybrid searches')."""
        return [{"query": r.query, "hits": r.graph_hits, "links": r.links, "bridges": r.bridges,
                 **({"walk": r.trace} if r.trace else {})} for r in self.graph_records]
