"""Agentic multi-hop search: search, judge what was found, search again, within a budget.

The loop (the course's "Agentic RAG" lesson): the first round searches the question itself; after
every round a planner decides whether the evidence covers every part of the question and, if not,
proposes up to 3 new queries. Budgets: rounds (`max_iterations`), searches (`max_searches`), top-k per
search (`k`) and the evidence ceiling (`max_evidence`, chunks). Evidence is deduplicated by chunk id;
a query asked before (same words, any order or case) is never searched twice, and a round whose
proposals are all repeats stops the loop. Stopping on a budget (or because the planner has nothing
new to try) marks the result `partial`: the answer must say it may not have found everything.

The final answer sees at most `max_context` passages (`select_context`): the top hit of every
query first, so each query's best hit survives the cut, then the question's own ranking alternating
with the other queries round-robin by rank; one passage per document before any document's second.

Planners (both deterministic about their inputs; neither raises):
- `OfflinePlanner` (router/planner_offline.py): no model. Reads the question's *form*, never its topic: a comparison ("A vs B",
  "Which is older, A or B?", "Are A and B both ...", "compare A and B", "чем отличается A от B",
  "сравни A и B") is decomposed into one query per compared entity, with the compared attribute;
  any other question is treated as a bridge question: entities found in the previous round's
  evidence (passage titles and named entities absent from the question) become the next queries,
  each combined with the part of the question that evidence did not resolve ("spouse" + "Tim
  Burton"). It says `enough` when every entity the question names has a passage about it and, for a
  bridge question, a second hop has been searched.
- `LLMPlanner` (router/planner_llm.py): a `fast`-model call with a forced tool (`enough`, `queries` <= 3, `reason`); the
  evidence goes in XML tags, escaped, as data. Any LLM failure or malformed reply falls back to the
  offline planner's decision, with the error in the decision (and so in the trace).

Pure logic: no database here. `router.evidence_search.HybridPassageSearcher` is the production
`Searcher`; tests use scripted ones.
"""
from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field
from typing import Protocol, Sequence

from answers.question import Question
from answers.question_text import WORD, fold
from answers.types import Passage

log = logging.getLogger(__name__)

STOP_REASONS = ("enough", "budget", "repeated_queries", "no_new_queries")
MAX_PLANNED_QUERIES = 3  # per round, as the seed's PLAN_PROMPT says


# --- the loop ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Limits:
    """Budgets of one question. Defaults measured on the multi-hop dev set (see
    bench/multihop_agentic.py): 3 rounds (question, first hop, second hop), 8 searches (1 + 3 + 3, one spare
    for a decomposition), k=5 per search, at most 24 evidence chunks, 10 passages to the answer.
    `first_k`: the question's own search; the graph leg's searcher asks it as deep as the context
    (router/graph_leg.question_as_deep_as_context: why there and not over hybrid search alone)."""

    max_iterations: int = 3
    max_searches: int = 8
    k: int = 5
    max_evidence: int = 24
    max_context: int = 10
    first_k: int | None = None  # top-k of the first round (the question itself); None: k

    def __post_init__(self) -> None:
        for name in ("max_iterations", "max_searches", "k", "max_evidence", "max_context", "first_k"):
            value = getattr(self, name)
            if name == "first_k" and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"Limits.{name} must be an integer >= 1, got {value!r}")


class Searcher(Protocol):
    def search(self, query: str, k: int) -> list[Passage]:
        """The top-k passages for `query`, best first, as the reader may see them (tenant + ACL inside)."""
        ...


@dataclass
class Decision:
    enough: bool
    queries: list[str]
    reason: str
    planner: str = "offline"  # who decided: "offline", "llm" or "llm->offline" (the LLM failed)
    error: str | None = None  # the LLM failure an offline fallback stands in for
    usage: dict = field(default_factory=dict)  # LLM tokens and cost of this decision


class Planner(Protocol):
    def plan(self, question: Question, evidence: list[Passage], asked: list[str]) -> Decision:
        """After a round: is `evidence` enough to answer every part of `question`? If not, what to search
        next (<= 3 queries, none of `asked`). Must not raise."""
        ...


@dataclass
class QueryHits:
    query: str
    hits: list[int]  # chunk ids in the searcher's order (already-seen ones included)
    new: list[int]  # the ones this search added to the evidence
    latency_ms: float = 0.0
    error: str | None = None


