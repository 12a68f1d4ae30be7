"""POST /v1/chat/completions with the real `openai` SDK (its HTTP client is the in-process app's), and
/v1/ask's `history`: a follow-up rewritten before routing (a loopback fake of the Anthropic API
writes the rewrite), bounded and validated, never widening what the token may read."""
from __future__ import annotations

import json
import uuid

import openai
import pytest
from fastapi.testclient import TestClient

from api.http.app import create_app
from core.llm.client import make_llm
from core.settings import Settings
from router.service import QuestionRouter
from tests.conftest import RETRY_AND_SALARY, bearer, reader_and_writer
from tests.fakes.anthropic_server import FakeAnthropic, text, tool_use
from vector.prompts import REWRITE_TOOL

TENANT = f"chat_{uuid.uuid4().hex[:8]}"
PROBLEM = "application/problem+json"
QUESTION = "What is the retry limit for error 429?"
DOCS = RETRY_AND_SALARY  # the salary document is for hr only: staff must never see it



@pytest.fixture(scope="module")
def tok(db, client):
    return reader_and_writer(db, client, TENANT, DOCS)


def sdk(client: TestClient, token: str) -> openai.OpenAI:
    """The real SDK, sending through the in-process app (TestClient is an httpx.Client)."""
    return openai.OpenAI(api_key=token, base_url=f"{client.base_url}/v1", http_client=client, max_retries=0)


def test_the_sdk_gets_the_answer_its_citations_and_the_model_echoed(client, tok):
    chat = sdk(client, tok["staff"])
    reply = chat.chat.completions.create(model="my-front-end-model", temperature=0.2, max_tokens=300, top_p=1,
                                         user="u-1", messages=[{"role": "system", "content": "Be brief."},
                                                               {"role": "user", "content": QUESTION}])
    assert reply.object == "chat.completion" and reply.model == "my-front-end-model" and reply.id.startswith("chatcmpl-")
    [choice] = reply.choices
    assert choice.message.role == "assistant" and "five" in choice.message.content and choice.finish_reason == "stop"
    citations = reply.model_extra["citations"]
    assert {c["doc_id"] for c in citations} == {"retry.md"}
    assert reply.model_extra["crossroads"]["route"] in ("local", "global", "multihop")
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens


def test_streaming_sends_openai_chunks_then_done(client, tok):
    chat = sdk(client, tok["staff"])
    whole = chat.chat.completions.create(model="m", messages=[{"role": "user", "content": QUESTION}])
    chunks = list(chat.chat.completions.create(model="m", stream=True, stream_options={"include_usage": True},
                                               messages=[{"role": "user", "content": QUESTION}]))
    assert chunks[0].choices[0].delta.role == "assistant"
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert streamed == whole.choices[0].message.content
    final = [c for c in chunks if c.choices and c.choices[0].finish_reason][-1]
    assert final.choices[0].finish_reason == "stop" and {c["doc_id"] for c in final.model_extra["citations"]} == {"retry.md"}
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    r = client.post("/v1/chat/completions", json={"model": "m", "stream": True,
                                                  "messages": [{"role": "user", "content": QUESTION}]},
                    headers=bearer(tok["staff"]))
    assert r.headers["content-type"].startswith("text/event-stream")
    frames = [f for f in r.text.split("\n\n") if f]
    assert all(f.startswith("data: ") for f in frames) and frames[-1] == "data: [DONE]"
    assert all(json.loads(f[6:])["object"] == "chat.completion.chunk" for f in frames[:-1])


def test_a_reader_without_the_group_gets_nothing_of_the_document(client, tok):
    chat = sdk(client, tok["staff"])
    history = [{"role": "user", "content": "Tell me about Project Sandpiper."},
               {"role": "assistant", "content": "I know nothing of it."}]
    for stream in (False, True):
        reply = chat.chat.completions.create(model="m", stream=stream, messages=[
            *history, {"role": "user", "content": "When is the retry bonus of Project Sandpiper paid?"}])
        dumped = json.dumps([c.model_dump() for c in reply] if stream else reply.model_dump())
        assert "hr.md" not in dumped and "March" not in dumped and "Sandpiper is paid" not in dumped
    reply = sdk(client, tok["writer"]).chat.completions.create(model="m", messages=[
        {"role": "user", "content": "When is the retry bonus of Project Sandpiper paid?"}])
    assert "hr.md" in {c["doc_id"] for c in reply.model_extra["citations"]}  # the control: hr may read it


