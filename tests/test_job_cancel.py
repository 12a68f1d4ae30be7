"""Stopping a graph build (migration 014, core/jobs.py): a cancel request stops it at its next progress
step and records `cancelled`; a build whose row was taken over stops without writing to it; the old
graph survives both; the request over HTTP and the CLI."""
from __future__ import annotations

import pytest

from core import jobs
from core.errors import JobNotFoundError, JobStoppedError
from graph import browse_store, store
from graph.indexing.contracts import BuildSettings, OfflineReporter
from graph.indexing.runner import build_graph
from graph.indexing.extract_offline import OfflineExtractor
from tests.conftest import crossroads
from tests.test_jobs import KIND, bearer, live_job, silence, stored_row
from vector.ingest.runner import ingest_documents
from vector.ingest.sources import SourceDocument

PROBLEM = "application/problem+json"


def ingest_documents_of(db, settings, embedder, tenant: str, n: int = 4) -> None:
    """Texts unique to the tenant, so extraction is not cached and calls progress per chunk."""
    docs = [SourceDocument(f"ops/{i}.md", f"Gateway {i}", f"The {tenant} Gateway {i} retries calls to the "
                           f"Billing Service {i} in Lisbon.", ("staff",), "english", "test") for i in range(n)]
    ingest_documents(db, embedder, settings, tenant, docs, [])


def graph_counts(db, tenant: str) -> tuple[int, int]:
    with db.connection() as conn:
        return len(store.list_reports(conn, tenant, "all")), len(browse_store.find_entities(conn, tenant, "all", "", 1000))


def build(db, tenant, progress=None):
    return build_graph(db, tenant, None, OfflineExtractor(), OfflineReporter(), None, BuildSettings(), progress)


def test_a_cancel_request_stops_the_build_and_keeps_the_last_graph(db, settings, local_embedder, tenant):
    ingest_documents_of(db, settings, local_embedder, tenant)
    assert build(db, tenant)["status"] == "done"
    before = graph_counts(db, tenant)
    assert min(before) > 0
    ingest_documents_of(db, settings, local_embedder, tenant, n=6)  # new chunks: the rebuild extracts
    seen = []

    def operator_cancels(stage: str, done: int, total: int) -> None:
        seen.append((stage, done))
        if len(seen) == 1:  # as `crossroads graph cancel` would, from another process
            with db.connection() as conn:
                running = jobs.running_job(conn, tenant, KIND, db.job_lease_s)
                assert jobs.request_cancel(conn, running["id"], tenant, db.job_lease_s)["status"] == "running"

    with pytest.raises(JobStoppedError) as stopped:
        build(db, tenant, operator_cancels)
    assert stopped.value.reason == "cancelled" and seen == [("extract", 0)]  # stopped at the next step
    row = stored_row(db, stopped.value.job_id)
    assert row["status"] == "cancelled" and row["finished_at"] is not None
    assert "cancelled on request" in row["errors"][-1]["error"]
    assert graph_counts(db, tenant) == before  # the graph it would have replaced is still served
    assert build(db, tenant)["status"] == "done"  # the slot is free again


def test_a_build_whose_row_was_taken_over_stops_without_writing_to_it(db, settings, local_embedder, tenant):
    ingest_documents_of(db, settings, local_embedder, tenant)
    taken_over = []

    def another_process_takes_over(stage: str, done: int, total: int) -> None:
        if not taken_over:  # what the next start does to a job silent past its lease
            with db.connection() as conn:
                running = jobs.running_job(conn, tenant, KIND, db.job_lease_s)
                conn.execute("UPDATE jobs SET heartbeat_at = now() - interval '1 hour' WHERE id = %s", (running["id"],))
                assert jobs.fail_abandoned_jobs(conn, tenant, KIND, db.job_lease_s) == [running["id"]]
                taken_over.append(running["id"])

    with pytest.raises(JobStoppedError) as stopped:
        build(db, tenant, another_process_takes_over)
    assert stopped.value.reason == "lost" and stopped.value.job_id == taken_over[0]
    row = stored_row(db, taken_over[0])
    assert row["status"] == "failed" and len(row["errors"]) == 1  # only the takeover's reason: nothing overwritten
    assert row["errors"][0]["error"].startswith("abandoned: no heartbeat since")


def test_update_job_writes_only_a_running_row_and_reports_a_cancel(db, tenant):
    job_id = live_job(db, tenant)
    with db.connection() as conn:
        assert jobs.update_job(conn, job_id, stage="extract") == "running"
        jobs.request_cancel(conn, job_id, tenant, db.job_lease_s)
        assert jobs.update_job(conn, job_id, stage="reports") == "cancelling"
        assert jobs.update_job(conn, job_id, status="cancelled") == "cancelling"
        assert jobs.update_job(conn, job_id, status="done", stage="done") == "stopped"
        assert jobs.request_cancel(conn, job_id, tenant, db.job_lease_s)["status"] == "cancelled"  # idempotent
    assert stored_row(db, job_id)["status"] == "cancelled"
    watch = jobs.JobWatch(job_id)
    watch.note("running")
    watch.raise_if_stopped()  # nothing to stop for
    watch.note("stopped")
    with pytest.raises(JobStoppedError, match="no longer running"):
        watch.raise_if_stopped()


def test_cancelling_an_abandoned_job_ends_it_at_once(db, tenant):
    job_id = live_job(db, tenant)
    silence(db, job_id)
    with db.connection() as conn:
        with pytest.raises(JobNotFoundError):  # not that tenant's
            jobs.request_cancel(conn, job_id, f"{tenant}_other", db.job_lease_s)
        job = jobs.request_cancel(conn, job_id, tenant, db.job_lease_s)
    assert job["status"] == "cancelled" and "after its process had stopped" in job["errors"][-1]["error"]
    assert job["finished_at"] == job["heartbeat_at"]


def test_cancel_over_http(db, client, tenant):
    job_id = live_job(db, tenant)
    admin = bearer(db, tenant, "admin")
    assert client.post(f"/v1/jobs/{job_id}/cancel", headers=bearer(db, tenant, "reader")).status_code == 403
    other = client.post(f"/v1/jobs/{job_id}/cancel", headers=bearer(db, f"{tenant}_other", "admin"))
    assert other.status_code == 404 and other.headers["content-type"].startswith(PROBLEM)
    asked = client.post(f"/v1/jobs/{job_id}/cancel", headers=admin)
    assert asked.status_code == 202 and asked.json()["status"] == "running" and asked.json()["cancel_requested_at"]
    with db.connection() as conn:
        jobs.update_job(conn, job_id, status="done", stage="done")  # it finished before it saw the request
    ended = client.post(f"/v1/jobs/{job_id}/cancel", headers=admin)
    assert ended.status_code == 409 and "already ended (done)" in ended.json()["detail"]


def test_cancel_from_the_cli(db, cli_env, tenant):
    nothing = crossroads(cli_env, "graph", "cancel", "--tenant", tenant, rc=1)
    assert "nothing to cancel" in nothing.stderr and "Traceback" not in nothing.stderr
    job_id = live_job(db, tenant)
    asked = crossroads(cli_env, "graph", "cancel", "--tenant", tenant)
    assert f"job {job_id}: cancel requested" in asked.stdout
    assert stored_row(db, job_id)["status"] == "running"  # until its process sees the request
    with db.connection() as conn:
        assert jobs.get_job(conn, job_id, db.job_lease_s)["cancel_requested_at"] is not None
