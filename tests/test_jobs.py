"""Job leases against a real PostgreSQL: a job whose process died is reported failed and taken over;
one running build per tenant across processes (core, HTTP API, CLI); heartbeats; migration 012.

"Another process" is simulated by a job row made through core.jobs (a live heartbeat) that no
thread of the API under test knows about, and by the CLI run as a real process.
"""
from __future__ import annotations

import json
import threading
import time
import uuid

import psycopg
import pytest

from api import tokens
from core import database, jobs
from core.database import open_database
from core.errors import JobRunningError
from graph.indexing.contracts import BuildSettings, OfflineReporter
from graph.indexing.runner import build_graph, create_build_job
from graph.indexing.extract_offline import OfflineExtractor
from tests.conftest import crossroads, wait_for_job
from vector.ingest.runner import ingest_documents
from vector.ingest.sources import SourceDocument

KIND = "graph-build"
PROBLEM = "application/problem+json"






def one_line(text: str) -> str:
    """Console output with its wrapping undone."""
    return " ".join(text.split())


def bearer(db, tenant: str, role: str) -> dict:
    with db.connection() as conn:
        token = tokens.create_token(conn, tenant, ["staff"], role, f"{role}-{uuid.uuid4().hex[:6]}")[0]
    return {"Authorization": f"Bearer {token}"}


def live_job(db, tenant: str) -> int:
    """A build as another process would hold it: running, heartbeat now."""
    with db.connection() as conn:
        return jobs.create_job(conn, KIND, tenant, {"level": None}, db.job_lease_s)


def silence(db, job_id: int, seconds: float = 600) -> None:
    """The job's process stopped beating `seconds` ago."""
    with db.connection() as conn:
        conn.execute("UPDATE jobs SET heartbeat_at = now() - make_interval(secs => %s) WHERE id = %s", (seconds, job_id))


def stored_row(db, job_id: int) -> dict:
    with db.connection() as conn:
        status, errors, finished_at, heartbeat_at = conn.execute(
            "SELECT status, errors, finished_at, heartbeat_at FROM jobs WHERE id = %s", (job_id,)).fetchone()
    return {"status": status, "errors": errors, "finished_at": finished_at, "heartbeat_at": heartbeat_at}


def finish(db, job_id: int) -> None:
    with db.connection() as conn:
        jobs.update_job(conn, job_id, status="done", stage="done")




def is_abandoned(job: dict) -> bool:
    return job["status"] == "failed" and job["errors"][-1]["error"].startswith("abandoned: no heartbeat since")


# --- abandoned jobs -------------------------------------------------------------------------------


def test_job_silent_past_its_lease_is_reported_failed_everywhere(db, client, cli_env, tenant):
    job_id = live_job(db, tenant)
    with db.connection() as conn:
        assert jobs.get_job(conn, job_id, db.job_lease_s)["status"] == "running"
    silence(db, job_id)

    with db.connection() as conn:
        job = jobs.get_job(conn, job_id, db.job_lease_s)
    assert is_abandoned(job), job
    assert job["finished_at"] == job["heartbeat_at"]  # it stopped at its last sign of life
    assert stored_row(db, job_id)["status"] == "running"  # derived on read: a read writes nothing

    over_http = client.get(f"/v1/jobs/{job_id}", headers=bearer(db, tenant, "admin"))
    assert over_http.status_code == 200 and is_abandoned(over_http.json()), over_http.text

    status = crossroads(cli_env, "graph", "status", "--tenant", tenant, "--json", rc=None)
    assert status.returncode == 0, status.stderr
    [listed] = json.loads(status.stdout)["jobs"]
    assert listed["id"] == job_id and is_abandoned(listed)
    text = crossroads(cli_env, "graph", "status", "--tenant", tenant, rc=None)
    assert f"job {job_id}: failed" in text.stdout and "abandoned: no heartbeat since" in one_line(text.stdout)


