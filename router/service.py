"""The router: classify a question, answer it by its route, and return one `Answer` for all routes.

local    -> hybrid search + rerank -> answer over the top passages;
global   -> the graph's map-reduce over the community reports of the user's access level;
multihop -> the agentic loop (search -> "enough?" -> new queries, within budgets) -> answer; every
           search fuses hybrid search with personalized PageRank over the reader's graph (router/graph_leg.py).

`tenant` and `groups` come from the caller's verified identity (CLI flags, an API token); every
search and graph read below filters by them in SQL. With an LLM the answer is written by the model
and its citations are checked; without one (or when the model fails or cites out of range) the
answer is extractive and says so (`offline`, `degraded`).
"""
from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import asdict
from typing import Iterator

from core.database import Database
from core.embeddings import Embedder
from core.llm.client import LLM, make_llm
from core.llm.usage import UsageMeter
from core.settings import Settings
from graph.query.graph_search import GraphSearcher
from graph.query.local_context import local_context
from graph.query.drift_primer import primer as drift_primer
from graph.query.entity_link import name_links
from graph.query.global_budget import GlobalBudget
from graph.query.runner import ask_global
from router.agentic import Limits, agentic_search
from router.classify import classify
from router.graph_leg import HybridGraphSearcher, merge_passages
from router.question_cues import asks_relation
from router.drift import DriftLimits, drift_search, first_follow_ups
from answers.generate import is_no_answer, streaming_to, token_sink
from router.planner_llm import LLMPlanner
from router.planner_offline import OfflinePlanner
from router.route_model import offline_classifier
from answers.question import Question
from answers.types import FORCED_ROUTES, Answer, Passage, RouteDecision
from answers.unit_similarity import EmbeddingSimilarity
from answers.reader import load_reader
from answers.other_language_gate import load_gate
from answers.relation_judge import load_judge
from answers.themes.answer import themes_in_scope
from answers.writer import AnswerWriter, uncited_no_answer
from vector.search.factory import make_searcher, with_transforms
from vector.search.hybrid import HybridSearcher
from vector.search.unmentioned import CodeCheck

log = logging.getLogger(__name__)

STREAM_PIECE_CHARS = 24


