"""core.llm.client through the real anthropic SDK against a fake Messages API on loopback."""
from __future__ import annotations

import logging
import socket
import threading
import time

import pytest

from core.llm.client import AnthropicLLM, make_llm
from core.llm.usage import Usage, UsageMeter, model_prices
from core.llm.errors import LLMError
from core.settings import Settings
from tests.fakes.anthropic_server import FakeAnthropic, error, text, tool_use

USER = [{"role": "user", "content": "What is the retry limit?"}]


def make_settings(api: FakeAnthropic | None = None, **overrides) -> Settings:
    # Every value the assertions depend on is explicit, so CROSSROADS_* env vars cannot change them.
    values = dict(
        anthropic_api_key="test-key",
        anthropic_base_url=api.url if api else None,
        llm_model_fast="claude-haiku-4-5",
        llm_model_answer="claude-sonnet-5",
        llm_max_retries=2,
        llm_timeout_s=5.0,
    )
    values.update(overrides)
    return Settings(**values)


# --- pricing and accounting (no server) -----------------------------------------------------

def test_usage_add_and_iadd():
    a = Usage(1, 2, 3, 4, 0.5, 1)
    b = Usage(10, 20, 30, 40, 0.25, 2)
    assert a + b == Usage(11, 22, 33, 44, 0.75, 3)
    assert a == Usage(1, 2, 3, 4, 0.5, 1)  # + leaves its operands alone
    assert a.add(b) is a and a == Usage(11, 22, 33, 44, 0.75, 3)
    assert a.prompt_tokens == 11 + 33 + 44


def test_prices_per_model_and_cache_factors():
    # haiku 4.5: $1 in / $5 out; 1M cache writes = $1.25, 1M cache reads = $0.10
    u = Usage.priced("claude-haiku-4-5", input_tokens=1_000_000, output_tokens=1_000_000,
                     cache_write_tokens=1_000_000, cache_read_tokens=1_000_000)
    assert u.cost_usd == pytest.approx(1 + 5 + 1.25 + 0.10)
    assert Usage.priced("claude-sonnet-5", input_tokens=1_000_000).cost_usd == pytest.approx(2.0)
    assert Usage.priced("claude-opus-5", output_tokens=1_000_000).cost_usd == pytest.approx(25.0)
    assert model_prices("claude-haiku-4-5-20251001") == (1.0, 5.0)  # dated snapshot -> its alias


def test_unknown_model_costs_null_and_warns_once(caplog):
    with caplog.at_level(logging.WARNING, logger="core.llm.pricing"):
        first = Usage.priced("mystery-model-x1", input_tokens=500, output_tokens=50)
        second = Usage.priced("mystery-model-x1", input_tokens=500)
    assert first.cost_usd is None and second.cost_usd is None and first.input_tokens == 500
    assert (first + Usage.priced("claude-haiku-4-5", input_tokens=10)).as_dict()["cost_usd"] is None
    assert sum("no price known for model 'mystery-model-x1'" in r.getMessage() for r in caplog.records) == 1
    # a name that merely starts like a priced one is not priced as it (only a dated snapshot is)
    assert model_prices("claude-haiku-4-5-turbo-x") is None