def test_next_build_fails_the_abandoned_job_and_runs(db, tenant):
    dead = live_job(db, tenant)
    silence(db, dead)

    job = build_graph(db, tenant, None, OfflineExtractor(), OfflineReporter(), None, BuildSettings())

    assert job["status"] == "done" and job["id"] != dead
    row = stored_row(db, dead)
    assert row["status"] == "failed" and row["finished_at"] == row["heartbeat_at"]
    assert row["errors"][-1]["error"].startswith("abandoned: no heartbeat since"), row


def test_interrupted_build_frees_the_tenant_at_once(db, settings, local_embedder, tenant):
    ingest_one_document(db, settings, local_embedder, tenant)

    def interrupt(stage: str, done: int, total: int) -> None:
        raise KeyboardInterrupt  # Ctrl-C in `crossroads graph build`

    with pytest.raises(KeyboardInterrupt):
        build_graph(db, tenant, None, OfflineExtractor(), OfflineReporter(), None, BuildSettings(), interrupt)
    with db.connection() as conn:
        [interrupted] = jobs.recent_jobs(conn, tenant, KIND, db.job_lease_s)
    assert interrupted["status"] == "failed" and "KeyboardInterrupt" in interrupted["errors"][-1]["error"]
    assert build_graph(db, tenant, None, OfflineExtractor(), OfflineReporter(), None, BuildSettings())["status"] == "done"


# --- one running build per tenant, across processes -------------------------------------------------


def test_second_build_job_of_a_tenant_is_refused_while_one_is_alive(db, tenant):
    running = live_job(db, tenant)
    with pytest.raises(JobRunningError) as refused:
        create_build_job(db, tenant, None, OfflineExtractor(), OfflineReporter())
    assert refused.value.job_id == running and f"job {running}" in str(refused.value)
    with db.connection() as conn:
        assert [j["id"] for j in jobs.recent_jobs(conn, tenant, KIND, db.job_lease_s)] == [running]

    other = create_build_job(db, f"{tenant}_other", None, OfflineExtractor(), OfflineReporter())
    assert other != running
    finish(db, other)
    finish(db, running)


def test_http_build_is_refused_with_409_while_another_process_builds(db, client, tenant):
    running = live_job(db, tenant)
    admin = bearer(db, tenant, "admin")

    refused = client.post("/v1/jobs/graph-build", json={}, headers=admin)

    assert refused.status_code == 409 and refused.headers["content-type"].startswith(PROBLEM), refused.text
    problem = refused.json()
    assert problem["type"].endswith(":job-running") and problem["job_id"] == running
    assert f"GET /v1/jobs/{running}" in problem["detail"]
    other_admin = bearer(db, f"{tenant}_other", "admin")
    accepted = client.post("/v1/jobs/graph-build", json={}, headers=other_admin)
    assert accepted.status_code == 202, accepted.text
    assert wait_for_job(client, other_admin, accepted.json()["job_id"])["status"] == "done"
    finish(db, running)


def test_cli_build_is_refused_while_another_process_builds(db, cli_env, tenant):
    running = live_job(db, tenant)

    refused = crossroads(cli_env, "graph", "build", "--tenant", tenant, rc=None)

    assert refused.returncode == 1, refused.stderr
    message = one_line(refused.stderr)
    assert f"job {running}" in message and f"crossroads graph status --tenant {tenant}" in message, message
    crossroads(cli_env, "levels", "set", f"{tenant}_other", "staff", "staff", "--json")  # a tenant, with nothing yet
    other = crossroads(cli_env, "graph", "build", "--tenant", f"{tenant}_other", "--json", rc=None)
    assert other.returncode == 0, other.stderr
    assert json.loads(other.stdout)["status"] == "done"
    finish(db, running)


# --- heartbeats ---------------------------------------------------------------------------------


def heartbeat_age_s(db, job_id: int) -> float:
    with db.connection() as conn:
        return conn.execute("SELECT extract(epoch FROM now() - heartbeat_at) FROM jobs WHERE id = %s",
                            (job_id,)).fetchone()[0]


def wait_for_fresh_heartbeat(db, job_id: int, timeout_s: float = 10) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if heartbeat_age_s(db, job_id) < 60:
            return True
        time.sleep(0.02)
    return False


