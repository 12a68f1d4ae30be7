"""Honest estimates: token ratios measured from the API's `usage` (graph.indexing.calibration) replace the
defaults once enough calls back them, every figure comes with its range, and a thinking budget is sent
only to a model that thinks, as it takes it, and counted as output."""
from __future__ import annotations

import pytest

from core.llm.client import AnthropicLLM, llm_stage
from core.llm.usage import Usage
from core.llm.errors import LLMError
from core.llm.stats import CallStats, language_of
from core.settings import Settings
from graph.indexing.calibration import MIN_CALLS, Calibration, save_call_stats
from graph.indexing.estimate import DEFAULT_BAND, estimate_reports
from tests.fakes.anthropic_server import FakeAnthropic, text

MODEL = "claude-sonnet-5"


def measured(model: str, stage: str, calls: list[tuple[str, int, int]], thinking: int = 0) -> Calibration:
    """A calibration from calls (prompt, prompt tokens, output tokens), as a build would record them."""
    stats = CallStats()
    for prompt, tokens, out in calls:
        stats.add(model, stage, request(prompt), thinking, Usage(input_tokens=tokens, output_tokens=out, calls=1))
    return Calibration(stats.take())


def request(message: str, system: str = "") -> dict:
    return {"model": MODEL, "system": system, "messages": [{"role": "user", "content": message}]}


def test_calls_are_summed_by_stage_and_language_of_their_input():
    stats = CallStats()
    stats.add(MODEL, "extraction", request("Alpha met Bravo in Paris."), 0, Usage(input_tokens=5, output_tokens=40))
    stats.add(MODEL, "extraction", request("Альфа встретил Браво в Париже.", system="Extract."), 0,
              Usage(input_tokens=10, output_tokens=50))
    stats.add(MODEL, "extraction", request("no usage, nothing learnt"), 0, Usage())
    sums = stats.take()
    assert sorted(sums) == [(MODEL, "extraction", "english", 0), (MODEL, "extraction", "russian", 0)]
    russian = sums[(MODEL, "extraction", "russian", 0)]
    assert (russian.input_chars, russian.message_chars, russian.input_tokens) == (39, 30, 10)
    assert stats.take() == {}  # each measurement is saved once
    assert language_of("Chunk title. Текст документа целиком по-русски, длиннее заголовка.") == "russian"


def test_measured_report_calls_replace_the_bound_and_narrow_the_range():
    default = estimate_reports(10, MODEL)
    assert default["measured_calls"] == {}
    assert default["input_tokens_range"] == [int(89_000 * f) for f in DEFAULT_BAND]
    # prompts of 2,000 tokens or 2,400 (mean 2,200, spread ~9%), replies of 700 or 900 tokens
    calls = [("x" * 8000, 2000 + 400 * (i % 2), 700 + 200 * (i % 2)) for i in range(MIN_CALLS)]
    calibrated = estimate_reports(10, MODEL, calibration=measured(MODEL, "reports", calls))
    assert calibrated["measured_calls"] == {"input": MIN_CALLS, "output": MIN_CALLS}
    assert (calibrated["input_tokens"], calibrated["output_tokens"]) == (22_000, 8_000)
    low, high = calibrated["input_tokens_range"]
    assert 19_000 < low < 22_000 < high < 25_000
    assert calibrated["cost_usd_range"][0] < calibrated["cost_usd"] < calibrated["cost_usd_range"][1]
    assert calibrated["cost_usd_range"][1] < default["cost_usd_range"][1]
    # too few calls say too little; another model's or stage's calls say nothing of this one
    assert estimate_reports(10, MODEL, calibration=measured(MODEL, "reports", calls[:-1]))["measured_calls"] == {}
    assert estimate_reports(10, MODEL, calibration=measured(MODEL, "summaries", calls))["measured_calls"] == {}


def test_measured_output_includes_the_thinking_it_was_measured_with():
    calls = [("x" * 400, 100, 3000)] * MIN_CALLS
    with_budget = measured(MODEL, "reports", calls, thinking=2048)
    same = estimate_reports(10, MODEL, thinking=2048, calibration=with_budget)
    assert (same["output_tokens"], same["thinking_tokens"]) == (30_000, 0)  # billed as output: already in it
    other = estimate_reports(10, MODEL, thinking=4096, calibration=with_budget)  # a new budget: not measured yet
    assert other["measured_calls"] == {"input": MIN_CALLS} and other["thinking_tokens"] == 40_960