class QuestionRouter:
    def __init__(self, db: Database, settings: Settings, *, searcher: HybridSearcher | None = None,
                 embedder: Embedder | None = None, llm: LLM | None = None, use_llm: bool | None = None):
        """`searcher`/`embedder`/`llm` default to what `settings` configures; `use_llm=False` forces offline."""
        self.db, self.settings = db, settings
        self._owns_searcher = searcher is None
        self.searcher = searcher or make_searcher(db, settings, embedder=embedder)
        self.embedder = self.searcher.embedder
        # the local route's offline reader (answers/reader.py); None: the hand-weighted scorer
        self.writer = AnswerWriter(self.searcher, EmbeddingSimilarity(self.embedder),
                                   load_reader() if settings.answer_learned_reader else None,
                                   settings.answer_unmentioned_words,
                                   load_gate(self.embedder.model_id) if settings.answer_other_language_gate else None,
                                   settings.answer_unknown_names,
                                   load_judge(settings.state_dir) if settings.answer_relation_judge else None)
        # query transforms (multi-query, HyDE) apply to the local route when switched on
        self.local_searcher = with_transforms(self.searcher, settings)
        self.llm = None if use_llm is False else (llm or make_llm(settings))
        # routes by the question's vector when it can: embedded through the search's own embedder, whose
        # query cache hands the same vector to the search that follows (one model call per question)
        self.offline_classifier = offline_classifier(settings, self.embedder)
        # the multi-hop route's graph leg (personalized PageRank); caches each level's graph matrix
        self.graph = GraphSearcher(db, self.embedder)

    def close(self) -> None:
        """Closes what the router made (a searcher passed in belongs to the caller)."""
        if self.local_searcher is not self.searcher:
            self.local_searcher.close()
        if self._owns_searcher:
            self.searcher.close()

    def __enter__(self) -> "QuestionRouter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- classification
    def classify(self, question: str, route: str = "auto", llm: LLM | None = None) -> RouteDecision:
        question = _check_question(question)
        forced = None if route in (None, "auto") else route
        if forced is not None and forced not in FORCED_ROUTES:
            raise ValueError(f"route must be auto, {', '.join(FORCED_ROUTES)}; got {route!r}")
        if forced == "drift":  # no classifier chooses it: forced, or a global route's mode (settings.global_mode)
            return RouteDecision(route="drift", confidence=1.0, reason="route forced to drift by the caller.",
                                 classifier="forced")
        use = llm if llm is not None else (self.llm if self.settings.router_llm_classifier else None)
        return classify(question, llm=use, forced=forced, offline=self.offline_classifier)

    # --- answering
    def ask(self, tenant: str, groups: list[str], question: str, route: str = "auto",
            budget: GlobalBudget | None = None) -> Answer:
        """`budget`: the global route's cost dial for this question (graph/query/global_budget.py)."""
        started = time.perf_counter()
        # one meter for every LLM call of the question: classifier, transforms, reranker, planner, answer
        with UsageMeter().metering() as meter:
            decision = self._global_mode(self.classify(question, route, llm=self.llm), tenant, groups, question)
            return self._answer_route(tenant, groups, Question(_check_question(question)), decision, meter,
                                      started, budget)

    def ask_events(self, tenant: str, groups: list[str], question: str, route: str = "auto",
                   budget: GlobalBudget | None = None) -> Iterator[tuple[str, dict]]:
        """Events for streaming: route, token..., [withdraw, token...], verdict, citations, usage, done (or error).

        An LLM answer's tokens are sent as they arrive; `verdict` then says whether the whole answer
        passed its citation check. When the answer returned is not the one streamed (the check failed,
        or the call broke off), `withdraw` comes first: the client must drop every token shown so far,
        and the tokens of the answer that stands follow.
        """
        started = time.perf_counter()
        meter = UsageMeter()  # metering only around calls, never across a yield (each may resume elsewhere)
        try:
            with meter.metering():
                decision = self._global_mode(self.classify(question, route, llm=self.llm), tenant, groups,
                                             question)
        except ValueError as exc:
            yield "error", {"title": "Invalid question", "detail": str(exc)}
            return
        yield "route", asdict(decision)
        pieces: queue.Queue = queue.Queue()
        outcome: dict = {}

        def work() -> None:
            try:
                with meter.metering(), streaming_to(lambda text: pieces.put(text)):
                    outcome["answer"] = self._answer_route(tenant, groups, Question(_check_question(question)),
                                                           decision, meter, started, budget)
            except Exception as exc:  # noqa: BLE001 - a stream cannot turn into an HTTP error any more
                outcome["error"] = exc
            finally:
                pieces.put(None)

        worker = threading.Thread(target=work, name="ask-stream", daemon=True)
        worker.start()
        streamed = []
        while (piece := pieces.get()) is not None:
            streamed.append(piece)
            yield "token", {"text": piece}
        worker.join()
        if "error" in outcome:
            exc = outcome["error"]
            log.error("answering failed", exc_info=exc)
            yield "error", {"title": "Answering failed", "detail": f"{type(exc).__name__}: the answer could not be produced; see the server log."}
            return
        answer = outcome["answer"]
        shown = "".join(streamed).strip()
        kept = bool(shown) and (shown == answer.answer or (answer.no_answer and is_no_answer(shown)))
        if shown and not kept:
            yield "withdraw", {"reason": "; ".join(answer.degraded_reasons) or "the streamed answer was replaced"}
        if not kept:
            text = answer.answer
            for start in range(0, len(text), STREAM_PIECE_CHARS):
                yield "token", {"text": text[start:start + STREAM_PIECE_CHARS]}
        # an extractive answer quotes its passages: nothing to check; a streamed one passed only if it stands
        yield "verdict", {"checked": bool(shown), "passed": kept or not shown, "withdrawn": bool(shown) and not kept,
                          "offline": answer.offline, "degraded": answer.degraded}
        yield "citations", {"citations": [asdict(c) for c in answer.citations]}
        yield "usage", {**answer.usage, "latency_ms": answer.latency_ms}
        yield "done", answer.to_dict()

    def _global_mode(self, decision: RouteDecision, tenant: str, groups: list[str], question: str) -> RouteDecision:
        """A global route answered by DRIFT (before the route is shown) when CROSSROADS_GLOBAL_MODE=drift, or with
        `auto` when the question names a subject: an entity of the reader's graph, by name (graph/query/entity_link:
        a capitalised or coded run of words equal to an entity's merge key)."""
        mode = self.settings.global_mode
        if decision.route != "global" or mode == "map_reduce":
            return decision
        if mode == "auto":
            named = self._named_entities(tenant, groups, question)
            decision.features["drift_subject"] = named
            if not named:
                return decision
            decision.reason += f" Answered by DRIFT: the question names {', '.join(named[:3])} (CROSSROADS_GLOBAL_MODE=auto)."
        else:
            decision.reason += " Answered by DRIFT (CROSSROADS_GLOBAL_MODE=drift)."
        decision.route = "drift"
        return decision

    def _named_entities(self, tenant: str, groups: list[str], question: str) -> list[str]:
        level = self.graph.level(tenant, sorted({g for g in groups if g}))
        if level is None:
            return []
        matrix, _ = self.graph.matrix(tenant, level.name)
        links = name_links(question, matrix.entity_index, matrix.entity_spellings)
        return [link.surface for link in links if link.score >= 1.0]

    def _answer_route(self, tenant, groups, question: Question, decision, meter: UsageMeter, started,
                      budget: GlobalBudget | None = None) -> Answer:
        """`question`: parsed once here, read by the route's loop and the answer writers (answers/question.py)."""
        groups = sorted({g for g in groups if g})
        if decision.route == "drift":
            answer = self._drift(tenant, groups, question, decision, self.llm)
        elif decision.route == "global":
            answer = self._global(tenant, groups, question, decision, self.llm, budget)
        elif decision.route == "multihop":
            answer = self._multihop(tenant, groups, question, decision, self.llm)
        else:
            answer = self._local(tenant, groups, question, decision, self.llm)
        answer.usage = meter.summary()
        answer.latency_ms = round((time.perf_counter() - started) * 1000, 1)
        answer.trace["classifier"] = {"classifier": decision.classifier, "features": decision.features}
        unsure = decision.features.get("low_confidence")
        if unsure:
            answer.trace["route_hint"] = (f"The router was unsure of this question's route and took local search; "
                                          f"the {unsure['may_answer_better']} route may answer it better "
                                          f"(ask again with route={unsure['may_answer_better']}).")
        log.info("route=%s offline=%s degraded=%s partial=%s citations=%d latency_ms=%.0f", decision.route,
                 answer.offline, answer.degraded, answer.partial, len(answer.citations), answer.latency_ms)
        return answer

    def _local(self, tenant, groups, question: Question, decision, llm) -> Answer:
        # offline, pages in the other script are judged by the answer's gate (answers/other_language_gate.py)
        # rather than held to the reranker's cut
        hold_other_script = llm is not None or self.writer.gate is None
        result = self.local_searcher.search(tenant, groups, question.text, k=self.settings.answer_passages,
                                            mode="hybrid+rerank", hold_other_script=hold_other_script)
        # a hit kept by a calibrated cut scores as a probability of relevance
        calibrated = result.trace.get("rerank_threshold") is not None and not result.degraded
        passages = [Passage.of_chunk(h, h.score if calibrated else None) for h in result.hits]
        graph_local = None
        if asks_relation(question.text):
            # "how is X related to Y": the passages behind the named entities' relationships first
            # (GraphRAG's local search), then the search's; nothing named in the graph leaves the search's
            graph_local = local_context(self.graph, tenant, groups, question.text)
            passages = merge_passages([Passage.of_chunk(h) for h in graph_local.passages], passages,
                                      self.settings.answer_passages)
        answer = self.writer.write(tenant, groups, question, passages, decision, llm, partial=False)
        answer.trace.update({"queries": [question.text], "search": result.trace})
        if graph_local is not None:
            answer.trace["graph_local"] = {"level": graph_local.level, "entities": graph_local.entities,
                                           "relationships": graph_local.relationships,
                                           "report": graph_local.report, **graph_local.trace}
        if result.degraded:
            answer.degraded = True
            answer.degraded_reasons.insert(0, f"search: {result.degraded_reason}")
        return answer

    def _multihop(self, tenant, groups, question: Question, decision, llm) -> Answer:
        s = self.settings
        limits = Limits(max_iterations=s.agentic_max_iterations, max_searches=s.agentic_max_searches,
                        k=s.agentic_k, max_evidence=s.agentic_max_evidence, max_context=s.agentic_max_context)
        planner = LLMPlanner(llm) if llm is not None else OfflinePlanner()
        evidence_searcher = HybridGraphSearcher(self.searcher, self.graph, tenant, groups)
        result = agentic_search(evidence_searcher, planner, question, evidence_searcher.loop_limits(limits))
        context = result.context()
        if llm is None:  # the offline chain may run through any passage found: the context's first, then the rest
            shown = {p.id for p in context}
            context = context + [p for p in result.evidence if p.id not in shown]
        answer = self.writer.write(tenant, groups, question, context, decision, llm, partial=result.partial, multihop=True,
                             follow_ups=[q for q in result.asked if q != question.text])
        answer.partial = result.partial
        answer.trace.update({"queries": result.asked, "agentic": result.trace,
                             "evidence": [p.id for p in result.evidence], "context": [p.id for p in context],
                             "searches": evidence_searcher.trace(), "graph": evidence_searcher.graph_trace()})
        if evidence_searcher.degraded:
            answer.degraded = True
            answer.degraded_reasons[:0] = [f"search: {r}" for r in evidence_searcher.degraded_reasons]
        if result.errors:  # a failed search or plan in the loop (an LLM planner's fallback included): said, not hidden
            answer.errors.extend(result.errors)
            answer.degraded = True
            answer.degraded_reasons.append(f"search loop: {len(result.errors)} step(s) failed, first: {result.errors[0]}")
        return answer

    def _drift(self, tenant, groups, question: Question, decision, llm) -> Answer:
        """DRIFT (router/drift.py): the reader's best community reports, follow-up local searches from them
        (with the reader's groups: ACL in SQL), one answer citing reports and passages, citations checked."""
        s = self.settings
        limits = DriftLimits(max_follow_ups=s.drift_max_follow_ups, max_depth=s.drift_max_depth, k=s.agentic_k,
                             primer_reports=s.drift_primer_reports, max_context=s.agentic_max_context)
        primer = drift_primer(self.db, self.embedder, tenant, groups, question.text, k=limits.primer_reports)
        first, source = first_follow_ups(llm, question.text, primer, limits)
        if not first:  # no level or no report: the question itself is the one local search
            first = [question.text]
        planner = (LLMPlanner(llm) if llm is not None else OfflinePlanner()) if limits.max_depth > 1 else None

        def search(query: str) -> list[Passage]:
            result = self.searcher.search(tenant, groups, query, k=limits.k, mode="hybrid+rerank",
                                          apply_threshold=False)
            return [Passage.of_chunk(h) for h in result.hits]

        result = drift_search(search, planner, question, primer, first, limits)
        queries = [f.query for f in result.follow_ups]
        trace = {"level": primer.level, "drift": {**result.trace, "first_follow_ups": source}, "queries": queries}
        reasons = [f"DRIFT primer: {source['error']}"] if source.get("error") else []
        return self.writer.write_drift(question, result.passages, decision, llm, partial=result.partial,
                                       follow_ups=queries, best=result.best, trace=trace, reasons=reasons)

    def _global(self, tenant, groups, question: Question, decision, llm, budget: GlobalBudget | None = None) -> Answer:
        # offline, the themes come from the documents nearest the question: about something else when no
        # readable document holds a code or spells a name it asks about (an LLM reading the reports says so itself)
        check = self.writer.unmentioned(tenant, groups, question) if llm is None else CodeCheck()
        if check.unmentioned:
            return uncited_no_answer(question, decision, check, offline=True, trace={})
        result = ask_global(self.db, self.embedder, tenant, groups, question.text, llm=llm,
                            max_map_calls=self.settings.global_max_map_calls,
                            max_cost_usd=self.settings.global_max_cost_usd, budget=budget, on_text=token_sink(),
                            scope_themes=themes_in_scope)
        return self.writer.write_global(question, result, decision, [check.error] if check.error else [])


def _check_question(question: str) -> str:
    question = (question or "").strip()
    if not question:
        raise ValueError("the question is empty; ask something, e.g. \"What does ERR_2043 mean?\"")
    return question
