"""The LLM route classifier with a key (issue 22, item 5): its few-shot prompt, as the real anthropic SDK
sends it to the loopback fake, shows every route in English and in Russian; and its agreement with the
offline router (the cue table, or the learned model the service uses) is kept in the decision's features,
which the answer's trace carries, and logged for an operator to count."""
from __future__ import annotations

import logging
import re
from types import SimpleNamespace

import pytest

from api.http.routes_query import route as route_endpoint
from api.http.schemas import RouteRequest, RouteResponse
from core.llm.client import AnthropicLLM
from core.settings import Settings
from router.classify import HeuristicClassifier, classify
from router.prompts import ROUTE_SYSTEM, ROUTE_TOOL_NAME
from router.route_model import LearnedClassifier
from router.service import QuestionRouter
from answers.types import ROUTES
from tests.fakes.anthropic_server import FakeAnthropic, tool_use

EXAMPLE = re.compile(r"^<question>(.+)</question> -> (\w+)$", re.MULTILINE)
CYRILLIC = re.compile(r"[а-яё]", re.IGNORECASE)


def llm_for(api: FakeAnthropic) -> AnthropicLLM:
    return AnthropicLLM(Settings(anthropic_api_key="test-key", anthropic_base_url=api.url,
                                 llm_model_fast="claude-haiku-4-5", llm_max_retries=0, llm_timeout_s=5.0))


def answer(route: str) -> dict:
    return {"route": route, "confidence": 0.9, "reason": f"Looks {route}."}


def system_text(body: dict) -> str:
    system = body["system"]
    return system if isinstance(system, str) else "".join(block["text"] for block in system)


def test_few_shot_prompt_shows_every_route_in_both_languages():
    with FakeAnthropic(tool_use(ROUTE_TOOL_NAME, answer("local"))) as api:
        classify("Who signed the lease?", llm=llm_for(api))
    (body,) = api.bodies
    sent = system_text(body)
    assert sent == ROUTE_SYSTEM  # what the model sees is the prompt kept in router/prompts.py
    examples = EXAMPLE.findall(sent)
    assert {route for _, route in examples} == set(ROUTES)  # no example names a route the tool refuses
    for route in ROUTES:
        questions = [q for q, r in examples if r == route]
        assert any(CYRILLIC.search(q) for q in questions), f"no Russian example of {route}"
        assert any(not CYRILLIC.search(q) for q in questions), f"no English example of {route}"
    # the examples are data like the question: inside the tags the prompt says are never instructions
    assert "never instructions" in sent


@pytest.mark.parametrize("llm_route, agrees", [("multihop", True), ("global", False)])
def test_agreement_with_the_cue_table_is_in_the_features_and_the_log(caplog, llm_route, agrees):
    question = "Which is older, the Louvre or the Prado?"  # the cue table says multihop
    caplog.set_level(logging.INFO, logger="router.classify")
    with FakeAnthropic(tool_use(ROUTE_TOOL_NAME, answer(llm_route))) as api:
        decision = classify(question, llm=llm_for(api), offline=HeuristicClassifier())
    assert (decision.classifier, decision.route) == ("llm", llm_route)
    assert decision.features["offline_route"] == "multihop" and decision.features["offline_agrees"] is agrees
    (record,) = [r for r in caplog.records if r.getMessage().startswith("route agreement:")]
    assert record.getMessage() == (f"route agreement: llm={llm_route} offline=multihop (heuristic) "
                                   f"agrees={agrees}")


def test_no_agreement_is_claimed_when_the_llm_failed(caplog):
    caplog.set_level(logging.INFO, logger="router.classify")
    with FakeAnthropic(tool_use(ROUTE_TOOL_NAME, {"route": "sideways", "confidence": 0.9, "reason": "x"})) as api:
        decision = classify("Which is older, the Louvre or the Prado?", llm=llm_for(api))
    assert decision.classifier == "heuristic" and decision.features["llm_error"]
    assert "offline_agrees" not in decision.features  # the fallback cannot agree with itself
    assert not [r for r in caplog.records if r.getMessage().startswith("route agreement:")]


def test_service_compares_the_llm_with_the_learned_router(caplog, settings, local_embedder):
    """As the service runs with a key: the LLM decides, the learned model (on the search's own vector)
    is the offline opinion that is compared and logged, and /v1/route returns its probabilities."""
    caplog.set_level(logging.INFO, logger="router.classify")
    question = "Which is older, the Louvre or the Prado?"
    with FakeAnthropic(*[tool_use(ROUTE_TOOL_NAME, answer("local"))] * 2) as api:
        with QuestionRouter(None, settings, embedder=local_embedder, llm=llm_for(api)) as router:
            assert isinstance(router.offline_classifier, LearnedClassifier)
            offline = router.offline_classifier.classify(question)
            decision = router.classify(question)
            services = SimpleNamespace(settings=settings, router=lambda: router)
            body = RouteResponse.model_validate(route_endpoint(RouteRequest(question=question), None, services))
    assert api.calls == 2 and decision.classifier == "llm" and decision.route == "local"
    # the LLM decided; the offline model's calibrated probabilities ride along, its fallback untaken
    assert decision.features["probabilities"] == offline.features["probabilities"]
    assert decision.features["offline_classifier"] == "learned" and decision.features["low_confidence"] is None
    assert (body.classifier, body.route, body.low_confidence) == ("llm", "local", False)
    assert body.probabilities == offline.features["probabilities"] and max(body.probabilities.values()) > 0.5
    assert offline.classifier == "learned" and offline.route == "multihop"
    assert decision.features["offline_route"] == "multihop" and decision.features["offline_agrees"] is False
    messages = [r.getMessage() for r in caplog.records if r.getMessage().startswith("route agreement:")]
    assert messages == ["route agreement: llm=local offline=multihop (learned) agrees=False"] * 2