def llm(**settings) -> AnthropicLLM:
    return AnthropicLLM(Settings(**{"anthropic_api_key": "test-key", "llm_model_fast": "claude-haiku-4-5",
                                    "llm_model_answer": MODEL, **settings}))


def test_a_thinking_budget_per_task_is_sent_as_each_model_takes_it():
    client = llm(llm_thinking={"extraction": 2048, "reports": 4096, "answer": 1024})
    ask = {"system": "s", "messages": [{"role": "user", "content": "q"}], "max_tokens": 500,
           "tools": [{"name": "t", "input_schema": {"type": "object"}}], "tool_choice": {"type": "tool", "name": "t"}}
    with llm_stage("extraction"):
        fast = client.request(task="fast", **ask)
    assert fast["thinking"] == {"type": "enabled", "budget_tokens": 2048} and fast["max_tokens"] == 2548
    assert fast["tool_choice"] == {"type": "auto"}  # thinking rejects a forced tool
    with llm_stage("reports"):
        report = client.request(task="answer", **ask)
    assert report["thinking"] == {"type": "adaptive"} and report["max_tokens"] == 4596  # no budget_tokens: a 400
    assert client.request(task="answer", **ask)["thinking"] == {"type": "adaptive"}  # an answer outside any stage
    with llm_stage("summaries"):
        assert "thinking" not in client.request(task="fast", **ask)  # no budget for this task
    assert "thinking" not in client.request(task="fast", **ask)  # classifier, planner, ...: never
    unknown = llm(llm_thinking={"answer": 2048}, llm_model_answer="mystery-model")
    assert "thinking" not in unknown.request(task="answer", **ask)  # not known to think: not sent, not counted
    assert unknown.thinking_budget("answer", "mystery-model") == 0
    with pytest.raises(ValueError, match="at least 1024"):
        Settings(llm_thinking={"reports": 500})
    with pytest.raises(ValueError):
        Settings(llm_thinking={"report": 2048})


def test_measurements_are_kept_per_tenant_and_read_back(db, tenant):
    class Part:
        llm = llm()

    for _ in range(2):  # two builds' worth: the sums add up
        for i in range(MIN_CALLS // 2):
            Part.llm.stats.add(MODEL, "reports", request("y" * 2000, system="z" * 999), 0,
                               Usage(input_tokens=1000, output_tokens=500 + i))
        save_call_stats(db, tenant, Part)
    save_call_stats(db, tenant, object())  # an offline part measures nothing
    with db.connection() as conn:
        mine, other = Calibration.load(conn, tenant), Calibration.load(conn, tenant + "_other")
    cpt = mine.chars_per_token(MODEL, "reports")
    assert (cpt.calls, cpt.value, cpt.spread) == (MIN_CALLS, 3.0, 0.0)
    assert mine.output_per_call(MODEL, "reports", 0).value == pytest.approx(504.5)
    assert mine.instructions_chars(MODEL, "reports") == 1000  # the system prompt and the newline after it
    assert other.chars_per_token(MODEL, "reports") is None


def test_the_api_takes_each_model_thinking_as_sent():
    with FakeAnthropic(handler=lambda body: text("ok", output_tokens=1500)) as api:
        client = llm(anthropic_base_url=api.url, llm_max_retries=0, llm_thinking={"summaries": 1024, "answer": 2048})
        with llm_stage("summaries"):
            fast = client.complete(task="fast", system="s", messages=[{"role": "user", "content": "q"}], max_tokens=100)
        answer = client.complete(task="answer", system="s", messages=[{"role": "user", "content": "q"}], max_tokens=100)
        # what the fake refuses, as the API does: a budget on a model that thinks adaptively
        with pytest.raises(LLMError, match="thinking.type.enabled"):
            client._send(lambda headers: client.client.messages.create(
                model=MODEL, max_tokens=3000, messages=[{"role": "user", "content": "q"}],
                thinking={"type": "enabled", "budget_tokens": 2048}), MODEL)
    sent = api.bodies
    assert sent[0]["thinking"] == {"type": "enabled", "budget_tokens": 1024} and sent[0]["max_tokens"] == 1124
    assert sent[1]["thinking"] == {"type": "adaptive"} and sent[1]["max_tokens"] == 2148
    assert fast.usage.output_tokens == answer.usage.output_tokens == 1500  # thinking is billed as output
    # measured: a step's calls (a stage set), not a question's answer
    assert [(stage, thinking) for _, stage, _, thinking in client.stats.take()] == [("summaries", 1024)]