@dataclass
class Round:
    number: int
    searched: list[QueryHits] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)  # {"query", "why": "repeated" | "budget"}
    decision: dict | None = None
    plan_ms: float = 0.0

    @property
    def queries(self) -> list[str]:
        return [s.query for s in self.searched]

    @property
    def new_evidence(self) -> list[int]:
        return [i for s in self.searched for i in s.new]


@dataclass
class AgenticResult:
    question: str
    limits: Limits
    evidence: list[Passage]  # deduplicated by id, in the order found
    rounds: list[Round]
    searches: int
    iterations: int
    partial: bool  # stopped on a budget or with nothing new to try, not because the evidence was enough
    stop_reason: str  # one of STOP_REASONS
    errors: list[str] = field(default_factory=list)
    latency_ms: float = 0.0

    @property
    def ranked(self) -> list[list[int]]:
        """Each search's hit ids, in the order the searches ran."""
        return [s.hits for r in self.rounds for s in r.searched]

    @property
    def asked(self) -> list[str]:
        return [q for r in self.rounds for q in r.queries]

    def context(self, max_context: int | None = None) -> list[Passage]:
        """The passages for the final answer (at most `max_context`, default `limits.max_context`)."""
        return select_context(self.question, self.evidence, max_context or self.limits.max_context,
                              ranked=self.ranked)

    @property
    def trace(self) -> dict:
        return {
            "limits": asdict(self.limits),
            "iterations": self.iterations, "searches": self.searches, "evidence": len(self.evidence),
            "partial": self.partial, "stop_reason": self.stop_reason, "errors": list(self.errors),
            "latency_ms": round(self.latency_ms, 1),
            "rounds": [{"round": r.number,
                        "queries": [{"query": s.query, "hits": s.hits, "new": s.new,
                                     "latency_ms": round(s.latency_ms, 1), **({"error": s.error} if s.error else {})}
                                    for s in r.searched],
                        "new_evidence": r.new_evidence, "skipped": r.skipped, "decision": r.decision,
                        "plan_ms": round(r.plan_ms, 1)} for r in self.rounds],
        }


def query_key(query: str) -> tuple[str, ...]:
    """Two queries are the same when they have the same words, whatever the case, order or punctuation."""
    return tuple(sorted(set(w.casefold() for w in WORD.findall(fold(query)))))


def agentic_search(searcher: Searcher, planner: Planner, question: Question,
                   limits: Limits | None = None) -> AgenticResult:
    """Search -> plan -> search ... until the planner has enough, a budget ends it, or it repeats itself.

    A failing search in the first round raises (there is nothing to answer from); later it is recorded
    in `errors` and the loop goes on with what it has. A planner that raises (against its contract)
    ends the loop as `no_new_queries`, partial, with the error recorded.
    """
    limits = limits or Limits()
    started = time.perf_counter()
    evidence: list[Passage] = []
    seen: set[int] = set()
    asked: list[str] = []
    asked_keys: set[tuple[str, ...]] = set()
    rounds: list[Round] = []
    errors: list[str] = []
    searches = 0
    queries = [question.text]
    stop_reason, partial = "no_new_queries", True
    while True:
        rnd = Round(number=len(rounds) + 1)
        rounds.append(rnd)
        for query in queries:
            key = query_key(query)
            if not key or key in asked_keys:
                rnd.skipped.append({"query": query, "why": "repeated" if key else "empty"})
                continue
            if searches >= limits.max_searches or len(evidence) >= limits.max_evidence:
                rnd.skipped.append({"query": query, "why": "budget"})
                continue
            asked.append(query)
            asked_keys.add(key)
            searches += 1
            t0 = time.perf_counter()
            try:
                k = (limits.first_k or limits.k) if rnd.number == 1 else limits.k
                hits = list(searcher.search(query, k))[:k]
                failure = None
            except Exception as exc:  # noqa: BLE001 - one failed search must not lose the rest
                if rnd.number == 1:
                    raise
                log.warning("agentic search: query %r failed: %s", query, exc)
                hits, failure = [], f"search {query!r} failed: {type(exc).__name__}: {exc}"
                errors.append(failure)
            record = QueryHits(query, [h.id for h in hits], [], (time.perf_counter() - t0) * 1000, failure)
            rnd.searched.append(record)
            for hit in hits:
                if hit.id in seen or len(evidence) >= limits.max_evidence:
                    continue
                seen.add(hit.id)
                evidence.append(hit)
                record.new.append(hit.id)
        t0 = time.perf_counter()
        try:
            decision = planner.plan(question, list(evidence), list(asked))
        except Exception as exc:  # noqa: BLE001 - planners must not raise; if one does, stop honestly
            log.warning("agentic search: planner failed: %s", exc)
            errors.append(f"planner failed: {type(exc).__name__}: {exc}")
            decision = Decision(False, [], f"planner failed: {type(exc).__name__}", planner="error")
        rnd.plan_ms = (time.perf_counter() - t0) * 1000
        if decision.error:
            errors.append(decision.error)
        proposed = [q.strip() for q in decision.queries if isinstance(q, str) and q.strip()][:MAX_PLANNED_QUERIES]
        fresh: list[str] = []
        for q in proposed:
            key = query_key(q)
            if key and key not in asked_keys and key not in {query_key(f) for f in fresh}:
                fresh.append(q)
        rnd.decision = {"enough": decision.enough, "queries": proposed, "fresh": fresh, "reason": decision.reason,
                        "planner": decision.planner, **({"error": decision.error} if decision.error else {}),
                        **({"usage": decision.usage} if decision.usage else {})}
        if decision.enough:
            stop_reason, partial = "enough", False
            break
        if not proposed:
            stop_reason = "no_new_queries"
            break
        if not fresh:
            stop_reason = "repeated_queries"
            break
        if (len(rounds) >= limits.max_iterations or searches >= limits.max_searches
                or len(evidence) >= limits.max_evidence):
            stop_reason = "budget"
            break
        queries = fresh
    return AgenticResult(question.text, limits, evidence, rounds, searches, len(rounds), partial, stop_reason, errors,
                         (time.perf_counter() - started) * 1000)


