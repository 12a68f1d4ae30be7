"""/v1/ask with `stream`: an LLM answer's tokens go out as the API sends them, then the citation check's
verdict; an answer that fails the check is withdrawn (the page and the CLI drop it) and the extractive
answer follows. Against the loopback fake of the Messages API speaking the streaming wire format."""
from __future__ import annotations

import uuid

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from api import tokens
from api.http.app import create_app
from tests.conftest import parse_sse
from tests.fakes.anthropic_server import FakeAnthropic, Script, text

TENANT = f"stream_{uuid.uuid4().hex[:8]}"
DOC = {"doc_id": "retry.md", "acl": ["staff"],
       "text": "# Retry policy\n\nThe retry limit for error 429 is five attempts with exponential backoff."}
QUESTION = "What is the retry limit for error 429?"


def bearer(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture(scope="module")
def api():
    answers: list[str] = []

    def handler(body: dict) -> Script:
        return text(answers[0] if body.get("stream") else "ok")

    with FakeAnthropic(handler=handler) as fake:
        fake.answers = answers
        yield fake


@pytest.fixture(scope="module")
def streaming(db, settings, local_embedder, api):
    keyed = settings.model_copy(update={"anthropic_api_key": SecretStr("test-key"), "anthropic_base_url": api.url,
                                        "llm_max_retries": 0, "router_llm_classifier": False,
                                        "contextual_retrieval": "title"})
    with TestClient(create_app(keyed, db, embedder=local_embedder)) as client:
        with db.connection() as conn:
            reader = tokens.create_token(conn, TENANT, ["staff"], "reader")[0]
            writer = tokens.create_token(conn, TENANT, ["staff"], "writer")[0]
        r = client.post("/v1/documents:batch", json={"documents": [DOC]}, headers=bearer(writer))
        assert r.status_code == 200 and r.json()["errors"] == 0, r.text
        yield client, reader


def ask(client, token: str) -> list[tuple[str, dict]]:
    r = client.post("/v1/ask", json={"question": QUESTION, "route": "local", "stream": True}, headers=bearer(token))
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    return parse_sse(r.text)


def test_answer_tokens_stream_as_they_arrive_then_the_verdict(streaming, api):
    client, token = streaming
    api.answers[:] = ["The retry limit is five attempts [1]."]
    events = ask(client, token)
    names = [name for name, _ in events]
    tokens_ = [data["text"] for name, data in events if name == "token"]
    assert len(tokens_) > 3  # the fake's text deltas, passed on one by one, not one block at the end
    assert "".join(tokens_).strip() == events[-1][1]["answer"] == api.answers[0]
    assert "withdraw" not in names and names.index("token") < names.index("verdict") < names.index("done")
    verdict = dict(events)["verdict"]
    assert verdict == {"checked": True, "passed": True, "withdrawn": False, "offline": False, "degraded": False}
    assert any(b.get("stream") for b in api.bodies)


def test_an_answer_failing_its_citation_check_is_withdrawn_and_the_extractive_one_follows(streaming, api):
    client, token = streaming
    api.answers[:] = ["The limit is nine [7]."]  # one passage was sent: [7] is invented
    events = ask(client, token)
    names = [name for name, _ in events]
    assert names.index("token") < names.index("withdraw") < names.index("verdict")
    shown = "".join(data["text"] for name, data in events[:names.index("withdraw")] if name == "token")
    after = "".join(data["text"] for name, data in events[names.index("withdraw"):] if name == "token")
    final = events[-1][1]
    assert shown.strip() == api.answers[0] and after == final["answer"] and "[7]" not in final["answer"]
    assert dict(events)["verdict"]["withdrawn"] is True and dict(events)["verdict"]["passed"] is False
    assert "citation check" in dict(events)["withdraw"]["reason"] and final["degraded"] is True


def test_the_cli_prints_tokens_as_they_come_and_says_when_an_answer_is_withdrawn(capsys):
    from api.cli.ask import _stream_answer

    route = {"route": "local", "classifier": "given", "confidence": 1.0, "reason": "asked for"}
    done = {"answer": "Five attempts [1]."}
    events = iter([("route", route), ("token", {"text": "Nine "}), ("token", {"text": "[7]."}),
                   ("withdraw", {"reason": "the LLM answer failed its citation check"}),
                   ("token", {"text": "Five attempts [1]."}), ("verdict", {}), ("done", done)])
    assert _stream_answer(events) == done
    captured = capsys.readouterr()
    assert "Nine [7]." in captured.out and "Five attempts [1]." in captured.out
    assert "withdrawn" in captured.err and "citation check" in captured.err
