"""The graph's status over HTTP and the CLI (`GET /v1/graph/status`, `crossroads graph status`): what
each role may see of it; a level emptied of chunks cleared by the next build and then reported empty;
and the API's own record of the builds it runs (`Services.jobs`).
"""
from __future__ import annotations

import json
import threading
import uuid

import pytest
from fastapi.testclient import TestClient

from api import tokens
from api.http.app import create_app
from api.http.services import RunningBuild
from graph import store
from graph.indexing.contracts import BuildSettings, OfflineReporter
from graph.indexing.runner import build_graph
from graph.indexing.extract_offline import OfflineExtractor
from graph.indexing.parts import GraphPipeline
from tests.conftest import FIXTURES, crossroads, wait_for_job
from vector import store as vector_store
from vector.ingest.runner import ingest_documents
from vector.ingest.sources import SourceDocument, load_source

TENANT = "graph_status"
EMPTIED = "graph_status_emptied"
BUILDS = "graph_status_builds"
STAFF = ["public", "staff"]
SECRET_LEVEL = "payroll_secret"  # groups `finance`: a `staff` reader must never learn of it
KINDS = ("entities", "relationships", "reports")
PROBLEM = "application/problem+json"






def bearer(db, tenant: str, groups: list[str], role: str) -> dict:
    with db.connection() as conn:
        token = tokens.create_token(conn, tenant, groups, role, f"{role}-{uuid.uuid4().hex[:6]}")[0]
    return {"Authorization": f"Bearer {token}"}


def ingest_corpus(db, settings, embedder, tenant: str) -> None:
    docs, skipped = load_source(FIXTURES / "corpus", [], settings.max_document_bytes)
    ingest_documents(db, embedder, settings, tenant, docs, skipped)


def offline_build(db, tenant: str, embedder) -> dict:
    return build_graph(db, tenant, None, OfflineExtractor(), OfflineReporter(), embedder, BuildSettings())


def stored_rows(db, tenant: str) -> dict[str, int]:
    """Every graph row of the tenant, served or withdrawn, per table."""
    tables = ("graph_entities", "graph_relationships", "graph_communities", "community_reports")
    with db.connection() as conn:
        return {t: conn.execute(f"SELECT count(*) FROM {t} WHERE tenant_id = %s", (tenant,)).fetchone()[0]
                for t in tables}


@pytest.fixture(scope="module")
def graph(db, settings, local_embedder):
    """The demo corpus with levels `all`, `staff` and `payroll_secret`, built, then one `staff`
    document deleted so that `staff` and `all` have withdrawn text."""
    ingest_corpus(db, settings, local_embedder, TENANT)
    with db.connection() as conn:
        store.set_level(conn, TENANT, "staff", STAFF)
        store.set_level(conn, TENANT, SECRET_LEVEL, ["finance"])
    job = offline_build(db, TENANT, local_embedder)
    with db.connection() as conn:
        assert vector_store.delete_documents(conn, TENANT, ["incidents/2025-04-geomesh-outage.md"])[0] == 1
    return job


def test_admin_sees_every_level_with_counts_withdrawn_text_and_recent_builds(db, client, graph):
    response = client.get("/v1/graph/status", headers=bearer(db, TENANT, ["finance", "hr", "public", "staff"], "admin"))

    assert response.status_code == 200, response.text
    status = response.json()
    with db.connection() as conn:
        levels = {lvl.name: lvl for lvl in store.list_levels(conn, TENANT)}
        counts = store.graph_text_counts(conn, TENANT)
        communities = store.community_counts(conn, TENANT)
    shown = {lvl["level"]: lvl for lvl in status["levels"]}
    assert set(shown) == {"all", "staff", SECRET_LEVEL} == set(levels)
    for name, lvl in shown.items():
        assert lvl["groups"] == list(levels[name].groups) and lvl["chunks"] == levels[name].chunks > 0, name
        assert lvl["communities"] == communities[name] > 0, name
        for kind in KINDS:
            assert lvl["served"][kind] == counts[name][kind]["served"] > 0, (name, kind)
            assert lvl["withdrawn"][kind] == counts[name][kind]["withdrawn"], (name, kind)
    staff = shown["staff"]
    assert all(staff["withdrawn"][kind] > 0 for kind in KINDS), staff
    assert staff["state"] == "withdrawn" and staff["rebuild"] == 'POST /v1/jobs/graph-build {"level": "staff"}'
    assert shown[SECRET_LEVEL]["state"] == "built" and shown[SECRET_LEVEL]["rebuild"] is None
    assert status["access_level"] == "all"
    [build] = status["jobs"]
    assert build["id"] == graph["id"] and build["status"] == "done" and build["finished_at"]


