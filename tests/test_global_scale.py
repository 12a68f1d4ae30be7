"""Issue 41: global questions at corpus scale, on the fixtures' graph (the shared demo tenant) and the loopback
fake of the Messages API answering each call in 300 ms: calls in flight together, the cost dial, the reduce
streamed, and DRIFT answers (offline and with the fake) with checked citations."""
from __future__ import annotations

import re

import pytest

from core.citations import cited_numbers
from core.llm.client import make_llm
from core.settings import Settings
from graph.query.drift_primer import Primer, PrimerReport, offline_follow_ups, subject_words
from graph.query.global_budget import BudgetError, GlobalBudget, parse_budget, spread
from graph.query.runner import ask_global
from router.agentic import Decision
from answers.drift_answer import drift_answer
from router.drift import DriftLimits, drift_search
from router.service import QuestionRouter
from answers.types import Passage
from tests.fakes.anthropic_server import FakeAnthropic, text, tool_use
from tests.test_global_llm import _all_relevant, cite_all, phases
from answers.question import Question

QUESTION = "What are the main recurring themes across all incident reviews?"  # fixtures q18 (global)
GROUPS = ["public", "staff"]


def llm_for(api: FakeAnthropic, concurrency: int = 8):
    return make_llm(Settings(anthropic_api_key="test-key", anthropic_base_url=api.url, llm_model_fast="claude-haiku-4-5",
                             llm_model_answer="claude-sonnet-5", llm_max_retries=0, llm_timeout_s=5.0,
                             llm_concurrency=concurrency))


def every_report_relevant(body: dict):
    return phases(answer=cite_all)(_all_relevant(body))


# --- pure parts -------------------------------------------------------------------------------------

@pytest.mark.parametrize("value, expected", [(6, GlobalBudget(calls=6)), ("6", GlobalBudget(calls=6)),
                                             ("6 calls", GlobalBudget(calls=6)), ("$0.05", GlobalBudget(usd=0.05)),
                                             ("0.05usd", GlobalBudget(usd=0.05)), (None, None), ("", None)])
def test_parse_budget(value, expected):
    assert parse_budget(value) == expected


@pytest.mark.parametrize("bad", [1, "0", "abc", "$0", True, 0.5])
def test_parse_budget_refuses_what_cannot_answer(bad):
    with pytest.raises(BudgetError):
        parse_budget(bad)


def test_a_call_budget_splits_into_rating_map_and_the_answer():
    assert GlobalBudget(calls=2).split() == (0, 1)
    assert GlobalBudget(calls=6).split() == (2, 3)
    assert GlobalBudget(calls=30).split() == (14, 15)


def test_spread_keeps_calls_side_by_side_with_a_floor_per_call():
    assert spread(8, 8, 2) == [2, 2, 2, 2]
    assert spread(3, 8, 2) == [3]
    assert spread(10, 3, 1) == [4, 3, 3]
    assert spread(0, 4) == [] and sum(spread(41, 8, 2)) == 41


def test_offline_follow_ups_join_each_reports_entities_to_the_subject_round_robin():
    reports = [PrimerReport(1, "r1", "", ["Nordpost Express", "Tellwave"], 0.9, [1]),
               PrimerReport(2, "r2", "", ["GeoMesh"], 0.5, [2])]
    assert subject_words("What are the main recurring themes across all incident reviews?") == \
        ["incident", "reviews"]
    assert offline_follow_ups("Which vendors caused incidents?", reports, 3) == [
        "Nordpost Express vendors caused incidents", "GeoMesh vendors caused incidents",
        "Tellwave vendors caused incidents"]


def passage(pid: int, text: str) -> Passage:
    return Passage(id=pid, doc_id=f"d{pid}.md", title=f"Doc {pid}", heading="", text=text)


class Asks:
    def __init__(self, *queries):
        self.queries, self.calls = list(queries), 0

    def plan(self, question, evidence, asked):
        self.calls += 1
        return Decision(False, self.queries, "more")


