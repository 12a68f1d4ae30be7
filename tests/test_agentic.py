"""router.agentic: the search loop's budgets and stops, context selection, and the hybrid searcher
adapter (the planners: tests/test_agentic_planners.py). No database."""
from __future__ import annotations

import pytest

from router.agentic import Decision, Limits, agentic_search, query_key, select_context
from router.evidence_search import HybridPassageSearcher
from answers.types import Passage
from vector.search.hybrid import Candidate, SearchResult
from answers.question import Question


# --- scripted sides of the loop ------------------------------------------------------------------

def passage(pid: int, title: str = "", text_: str = "", doc: str | None = None) -> Passage:
    return Passage(id=pid, doc_id=doc or f"doc{pid}", title=title or f"Title {pid}", heading="",
                   text=text_ or f"Passage number {pid}.")


class ScriptedSearcher:
    """query -> passages (by exact query, else `default(query)`); records every call."""

    def __init__(self, script: dict[str, list[Passage]] | None = None, default=None):
        self.script = script or {}
        self.default = default
        self.calls: list[tuple[str, int]] = []

    def search(self, query: str, k: int) -> list[Passage]:
        self.calls.append((query, k))
        if query in self.script:
            return self.script[query][:k]
        return self.default(query)[:k] if self.default else []


class ScriptedPlanner:
    """Returns the scripted decisions in order (the last one repeats); records what it was shown."""

    def __init__(self, *decisions: Decision):
        self.decisions = list(decisions)
        self.seen: list[tuple[list[int], list[str]]] = []

    def plan(self, question, evidence, asked):
        self.seen.append(([p.id for p in evidence], list(asked)))
        return self.decisions[min(len(self.seen), len(self.decisions)) - 1]


class EndlessPlanner:
    """Never satisfied: three brand-new queries every round."""

    def __init__(self):
        self.round = 0

    def plan(self, question, evidence, asked):
        self.round += 1
        return Decision(False, [f"topic {self.round} part {i}" for i in range(3)], "more")


def unique_hits(per_query: int = 5):
    counter = iter(range(1, 10_000))
    return lambda query: [passage(next(counter)) for _ in range(per_query)]


# --- the loop ----------------------------------------------------------------------------------------

def test_first_round_searches_the_question_and_enough_stops_early():
    searcher = ScriptedSearcher({"Who leads Payments?": [passage(1), passage(2)]})
    planner = ScriptedPlanner(Decision(True, ["never searched"], "covered"))
    result = agentic_search(searcher, planner, Question("Who leads Payments?"), Limits(k=4, max_context=4))
    assert searcher.calls == [("Who leads Payments?", 4)]
    assert (result.searches, result.iterations, result.stop_reason, result.partial) == (1, 1, "enough", False)
    assert [p.id for p in result.evidence] == [1, 2]
    assert planner.seen == [([1, 2], ["Who leads Payments?"])]
    assert result.trace["rounds"][0]["decision"]["enough"] is True


def test_over_the_graph_leg_the_questions_own_search_is_as_deep_as_the_context_and_follow_ups_use_k():
    from router.graph_leg import question_as_deep_as_context

    planner = ScriptedPlanner(Decision(False, ["follow-up"], "more"), Decision(True, [], "ok"))
    searcher = ScriptedSearcher(default=unique_hits(8))
    result = agentic_search(searcher, planner, Question("q"), question_as_deep_as_context(Limits(k=3, max_context=6)))
    assert searcher.calls == [("q", 6), ("follow-up", 3)]
    assert [len(hits) for hits in result.ranked] == [6, 3]
    searcher = ScriptedSearcher(default=unique_hits(8))  # without the graph leg: k
    agentic_search(searcher, ScriptedPlanner(Decision(True, [], "ok")), Question("q"), Limits(k=3, max_context=6))
    assert searcher.calls == [("q", 3)]
    assert question_as_deep_as_context(Limits(k=3, max_context=6, first_k=2)).first_k == 2  # set: kept


def test_max_searches_is_enforced_and_marks_partial():
    searcher = ScriptedSearcher(default=unique_hits(2))
    result = agentic_search(searcher, EndlessPlanner(), Question("q"), Limits(max_iterations=10, max_searches=5, max_evidence=100))
    assert result.searches == 5 == len(searcher.calls)
    assert result.stop_reason == "budget" and result.partial
    skipped = [s for r in result.rounds for s in r.skipped]
    assert skipped and all(s["why"] == "budget" for s in skipped)