def test_reader_sees_only_the_level_it_is_served_from(db, client, graph):
    response = client.get("/v1/graph/status", headers=bearer(db, TENANT, STAFF, "reader"))

    assert response.status_code == 200, response.text
    status = response.json()
    assert status["access_level"] == "staff" and status["jobs"] is None
    [staff] = status["levels"]
    assert staff["level"] == "staff" and staff["groups"] == STAFF and staff["served"]["entities"] > 0
    assert staff["state"] == "withdrawn"
    for unreadable in (SECRET_LEVEL, "finance", "hr", '"all"'):  # other levels' names and groups
        assert unreadable not in response.text, unreadable

    fits_no_level = client.get("/v1/graph/status", headers=bearer(db, TENANT, ["public"], "writer")).json()
    assert fits_no_level == {"access_level": None, "levels": [], "jobs": None}


def test_status_needs_a_valid_token(client):
    for headers in ({}, {"Authorization": "Bearer not-a-token"}):
        response = client.get("/v1/graph/status", headers=headers)
        assert response.status_code == 401 and response.headers["content-type"].startswith(PROBLEM), response.text
        assert response.headers["www-authenticate"].startswith("Bearer")


# --- a level emptied of chunks ------------------------------------------------------------------


def test_build_clears_a_level_whose_chunks_are_all_gone_and_status_calls_it_empty(db, settings, local_embedder,
                                                                                 client, cli_env):
    ingest_corpus(db, settings, local_embedder, EMPTIED)
    with db.connection() as conn:
        store.set_level(conn, EMPTIED, "staff", STAFF)
    offline_build(db, EMPTIED, local_embedder)
    with db.connection() as conn:
        vector_store.delete_documents(conn, EMPTIED, vector_store.document_ids(conn, EMPTIED))
    admin = bearer(db, EMPTIED, STAFF, "admin")

    before = {lvl["level"]: lvl for lvl in json.loads(crossroads(cli_env, "graph", "status", "--tenant", EMPTIED,
                                                                 "--json").stdout)["levels"]}
    assert before["all"]["state"] == "emptied" and before["all"]["withdrawn"]["entities"] > 0
    assert before["all"]["rebuild"] == f"crossroads graph build --tenant {EMPTIED} --level all"

    job = offline_build(db, EMPTIED, local_embedder)

    assert job["status"] == "done" and {lvl["level"] for lvl in job["counts"]["levels"]} == {"all", "staff"}
    assert stored_rows(db, EMPTIED) == dict.fromkeys(stored_rows(db, EMPTIED), 0)
    cli = json.loads(crossroads(cli_env, "graph", "status", "--tenant", EMPTIED, "--json").stdout)
    over_http = client.get("/v1/graph/status", headers=admin).json()
    for levels in (cli["levels"], over_http["levels"]):
        assert {lvl["level"] for lvl in levels} == {"all", "staff"}
        for lvl in levels:
            assert lvl["state"] == "empty" and lvl["rebuild"] is None and lvl["chunks"] == 0, lvl
            assert lvl["withdrawn"] == lvl["served"] == dict.fromkeys(KINDS, 0) and lvl["communities"] == 0, lvl
    text = " ".join(crossroads(cli_env, "graph", "status", "--tenant", EMPTIED).stdout.split())
    assert "level all: empty" in text and "level staff: empty" in text
    assert "withdrawn" not in text and "crossroads graph build" not in text