def test_drift_search_keeps_its_budgets_and_every_citation_points_at_a_passage():
    found = {"a": [passage(1, "Alpha failed. Alpha retried."), passage(2, "Beta text.")],
             "b": [passage(2, "Beta text.")], "c": [passage(3, "Gamma rate limits.")], "d": [passage(4, "Delta.")]}
    primer = Primer("staff", [PrimerReport(9, "Vendors", "Vendors fail. Rate limits missing.", ["Alpha"], 0.8, [1])],
                    {})
    limits = DriftLimits(max_follow_ups=3, max_depth=2, k=2, primer_reports=1, max_context=4)
    planner = Asks("c", "d", "a")
    result = drift_search(lambda q: found.get(q, []), planner, Question("What fails?"), primer, ["a", "b"], limits)
    assert [(f.query, f.depth) for f in result.follow_ups] == [("a", 1), ("b", 1), ("c", 2)]
    assert result.partial and planner.calls == 1  # "d" was left out by max_follow_ups
    assert [p.kind for p in result.passages] == ["report", "chunk", "chunk", "chunk"]
    assert [p.id for p in result.passages[1:]] == [1, 2, 3]  # each follow-up's best first
    answer, quotes = drift_answer(Question("What fails?"), result.passages, [f.query for f in result.follow_ups],
                                 result.best)
    assert set(cited_numbers(answer)) == {1, 2, 3, 4} and set(quotes) == {1, 2, 3, 4}
    one_deep = drift_search(lambda q: found.get(q, []), Asks("c"), Question("What fails?"), primer, ["a"],
                            DriftLimits(max_depth=1))
    assert [f.query for f in one_deep.follow_ups] == ["a"] and not one_deep.partial


# --- on the fixtures' graph -------------------------------------------------------------------------

def test_fixtures_global_rating_and_map_calls_are_in_flight_together(db, demo_tenant, local_embedder):
    # held until four calls of a kind are in flight, so a loaded machine cannot pass for a serial client
    with FakeAnthropic(handler=every_report_relevant, gather=4) as api:
        result = ask_global(db, local_embedder, demo_tenant, GROUPS, QUESTION, llm=llm_for(api))
        in_flight = dict(api.max_in_flight_by_kind)
        calls = api.calls
    print(f"\nfixtures: max in flight {api.max_in_flight} by kind {in_flight}, calls {calls}, "
          f"trace rating={result.trace['rating_calls']} map={result.trace['map_calls']}")
    assert in_flight["rate_reports"] >= 4 and in_flight["record_points"] >= 4 and api.max_in_flight >= 4
    assert not result.degraded and result.reports


@pytest.mark.parametrize("budget", [2, 6])
def test_fixtures_a_call_budget_sets_the_number_of_calls_at_the_fake(db, demo_tenant, local_embedder, budget):
    with FakeAnthropic(handler=every_report_relevant) as api:
        result = ask_global(db, local_embedder, demo_tenant, GROUPS, QUESTION, llm=llm_for(api),
                            budget=GlobalBudget(calls=budget))
        kinds = [(b.get("tool_choice") or {}).get("name") for b in api.bodies]
    rating, mapping = GlobalBudget(calls=budget).split()
    print(f"\nbudget {budget}: calls at the fake {api.calls} "
          f"(rate {kinds.count('rate_reports')}, map {kinds.count('record_points')}, answer {kinds.count(None)})")
    assert api.calls == budget
    assert kinds.count("rate_reports") == rating and kinds.count("record_points") == mapping and kinds.count(None) == 1
    assert result.trace["budget"]["calls"] == budget and not result.degraded and result.reports


def test_fixtures_the_reduce_answer_is_streamed(db, demo_tenant, local_embedder):
    pieces: list[str] = []
    with FakeAnthropic(handler=every_report_relevant) as api:
        result = ask_global(db, local_embedder, demo_tenant, GROUPS, QUESTION, llm=llm_for(api),
                            budget=GlobalBudget(calls=3), on_text=pieces.append)
        streamed = [b for b in api.bodies if b.get("stream")]
    assert len(streamed) == 1 and len(pieces) > 1 and "".join(pieces).strip() == result.answer
    assert result.trace["answer_streamed"]


@pytest.fixture(scope="module")
def offline_router(db, settings, local_embedder):
    with QuestionRouter(db, settings, embedder=local_embedder, use_llm=False) as router:
        yield router