def test_max_iterations_is_enforced_and_marks_partial():
    searcher = ScriptedSearcher(default=unique_hits(2))
    result = agentic_search(searcher, EndlessPlanner(), Question("q"), Limits(max_iterations=2, max_searches=100, max_evidence=100))
    assert result.iterations == 2 and result.searches == 1 + 3
    assert result.stop_reason == "budget" and result.partial


def test_max_evidence_caps_the_evidence_and_stops_searching():
    searcher = ScriptedSearcher(default=unique_hits(5))
    result = agentic_search(searcher, EndlessPlanner(), Question("q"),
                            Limits(max_iterations=10, max_searches=100, k=5, max_evidence=7))
    assert len(result.evidence) == 7
    assert result.searches == 2  # the second search filled it; the third was not run
    assert result.stop_reason == "budget" and result.partial


def test_evidence_is_deduplicated_by_chunk_id():
    searcher = ScriptedSearcher({
        "q": [passage(1), passage(2), passage(3)],
        "a": [passage(2), passage(4)],
        "b": [passage(4), passage(1), passage(5)],
    })
    planner = ScriptedPlanner(Decision(False, ["a", "b"], "need more"), Decision(True, [], "ok"))
    result = agentic_search(searcher, planner, Question("q"), Limits())
    assert [p.id for p in result.evidence] == [1, 2, 3, 4, 5]
    second = result.rounds[1]
    assert [s.new for s in second.searched] == [[4], [5]]
    assert second.new_evidence == [4, 5]
    assert result.ranked == [[1, 2, 3], [2, 4], [4, 1, 5]]  # hits as searched, repeats included


def test_repeated_queries_are_detected_and_stop_the_loop():
    searcher = ScriptedSearcher(default=unique_hits(1))
    # the same words in another case, order and punctuation are the same query
    planner = ScriptedPlanner(Decision(False, ["payments LEADS who", "Who leads Payments"], "again"))
    result = agentic_search(searcher, planner, Question("Who leads Payments?"), Limits())
    assert result.searches == 1
    assert result.stop_reason == "repeated_queries" and result.partial
    assert query_key("Who leads Payments?") == query_key("payments, LEADS who")


def test_a_repeat_inside_a_round_is_skipped_but_fresh_queries_run():
    searcher = ScriptedSearcher(default=unique_hits(1))
    planner = ScriptedPlanner(Decision(False, ["alpha", "the question", "Alpha!"], "mixed"), Decision(True, [], "ok"))
    result = agentic_search(searcher, planner, Question("the question"), Limits())
    assert [q for q, _ in searcher.calls] == ["the question", "alpha"]
    assert result.stop_reason == "enough"


def test_no_proposal_without_enough_stops_as_no_new_queries():
    searcher = ScriptedSearcher(default=unique_hits(1))
    result = agentic_search(searcher, ScriptedPlanner(Decision(False, [], "stuck")), Question("q"), Limits())
    assert result.stop_reason == "no_new_queries" and result.partial and result.searches == 1


def test_at_most_three_planned_queries_per_round():
    searcher = ScriptedSearcher(default=unique_hits(1))
    planner = ScriptedPlanner(Decision(False, ["a", "b", "c", "d", "e"], "many"), Decision(True, [], "ok"))
    result = agentic_search(searcher, planner, Question("q"), Limits(max_searches=20))
    assert [q for q, _ in searcher.calls] == ["q", "a", "b", "c"] and result.searches == 4
    assert result.trace["rounds"][0]["decision"]["queries"] == ["a", "b", "c"]


def test_a_failed_later_search_is_recorded_and_the_loop_goes_on():
    def default(query):
        if query == "broken":
            raise ConnectionError("leg down")
        return [passage(len(query))]

    planner = ScriptedPlanner(Decision(False, ["broken", "fine"], "more"), Decision(True, [], "ok"))
    result = agentic_search(ScriptedSearcher(default=default), planner, Question("q"), Limits())
    assert result.stop_reason == "enough" and result.searches == 3
    assert any("leg down" in e for e in result.errors)
    with pytest.raises(ConnectionError):  # nothing at all to answer from: the caller must know
        agentic_search(ScriptedSearcher(default=default), planner, Question("broken"), Limits())


def test_a_raising_planner_ends_the_loop_partial_with_the_error():
    class Boom:
        def plan(self, question, evidence, asked):
            raise RuntimeError("planner bug")

    result = agentic_search(ScriptedSearcher(default=unique_hits(2)), Boom(), Question("q"), Limits())
    assert result.stop_reason == "no_new_queries" and result.partial
    assert "planner bug" in result.errors[0]


