"""The HTTP API against a real PostgreSQL: auth, the search contract, documents, graph, jobs, operations.

One small corpus is written through the API itself (PUT and batch) at module start, so the
document endpoints are exercised by the fixture and checked by the tests below.
"""
from __future__ import annotations

import json
import time
import uuid

import pytest
from fastapi.testclient import TestClient

from api import tokens
from api.http.app import create_app
from graph import store as graph_store

TENANT = f"api_{uuid.uuid4().hex[:8]}"
OTHER = f"api_other_{uuid.uuid4().hex[:8]}"
PROBLEM = "application/problem+json"

DOCS = {
    "handbook/retry.md": (["staff"], "# Retry policy\n\nThe retry limit for error 429 is five attempts. The Kestrel "
                                     "Gateway retries calls to the Billing Service with exponential backoff."),
    "hr/salaries.md": (["hr"], "# Salary review\n\nProject Sandpiper raises the salaries of the Platform team "
                               "in March; Sandpiper is confidential."),
    "public/welcome.md": (["public", "staff"], "# Welcome\n\nThe Platform team runs the Kestrel Gateway and the "
                                               "Billing Service for the company wiki."),
}
BATCH = [
    {"doc_id": "ops/oncall.md", "acl": ["staff"],
     "text": "# On-call\n\nOn-call engineers of the Platform team rotate weekly; the Billing Service pager "
             "escalates after 15 minutes."},
    {"doc_id": "bad/no-acl.md", "text": "A document without groups is never made public."},
    {"doc_id": "hr/leave.md", "acl": ["hr"],
     "text": "# Leave\n\nParental leave under Project Sandpiper lasts 26 weeks for the Platform team."},
    "not an object",
    {"doc_id": "bad/blank-acl.md", "acl": ["  "], "text": "Blank groups are no groups."},
]