def test_usage_meter_is_thread_safe():
    meter = UsageMeter()

    def work(model: str) -> None:
        for _ in range(1000):
            meter.record(model, Usage(1, 2, 0, 0, 0.001, 1))

    threads = [threading.Thread(target=work, args=(["m-a", "m-b"][i % 2],)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    total = meter.total
    assert (total.calls, total.input_tokens, total.output_tokens) == (16_000, 16_000, 32_000)
    assert total.cost_usd == pytest.approx(16.0)
    assert {m: u.calls for m, u in meter.by_model.items()} == {"m-a": 8000, "m-b": 8000}


def test_make_llm_without_key_is_offline():
    assert make_llm(make_settings(anthropic_api_key=None)) is None
    assert make_llm(make_settings(anthropic_api_key="")) is None
    assert isinstance(make_llm(make_settings()), AnthropicLLM)


# --- through the SDK --------------------------------------------------------------------------

def test_text_completion_usage_and_cost():
    meter = UsageMeter()
    with FakeAnthropic(text("Four retries.", input_tokens=1200, output_tokens=300)) as api:
        resp = make_llm(make_settings(api), meter).complete(task="fast", system="Be brief.", messages=USER)
    assert resp.text == "Four retries."
    assert resp.tool_input is None and resp.stop_reason == "end_turn" and resp.model == "claude-haiku-4-5"
    assert resp.usage == Usage(1200, 300, 0, 0, resp.usage.cost_usd, 1)
    assert resp.usage.cost_usd == pytest.approx(0.0027)  # 1200 * $1/M + 300 * $5/M
    assert meter.total == resp.usage
    body = api.bodies[0]
    assert body["system"] == "Be brief." and body["messages"] == USER
    assert body["max_tokens"] == 1024 and "temperature" not in body
    assert "tools" not in body and "tool_choice" not in body
    assert api.requests[0].headers["authorization"] == "Bearer test-key"


def test_task_picks_model_from_settings():
    with FakeAnthropic() as api:
        llm = make_llm(make_settings(api, llm_model_answer="claude-opus-5"))
        fast = llm.complete(task="fast", system="s", messages=USER)
        answer = llm.complete(task="answer", system="s", messages=USER, max_tokens=77)
    assert [b["model"] for b in api.bodies] == ["claude-haiku-4-5", "claude-opus-5"]
    assert api.bodies[1]["max_tokens"] == 77
    assert (fast.model, answer.model) == ("claude-haiku-4-5", "claude-opus-5")
    with pytest.raises(ValueError, match="unknown LLM task"):
        llm.complete(task="slow", system="s", messages=USER)


def test_temperature_is_sent_only_when_asked():
    with FakeAnthropic() as api:
        llm = make_llm(make_settings(api))
        llm.complete(task="fast", system="s", messages=USER, temperature=0.0)
        llm.complete(task="answer", system="s", messages=USER)
        with pytest.raises(LLMError) as info:  # Sonnet 5 rejects sampling parameters
            llm.complete(task="answer", system="s", messages=USER, temperature=0.0)
    assert api.bodies[0]["temperature"] == 0.0 and "temperature" not in api.bodies[1]
    assert info.value.status == 400 and not info.value.retryable
    assert "`temperature` is deprecated for this model." in str(info.value)


def test_tool_use_returns_tool_input():
    tools = [{"name": "route", "description": "Pick a route.",
              "input_schema": {"type": "object", "properties": {"route": {"type": "string"}}}}]
    choice = {"type": "tool", "name": "route"}
    with FakeAnthropic(tool_use("route", {"route": "global", "reason": "corpus-wide"})) as api:
        resp = make_llm(make_settings(api)).complete(
            task="fast", system="Classify.", messages=USER, tools=tools, tool_choice=choice)
    assert resp.tool_input == {"route": "global", "reason": "corpus-wide"}
    assert resp.stop_reason == "tool_use" and resp.text == ""
    assert api.bodies[0]["tools"] == tools and api.bodies[0]["tool_choice"] == choice


def test_cached_prefix_is_cached_and_second_call_is_cheaper():
    document = "D" * 40_000  # 10,000 tokens in the fake's estimate (4 chars a token)
    meter = UsageMeter()
    with FakeAnthropic(text("ctx one"), text("ctx two")) as api:
        llm = make_llm(make_settings(api), meter)
        first = llm.complete(task="fast", system="Situate the chunk.", cached_prefix=document,
                             messages=[{"role": "user", "content": "chunk one"}])
        second = llm.complete(task="fast", system="Situate the chunk.", cached_prefix=document,
                              messages=[{"role": "user", "content": "chunk two"}])
    assert api.bodies[0]["system"] == [
        {"type": "text", "text": document, "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "Situate the chunk."},
    ]
    # uncached input: system 18 chars -> 5 tokens + message 9 chars -> 3 tokens; output "ctx one" -> 2
    assert (first.usage.cache_write_tokens, first.usage.cache_read_tokens, first.usage.input_tokens) == (10_000, 0, 8)
    assert (second.usage.cache_write_tokens, second.usage.cache_read_tokens, second.usage.input_tokens) == (0, 10_000, 8)
    assert first.usage.cost_usd == pytest.approx((8 + 2 * 5 + 10_000 * 1.25) / 1e6)  # 0.012518
    assert second.usage.cost_usd == pytest.approx((8 + 2 * 5 + 10_000 * 0.1) / 1e6)  # 0.001018
    assert second.usage.cost_usd < first.usage.cost_usd / 10
    assert meter.total.cache_write_tokens == 10_000 and meter.total.cache_read_tokens == 10_000


def test_429_then_success_is_retried_once():
    with FakeAnthropic(error(429), text("ok")) as api:
        resp = make_llm(make_settings(api)).complete(task="fast", system="s", messages=USER)
    assert resp.text == "ok" and api.calls == 2
    assert [r.headers["x-stainless-retry-count"] for r in api.requests] == ["0", "1"]  # the SDK retried


def test_retry_after_header_is_honoured():
    with FakeAnthropic(error(429, retry_after="0.4"), text("ok")) as api:
        start = time.monotonic()
        make_llm(make_settings(api)).complete(task="fast", system="s", messages=USER)
        elapsed = time.monotonic() - start
    assert api.calls == 2 and elapsed >= 0.4


def test_529_overloaded_then_success():
    with FakeAnthropic(error(529), text("ok")) as api:
        resp = make_llm(make_settings(api)).complete(task="answer", system="s", messages=USER)
    assert resp.text == "ok" and api.calls == 2


def test_500_exhausted_raises_llm_error():
    meter = UsageMeter()
    with FakeAnthropic(*[error(500, "boom", retry_after="0.01")] * 3) as api:
        with pytest.raises(LLMError) as info:
            make_llm(make_settings(api), meter).complete(task="fast", system="s", messages=USER)
    err = info.value
    assert err.status == 500 and err.retryable
    assert "Anthropic API error 500 after 2 retries; try again later" in str(err) and "boom" in str(err)
    assert api.calls == 1 + 2
    assert meter.total.calls == 0  # failed calls are not billed


def test_429_exhausted_says_what_to_do():
    with FakeAnthropic(*[error(429)] * 3) as api:
        with pytest.raises(LLMError) as info:
            make_llm(make_settings(api)).complete(task="fast", system="s", messages=USER)
    assert info.value.status == 429 and info.value.retryable
    assert "rate limit still exceeded after 2 retries; lower concurrency or raise limits" in str(info.value)
    assert api.calls == 3


def test_401_is_not_retried():
    with FakeAnthropic(api_key="the-right-key") as api:
        with pytest.raises(LLMError) as info:
            make_llm(make_settings(api, anthropic_api_key="a-wrong-key")).complete(
                task="fast", system="s", messages=USER)
    assert info.value.status == 401 and not info.value.retryable
    assert str(info.value).startswith("authentication failed: check ANTHROPIC_API_KEY")
    assert api.calls == 1


def test_400_is_not_retried():
    with FakeAnthropic(error(400, "prompt is too long: 250000 tokens > 200000 maximum")) as api:
        with pytest.raises(LLMError) as info:
            make_llm(make_settings(api)).complete(task="fast", system="s", messages=USER)
    assert info.value.status == 400 and not info.value.retryable
    assert "prompt is too long" in str(info.value) and api.calls == 1


def test_timeout_becomes_llm_error():
    with FakeAnthropic(text("late", delay_s=1.0)) as api:
        with pytest.raises(LLMError) as info:
            make_llm(make_settings(api, llm_timeout_s=0.2, llm_max_retries=0)).complete(
                task="fast", system="s", messages=USER)
    assert info.value.status is None and info.value.retryable
    assert "timed out" in str(info.value) and "CROSSROADS_LLM_TIMEOUT_S" in str(info.value)


def test_unreachable_server_becomes_llm_error():
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings = make_settings(anthropic_base_url=f"http://127.0.0.1:{port}", llm_max_retries=0)
    with pytest.raises(LLMError) as info:
        make_llm(settings).complete(task="fast", system="s", messages=USER)
    assert info.value.status is None and info.value.retryable
    assert "cannot reach the Anthropic API" in str(info.value)


def test_meter_sums_calls_across_threads():
    meter = UsageMeter()
    with FakeAnthropic(handler=lambda body: text("x", input_tokens=100, output_tokens=10)) as api:
        llm = make_llm(make_settings(api), meter)
        errors: list[BaseException] = []

        def work() -> None:
            try:
                for _ in range(5):
                    llm.complete(task="fast", system="s", messages=USER)
            except BaseException as exc:  # surfaced below
                errors.append(exc)

        threads = [threading.Thread(target=work) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors and api.calls == 40
    total = meter.total
    assert (total.calls, total.input_tokens, total.output_tokens) == (40, 4000, 400)
    assert total.cost_usd == pytest.approx(40 * (100 * 1 + 10 * 5) / 1e6)
    assert list(meter.by_model) == ["claude-haiku-4-5"]