def test_limits_reject_nonsense():
    with pytest.raises(ValueError):
        Limits(k=0)
    with pytest.raises(ValueError):
        Limits(max_searches=True)


# --- context selection -----------------------------------------------------------------------------

def test_select_context_caps_and_keeps_every_querys_top_hit():
    evidence = [passage(i) for i in range(1, 31)]
    ranked = [[q * 5 + r + 1 for r in range(5)] for q in range(6)]  # 6 searches x 5 distinct hits
    context = select_context("q", evidence, 10, ranked=ranked)
    ids = [p.id for p in context]
    assert len(ids) == 10 and len(set(ids)) == 10
    assert ids[:6] == [1, 6, 11, 16, 21, 26]  # each query's best hit first, in search order
    # then the question's own ranking, one for one with the other searches' round-robin by rank
    assert ids[6:] == [2, 7, 3, 12]


def test_select_context_round_robin_after_the_question_and_never_outside_evidence():
    evidence = [passage(i) for i in (1, 2, 10, 11, 12, 20, 21)]
    ranked = [[1, 2], [10, 11, 12, 99], [20, 21]]  # 99 fell beyond max_evidence
    ids = [p.id for p in select_context("q", evidence, 6, ranked=ranked)]
    assert ids == [1, 10, 20, 2, 11, 21]
    assert 99 not in [p.id for p in select_context("q", evidence, 50, ranked=ranked)]
    assert [p.id for p in select_context("q", evidence, 3)] == [1, 2, 10]  # no ranks: evidence order
    assert select_context("q", evidence, 0, ranked=ranked) == []


def test_select_context_shows_one_passage_per_page_before_a_pages_second():
    # the question's ranking holds two chunks of one page; the last hop's page is its 4th hit
    evidence = [passage(1, doc="harbour"), passage(2, doc="harbour"), passage(3, doc="mayor"), passage(4, doc="ferry"),
                passage(10, doc="town")]
    ranked = [[1, 2, 3, 4], [10]]
    ids = [p.id for p in select_context("q", evidence, 4, ranked=ranked)]
    assert ids == [1, 10, 3, 4]  # the harbour's second chunk waits for room
    assert [p.id for p in select_context("q", evidence, 5, ranked=ranked)] == [1, 10, 3, 4, 2]
    # passages without a document are each their own page
    loose = [Passage(id=i, doc_id=None, title="", heading="", text=f"note {i}") for i in (5, 6)]
    assert [p.id for p in select_context("q", loose, 2, ranked=[[5, 6]])] == [5, 6]


def test_result_context_uses_at_most_max_context():
    searcher = ScriptedSearcher(default=unique_hits(5))
    result = agentic_search(searcher, EndlessPlanner(), Question("q"),
                            Limits(max_iterations=3, max_searches=8, k=5, max_evidence=40, max_context=10))
    context = result.context()
    assert len(context) == 10 and len(result.evidence) > 10
    assert {hits[0] for hits in result.ranked} <= {p.id for p in context}


# --- the hybrid searcher adapter -----------------------------------------------------------------

class FakeHybrid:
    def __init__(self, degraded: bool = False):
        self.degraded = degraded
        self.calls = []

    def search(self, tenant, groups, query, k=10, mode="hybrid", apply_threshold=True):
        self.calls.append((tenant, groups, query, k, mode, apply_threshold))
        hits = [Candidate(id=41, doc_id="runbook", title="Payments runbook", heading="Ownership",
                          text="The Payments team owns billing.", lang="english", score=0.9)]
        return SearchResult(hits, hits, self.degraded, "reranker offline failed: boom" if self.degraded else None,
                            trace={"mode": mode})


def test_hybrid_passage_searcher_maps_candidates_and_records_degraded_searches():
    fake = FakeHybrid(degraded=True)
    searcher = HybridPassageSearcher(fake, "acme", ["staff"], mode="hybrid+rerank")
    [p] = searcher.search("who owns billing", 5)
    assert p == Passage(id=41, doc_id="runbook", title="Payments runbook", heading="Ownership",
                        text="The Payments team owns billing.", kind="chunk")
    # the rerank cut is off while gathering evidence: a hop's passage may only name the bridge
    assert fake.calls == [("acme", ["staff"], "who owns billing", 5, "hybrid+rerank", False)]
    assert searcher.degraded and searcher.degraded_reasons == ["reranker offline failed: boom"]
    assert searcher.trace()[0]["hits"] == [41] and searcher.trace()[0]["search"] == {"mode": "hybrid+rerank"}
    searcher.reset()
    assert not searcher.degraded and searcher.trace() == []
