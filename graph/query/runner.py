"""Global search with its I/O: load the user's level and reports, embed the question, list documents."""
from __future__ import annotations

from dataclasses import asdict

from core.database import Database
from core.embeddings import Embedder
from core.llm import LLM
from graph import store
from graph.query.global_llm import LLMGlobalSearch
from graph.query.global_search import GlobalResult, global_search


def ask_global(db: Database, embedder: Embedder | None, tenant: str, groups: list[str], question: str,
               llm: LLM | None = None, *, max_map_calls: int | None = None,
               max_cost_usd: float | None = None) -> dict:
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
    for report in result.reports:
        behind = {docs[c] for c in report["chunk_ids"] if c in docs}
        report["documents"] = [{"doc_id": d, "title": t} for d, t in sorted(behind)]
    return {
        "answer": result.answer,
        "level": result.level,
        "offline": result.offline,
        "degraded": result.degraded,
        "reports": result.reports,
        "points": [asdict(p) for p in result.points],
        "trace": result.trace,
    }
