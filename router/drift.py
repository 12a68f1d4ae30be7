"""DRIFT answers: a global question answered from community reports down to local searches.

DRIFT search (Microsoft GraphRAG's "dynamic reasoning and inference with flexible traversal"; the idea, no
text copied): a primer reads the community reports that best fit the question and asks follow-up questions;
each is answered by local search; the follow-ups' results may ask further ones (depth); everything found is
merged into one answer. Here:

1. primer: the reader's level's best reports (graph/query/drift_primer.py; ranked offline by the question's
   words and vector);
2. follow-ups, depth 1: with an LLM, one `plan_follow_ups` call over the primer reports
   (router/prompts.DRIFT_PLAN); offline, or when that call fails, each report's top entities (its findings)
   joined to the question's subject;
3. each follow-up is a local hybrid search with the reader's tenant and groups (ACL in SQL, as every search);
   depth 2 and on: the multi-hop loop's planner (LLM or offline) reads what was found and may ask more;
4. merge: the primer reports, then the passages found (each follow-up's best first, deduplicated by chunk),
   numbered; with an LLM one answer cites them as [N] and every [N] is checked against the passages sent
   (answers/generate.llm_answer); offline, or when the answer fails its check, an extractive answer: one line
   per report and one per follow-up (its best passage's sentence closest to it), each cited
   (answers/drift_answer.py).

Budgets (`DriftLimits`): follow-ups in all, depth, hits per search, primer reports, passages in the answer;
`partial` when a budget stopped a planner that wanted more.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Callable

from core.llm.errors import LLMError
from core.llm.prompting import call_tool
from graph.query.drift_primer import Primer, PrimerReport, offline_follow_ups
from router.agentic import Planner
from router.prompts import DRIFT_PLAN, DRIFT_SYSTEM, drift_message
from answers.question import Question
from answers.types import Passage

log = logging.getLogger(__name__)



@dataclass(frozen=True)
class DriftLimits:
    max_follow_ups: int = 6  # local searches in all, every depth together
    max_depth: int = 2  # 1: the primer's follow-ups only
    k: int = 4  # hits per follow-up search
    primer_reports: int = 3
    max_context: int = 12  # passages the answer sees (reports included)


@dataclass
class FollowUp:
    query: str
    depth: int
    hits: list[int] = field(default_factory=list)  # chunk ids found, best first


@dataclass
class DriftResult:
    follow_ups: list[FollowUp]
    passages: list[Passage]  # reports first, then chunks: what the answer is written from, numbered 1..n
    best: dict[int, int]  # follow-up index -> the 1-based number of its best passage
    partial: bool
    trace: dict


def report_passage(r: PrimerReport) -> Passage:
    text = r.summary + ("" if not r.findings else " " + "; ".join(f for f in r.findings if f))
    return Passage(id=r.id, doc_id=None, title=r.title, heading="community report", text=text.strip(),
                   kind="report", documents=list(r.documents))


def llm_follow_ups(llm, question: str, reports: list[PrimerReport], limit: int) -> tuple[list[str], str]:
    """The primer call: (follow-up questions, the intermediate answer). Raises LLMError (refused,
    malformed twice, the API down)."""
    message = drift_message(question, [(r.id, r.title, report_passage(r).text) for r in reports], limit)
    reply = call_tool(llm, DRIFT_PLAN, task="fast", system=DRIFT_SYSTEM, max_tokens=1024,
                      messages=[{"role": "user", "content": message}])
    asked = {question.strip().lower()}
    out = [q for q in dict.fromkeys(reply.value.follow_ups) if q.strip() and q.strip().lower() not in asked]
    return out[:limit], reply.value.intermediate_answer


def drift_search(search: Callable[[str], list[Passage]], planner: Planner | None, question: Question,
                 primer: Primer, first: list[str], limits: DriftLimits) -> DriftResult:
    """Runs the follow-ups (depth 1: `first`; deeper: what `planner` asks after reading the evidence), within
    the limits, and numbers the passages the answer is written from."""
    follow_ups: list[FollowUp] = []
    evidence: dict[int, Passage] = {}
    partial = False
    pending = [q for q in first]
    asked = [question.text]
    for depth in range(1, limits.max_depth + 1):
        if not pending:
            break
        room = limits.max_follow_ups - len(follow_ups)
        if room <= 0:
            partial = True
            break
        if len(pending) > room:
            partial = True
        for query in pending[:room]:
            hits = search(query)
            follow_ups.append(FollowUp(query, depth, [p.id for p in hits]))
            asked.append(query)
            for p in hits:
                evidence.setdefault(p.id, p)
        pending = []
        if depth < limits.max_depth and planner is not None and len(follow_ups) < limits.max_follow_ups:
            decision = planner.plan(question, list(evidence.values()), list(asked))
            known = {a.strip().lower() for a in asked}
            pending = [q for q in dict.fromkeys(decision.queries) if q.strip().lower() not in known]
    reports = [report_passage(r) for r in primer.reports]
    # each follow-up's best hit first, then the rest in the order found: no follow-up goes unseen
    order: list[int] = []
    for f in follow_ups:
        order += [c for c in f.hits[:1] if c not in order]
    for f in follow_ups:
        order += [c for c in f.hits if c not in order]
    chunks = [evidence[c] for c in order][: max(0, limits.max_context - len(reports))]
    passages = reports + chunks
    number = {p.id: n for n, p in enumerate(passages, 1) if p.kind == "chunk"}
    best = {i: number[f.hits[0]] for i, f in enumerate(follow_ups) if f.hits and f.hits[0] in number}
    trace = {"primer": primer.trace, "limits": limits.__dict__,
             "follow_ups": [{"query": f.query, "depth": f.depth, "hits": f.hits} for f in follow_ups],
             "passages": [{"number": n, "kind": p.kind, "id": p.id, "doc_id": p.doc_id}
                          for n, p in enumerate(passages, 1)]}
    return DriftResult(follow_ups, passages, best, partial, trace)


def first_follow_ups(llm, question: str, primer: Primer, limits: DriftLimits) -> tuple[list[str], dict]:
    """Depth 1's follow-ups and how they were made (`source`: llm, offline, or llm->offline with the error)."""
    if llm is not None and primer.reports:
        try:
            queries, intermediate = llm_follow_ups(llm, question, primer.reports, limits.max_follow_ups)
            if queries:
                return queries, {"source": "llm", "intermediate_answer": intermediate}
            info = {"source": "llm->offline", "error": "the primer call proposed no follow-up"}
        except LLMError as err:
            log.warning("DRIFT primer call failed: %s", err)
            info = {"source": "llm->offline", "error": str(err)}
    else:
        info = {"source": "offline"}
    return offline_follow_ups(question, primer.reports, limits.max_follow_ups), info
