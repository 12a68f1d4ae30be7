"""LLM calls at corpus scale: reports and the global map phase run their calls concurrently (the fake
counts how many are in flight at once, holding each until four are), results stay in id order, and one
limiter per process holds every thread back after a 429 / 529."""
from __future__ import annotations

import threading
import time

import pytest

from core.llm.client import make_llm
from core.llm.limiter import Limiter, map_ordered
from core.settings import Settings
from graph import store
from graph.types import Community
from graph.indexing.communities import membership_hash
from graph.indexing.contracts import LevelReport
from graph.indexing.runner import report_communities
from graph.levels import AccessLevel
from graph.query.global_llm import LLMGlobalSearch
from tests.fakes.anthropic_server import GATHER_WAIT_S, FakeAnthropic, error, text
from tests.test_global_llm import phases, report
from tests.test_reports_llm import GOOD, on_chunks, reporter, stored_chunks
from tests.test_reports_llm import ent, rel

LATENCY_S = 0.3


def settings_for(api: FakeAnthropic, concurrency: int = 8) -> Settings:
    return Settings(anthropic_api_key="test-key", anthropic_base_url=api.url, llm_model_fast="claude-haiku-4-5",
                    llm_model_answer="claude-sonnet-5", llm_max_retries=0, llm_timeout_s=5.0,
                    llm_concurrency=concurrency)


def test_reports_of_one_level_are_written_concurrently_and_stored_in_id_order(db, tenant):
    leaves = [Community(i, 0, None, (f"a{i}", f"b{i}"), ()) for i in range(6)]
    chunk_ids = stored_chunks(db, tenant, range(1, 13))
    ents = [ent(f"{x}{i}", 1, [2 * i + 1 + (x == "b")]) for i in range(6) for x in "ab"]
    rels = [rel(f"a{i}", f"b{i}", 5, [2 * i + 1]) for i in range(6)]
    ents, rels = on_chunks(ents, rels, chunk_ids)
    with db.connection() as conn:
        store.replace_communities(conn, tenant, "all", leaves, {c.id: membership_hash(c) for c in leaves})
    seen: list[int] = []
    with FakeAnthropic(handler=lambda body: GOOD, gather=4) as api:
        llm_reporter = reporter(api)
        llm_reporter.llm = make_llm(settings_for(api))
        level = LevelReport("all", [])
        started = time.perf_counter()
        report_communities(db, tenant, "all", leaves, ents, rels, llm_reporter, level,
                           lambda stage, done, total: seen.append(done), concurrency=8)
        wall = time.perf_counter() - started
    assert level.reports_generated == 6 and level.report_fallbacks == 0
    assert api.max_in_flight_by_kind["write_report"] >= 4
    assert wall < 2 * GATHER_WAIT_S  # one after another would take 6 * GATHER_WAIT_S
    assert seen == [1, 2, 3, 4, 5, 6]  # progress in id order, not arrival order
    with db.connection() as conn:
        assert sorted(r["id"] for r in store.list_reports(conn, tenant, "all")) == list(range(6))


def test_global_rating_and_map_calls_run_concurrently_with_the_same_result_as_one_at_a_time():
    roots = [report(i, f"relevant root {i}") for i in range(1, 9)]

    def run(concurrency: int):
        held = {"gather": 4} if concurrency > 1 else {"latency_s": LATENCY_S}
        with FakeAnthropic(handler=phases(), **held) as api:
            search = LLMGlobalSearch(make_llm(settings_for(api, concurrency)), map_budget_tokens=60)
            result = search.search([AccessLevel("staff", ("staff",), 1)], {"staff"}, lambda level: roots,
                                   "What are the payments themes?")
            return result, dict(api.max_in_flight_by_kind)

    together, in_flight = run(8)
    assert in_flight["record_points"] >= 4 and in_flight["rate_reports"] >= 4
    assert together.trace["map_calls"] == 8 and not together.degraded
    alone, in_flight_alone = run(1)
    assert in_flight_alone["record_points"] == 1
    assert [(p.report_id, p.text) for p in together.points] == [(p.report_id, p.text) for p in alone.points]
    assert together.answer == alone.answer


def test_a_429_pauses_every_thread_of_the_process_for_its_retry_after():
    limiter = Limiter(4)
    limiter.rate_limited(0.3, attempt=0)
    started = time.monotonic()
    waited: list[float] = []

    def call() -> None:
        with limiter.slot():
            waited.append(time.monotonic() - started)

    threads = [threading.Thread(target=call) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert min(waited) >= 0.29 and limiter.pauses == 1


def test_a_429_through_the_sdk_is_retried_once_after_retry_after_and_holds_the_others_back():
    arrivals: list[float] = []

    def handler(body: dict):
        arrivals.append(time.monotonic())
        return text("ok")

    with FakeAnthropic(error(429, retry_after="0.4"), handler=handler) as api:
        settings = settings_for(api, 4).model_copy(update={"llm_max_retries": 2})
        llm = make_llm(settings)
        started = time.monotonic()
        replies = map_ordered(lambda n: llm.complete(task="fast", system="s", messages=[
            {"role": "user", "content": f"q{n}"}]).text, range(4), 4)
    assert replies == ["ok"] * 4 and api.calls == 5
    assert llm.limiter.pauses == 1
    # the retried call waited its retry-after; the others started before the 429 came back, or after the pause
    assert max(arrivals) - started >= 0.39


def test_a_529_backs_off_process_wide_and_a_success_ends_the_streak():
    limiter = Limiter(2)
    limiter.overloaded(None)
    limiter.overloaded(None)
    assert limiter.pauses == 2 and limiter._overloads == 2
    limiter.succeeded()
    assert limiter._overloads == 0


def test_map_ordered_keeps_the_items_order_and_hands_back_errors():
    def slow_square(n: int) -> int:
        if n == 3:
            raise ValueError("three")
        time.sleep(0.05 * (5 - n))  # the first items finish last
        return n * n

    out = map_ordered(slow_square, range(5), 5)
    assert out[:3] == [0, 1, 4] and isinstance(out[3], ValueError) and out[4] == 16
    with pytest.raises(ValueError):
        Limiter(0)
