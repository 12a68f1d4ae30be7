"""The graph leg of retrieval: personalized PageRank passages beside hybrid search, for one reader.

`HybridGraphSearcher.search` runs hybrid search (dense + BM25, reranked), seeds the walk with the
question's linked entities and the dense scores of hybrid's candidates (HippoRAG 2's reset vector),
and fuses the two rankings by Reciprocal Rank Fusion (k = 60, the usual constant: no weight is fitted,
so neither ranking is trusted over the other on any dataset). It is an `router.agentic.Searcher`, so
the multi-hop route's every round gets the PPR candidates too. `graph_only` ranks by PPR alone,
its passage seeds the dense leg's scores.

Tenant and ACL stay inside both searchers (SQL); this module never widens them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from graph.query.graph_search import GraphResult, GraphSearcher
from router.evidence_search import HybridPassageSearcher
from router.types import Passage
from vector.search.hybrid import HybridSearcher, Mode, SearchResult

RRF_K = 60  # Cormack et al.'s constant, as vector/search/fusion's RRF


def rrf(rankings: Sequence[Sequence[int]], k: int = RRF_K) -> list[int]:
    """Ids by summed 1 / (k + rank) over the rankings; ties keep the first ranking's order."""
    scores: dict[int, float] = {}
    first_seen: dict[int, int] = {}
    for ranking in rankings:
        for rank, pid in enumerate(ranking, start=1):
            scores[pid] = scores.get(pid, 0.0) + 1.0 / (k + rank)
            first_seen.setdefault(pid, len(first_seen))
    return sorted(scores, key=lambda pid: (-scores[pid], first_seen[pid]))


def dense_scores(result: SearchResult) -> dict[int, float]:
    """chunk id -> cosine of every candidate the vector leg scored (the walk's passage seeds)."""
    return {c.id: c.vector_score for c in result.candidates if c.vector_score is not None}


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

    def walk(self, query: str, k: int, seeds: SearchResult) -> GraphResult:
        if self._level is True:
            self._level = self.graph.level(self.tenant, self.groups)
        result = self.graph.search(self.tenant, self.groups, query, k, level=self._level,
                                   passage_scores=dense_scores(seeds))
        self.graph_records.append(GraphRecord(query, [h.id for h in result.hits],
                                              result.trace.get("links", []), [b for b, _ in result.bridges],
                                              result.trace if self.keep_traces else {}))
        return result

    def search(self, query: str, k: int) -> list[Passage]:
        if self.graph_only:
            # the dense leg alone gives the walk its passage seeds; its ranking is not used
            hybrid = self.searcher.search(self.tenant, self.groups, query, k=k, mode="dense")
            return [Passage.of_chunk(h) for h in self.walk(query, k, hybrid).hits]
        hybrid_passages = super().search(query, k)
        # HippoRAG 2's reset vector: the linked entities and the dense scores of hybrid's candidates.
        # Measured on multihop dev against entity-only seeds (which avoid counting the dense signal
        # twice in the fusion): one search 0.60 vs 0.62, the agentic route 0.81 vs 0.76 evidence
        # recall@10; the recipe is kept (bench/multihop_agentic.py --graph, docs/benchmarks.md).
        graph = self.walk(query, k, self.last_result)
        by_id = {p.id: p for p in hybrid_passages} | {h.id: Passage.of_chunk(h) for h in graph.hits
                                                      if h.id not in {p.id for p in hybrid_passages}}
        fused = rrf([[p.id for p in hybrid_passages], [h.id for h in graph.hits]])
        return [by_id[pid] for pid in fused[:k]]

    def reset(self) -> None:
        super().reset()
        self.graph_records = []

    def graph_trace(self) -> list[dict]:
        """One entry per walk, in search order (beside `trace()`, the hybrid searches')."""
        return [{"query": r.query, "hits": r.graph_hits, "links": r.links, "bridges": r.bridges,
                 **({"walk": r.trace} if r.trace else {})} for r in self.graph_records]



def eval_searches(db, searcher: HybridSearcher, tenant: str, groups: Sequence[str],
                  configs: Sequence[str]) -> dict:
    """`crossroads eval`'s graph configs (vector.evaluation.runner.GRAPH_CONFIGS) for one tenant:
    config -> search(question, n) -> doc ids of the ranked chunks. graph: PPR alone (seeded by the
    dense leg); hybrid+graph: hybrid+rerank fused with PPR; agentic: the multi-hop route's retrieval
    (the agentic loop, offline planner, over hybrid+graph), scored on the passages its answer sees."""
    from router.agentic import Limits, agentic_search
    from router.planner_offline import OfflinePlanner

    graph = GraphSearcher(db, searcher.embedder)

    def leg(graph_only: bool):
        def search(question: str, n: int) -> list[str]:
            s = HybridGraphSearcher(searcher, graph, tenant, groups, graph_only=graph_only, keep_traces=False)
            return [p.doc_id for p in s.search(question, n)]
        return search

    def agentic(question: str, n: int) -> list[str]:
        s = HybridGraphSearcher(searcher, graph, tenant, groups, keep_traces=False)
        return [p.doc_id for p in agentic_search(s, OfflinePlanner(), question, Limits()).context()]

    made = {"graph": leg(True), "hybrid+graph": leg(False), "agentic": agentic}
    return {c: made[c] for c in configs if c in made}
