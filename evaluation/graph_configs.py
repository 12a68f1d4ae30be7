"""The graph configs of `crossroads eval` (graph, hybrid+graph, agentic): search functions over a
tenant's graph, built offline for the dataset when it has none. Evaluation only: serving never imports
this module (tests/test_architecture.py)."""
from __future__ import annotations

from typing import Sequence

from core.database import Database
from core.embeddings import Embedder
from evaluation.runner import CHUNKS_PER_DOC_SLACK
from graph.indexing.contracts import BuildSettings, OfflineReporter
from graph.indexing.extract_offline import OfflineExtractor
from graph.indexing.runner import build_graph
from graph.query.graph_search import GraphSearcher
from router.agentic import Limits, agentic_search
from router.graph_leg import HybridGraphSearcher
from router.planner_offline import OfflinePlanner
from vector.search.hybrid import HybridSearcher
from answers.question import Question


def ensure_offline_graph(db: Database, tenant: str, embedder: Embedder | None) -> dict | None:
    """Build the tenant's graph offline (labelled: offline extractor and reporter) when no level has
    one yet, for evaluating graph retrieval on a dataset; None when a graph exists already."""
    with db.connection() as conn:
        built = conn.execute("SELECT 1 FROM graph_entities WHERE tenant_id = %s LIMIT 1", (tenant,)).fetchone()
    if built:
        return None
    return build_graph(db, tenant, None, OfflineExtractor(), OfflineReporter(), embedder, BuildSettings())


def eval_searches(db, searcher: HybridSearcher, tenant: str, groups: Sequence[str],
                  configs: Sequence[str]) -> dict:
    """`crossroads eval`'s graph configs (runner.GRAPH_CONFIGS) for one tenant:
    config -> search(question, n) -> doc ids of the ranked chunks. graph: PPR alone (seeded by the
    dense leg: every passage's score, its top passage the first hop); hybrid+graph: hybrid+rerank fused
    with PPR (hybrid's top passage the first hop); agentic: the multi-hop route's retrieval
    (the agentic loop, offline planner, over hybrid+graph), scored on the passages its answer sees."""
    graph = GraphSearcher(db, searcher.embedder)

    def leg(graph_only: bool):
        def search(question: str, n: int) -> list[str]:
            # as the route searches: k passages per leg (the eval asks k * CHUNKS_PER_DOC_SLACK chunks so
            # that k documents survive; fusing 30 per leg ranks other passages than the route's answer sees)
            s = HybridGraphSearcher(searcher, graph, tenant, groups, graph_only=graph_only, keep_traces=False)
            return [p.doc_id for p in s.search(question, max(1, n // CHUNKS_PER_DOC_SLACK))]
        return search

    def agentic(question: str, n: int) -> list[str]:
        s = HybridGraphSearcher(searcher, graph, tenant, groups, keep_traces=False)
        return [p.doc_id for p in agentic_search(s, OfflinePlanner(), Question(question), s.loop_limits(Limits())).context()]

    made = {"graph": leg(True), "hybrid+graph": leg(False), "agentic": agentic}
    return {c: made[c] for c in configs if c in made}