def _checked(answer) -> None:
    numbers = set(cited_numbers(answer.answer))
    sent = {p["number"] for p in answer.trace["drift"]["passages"]}
    assert numbers and numbers <= sent and {c.number for c in answer.citations} == numbers


def test_fixtures_drift_answers_global_questions_offline_with_checked_citations(offline_router, demo_tenant):
    answer = offline_router.ask(demo_tenant, GROUPS, QUESTION, route="drift")
    assert answer.route.route == "drift" and answer.offline and not answer.no_answer
    _checked(answer)
    kinds = {c.kind for c in answer.citations}
    assert kinds == {"report", "chunk"}
    follow = answer.trace["drift"]["follow_ups"]
    assert 1 <= len(follow) <= 6 and all(f["depth"] <= 2 for f in follow)
    # the staff reader never sees a passage of the hr group (ACL in SQL)
    assert all(not (c.doc_id or "").startswith("hr/") or c.doc_id == "hr/vacation-policy.md" for c in answer.citations)


def test_fixtures_drift_with_the_llm_plans_follow_ups_and_its_answer_citations_are_checked(db, settings, demo_tenant,
                                                                                          local_embedder):
    def handle(body: dict):
        tool = (body.get("tool_choice") or {}).get("name") or (body.get("tools") or [{}])[0].get("name")
        if tool == "plan_follow_ups":
            return tool_use("plan_follow_ups", {"intermediate_answer": "Vendors and rate limits recur.",
                                                "follow_ups": ["Nordpost rate limit incident", "GeoMesh outage"]})
        if tool == "plan_search":
            return tool_use("plan_search", {"enough": True, "queries": [], "reason": "enough"})
        n = len(re.findall(r'<document index="', body["messages"][0]["content"]))
        return text(f"Rate limits and vendor outages recur [1][{n}].")
    with FakeAnthropic(handler=handle) as api:
        with QuestionRouter(db, settings.model_copy(update={"global_mode": "drift"}), embedder=local_embedder,
                            llm=llm_for(api)) as router:
            answer = router.ask(demo_tenant, GROUPS, QUESTION, route="global")
    assert answer.route.route == "drift" and not answer.offline and not answer.degraded
    assert [f["query"] for f in answer.trace["drift"]["follow_ups"]][:2] == ["Nordpost rate limit incident",
                                                                             "GeoMesh outage"]
    assert answer.trace["drift"]["first_follow_ups"]["source"] == "llm"
    _checked(answer)
    with FakeAnthropic(handler=lambda body: text("Invented [99].") if not body.get("tools") else handle(body)) as api:
        with QuestionRouter(db, settings, embedder=local_embedder, llm=llm_for(api)) as router:
            bad = router.ask(demo_tenant, GROUPS, QUESTION, route="drift")
    assert bad.degraded and bad.offline and "[99]" not in bad.answer and bad.errors
    _checked(bad)


def test_http_ask_takes_a_budget_and_the_drift_route(db, client, demo_tenant):
    from api import tokens
    from tests.conftest import bearer

    with db.connection() as conn:
        token = tokens.create_token(conn, demo_tenant, GROUPS, "reader")[0]
    r = client.post("/v1/ask", json={"question": QUESTION, "route": "global", "budget": "lots"}, headers=bearer(token))
    assert r.status_code == 422 and "budget" in r.text
    r = client.post("/v1/ask", json={"question": QUESTION, "route": "drift", "budget": 6}, headers=bearer(token))
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["route"]["route"] == "drift" and body["citations"] and body["offline"]  # offline: no call to budget


def test_fixtures_auto_mode_takes_drift_for_a_global_question_naming_a_subject(db, settings, demo_tenant,
                                                                              local_embedder):
    auto = settings.model_copy(update={"global_mode": "auto"})
    with QuestionRouter(db, auto, embedder=local_embedder, use_llm=False) as router:
        named = router.ask(demo_tenant, GROUPS, "Across all incidents, what problems has Nordpost Express caused?",
                           route="global")
        plain = router.ask(demo_tenant, GROUPS, QUESTION, route="global")
    assert named.route.route == "drift" and "Nordpost Express" in named.route.reason and named.citations
    assert plain.route.route == "global" and plain.route.features["drift_subject"] == []