def test_heartbeat_thread_beats_while_work_runs_and_stops_after(db, tenant):
    job_id = live_job(db, tenant)
    silence(db, job_id)

    with jobs.heartbeat(db, job_id, every_s=0.05):
        assert wait_for_fresh_heartbeat(db, job_id)
        assert any(t.name == f"job-heartbeat-{job_id}" for t in threading.enumerate())

    assert not any(t.name == f"job-heartbeat-{job_id}" for t in threading.enumerate())
    silence(db, job_id)
    time.sleep(0.5)  # ten intervals
    assert heartbeat_age_s(db, job_id) > 500
    finish(db, job_id)


class StallingExtractor:
    """The offline extractor behind a stage that records no progress: on its first chunk it silences
    the job and waits for a heartbeat, as a long LLM call would leave the build to its heartbeat."""

    name, model = "offline-ner-stalling", ""

    def __init__(self, db, tenant: str):
        self.db, self.tenant, self.version = db, tenant, uuid.uuid4().hex  # a version of its own: nothing cached
        self.kept_alive: bool | None = None

    def extract(self, chunk):
        if self.kept_alive is None:
            with self.db.connection() as conn:
                job_id = jobs.running_job(conn, self.tenant, KIND, self.db.job_lease_s)["id"]
            silence(self.db, job_id)
            self.kept_alive = wait_for_fresh_heartbeat(self.db, job_id)
        return OfflineExtractor().extract(chunk)


def ingest_one_document(db, settings, embedder, tenant: str) -> None:
    doc = SourceDocument("ops/kestrel.md", "Kestrel", "The Kestrel Gateway retries calls to the Billing Service.",
                         ("staff",), "english", "test")
    ingest_documents(db, embedder, settings, tenant, [doc], [])


def test_build_graph_keeps_its_lease_through_a_stage_without_progress(db, settings, local_embedder, tenant):
    ingest_one_document(db, settings, local_embedder, tenant)
    extractor = StallingExtractor(db, tenant)
    # a short lease, so the build beats every 0.1 s
    with open_database(settings.model_copy(update={"job_lease_s": 0.4}), url=db.url) as quick:
        job = build_graph(quick, tenant, None, extractor, OfflineReporter(), None, BuildSettings())
    assert extractor.kept_alive is True
    assert job["status"] == "done" and job["counts"]["levels"][0]["extracted"] == 1


# --- migration 012 ------------------------------------------------------------------------------


def test_migration_leaves_only_the_newest_running_job_per_tenant_and_kind(make_database, monkeypatch):
    every = database.load_migrations()
    monkeypatch.setattr(database, "load_migrations", lambda: [m for m in every if m.version < 12])
    with psycopg.connect(make_database()) as conn:
        database.ensure_pgvector(conn)
        conn.commit()
        database.apply_migrations(conn)

        def insert(tenant: str, kind: str, status: str) -> int:
            return conn.execute("INSERT INTO jobs (kind, tenant_id, status, started_at) VALUES (%s, %s, %s, now())"
                                " RETURNING id", (kind, tenant, status)).fetchone()[0]

        stale = [insert("a", KIND, "running") for _ in range(2)]
        newest = insert("a", KIND, "running")
        other_kind = insert("a", "reindex", "running")
        other_tenant = insert("b", KIND, "running")
        done = insert("b", KIND, "done")
        conn.commit()
        monkeypatch.setattr(database, "load_migrations", lambda: [m for m in every if m.version <= 12])
        assert database.apply_migrations(conn) == [12]

        rows = {i: (s, e) for i, s, e in conn.execute("SELECT id, status, errors FROM jobs")}
        assert {i for i, (s, _) in rows.items() if s == "running"} == {newest, other_kind, other_tenant}
        assert rows[done] == ("done", [])
        for job_id in stale:
            status, errors = rows[job_id]
            assert status == "failed" and errors[-1]["error"].startswith(f"superseded: job {newest} "), errors
        conn.commit()
        with pytest.raises(psycopg.errors.UniqueViolation):
            insert("b", KIND, "running")
