"""A tenant's own HNSW graph (migration 013, vector/hnsw_index.py): when it is built, that the
vector leg's statement reaches it, that the ACL filter still applies on it, and its upkeep."""
from __future__ import annotations

import json

import numpy as np
import psycopg
import pytest
from fastapi.testclient import TestClient
from psycopg import sql

from api import tokens
from api.http.app import create_app

from tests.conftest import crossroads, unit
from tests.test_model_switch import CORPUS, DIM, NEW, fake, stage_vectors, voyage  # noqa: F401 (fixtures)
from vector import store
from vector.search import sql as search_sql
from vector import hnsw_index
from vector.model_switch.runner import switch
from vector.ingest.runner import ingest_documents
from vector.search.hybrid import HybridSearcher
from vector.ingest.sources import load_source

SMALL = 3  # min_rows for these tests: the corpus has about ten chunks


def test_a_tenant_needs_its_own_graph_only_when_big_enough_and_sharing_the_model():
    assert hnsw_index.wants_own_index(5_000, True, 2_000)
    assert hnsw_index.wants_own_index(2_000, True, 2_000)
    assert not hnsw_index.wants_own_index(1_999, True, 2_000)  # searched with exact distances anyway
    assert not hnsw_index.wants_own_index(1_000_000, False, 2_000)  # alone: the shared graph is its graph
    assert hnsw_index.index_name("a", "m") != hnsw_index.index_name("b", "m") != hnsw_index.index_name("a", "n")


