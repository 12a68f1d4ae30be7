"""Global search with its I/O: load the user's level and reports, embed the question, list documents.

`ask_global` returns a typed `GlobalAnswer`, the graph's side of the border with the router.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from core.database import Database
from core.embeddings import Embedder
from core.llm import LLM
from graph import store
from graph.query.global_llm import LLMGlobalSearch
from graph.query.global_search import GlobalResult, Point, Theme, global_search


@dataclass
class CitedReport:
    """A community report an answer cites as [number], with the documents behind its chunks."""
    number: int
    id: int
    title: str
    rating: float
    chunk_ids: list[int]
    documents: list[dict] = field(default_factory=list)  # {"doc_id", "title"}, the reader's own


@dataclass
class GlobalAnswer:
    answer: str
    level: str | None  # the access level answered from; None: no level fits the reader's groups
    offline: bool
    degraded: bool  # the LLM path fell back (trace["degraded"] says why)
    reports: list[CitedReport]
    points: list[Point]
    themes: list[Theme]  # the offline answer's themes, best first (empty for an LLM answer)
    trace: dict


def ask_global(db: Database, embedder: Embedder | None, tenant: str, groups: list[str], question: str,
               llm: LLM | None = None, *, max_map_calls: int | None = None,
               max_cost_usd: float | None = None) -> GlobalAnswer:
    """The answer, cited reports with the documents behind them, and a trace. Groups come from auth.
    With an `llm` the LLM map-reduce answers (falling back offline itself, `degraded`), its map phase
    capped per question by `max_map_calls` and `max_cost_usd`; else offline."""
    with db.connection() as conn:
        levels = store.list_levels(conn, tenant)

    def load(level: str) -> list[dict]:
        with db.connection() as conn:
            return store.list_reports(conn, tenant, level)

    if llm is not None:  # the LLM rates reports itself: no question embedding needed
        result: GlobalResult = LLMGlobalSearch(llm, max_map_calls=max_map_calls,
                                                  max_cost_usd=max_cost_usd).search(levels, set(groups), load, question)
    else:
        vector = embedder.embed_query(question) if embedder else None
        result = global_search(levels, set(groups), load, question, vector)
    chunk_ids = sorted({c for r in result.reports for c in r["chunk_ids"]})
    with db.connection() as conn:
        docs = store.documents_of_chunks(conn, tenant, chunk_ids) if chunk_ids else {}
    reports = [CitedReport(r["number"], r["id"], r["title"], r["rating"], list(r["chunk_ids"]),
                           [{"doc_id": d, "title": t} for d, t in sorted({docs[c] for c in r["chunk_ids"] if c in docs})])
               for r in result.reports]
    return GlobalAnswer(result.answer, result.level, result.offline, result.degraded, reports, list(result.points),
                        list(result.themes), result.trace)