def bearer(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture(scope="module")
def api_settings(settings):
    return settings.model_copy(update={"api_max_body_bytes": 64_000, "max_document_bytes": 20_000,
                                       "api_max_batch_documents": 6, "api_max_query_chars": 300,
                                       "api_max_question_chars": 300})


@pytest.fixture(scope="module")
def client(db, api_settings, local_embedder):
    with TestClient(create_app(api_settings, db, embedder=local_embedder), raise_server_exceptions=False) as c:
        yield c


@pytest.fixture(scope="module")
def tok(db):
    """Tokens by name: tenant, groups, role."""
    spec = {
        "staff": (TENANT, ["staff"], "reader"),
        "hr": (TENANT, ["hr", "public", "staff"], "reader"),
        "writer": (TENANT, ["hr", "public", "staff"], "writer"),
        "staff_writer": (TENANT, ["staff"], "writer"),
        "admin": (TENANT, ["hr", "public", "staff"], "admin"),
        "other": (OTHER, ["hr", "public", "staff"], "admin"),
    }
    with db.connection() as conn:
        return {name: tokens.create_token(conn, t, g, r, name)[0] for name, (t, g, r) in spec.items()}


@pytest.fixture(scope="module")
def corpus(client, tok):
    """The corpus, written through PUT and the batch endpoint; returns the batch response."""
    for doc_id, (acl, text) in DOCS.items():
        r = client.put(f"/v1/documents/{doc_id}", json={"text": text, "acl": acl}, headers=bearer(tok["writer"]))
        assert r.status_code == 201, r.text
        assert r.json()["status"] == "added" and r.json()["chunks"]["added"] == 1
    r = client.post("/v1/documents:batch", json={"documents": BATCH}, headers=bearer(tok["writer"]))
    assert r.status_code == 200, r.text
    return r.json()


def search(client, token, query, k=10, **extra):
    r = client.post("/v1/search", json={"query": query, "k": k, **extra}, headers=bearer(token))
    assert r.status_code == 200, r.text
    return r.json()


def assert_problem(r, status, field=None):
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith(PROBLEM)
    body = r.json()
    assert {"type", "title", "status", "detail", "instance"} <= set(body) and body["status"] == status
    assert "Traceback" not in r.text and 'File "' not in r.text
    if field is not None:
        assert any(e["field"].split(".")[0] == field for e in body["errors"]), body
        assert field in body["detail"]
    return body


# --- documents ------------------------------------------------------------------------------------


def test_batch_lands_good_items_and_reports_bad_ones_by_index(corpus):
    by_index = {r["index"]: r for r in corpus["results"]}
    assert by_index[0]["status"] == by_index[2]["status"] == "indexed"
    assert by_index[1]["status"] == "rejected" and "acl" in by_index[1]["error"] and by_index[1]["doc_id"] == "bad/no-acl.md"
    assert by_index[3]["status"] == "rejected" and by_index[3]["doc_id"] is None
    assert by_index[4]["status"] == "rejected" and "acl" in by_index[4]["error"]
    assert corpus["errors"] == 3 and corpus["documents"]["added"] == 2


def test_put_same_document_again_is_unchanged_and_costs_nothing(client, tok, corpus):
    doc_id = "handbook/retry.md"
    acl, text = DOCS[doc_id]
    r = client.put(f"/v1/documents/{doc_id}", json={"text": text, "acl": acl}, headers=bearer(tok["writer"]))
    assert r.status_code == 200 and r.json()["status"] == "unchanged" and r.json()["embeddings_computed"] == 0


def test_list_documents_shows_only_readable_ones(client, tok, corpus):
    staff = {d["doc_id"] for d in client.get("/v1/documents", headers=bearer(tok["staff"])).json()["documents"]}
    hr = {d["doc_id"] for d in client.get("/v1/documents", headers=bearer(tok["hr"])).json()["documents"]}
    assert staff == {"handbook/retry.md", "public/welcome.md", "ops/oncall.md"}
    assert hr == staff | {"hr/salaries.md", "hr/leave.md"}
    other = client.get("/v1/documents", headers=bearer(tok["other"])).json()
    assert other["documents"] == []


def test_a_document_and_its_passages_are_read_only_by_readers_who_may(client, tok, corpus):
    listed = client.get("/v1/documents?limit=2", headers=bearer(tok["staff"])).json()
    assert listed["total"] == 3 and len(listed["documents"]) == 2
    r = client.get("/v1/documents/handbook/retry.md", headers=bearer(tok["staff"]))
    assert r.status_code == 200, r.text
    document = r.json()
    assert document["doc_id"] == "handbook/retry.md" and document["acl"] == DOCS["handbook/retry.md"][0]
    assert [c["chunk_no"] for c in document["chunks"]] == list(range(len(document["chunks"])))
    chunk = client.get(f"/v1/chunks/{document['chunks'][0]['id']}", headers=bearer(tok["staff"])).json()
    assert chunk["doc_id"] == "handbook/retry.md" and chunk["text"] == document["chunks"][0]["text"]
    hidden = client.get("/v1/documents/hr/salaries.md", headers=bearer(tok["hr"])).json()
    # a reader without the group: the same 404 as for a document that does not exist
    assert_problem(client.get("/v1/documents/hr/salaries.md", headers=bearer(tok["staff"])), 404)
    assert_problem(client.get("/v1/documents/nosuch.md", headers=bearer(tok["staff"])), 404)
    assert_problem(client.get(f"/v1/chunks/{hidden['chunks'][0]['id']}", headers=bearer(tok["staff"])), 404)
    assert_problem(client.get(f"/v1/chunks/{hidden['chunks'][0]['id']}", headers=bearer(tok["other"])), 404)


def test_upsert_acl_change_and_delete_are_reflected_by_search(client, tok, corpus):
    doc_id = "tmp/kiwi.md"
    body = {"text": "# Kiwi\n\nThe Kiwi gateway rotates its TLS certificates every 90 days.", "acl": ["staff"]}
    assert client.put(f"/v1/documents/{doc_id}", json=body, headers=bearer(tok["writer"])).status_code == 201

    def staff_sees():
        return doc_id in {h["doc_id"] for h in search(client, tok["staff"], "Kiwi gateway TLS certificates")["hits"]}

    assert staff_sees()
    r = client.patch(f"/v1/documents/{doc_id}/acl", json={"acl": ["hr"]}, headers=bearer(tok["writer"]))
    assert r.status_code == 200 and r.json() == {"doc_id": doc_id, "acl": ["hr"]}
    assert not staff_sees()
    # a writer whose groups cannot read it can neither see, change nor delete it
    assert_problem(client.delete(f"/v1/documents/{doc_id}", headers=bearer(tok["staff_writer"])), 404)
    assert_problem(client.put(f"/v1/documents/{doc_id}", json=body, headers=bearer(tok["staff_writer"])), 404)
    r = client.delete(f"/v1/documents/{doc_id}", headers=bearer(tok["writer"]))
    assert r.status_code == 200 and r.json()["chunks_deleted"] == 1
    assert doc_id not in {h["doc_id"] for h in search(client, tok["hr"], "Kiwi gateway TLS certificates")["hits"]}
    assert_problem(client.delete(f"/v1/documents/{doc_id}", headers=bearer(tok["writer"])), 404)
    assert_problem(client.patch(f"/v1/documents/{doc_id}/acl", json={"acl": ["hr"]}, headers=bearer(tok["writer"])), 404)


def test_document_limits_name_the_field(client, tok, api_settings):
    h = bearer(tok["writer"])
    big = "word " * (api_settings.max_document_bytes // 5 + 10)
    assert_problem(client.put("/v1/documents/big.md", json={"text": big, "acl": ["staff"]}, headers=h), 422, "text")
    assert_problem(client.put("/v1/documents/x.md", json={"text": "x", "acl": []}, headers=h), 422, "acl")
    assert_problem(client.put("/v1/documents/x.md", json={"text": "x", "acl": [" ", ""]}, headers=h), 422, "acl")
    assert_problem(client.put("/v1/documents/x.md", json={"text": " \n ", "acl": ["staff"]}, headers=h), 422, "text")
    assert_problem(client.put("/v1/documents/x.md", json={"text": "x"}, headers=h), 422, "acl")
    assert_problem(client.put("/v1/documents/x.md", json={"text": "x", "acl": ["staff"], "lang": "xx"}, headers=h),
                   422, "lang")
    assert_problem(client.put("/v1/documents/x.md", json={"text": "nul \u0000 inside", "acl": ["staff"]}, headers=h),
                   422, "text")
    assert_problem(client.put("/v1/documents/x%01y.md", json={"text": "x", "acl": ["staff"]}, headers=h), 422, "doc_id")
    too_many = {"documents": [{"doc_id": f"d{i}", "text": "t", "acl": ["staff"]} for i in range(7)]}
    assert_problem(client.post("/v1/documents:batch", json=too_many, headers=h), 422, "documents")
    assert_problem(client.post("/v1/documents:batch", json={"documents": []}, headers=h), 422, "documents")


# --- auth -------------------------------------------------------------------------------------------


def test_missing_and_bad_tokens_get_401_with_challenge(client, tok):
    for headers in ({}, {"Authorization": "Basic dXNlcjpwYXNz"}, bearer("nonsense"),
                    bearer("cr_0123456789ab_" + "A" * 43), bearer("a.b.c")):
        r = client.post("/v1/search", json={"query": "retry", "k": 3}, headers=headers)
        assert_problem(r, 401)
        assert r.headers["www-authenticate"].startswith("Bearer")


def test_revoked_token_is_refused_at_once(client, db, corpus):
    with db.connection() as conn:
        token, record = tokens.create_token(conn, TENANT, ["staff"], "reader")
    assert client.get("/v1/documents", headers=bearer(token)).status_code == 200
    with db.connection() as conn:
        assert tokens.revoke_token(conn, record.id) == record.id
        assert tokens.revoke_token(conn, token) is None  # already revoked
    assert_problem(client.get("/v1/documents", headers=bearer(token)), 401)


def test_roles(client, tok, corpus):
    body = {"text": "x", "acl": ["staff"]}
    assert_problem(client.put("/v1/documents/r.md", json=body, headers=bearer(tok["staff"])), 403)
    assert_problem(client.post("/v1/documents:batch", json={"documents": [body]}, headers=bearer(tok["staff"])), 403)
    assert_problem(client.delete("/v1/documents/handbook/retry.md", headers=bearer(tok["staff"])), 403)
    assert_problem(client.patch("/v1/documents/handbook/retry.md/acl", json={"acl": ["x"]},
                                headers=bearer(tok["staff"])), 403)
    assert_problem(client.post("/v1/jobs/graph-build", json={}, headers=bearer(tok["writer"])), 403)
    assert client.get("/v1/communities", headers=bearer(tok["staff"])).status_code == 200


def test_another_tenant_sees_nothing_of_this_one(client, tok, corpus):
    assert search(client, tok["other"], "retry limit for error 429")["hits"] == []
    assert_problem(client.delete("/v1/documents/handbook/retry.md", headers=bearer(tok["other"])), 404)
    assert client.get("/v1/entities", headers=bearer(tok["other"])).json()["entities"] == []


def test_groups_come_only_from_the_token(client, tok, corpus):
    hr_doc = {"hr/salaries.md", "hr/leave.md"}
    assert hr_doc & {h["doc_id"] for h in search(client, tok["hr"], "Sandpiper salaries")["hits"]}
    # in the body: refused (422 naming the field), never used
    for field in ({"groups": ["hr"]}, {"tenant": "other", "groups": ["hr", "staff"]}):
        r = client.post("/v1/search", json={"query": "Sandpiper salaries", "k": 5, **field},
                        headers=bearer(tok["staff"]))
        assert_problem(r, 422, "groups")
        assert "hr/" not in r.text and "hits" not in r.json()
    r = client.post("/v1/ask", json={"question": "What are the Sandpiper salaries?", "groups": ["hr"]},
                    headers=bearer(tok["staff"]))
    assert_problem(r, 422, "groups")
    r = client.post("/v1/ask", json={"question": "What are the Sandpiper salaries?"}, headers=bearer(tok["staff"]))
    assert r.status_code == 200 and not hr_doc & {c["doc_id"] for c in r.json()["citations"]}
    # as a query parameter or header: ignored
    r = client.post("/v1/search?groups=hr", json={"query": "Sandpiper salaries", "k": 5},
                    headers={**bearer(tok["staff"]), "X-Groups": "hr"})
    assert r.status_code == 200 and not hr_doc & {h["doc_id"] for h in r.json()["hits"]}


# --- search contract ---------------------------------------------------------------------------------


def test_search_contract(client, tok, corpus):
    out = search(client, tok["staff"], "What is the retry limit for error 429?", k=2)
    assert set(out) >= {"hits", "degraded"} and out["degraded"] is False
    assert 1 <= len(out["hits"]) <= 2
    assert out["hits"][0]["doc_id"] == "handbook/retry.md"
    assert set(out["hits"][0]) == {"id", "doc_id", "title", "heading", "text", "score"}
    assert out["hits"][0]["title"] == "Retry policy" and "five attempts" in out["hits"][0]["text"]


def test_user_without_hr_never_gets_an_hr_document(client, tok, corpus):
    for query in ("Sandpiper", "salaries of the Platform team", "parental leave weeks", "Platform team"):
        hits = search(client, tok["staff"], query, k=100)["hits"]
        assert not any(h["doc_id"].startswith("hr/") for h in hits), (query, hits)


@pytest.mark.parametrize("body,field", [
    ({"query": "retry", "k": 0}, "k"), ({"query": "retry", "k": -1}, "k"), ({"query": "retry", "k": 101}, "k"),
    ({"query": "retry", "k": "ten"}, "k"), ({"query": 5}, "query"), ({"k": 3}, "query"), ({"query": ""}, "query"),
    ({"query": "   "}, "query"), ({"query": "x" * 301}, "query"), ({"query": "a\u0000b"}, "query"),
    (b'{"query": "\\ud800 lone surrogate"}', "query"), ([1, 2], None),
])
def test_search_rejects_bad_input_with_the_field_named(client, tok, body, field):
    h = {**bearer(tok["staff"]), "Content-Type": "application/json"}
    sent = {"content": body} if isinstance(body, bytes) else {"json": body}
    assert_problem(client.post("/v1/search", headers=h, **sent), 422, field)


def test_malformed_bodies_are_400_problems(client, tok):
    h = {**bearer(tok["staff"]), "Content-Type": "application/json"}
    assert_problem(client.post("/v1/search", content=b'{"query": "retry", "k": ', headers=h), 400)
    assert_problem(client.post("/v1/search", content=b'{"query": "\xff\xfe caf\xe9"}', headers=h), 400)
    body = assert_problem(client.post("/v1/search", content=b"", headers=h), 422)
    assert "body" in body["detail"]


def test_huge_bodies_get_413_declared_or_streamed(client, tok, api_settings):
    h = bearer(tok["writer"])
    huge = {"text": "x" * (api_settings.api_max_body_bytes + 10), "acl": ["staff"]}
    assert_problem(client.put("/v1/documents/huge.md", json=huge, headers=h), 413)

    def chunks():
        payload = json.dumps(huge).encode()
        for start in range(0, len(payload), 8192):
            yield payload[start:start + 8192]

    r = client.put("/v1/documents/huge.md", content=chunks(), headers={**h, "Content-Type": "application/json"})
    assert_problem(r, 413)


def test_unknown_paths_and_methods_are_problems(client, tok):
    assert_problem(client.get("/v1/nothing-here", headers=bearer(tok["staff"])), 404)
    assert_problem(client.get("/v1/search", headers=bearer(tok["staff"])), 405)
    assert_problem(client.get("/v1/jobs/not-a-number", headers=bearer(tok["admin"])), 422, "job_id")
    assert_problem(client.get("/v1/jobs/999999999", headers=bearer(tok["admin"])), 404)


# --- graph and jobs -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def built(client, tok, db, corpus):
    """A `staff` level next to `all`, built through the jobs endpoint."""
    with db.connection() as conn:
        graph_store.set_level(conn, TENANT, "staff", ["staff"])
    r = client.post("/v1/jobs/graph-build", json={}, headers=bearer(tok["admin"]))
    assert r.status_code == 202, r.text
    job_id = r.json()["job_id"]
    assert r.headers["location"] == f"/v1/jobs/{job_id}"
    deadline = time.monotonic() + 120
    while True:
        job = client.get(f"/v1/jobs/{job_id}", headers=bearer(tok["admin"])).json()
        if job["status"] in ("done", "failed") or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    return job


def test_graph_build_job_finishes_with_counts(built, client, tok):
    assert built["status"] == "done", built
    assert built["kind"] == "graph-build" and built["finished_at"]
    levels = {lvl["level"]: lvl for lvl in built["counts"]["levels"]}
    assert set(levels) == {"all", "staff"} and levels["all"]["entities"] > 0
    assert_problem(client.get(f"/v1/jobs/{built['id']}", headers=bearer(tok["other"])), 404)
    # a job's counts name every level and its groups: a reader may not follow it
    assert_problem(client.get(f"/v1/jobs/{built['id']}", headers=bearer(tok["staff"])), 403)


def test_graph_endpoints_serve_only_the_callers_level(built, client, tok):
    staff = client.get("/v1/communities", headers=bearer(tok["staff"])).json()
    hr = client.get("/v1/communities", headers=bearer(tok["hr"])).json()
    assert staff["access_level"] == "staff" and hr["access_level"] == "all"
    assert hr["communities"] and staff["communities"]

    def sandpiper(token):
        return client.get("/v1/entities", params={"q": "sandpiper"}, headers=bearer(token)).json()["entities"]

    assert sandpiper(tok["hr"])  # the test can fail: the entity exists in the `all` graph
    assert sandpiper(tok["staff"]) == []
    staff_text = json.dumps(client.get("/v1/entities", params={"limit": 500}, headers=bearer(tok["staff"])).json())
    for c in staff["communities"]:
        detail = client.get(f"/v1/communities/{c['id']}", headers=bearer(tok["staff"]))
        assert detail.status_code == 200
        staff_text += detail.text
        assert not any(d["doc_id"].startswith("hr/") for d in detail.json()["documents"])
    assert "sandpiper" not in staff_text.lower()
    # a community of the `all` graph is not reachable by id from the staff level unless staff has it too
    hr_only_ids = {c["id"] for c in hr["communities"]} - {c["id"] for c in staff["communities"]}
    for cid in hr_only_ids:
        assert_problem(client.get(f"/v1/communities/{cid}", headers=bearer(tok["staff"])), 404)
    one = hr["communities"][0]
    detail = client.get(f"/v1/communities/{one['id']}", headers=bearer(tok["hr"])).json()
    assert detail["members"] and detail["title"] == one["title"]
    assert all("summary" in c for c in hr["communities"])
    # the edges the web page draws: only between members, and some community has them
    with_edges = 0
    for c in hr["communities"]:
        d = client.get(f"/v1/communities/{c['id']}", headers=bearer(tok["hr"])).json()
        keys = {m["key"] for m in d["members"]}
        assert all(r["source"] in keys and r["target"] in keys for r in d["relationships"])
        with_edges += bool(d["relationships"])
    assert with_edges
    levels = client.get("/v1/communities", params={"level": 0}, headers=bearer(tok["hr"])).json()["communities"]
    assert levels and all(c["level"] == 0 for c in levels)


# --- operations ---------------------------------------------------------------------------------------


def test_health_readiness_and_metrics(client, tok, corpus):
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["status"] == "ready"
    search(client, tok["staff"], "retry limit")
    search(client, tok["staff"], "zzzqqq xylophone unrelated")
    text = client.get("/metrics").text
    assert 'crossroads_http_request_duration_seconds_bucket{le="0.005",method="POST",route="/v1/search"}' in text \
        or 'crossroads_http_request_duration_seconds_bucket{method="POST",route="/v1/search"' in text
    assert 'route="/v1/documents/{doc_id}"' in text  # templates, not raw paths
    assert 'crossroads_results_total{endpoint="search"}' in text
    assert "crossroads_empty_results_total" in text and "crossroads_degraded_results_total" in text
    assert "crossroads_llm_cost_usd_total" in text


def test_openapi_is_valid_and_lists_every_route(client):
    from openapi_spec_validator import validate

    spec = client.get("/openapi.json").json()
    validate(spec)
    paths = set(spec["paths"])
    for route in client.app.routes:
        path = getattr(route, "path", "").replace(":path}", "}")
        if path.startswith(("/v1", "/healthz", "/readyz", "/metrics")):
            assert path in paths, path
    assert {"/v1/ask", "/v1/route", "/v1/search", "/v1/documents/{doc_id}", "/v1/documents:batch",
            "/v1/documents/{doc_id}/acl", "/v1/documents", "/v1/communities", "/v1/communities/{community_id}",
            "/v1/entities", "/v1/jobs/graph-build", "/v1/jobs/{job_id}", "/v1/jobs", "/v1/chat/completions",
            "/healthz", "/readyz", "/metrics"} <= paths


def test_search_names_the_codes_no_readable_document_holds(client, tok, corpus):
    """A code held only by an HR page is unmentioned for staff and mentioned for HR; the field is there
    (empty) for a query without codes. Written last: the page it adds is seen by no earlier test."""
    r = client.put("/v1/documents/hr/budget-codes.md", headers=bearer(tok["writer"]),
                   json={"text": "# Budget codes\n\nBudget code FIN_7731 pays for Project Sandpiper, approved by "
                         "Greta Lindqvist.", "acl": ["hr"]})
    assert r.status_code == 201, r.text
    staff = search(client, tok["staff"], "What does budget code FIN_7731 pay for?")
    assert staff["unmentioned"] == ["FIN_7731"] and not any(h["doc_id"].startswith("hr/") for h in staff["hits"])
    # the names a query spells too, after its codes, each as the reader's groups see the corpus
    staff = search(client, tok["staff"], "Did Greta Lindqvist approve FIN_7731?")
    assert staff["unmentioned"] == ["FIN_7731", "Greta Lindqvist"]
    assert search(client, tok["hr"], "Did Greta Lindqvist approve FIN_7731?")["unmentioned"] == []
    # and the answer: withheld for staff naming her, answered from the HR page for HR (offline, the same check)
    asked = {"question": "What did Greta Lindqvist approve?", "route": "local"}
    staff = client.post("/v1/ask", json=asked, headers=bearer(tok["staff"])).json()
    assert staff["no_answer"] and "Greta Lindqvist" in staff["answer"]
    assert not any(c["doc_id"].startswith("hr/") for c in staff["citations"])
    hr = client.post("/v1/ask", json=asked, headers=bearer(tok["hr"])).json()
    assert not hr["no_answer"] and "hr/budget-codes.md" in {c["doc_id"] for c in hr["citations"]}
    hr = search(client, tok["hr"], "What does budget code FIN_7731 pay for? And ERR_9999?")
    assert hr["unmentioned"] == ["ERR_9999"] and "hr/budget-codes.md" in {h["doc_id"] for h in hr["hits"]}
    assert search(client, tok["staff"], "retry limit for error 429")["unmentioned"] == []
