"""Global search with its I/O: load the user's level and reports, embed the question, list documents.

`ask_global` returns a typed `GlobalAnswer`, the graph's side of the border with the router.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from core.database import Database
from core.embeddings import Embedder
from core.llm.client import LLM
from graph import retrieval_store, store
from graph.query.global_budget import GlobalBudget
from graph.query.global_llm import LLMGlobalSearch
from graph.query.global_search import GlobalResult, Point, ScopeThemes, Theme, global_search
from graph.types import ScopePassage

# The scoped themes read the whole level's text per question (about 20 ms at 1,560 chunks) and analyse
# it once per version of it (answers/themes/text.level_text: 1-4 s at 1,560 chunks, then 0.1-0.3 s a
# question), holding it in memory (about 12 MB per 1,500 chunks). Past this many chunks the community
# reports' themes answer instead, as they do without a question vector's scope.
SCOPED_THEMES_UP_TO = 20_000


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
               max_cost_usd: float | None = None, budget: GlobalBudget | None = None,
               on_text=None, scope_themes: ScopeThemes | None = None) -> GlobalAnswer:
    """The answer, cited reports with the documents behind them, and a trace. Groups come from auth.
    With an `llm` the LLM map-reduce answers (falling back offline itself, `degraded`), its map phase
    capped per question by `max_map_calls` and `max_cost_usd`, its calls set by `budget` (a call budget
    ranks the reports offline first, by the question's vector too), its answer streamed to `on_text`;
    else offline (no call: the budget changes nothing): from `scope_themes`, the themes of the level's
    passages (answers/themes/answer.py), when given, else each relevant community's report."""
    with db.connection() as conn:
        levels = store.list_levels(conn, tenant)

    def load(level: str) -> list[dict]:
        with db.connection() as conn:
            return store.list_reports(conn, tenant, level)

    if llm is not None:  # the LLM rates reports itself: no question embedding needed, but for a call budget's ranking
        vector = embedder.embed_query(question) if embedder and budget is not None and budget.calls else None
        result: GlobalResult = LLMGlobalSearch(llm, max_map_calls=max_map_calls, max_cost_usd=max_cost_usd,
                                               budget=budget, on_text=on_text).search(levels, set(groups), load,
                                                                                      question, vector)
    else:
        vector = embedder.embed_query(question) if embedder else None

        def load_scope(level) -> tuple[list[ScopePassage], dict[int, float]]:
            """The level's passages (ACL in SQL: every group of the level, all of them the reader's)
            and each one's similarity to the question; none past SCOPED_THEMES_UP_TO chunks."""
            with db.connection() as conn:
                if retrieval_store.count_readable_chunks(conn, tenant, list(level.groups)) > SCOPED_THEMES_UP_TO:
                    return [], {}
                passages = [ScopePassage(c.id, c.doc_id, c.title, c.text, c.heading)
                            for c in store.level_chunks(conn, tenant, level.groups)]
                similarities = dict(retrieval_store.passage_similarities(
                    conn, tenant, list(level.groups), embedder.model_id, vector, [p.id for p in passages])
                ) if vector is not None else {}
            return passages, similarities

        result = global_search(levels, set(groups), load, question, vector, load_scope=load_scope,
                               scope_themes=scope_themes)
    chunk_ids = sorted({c for r in result.reports for c in r["chunk_ids"]})
    with db.connection() as conn:
        docs = store.documents_of_chunks(conn, tenant, chunk_ids) if chunk_ids else {}
    reports = [CitedReport(r["number"], r["id"], r["title"], r["rating"], list(r["chunk_ids"]),
                           [{"doc_id": d, "title": t} for d, t in sorted({docs[c] for c in r["chunk_ids"] if c in docs})])
               for r in result.reports]
    return GlobalAnswer(result.answer, result.level, result.offline, result.degraded, reports, list(result.points),
                        list(result.themes), result.trace)