# --- builds started through the API ---------------------------------------------------------------


class GatedExtractor:
    """The offline extractor, held at its first chunk until the test opens the gate."""

    name, model = "offline-ner-gated", ""

    def __init__(self):
        self.version = uuid.uuid4().hex  # a version of its own: nothing cached, so it extracts
        self.entered, self.gate = threading.Event(), threading.Event()

    def extract(self, chunk):
        self.entered.set()
        if not self.gate.wait(timeout=120):
            raise TimeoutError("the test never opened the gate")
        return OfflineExtractor().extract(chunk)




def test_a_running_build_refuses_a_second_start_naming_it_and_is_forgotten_when_done(
        db, settings, local_embedder, client, monkeypatch):
    import graph.indexing.runner
    import graph.indexing.parts

    doc = SourceDocument("ops/kestrel.md", "Kestrel", "The Kestrel Gateway retries calls to the Billing Service.",
                         ("staff",), "english", "test")
    ingest_documents(db, local_embedder, settings, BUILDS, [doc], [])
    extractor = GatedExtractor()
    monkeypatch.setattr(graph.indexing.parts, "make_pipeline",
                        lambda *args, **kwargs: GraphPipeline(extractor, OfflineReporter(), None))
    asked_the_database = []
    create_build_job = graph.indexing.runner.create_build_job

    def counted_create_build_job(*args, **kwargs) -> int:
        asked_the_database.append(args[1])  # the tenant
        return create_build_job(*args, **kwargs)

    monkeypatch.setattr(graph.indexing.runner, "create_build_job", counted_create_build_job)
    admin = bearer(db, BUILDS, ["staff"], "admin")
    svc = client.app.state.services

    started = client.post("/v1/jobs/graph-build", json={}, headers=admin)
    assert started.status_code == 202, started.text
    job_id = started.json()["job_id"]
    running = svc.jobs[BUILDS]
    assert running.job_id == job_id and extractor.entered.wait(timeout=60)

    try:
        refused = client.post("/v1/jobs/graph-build", json={}, headers=admin)
        asked_before_the_other_replica = list(asked_the_database)
        with TestClient(create_app(settings, db, embedder=local_embedder)) as other_replica:
            refused_elsewhere = other_replica.post("/v1/jobs/graph-build", json={}, headers=admin)
    finally:
        extractor.gate.set()

    assert refused.status_code == 409 and refused.headers["content-type"].startswith(PROBLEM), refused.text
    assert asked_before_the_other_replica == [BUILDS]  # this process refused it itself, before asking the database
    problem = refused.json()
    assert problem["type"].endswith(":job-running") and problem["job_id"] == job_id
    assert f"GET /v1/jobs/{job_id}" in problem["detail"]
    assert refused_elsewhere.status_code == 409 and asked_the_database == [BUILDS, BUILDS]
    assert {k: refused_elsewhere.json()[k] for k in ("type", "job_id", "detail")} == \
           {k: problem[k] for k in ("type", "job_id", "detail")}

    assert wait_for_job(client, admin, job_id)["status"] == "done"
    running.thread.join(timeout=60)
    assert not running.thread.is_alive() and BUILDS not in svc.jobs
    # a build thread lives on for a moment after its job row says done: a start then is not refused
    lingering = threading.Event()
    thread = threading.Thread(target=lingering.wait, daemon=True)
    thread.start()
    svc.jobs[BUILDS] = RunningBuild(job_id, thread)
    try:
        again = client.post("/v1/jobs/graph-build", json={}, headers=admin)
    finally:
        lingering.set()
    assert again.status_code == 202, again.text
    assert wait_for_job(client, admin, again.json()["job_id"])["status"] == "done"
