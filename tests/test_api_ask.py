"""/v1/ask and /v1/route over the real router (offline: no LLM key), streaming, and the catch-all 500."""
from __future__ import annotations

import uuid

import pytest
from fastapi.testclient import TestClient

from api.http.app import create_app
from tests.conftest import RETRY_AND_SALARY, bearer, parse_sse, reader_and_writer

TENANT = f"ask_{uuid.uuid4().hex[:8]}"
PROBLEM = "application/problem+json"
DOCS = RETRY_AND_SALARY  # the salary document is for hr only: staff must never see it



@pytest.fixture(scope="module")
def tok(db, client):
    return reader_and_writer(db, client, TENANT, DOCS)


def test_route_contract(client, tok):
    r = client.post("/v1/route", json={"question": "What are the main themes across all incident reviews?"},
                    headers=bearer(tok["staff"]))
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) >= {"route", "confidence", "reason"} and body["route"] in ("local", "global", "multihop")
    assert 0 <= body["confidence"] <= 1 and body["reason"]
    # offline the learned router decides: its calibrated probabilities let an app offer the other routes
    assert body["classifier"] == "learned" and body["route"] == "global" and body["low_confidence"] is False
    assert set(body["probabilities"]) == {"local", "global", "multihop"}
    assert abs(sum(body["probabilities"].values()) - 1) < 1e-3 and body["confidence"] == body["probabilities"]["global"]


def test_ask_answers_with_citations_from_readable_documents_only(client, tok):
    r = client.post("/v1/ask", json={"question": "What is the retry limit for error 429?", "route": "local"},
                    headers=bearer(tok["staff"]))
    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer["route"]["route"] == "local" and answer["offline"] is True
    assert answer["citations"] and {c["doc_id"] for c in answer["citations"]} == {"retry.md"}
    assert "hr.md" not in r.text and "Sandpiper" not in r.text


def test_ask_streams_route_tokens_citations_usage_done(client, tok):
    r = client.post("/v1/ask", json={"question": "What is the retry limit for error 429?", "route": "local",
                                     "stream": True}, headers=bearer(tok["staff"]))
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    events = parse_sse(r.text)
    names = [name for name, _ in events]
    assert names[0] == "route" and names[-1] == "done"
    assert "token" in names and names.index("citations") < names.index("usage") < names.index("done")
    assert names.index("token") < names.index("citations")
    text = "".join(data["text"] for name, data in events if name == "token")
    assert text == events[-1][1]["answer"]
    assert "hr.md" not in r.text


def test_ask_rejects_unknown_route_and_long_questions(client, tok, settings):
    h = bearer(tok["staff"])
    for body, field in (({"question": "retry?", "route": "sideways"}, "route"),
                        ({"question": "x" * (settings.api_max_question_chars + 1)}, "question"),
                        ({"question": " "}, "question"), ({"question": "retry?", "stream": "often"}, "stream")):
        r = client.post("/v1/ask", json=body, headers=h)
        assert r.status_code == 422 and r.headers["content-type"].startswith(PROBLEM), r.text
        assert field in [e["field"] for e in r.json()["errors"]]


class BrokenRouter:
    """A router whose every call fails the way a bug would."""

    def classify(self, question, route="auto"):
        raise RuntimeError("secret internal detail /etc/passwd")

    def ask(self, *args, **kwargs):
        raise KeyError("internal")

    def ask_events(self, *args, **kwargs):
        yield "route", {"route": "local"}
        raise ZeroDivisionError("internal")


def test_a_bug_is_a_500_problem_without_internals_and_a_stream_ends_with_an_error_event(db, settings, local_embedder, tok):
    app = create_app(settings, db, embedder=local_embedder, router=BrokenRouter())
    with TestClient(app, raise_server_exceptions=False) as broken:
        for path in ("/v1/route", "/v1/ask"):
            r = broken.post(path, json={"question": "anything?"}, headers=bearer(tok["staff"]))
            assert r.status_code == 500 and r.headers["content-type"].startswith(PROBLEM)
            body = r.json()
            assert body["status"] == 500 and body["instance"] == path and body["incident"]
            assert "secret" not in r.text and "Traceback" not in r.text and "KeyError" not in r.text
        r = broken.post("/v1/ask", json={"question": "anything?", "stream": True}, headers=bearer(tok["staff"]))
        events = parse_sse(r.text)
        assert [name for name, _ in events] == ["route", "error"] and "ZeroDivision" not in r.text
        metrics = broken.get("/metrics").text
        assert 'route="/v1/route",status="500"' in metrics
