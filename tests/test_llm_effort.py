"""Effort per task (CROSSROADS_LLM_EFFORT): `output_config.effort`, sent only to the models that take that level,
as the real API checks it (the fake answers 400 otherwise)."""
from __future__ import annotations

import pytest

from core.llm.client import AnthropicLLM, llm_stage
from core.llm.errors import LLMError
from core.llm.pricing import effort_for
from core.settings import Settings
from tests.fakes.anthropic_server import FakeAnthropic

ASK = {"system": "s", "messages": [{"role": "user", "content": "q"}], "max_tokens": 100}


def llm(**settings) -> AnthropicLLM:
    return AnthropicLLM(Settings(**{"anthropic_api_key": "test-key", "llm_model_fast": "claude-haiku-4-5",
                                    "llm_model_answer": "claude-sonnet-5", **settings}))


def test_effort_is_sent_per_task_only_to_models_that_take_that_level():
    client = llm(llm_effort={"reports": "low", "extraction": "low", "answer": "xhigh"})
    with llm_stage("reports"):
        assert client.request(task="answer", **ASK)["output_config"] == {"effort": "low"}
    assert client.request(task="answer", **ASK)["output_config"] == {"effort": "xhigh"}  # an answer
    with llm_stage("extraction"):
        assert "output_config" not in client.request(task="fast", **ASK)  # Haiku 4.5 takes no effort
    with llm_stage("summaries"):
        assert "output_config" not in client.request(task="answer", **ASK)  # none set for this task
    assert effort_for("claude-opus-4-5", "xhigh") is None and effort_for("claude-opus-4-5-20251101", "low") == "low"
    assert effort_for("claude-sonnet-4-6", "max") == "max" and effort_for("mystery-model", "low") is None
    with pytest.raises(ValueError):
        Settings(llm_effort={"reports": "extreme"})
    with pytest.raises(ValueError):
        Settings(llm_effort={"report": "low"})


def test_the_api_takes_the_effort_sent_and_refuses_it_where_the_model_has_none():
    with FakeAnthropic() as api:
        client = llm(anthropic_base_url=api.url, llm_max_retries=0,
                     llm_effort={"answer": "medium", "summaries": "high"})
        assert client.complete(task="answer", **ASK).text == "ok"
        with llm_stage("summaries"):
            assert client.complete(task="fast", **ASK).text == "ok"  # Haiku: not sent, so not refused
        # what the fake refuses, as the API does: an effort for a model that takes none, a level it lacks
        for model, level in (("claude-haiku-4-5", "low"), ("claude-sonnet-4-6", "xhigh")):
            with pytest.raises(LLMError, match="effort") as refused:
                client._send(lambda headers: client.client.messages.create(
                    model=model, max_tokens=100, messages=ASK["messages"], output_config={"effort": level}), model)
            assert refused.value.status == 400
    sent = api.bodies
    assert sent[0]["output_config"] == {"effort": "medium"} and "output_config" not in sent[1]