@pytest.mark.parametrize("body,field", [
    ({"n": 2}, "n"), ({"logprobs": True}, "logprobs"), ({"response_format": {"type": "json_object"}}, "response_format"),
    ({"tools": [{"type": "function", "function": {"name": "f"}}]}, "tools"), ({"frobnicate": 1}, "frobnicate"),
    ({"messages": [{"role": "assistant", "content": "hi"}]}, "messages.0.role"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}, "messages.0.content"),
    ({"messages": [{"role": "tool", "content": "x", "tool_call_id": "1"}]}, "messages.0.role"),
    ({"messages": []}, "messages"), ({"messages": [{"role": "user", "content": "x" * 5000}]}, "messages.0.content"),
    ({"messages": [{"role": "user", "content": "q"}] * 120}, "messages"),
    ({"messages": [{"role": "user", "content": "y" * 19_000}] * 6 + [{"role": "user", "content": "q"}]}, "messages"),
    ({"model": ""}, "model"),
])
def test_what_cannot_be_honoured_is_422_naming_the_field(client, tok, body, field):
    payload = {"model": "m", "messages": [{"role": "user", "content": QUESTION}], **body}
    r = client.post("/v1/chat/completions", json=payload, headers=bearer(tok["staff"]))
    assert r.status_code == 422 and r.headers["content-type"] == "application/json", r.text
    error = r.json()["error"]  # OpenAI's error body: what the clients of this endpoint parse
    assert error["type"] == "invalid_request_error" and error["code"] == "validation", error
    assert error["param"] == field or error["param"].startswith(field + "."), error
    assert field in error["message"], error


def test_the_sdk_raises_its_own_errors_with_the_reason(client, tok):
    with pytest.raises(openai.UnprocessableEntityError) as refused:
        sdk(client, tok["staff"]).chat.completions.create(model="m", n=2, messages=[{"role": "user", "content": "q"}])
    assert refused.value.status_code == 422 and refused.value.param == "n" and refused.value.code == "validation"
    assert refused.value.body["message"].startswith("n: ") and "n: " in refused.value.message
    with pytest.raises(openai.AuthenticationError) as unauthorized:
        sdk(client, "not-a-token").chat.completions.create(model="m", messages=[{"role": "user", "content": "q"}])
    assert unauthorized.value.body["type"] == "authentication_error" and unauthorized.value.code == "unauthorized"
    assert "token" in unauthorized.value.body["message"]
    assert unauthorized.value.response.headers["WWW-Authenticate"].startswith("Bearer")
    # the other endpoints keep problem details
    assert client.get("/v1/models").headers["content-type"].startswith(PROBLEM)


def test_a_bug_is_a_500_in_openai_format_without_internals(db, settings, local_embedder, tok):
    from tests.test_api_ask import BrokenRouter

    with TestClient(create_app(settings, db, embedder=local_embedder, router=BrokenRouter()),
                    raise_server_exceptions=False) as broken:
        with pytest.raises(openai.InternalServerError) as failed:
            sdk(broken, tok["staff"]).chat.completions.create(model="m", messages=[{"role": "user", "content": "q?"}])
    assert failed.value.body["type"] == "server_error" and "incident" in failed.value.body["message"]
    assert "secret" not in str(failed.value.body) and "Traceback" not in str(failed.value.body)


def test_bad_unicode_is_4xx(client, tok):
    h = {**bearer(tok["staff"]), "Content-Type": "application/json"}
    for raw in (b'{"model": "m", "messages": [{"role": "user", "content": "\\ud800 x"}]}',
                b'{"model": "m", "messages": [{"role": "user", "content": "a\\u0000b"}]}',
                b'{"model": "m", "messages": [{"role": "user", "content": "\xff\xfe"}]}'):
        r = client.post("/v1/chat/completions", content=raw, headers=h)
        assert r.status_code in (400, 422) and r.json()["error"]["message"], r.text
    r = client.post("/v1/ask", content=b'{"question": "q?", "history": [{"role": "user", "content": "\\udfff"}]}',
                    headers=h)
    assert r.status_code == 422, r.text



def test_a_body_over_the_limit_is_413_in_openai_form_there_and_a_problem_elsewhere(client, tok, settings):
    h = {**bearer(tok["staff"]), "Content-Type": "application/json"}
    huge = b'{"model": "m", "messages": [{"role": "user", "content": "' + b"x" * settings.api_max_body_bytes + b'"}]}'
    r = client.post("/v1/chat/completions", content=huge, headers=h)
    assert r.status_code == 413 and "CROSSROADS_API_MAX_BODY_BYTES" in r.json()["error"]["message"], r.text[:300]
    assert r.json()["error"]["code"] == "body-too-large"
    r = client.post("/v1/ask", content=huge, headers=h)
    assert r.status_code == 413 and r.headers["content-type"].startswith(PROBLEM), r.text[:300]

# --- /v1/ask's history ----------------------------------------------------------------------------------


@pytest.mark.parametrize("history,field", [
    ([{"role": "system", "content": "obey"}], "history.0.role"), ([{"role": "user"}], "history.0.content"),
    ([{"role": "user", "content": "x" * 20_001}], "history.0.content"),
    ([{"role": "user", "content": "hi"}] * 51, "history"),
    ([{"role": "user", "content": "x" * 19_000}] * 6, "history"),
    ([{"role": "user", "content": "hi", "groups": ["hr"]}], "history.0.groups"), ("hi", "history"),
])
def test_ask_history_is_bounded_and_validated(client, tok, history, field):
    r = client.post("/v1/ask", json={"question": QUESTION, "history": history}, headers=bearer(tok["staff"]))
    assert r.status_code == 422 and r.headers["content-type"].startswith(PROBLEM), r.text
    assert field in [e["field"] for e in r.json()["errors"]], r.json()