def select_context(question: str, evidence: Sequence[Passage], max_context: int = 10, *,
                   ranked: Sequence[Sequence[int]] | None = None) -> list[Passage]:
    """At most `max_context` passages of `evidence` for the final answer.

    With `ranked` (each search's hit ids, in the order the searches ran, the question's own search
    first; `AgenticResult.ranked`): first the top hit of every search, so each query's best hit
    survives; then the rest of the question's own ranking (plain RAG's order, the strongest single
    signal) alternating one for one with the other searches taken round-robin by rank, so neither the
    question's deep ranks nor the hops' second hits crowd the other out (as RRF fuses two rankings
    without trusting one over the other; no share is fitted). Measured on the multi-hop dev set,
    agentic+graph evidence recall@10 (bench/multihop_agentic.py, issue 20): the question's ranking in
    full before the round-robin 0.81 with a 10-deep first search (2hop 0.71: the hops' second hits
    were cut), plain round-robin 0.78, RRF 0.78, this alternation 0.87. Without `ranked`, or when
    room is left, evidence order fills up. Passages not in `evidence` (beyond `max_evidence`) are
    never added. `question` is part of the signature for selections that score passages against it;
    this one needs only the ranks.

    One passage per document first, in that order; a document's further chunks only fill the room
    left: each hop of a multi-hop question is a fact on another page, so a second chunk of a page
    already shown must not push out the only passage of another (measured: a page's two chunks kept
    the question's 10th hit, the last hop's page, out of the ten; agentic+graph evidence recall@10
    0.85 -> 0.86, 3-hop 5 -> 6 of 13, no question lost). The offline answer still reads every
    passage found (router/service.py), so a deferred chunk is not lost to it.
    """
    if max_context < 1:
        return []
    by_id = {p.id: p for p in evidence}
    chosen: list[Passage] = []
    taken: set[int] = set()

    def take(pid: int) -> bool:
        if pid in by_id and pid not in taken:
            taken.add(pid)
            chosen.append(by_id[pid])
        return len(chosen) >= max_context

    lists = [list(r) for r in ranked or []]
    order: list[int] = [hits[0] for hits in lists if hits]
    own = lists[0][1:] if lists else []
    others = lists[1:]
    hops = [hits[rank] for rank in range(1, max((len(r) for r in others), default=0))
            for hits in others if rank < len(hits)]
    for i in range(max(len(own), len(hops))):
        order += own[i:i + 1] + hops[i:i + 1]
    order += [p.id for p in evidence]
    pages: set[str | int] = set()
    first_of_page: list[int] = []
    for pid in order:
        if pid in by_id:
            page = by_id[pid].doc_id or pid  # a passage without a document is its own page
            if page not in pages:
                pages.add(page)
                first_of_page.append(pid)
    for pid in first_of_page + order:
        if take(pid):
            break
    return chosen
