"""The primer of a DRIFT answer (router/drift.py): the community reports of the reader's level that best fit a
global question, and what an offline follow-up search asks about each of them.

DRIFT (Microsoft's "DRIFT search": global-to-local) starts from the community reports most similar to the
question, asks follow-up questions from them and answers those by local search. The reports are ranked as
global search ranks them offline (graph/query/global_search.relevance: the question's words and the
report's vector, nudged by its rating), always within the one access level the reader's groups are served
from (graph/levels.py), so a report built from text the reader may not read is never a starting point.

Offline follow-ups: a report's findings name its most central entities (offline reports: one finding per
top entity; LLM reports: one sentence each); each follow-up joins one of them to the question's subject
(its content words), "Nordpost Express rate limits incidents", the best reports first, one entity per
report before a second of any.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from core.database import Database
from core.embeddings import Embedder
from core.text.terms import STOPWORDS
from core.text.tokens import WORD
from graph import store
from graph.levels import choose_level
from graph.query.global_search import _SCOPE_WORDS, relevance, stems

MAX_FOLLOW_UP_CHARS = 200


@dataclass
class PrimerReport:
    id: int
    title: str
    summary: str
    findings: list[str]  # the findings' summaries: a report's top entities (offline) or its points
    score: float  # 0..1, the offline relevance to the question
    chunk_ids: list[int]
    documents: list[dict] = field(default_factory=list)  # {"doc_id", "title"}: the reader's own


@dataclass
class Primer:
    level: str | None  # None: no level fits the reader's groups
    reports: list[PrimerReport]
    trace: dict


def subject_words(question: str) -> list[str]:
    """The question's content words, in order: what a global question is about, without the words that say
    'corpus-wide' ("main", "themes", "across") or nothing (stop words)."""
    words = [w for w in WORD.findall(question.lower()) if len(w) >= 3 and not w.isdigit()]
    return list(dict.fromkeys(w for w in words if w not in _SCOPE_WORDS and w not in STOPWORDS))


def offline_follow_ups(question: str, reports: list[PrimerReport], limit: int) -> list[str]:
    """Up to `limit` local-search questions: each report's findings joined to the question's subject,
    round-robin over the reports (the best first), duplicates dropped."""
    subject = " ".join(subject_words(question)[:6])
    lists = [[f for f in r.findings if f.strip()] or [r.title] for r in reports]
    out: list[str] = []
    seen: set[str] = set()
    for depth in range(max((len(x) for x in lists), default=0)):
        for findings in lists:
            if depth >= len(findings) or len(out) >= limit:
                continue
            query = " ".join(f"{findings[depth].strip()} {subject}".split())[:MAX_FOLLOW_UP_CHARS]
            if query.lower() not in seen:
                seen.add(query.lower())
                out.append(query)
    return out[:limit]


def primer(db: Database, embedder: Embedder | None, tenant: str, groups: list[str], question: str,
           k: int = 3) -> Primer:
    """The `k` reports of the reader's level most relevant to the question (offline ranking), with the
    documents behind each (ACL: the level's reports are built only from chunks all its groups may read)."""
    with db.connection() as conn:
        levels = store.list_levels(conn, tenant)
    level = choose_level(levels, set(groups))
    if level is None:
        return Primer(None, [], {"levels": [lvl.name for lvl in levels]})
    with db.connection() as conn:
        rows = store.list_reports(conn, tenant, level.name)
    vector = embedder.embed_query(question) if embedder is not None and rows else None
    q = set(stems(question))
    scored = sorted(((relevance(q, vector, r), r) for r in rows), key=lambda x: (-x[0], x[1]["id"]))[:k]
    chunk_ids = sorted({c for _, r in scored for c in r["source_chunk_ids"]})
    with db.connection() as conn:
        docs = store.documents_of_chunks(conn, tenant, chunk_ids) if chunk_ids else {}
    reports = [PrimerReport(r["id"], r["title"], r["summary"], [f.get("summary", "") for f in r["findings"]],
                            round(s, 4), list(r["source_chunk_ids"]),
                            [{"doc_id": d, "title": t} for d, t in sorted({docs[c] for c in r["source_chunk_ids"]
                                                                            if c in docs})])
               for s, r in scored]
    return Primer(level.name, reports, {"level": level.name, "reports": len(rows),
                                        "primer": [{"id": r.id, "score": r.score} for r in reports]})