def test_offline_history_is_said_unused(client, tok):
    r = client.post("/v1/ask", json={"question": QUESTION, "route": "local",
                                     "history": [{"role": "user", "content": "Hello"}]}, headers=bearer(tok["staff"]))
    assert r.status_code == 200, r.text
    conversation = r.json()["conversation"]
    assert conversation["turns"] == 1 and conversation["rewritten"] is False and "no LLM" in conversation["reason"]


@pytest.fixture(scope="module")
def rewriting(db, settings, local_embedder, tok):
    """The app with an LLM (the loopback fake): the rewrite turns any follow-up into `standalone[0]`."""
    standalone = [QUESTION]

    def handler(body):
        if body.get("tool_choice", {}).get("name") == REWRITE_TOOL:
            return tool_use(REWRITE_TOOL, {"question": standalone[0]})
        return text("I cannot say.")  # the answer: uncited, so the router answers extractively

    with FakeAnthropic(handler=handler) as api:
        llm = make_llm(Settings(anthropic_api_key="test-key", anthropic_base_url=api.url,
                                llm_model_fast="claude-haiku-4-5", llm_model_answer="claude-sonnet-5"))
        with QuestionRouter(db, settings, embedder=local_embedder, llm=llm) as router:
            with TestClient(create_app(settings, db, embedder=local_embedder, router=router),
                            raise_server_exceptions=False) as app:
                yield app, api, standalone


def test_a_follow_up_is_rewritten_before_routing(rewriting, tok):
    app, api, standalone = rewriting
    history = [{"role": "user", "content": "How do retries work for error 429?"},
               {"role": "assistant", "content": "They back off exponentially."}]
    r = app.post("/v1/ask", json={"question": "and what is its limit?", "route": "local", "history": history},
                 headers=bearer(tok["staff"]))
    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer["conversation"] == {"asked": "and what is its limit?", "question": QUESTION, "turns": 2,
                                      "rewritten": True, "reason": None}
    assert answer["question"] == QUESTION and {c["doc_id"] for c in answer["citations"]} == {"retry.md"}
    assert answer["usage"]["llm_calls"] >= 1
    rewrite = next(b for b in api.bodies if b.get("tool_choice", {}).get("name") == REWRITE_TOOL)
    assert "back off exponentially" in rewrite["messages"][0]["content"]
    chat = sdk(app, tok["staff"]).chat.completions.create(model="m", extra_body={"route": "local"}, messages=[
        *history, {"role": "user", "content": "and what is its limit?"}])
    assert chat.model_extra["crossroads"]["conversation"]["rewritten"] is True
    assert {c["doc_id"] for c in chat.model_extra["citations"]} == {"retry.md"}


def test_a_rewrite_never_widens_what_the_token_reads(rewriting, tok):
    app, _, standalone = rewriting
    standalone[0] = "When is the retry bonus of Project Sandpiper paid?"
    try:
        for stream in (False, True):
            r = app.post("/v1/ask", json={"question": "and the bonus?", "route": "local", "stream": stream,
                                          "history": [{"role": "user", "content": "Project Sandpiper"}]},
                         headers=bearer(tok["staff"]))
            assert r.status_code == 200 and "hr.md" not in r.text and "March" not in r.text, r.text
            assert "Project Sandpiper" in r.text  # the rewritten question was the one asked
    finally:
        standalone[0] = QUESTION


def test_openapi_has_the_chat_endpoint_and_history(client):
    spec = client.get("/openapi.json").json()
    post = spec["paths"]["/v1/chat/completions"]["post"]
    assert "text/event-stream" in post["responses"]["200"]["content"]
    schemas = spec["components"]["schemas"]
    assert schemas["ChatRequest"]["additionalProperties"] is False and "messages" in schemas["ChatRequest"]["required"]
    assert "history" in schemas["AskRequest"]["properties"] and schemas["Turn"]["additionalProperties"] is False


def test_a_streamed_answer_that_fails_its_check_is_withdrawn_visibly(rewriting, tok):
    """The model's streamed text cites nothing, so the router replaces it; OpenAI chunks cannot take text
    back, so a notice says so before the answer that stands, and the last chunk flags it."""
    from api.http.routes_chat import WITHDRAWN_NOTICE

    app, _, _ = rewriting
    chunks = list(sdk(app, tok["staff"]).chat.completions.create(
        model="m", stream=True, extra_body={"route": "local"}, messages=[{"role": "user", "content": QUESTION}]))
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    final = chunks[-1]
    assert final.model_extra["crossroads"]["withdrawn"] is True and final.model_extra["crossroads"]["degraded"]
    shown, _, stands = streamed.partition(WITHDRAWN_NOTICE)
    assert shown == "I cannot say." and "five" in stands
    assert {c["doc_id"] for c in final.model_extra["citations"]} == {"retry.md"}


def test_front_ends_find_a_model_to_offer(client, tok):
    assert [m.id for m in sdk(client, tok["staff"]).models.list()] == ["crossroads"]
    assert client.get("/v1/models").status_code == 401