def write_chunks(db, tenant: str, model: str, n: int, dim: int = 8) -> None:
    """`n` chunks with random vectors of `model`, written directly (no embedding model involved)."""
    rng = np.random.default_rng(len(tenant) + n)
    with db.connection() as conn, conn.transaction():
        conn.execute("INSERT INTO documents (tenant_id, doc_id, lang, acl, content_hash, index_key)"
                     " VALUES (%s, 'd', 'simple', '{public}', 'x', 'x')", (tenant,))
        with conn.cursor().copy("COPY chunks (tenant_id, doc_id, chunk_no, content, acl, content_hash, lang,"
                                " embedding, embed_model) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(["text", "text", "int4", "text", "text[]", "text", "text", "vector", "text"])
            for i in range(n):
                copy.write_row((tenant, "d", i, f"row {i}", ["public"], f"h{i}", "simple",
                                unit(rng.normal(size=dim)), model))


def index_state(db, name: str):
    """(exists, valid) of the index, and whether it is registered."""
    with db.connection() as conn:
        row = conn.execute("SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
                           " WHERE c.relname = %s", (name,)).fetchone()
        registered = conn.execute("SELECT 1 FROM tenant_vector_indexes WHERE index_name = %s", (name,)).fetchone()
    return (row is not None, bool(row and row[0])), registered is not None


def test_a_model_of_one_tenant_gets_no_graph_until_another_tenant_uses_it(db, tenant):
    model = f"test/solo-{tenant}"  # a model id no other tenant has
    write_chunks(db, tenant, model, 20)
    assert hnsw_index.ensure(db, tenant, model, 8, min_rows=1) is None
    write_chunks(db, tenant + "_other", model, 5)
    built = hnsw_index.ensure(db, tenant, model, 8, min_rows=1)
    assert built == {"index": hnsw_index.index_name(tenant, model), "rows": 20}
    assert index_state(db, built["index"]) == ((True, True), True)
    assert hnsw_index.ensure(db, tenant, model, 8, min_rows=1) is None  # registered: never rebuilt
    assert hnsw_index.ensure(db, tenant + "_other", model, 8, min_rows=6) is None  # 5 rows: too small


def test_an_index_left_invalid_by_a_dead_build_is_dropped_and_rebuilt(db, tenant):
    model = f"test/invalid-{tenant}"
    write_chunks(db, tenant, model, 10)
    write_chunks(db, tenant + "_other", model, 3)
    name = hnsw_index.index_name(tenant, model)
    with db.connection() as conn, conn.transaction():  # what CREATE INDEX CONCURRENTLY leaves when it dies
        conn.execute(sql.SQL("CREATE INDEX {} ON chunks (id) WHERE tenant_id = {}").format(
            sql.Identifier(name), sql.Literal(tenant)))
        conn.execute("UPDATE pg_index SET indisvalid = false WHERE indexrelid = %s::regclass", (name,))
    assert index_state(db, name) == ((True, False), False)
    assert hnsw_index.ensure(db, tenant, model, 8, min_rows=1)["index"] == name
    assert index_state(db, name) == ((True, True), True)
    with db.connection() as conn:
        definition = conn.execute("SELECT pg_get_indexdef(%s::regclass)", (name,)).fetchone()[0]
    assert "hnsw" in definition and tenant in definition


def test_a_build_held_up_by_an_open_transaction_fails_the_note_not_the_ingest(db, settings, local_embedder, tenant,
                                                                             tmp_path, demo_tenant, monkeypatch):
    monkeypatch.setattr(hnsw_index, "BUILD_LOCK_TIMEOUT", "300ms")
    (tmp_path / "a.md").write_text("Backups run nightly at two.", encoding="utf-8")
    (tmp_path / "b.md").write_text("Payments retry five times.", encoding="utf-8")
    docs, _ = load_source(tmp_path, ["public"], settings.max_document_bytes)
    small = settings.model_copy(update={"tenant_vector_index_min_rows": 2})
    # a session left in a transaction holding a snapshot: the build must not wait forever for it
    with psycopg.connect(db.url) as idle:
        idle.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        idle.execute("SELECT count(*) FROM documents")
        report = ingest_documents(db, local_embedder, small, tenant, docs, [])
    assert report.documents["added"] == 2 and report.clean  # the documents landed
    assert any("could not be built" in n and "crossroads embeddings index" in n for n in report.notes), report.notes
    name = hnsw_index.index_name(tenant, local_embedder.model_id)
    assert index_state(db, name)[1] is False  # not registered: search keeps the shared graph
    again = ingest_documents(db, local_embedder, small, tenant, docs, [])  # the next run builds it
    assert any(name in n for n in again.notes) and index_state(db, name) == ((True, True), True)


@pytest.fixture
def ingested(db, settings, local_embedder, tenant, tmp_path, demo_tenant):
    """The migration tests' corpus ingested with a threshold it passes; `demo_tenant` shares the model."""
    for name, text in CORPUS.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    docs, skipped = load_source(tmp_path, [], settings.max_document_bytes)
    small = settings.model_copy(update={"tenant_vector_index_min_rows": SMALL})
    report = ingest_documents(db, local_embedder, small, tenant, docs, skipped)
    assert report.clean
    return report, small, docs


def plan_of(db, statement, tenant) -> str:
    with db.connection() as conn, search_sql.read_only(conn):
        for name in ("enable_seqscan", "enable_sort", "enable_bitmapscan"):  # price out the exact plans
            conn.execute("SELECT set_config(%s, 'off', true)", (name,))
        return "\n".join(r[0] for r in conn.execute(sql.SQL("EXPLAIN ") + statement, {
            "vec": np.ones(384, dtype=np.float32), "tenant": tenant, "groups": ["public"], "limit": 5}))


def test_ingest_builds_the_graph_and_the_vector_leg_walks_it(db, local_embedder, tenant, ingested, demo_tenant):
    report, small, docs = ingested
    name = hnsw_index.index_name(tenant, local_embedder.model_id)
    assert any(name in note for note in report.notes), report.notes
    assert index_state(db, name) == ((True, True), True)
    model, dim = local_embedder.model_id, local_embedder.dimension
    assert name in plan_of(db, search_sql.vector_query(model, dim, tenant), tenant)
    # another tenant's statement cannot use this tenant's graph: it walks the shared one
    other = plan_of(db, search_sql.vector_query(model, dim, demo_tenant), demo_tenant)
    assert name not in other and store.vector_index_name(model) in other
    again = ingest_documents(db, local_embedder, small, tenant, docs)  # a no-op sync builds nothing
    assert again.documents["unchanged"] == len(CORPUS) and not any("HNSW" in n for n in again.notes)


def test_search_on_the_tenant_graph_keeps_the_acl_filter(db, local_embedder, tenant, ingested, monkeypatch):
    monkeypatch.setattr("vector.search.hybrid.EXACT_SCAN_MIN_ROWS", 0)  # the walk even for a tiny tenant
    with db.connection() as conn:
        hr_id, hr_text = conn.execute("SELECT id, content FROM chunks WHERE tenant_id = %s AND doc_id = 'hr/bonus.md'",
                                      (tenant,)).fetchone()
        readable = {i for (i,) in conn.execute("SELECT id FROM chunks WHERE tenant_id = %s AND acl && '{public,staff}'",
                                               (tenant,))}
    with HybridSearcher(db, local_embedder, ef_search=1) as searcher:  # ef 1 < readable rows: never exact
        assert searcher.search(tenant, ["hr"], hr_text, k=3, mode="dense").hits[0].id == hr_id
        for mode in ("dense", "hybrid"):
            outsider = searcher.search(tenant, ["public", "staff"], hr_text, k=10, mode=mode)
            traced = {e["id"] for stage in outsider.trace["stages"].values() for e in stage}
            assert outsider.trace["timings_ms"]["vector_graph"] == "tenant"
            assert outsider.hits and traced <= readable and hr_id not in traced


def test_scan_sizes_count_the_tenant_not_the_table_once_it_has_its_graph(db, local_embedder, tenant, ingested):
    with db.connection() as conn:
        readable, indexed, own = search_sql.scan_sizes(conn, tenant=tenant, groups=["public"],
                                                       model=local_embedder.model_id)
        tenant_rows = conn.execute("SELECT count(*) FROM chunks WHERE tenant_id = %s", (tenant,)).fetchone()[0]
        table = conn.execute("SELECT reltuples FROM pg_class WHERE oid = 'chunks'::regclass").fetchone()[0]
        _, without, none = search_sql.scan_sizes(conn, tenant=tenant, groups=["public"], model="test/no-graph-model")
    assert own and not none and 0 < readable < tenant_rows == indexed
    assert without == max(readable, int(table))


def test_switch_builds_the_new_models_graph_and_drops_the_old_one(db, local_embedder, tenant, ingested, voyage):
    old = hnsw_index.index_name(tenant, local_embedder.model_id)
    assert index_state(db, old) == ((True, True), True)
    stage_vectors(db, voyage, tenant)
    write_chunks(db, tenant + "_other", NEW, 2, dim=DIM)  # another tenant on the new model: a graph is due
    result = switch(db, tenant, NEW, tenant_graph_min_rows=SMALL)
    assert result["tenant_graph_built"] == hnsw_index.index_name(tenant, NEW)
    assert result["tenant_graphs_dropped"] == [old]
    assert index_state(db, old) == ((False, False), False)
    assert index_state(db, result["tenant_graph_built"]) == ((True, True), True)
    assert result["tenant_graph_built"] in plan_of(db, search_sql.vector_query(NEW, DIM, tenant), tenant)


def test_a_graph_whose_tenant_lost_every_chunk_of_its_model_is_dropped(db, tenant):
    model = f"test/emptied-{tenant}"
    write_chunks(db, tenant, model, 10)
    write_chunks(db, tenant + "_other", model, 3)
    name = hnsw_index.ensure(db, tenant, model, 8, min_rows=1)["index"]
    assert hnsw_index.drop_unserved(db, tenant) == []  # still serving: kept
    assert index_state(db, name) == ((True, True), True)
    with db.connection() as conn:
        store.delete_documents(conn, tenant, ["d"])
        conn.commit()
    assert hnsw_index.drop_unserved(db, tenant) == [name]
    assert index_state(db, name) == ((False, False), False)
    assert hnsw_index.drop_unserved(db, tenant) == []


def test_an_ingest_that_prunes_every_document_drops_the_tenants_graph(db, local_embedder, tenant, ingested):
    _, small, _ = ingested
    name = hnsw_index.index_name(tenant, local_embedder.model_id)
    assert index_state(db, name) == ((True, True), True)
    report = ingest_documents(db, local_embedder, small, tenant, [], prune=True)
    assert report.documents["deleted"] == len(CORPUS)
    assert any(name in n and "dropped" in n for n in report.notes), report.notes
    assert index_state(db, name) == ((False, False), False)


def test_deleting_the_last_document_through_the_api_drops_the_tenants_graph(db, local_embedder, tenant, ingested):
    _, small, docs = ingested
    name = hnsw_index.index_name(tenant, local_embedder.model_id)
    with db.connection() as conn:
        groups = sorted({g for (acl,) in conn.execute("SELECT acl FROM documents WHERE tenant_id = %s", (tenant,))
                         for g in acl})
        token = tokens.create_token(conn, tenant, groups, "writer", "graph-drop")[0]
    with TestClient(create_app(small, db, embedder=local_embedder)) as client:
        for i, doc in enumerate(sorted(d.doc_id for d in docs)):
            assert index_state(db, name) == ((True, True), True), f"dropped before the last delete ({i})"
            r = client.delete(f"/v1/documents/{doc}", headers={"Authorization": f"Bearer {token}"})
            assert r.status_code == 200, r.text
    assert index_state(db, name) == ((False, False), False)


def test_deleting_every_document_through_the_cli_drops_the_tenants_graph(db, local_embedder, tenant, ingested,
                                                                         cli_env):
    _, _, docs = ingested
    name = hnsw_index.index_name(tenant, local_embedder.model_id)
    assert index_state(db, name) == ((True, True), True)
    deleted = json.loads(crossroads(cli_env, "documents", "delete", *sorted(d.doc_id for d in docs),
                                    "--tenant", tenant, "--json").stdout)
    assert deleted["documents_deleted"] == len(docs)
    assert any(name in n and "dropped" in n for n in deleted["notes"]), deleted
    assert index_state(db, name) == ((False, False), False)
