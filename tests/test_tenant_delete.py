"""`crossroads tenants delete` (api.tenant_deletion.delete_tenant, core/tenants.py) on a real PostgreSQL: two tenants
with a row in every table that has a tenant_id column; the deleted one leaves no row in any of them (checked
over information_schema, so a table a later migration adds is covered), no HNSW index, no partition and no
cached graph output of its text; the other is untouched and still searches and authenticates. A hostile
tenant name deletes only itself; a queued or running job refuses the delete; an unknown tenant is an error."""
from __future__ import annotations

import json

import pytest

from api import tenant_deletion, tokens
from core import tenants as tenant_store
from core.database import open_database
from graph import store as graph_store
from graph.indexing.contracts import BuildSettings, OfflineReporter
from graph.indexing.extract_offline import OfflineExtractor
from graph.indexing.runner import build_graph
from tests.conftest import crossroads, ingest_corpus
from vector import hnsw_index, partitions
from vector.search.hybrid import HybridSearcher

# The name as a LIKE pattern ('%', '_') would match the other tenant's name; quotes, a backslash, Unicode
# and length try the identifiers and literals the delete builds (index and partition names, SQL).
VICTIM = "v'\"\\ %_ üñí名 " + "é" * 300 + "%"
KEEPER = VICTIM[:-1] + "keeper"

CORPUS = {
    "gateway.md": "---\ntitle: Payments Gateway\nacl: [staff]\n---\nFailed payment calls to Orlanth Bank are retried "
                  "five times by the Payments Gateway.\n",
    "backup.md": "---\ntitle: Backups\nacl: [staff, hr]\n---\nDatabase backups of the Kestrel cluster run every "
                 "night at two.\n",
}
VICTIM_ONLY = {"secret.md": "---\ntitle: Merger\nacl: [board]\n---\nThe Vireo merger closes in May under "
                            "Thornbury Holdings.\n"}


def tenant_tables(conn) -> list[str]:
    """Every table with a tenant_id column, read independently of the code under test (partitions included:
    a row in one is a row of the tenant too)."""
    return [r[0] for r in conn.execute(
        "SELECT c.table_name FROM information_schema.columns c JOIN information_schema.tables t"
        " USING (table_schema, table_name) WHERE c.column_name = 'tenant_id' AND t.table_type = 'BASE TABLE'"
        " AND c.table_schema = current_schema() ORDER BY 1")]


def counts(conn, tenant: str) -> dict[str, int]:
    return {t: conn.execute(f'SELECT count(*) FROM "{t}" WHERE tenant_id = %s', (tenant,)).fetchone()[0]
            for t in tenant_tables(conn)}


def add_other_rows(conn, tenant: str, model: str) -> None:
    """Rows of the tables an ingest and an offline graph build do not write: what LLM-backed work leaves."""
    doc, key = conn.execute("SELECT doc_id, content_hash FROM chunks WHERE tenant_id = %s LIMIT 1", (tenant,)).fetchone()
    conn.execute("INSERT INTO chunk_contexts (tenant_id, doc_id, chunk_key, mode, context) VALUES (%s, %s, %s, 'llm',"
                 " 'context of the chunk')", (tenant, doc, key))
    job = conn.execute("INSERT INTO jobs (kind, tenant_id, status, finished_at) VALUES ('reindex', %s, 'done', now())"
                       " RETURNING id", (tenant,)).fetchone()[0]
    conn.execute("INSERT INTO llm_batch_requests (tenant_id, custom_id, batch_id, job_id, result) VALUES"
                 " (%s, 'c1', 'msgbatch_1', %s, '{\"text\": \"an answer quoting the corpus\"}')", (tenant, job))
    conn.execute("INSERT INTO llm_call_stats (tenant_id, model, stage, lang, thinking, calls, input_chars, message_chars,"
                 " input_tokens, output_tokens, cpt_sum, cpt_squares, input_squares, output_squares)"
                 " VALUES (%s, 'claude', 'extract', 'en', 0, 1, 10, 8, 4, 2, 2.5, 6.25, 16, 4)", (tenant,))
    conn.execute("INSERT INTO embedding_migrations (tenant_id, target_model, source_model, dimension, status)"
                 " VALUES (%s, 'other/model', %s, 8, 'switched')", (tenant, model))
    conn.execute("INSERT INTO graph_entity_vectors (tenant_id, access_level, key, embed_model, text_hash, embedding)"
                 " SELECT tenant_id, access_level, key, %s, md5(description), '[1, 0, 0]' FROM graph_entities"
                 " WHERE tenant_id = %s", (model, tenant))
    tokens.create_token(conn, tenant, ["staff"], "reader")
    # a description summary cached for this tenant's graph, served as one of its entities' descriptions
    summary = f"summary written for {tenant}"
    conn.execute("UPDATE graph_entities SET description = %s WHERE tenant_id = %s AND key = (SELECT min(key)"
                 " FROM graph_entities WHERE tenant_id = %s)", (summary, tenant, tenant))
    conn.execute("INSERT INTO extraction_cache (content_hash, extractor, version, model, result) VALUES"
                 " (md5(%s), 'llm-summary', '1', 'claude', jsonb_build_object('summary', %s::text))", (tenant, summary))


def make_tenant(db, settings, embedder, root, tenant: str, corpus: dict[str, str]) -> None:
    ingest_corpus(db, settings, embedder, root, corpus, tenant)
    with db.connection() as conn:
        graph_store.set_level(conn, tenant, "staff", ["staff"])
    build_graph(db, tenant, None, OfflineExtractor(), OfflineReporter(), embedder, BuildSettings())
    with db.connection() as conn:
        add_other_rows(conn, tenant, embedder.model_id)


def index_exists(conn, name: str) -> bool:
    return conn.execute("SELECT EXISTS (SELECT 1 FROM pg_class WHERE relname = %s)", (name,)).fetchone()[0]


def test_a_deleted_tenant_leaves_no_trace_and_the_other_is_untouched(db, settings, local_embedder, cli_env,
                                                                     tmp_path):
    model = local_embedder.model_id
    make_tenant(db, settings, local_embedder, tmp_path / "k", KEEPER, CORPUS)
    make_tenant(db, settings, local_embedder, tmp_path / "v", VICTIM, CORPUS | VICTIM_ONLY)
    with db.connection() as conn:
        partitioned = partitions.is_partitioned(conn)  # the suite run with CROSSROADS_TEST_PARTITIONED=1
        if partitioned:
            partitions.partition(conn)  # each its own partition, with its own HNSW graph
    for name in ([] if partitioned else [KEEPER, VICTIM]):  # each its own HNSW graph: they share the model
        assert hnsw_index.ensure(db, name, model, local_embedder.dimension, min_rows=1)
    own_index = {t: partitions.partition_name(t) if partitioned else hnsw_index.index_name(t, model)
                 for t in (KEEPER, VICTIM)}
    with db.connection() as conn:
        parts = {r[0] for r in conn.execute("SELECT inhrelid::regclass::text FROM pg_inherits")}
        before = {t: n for t, n in counts(conn, VICTIM).items() if t not in parts}  # its partition: in chunks
        # every table holds rows of it: the delete is tried on each (a new table needs a row here too)
        assert [t for t, n in before.items() if not n] == (["tenant_vector_indexes"] if partitioned else []), before
        kept = counts(conn, KEEPER)
        keeper_token = conn.execute("SELECT id FROM api_tokens WHERE tenant_id = %s", (KEEPER,)).fetchone()[0]
        token, _ = tokens.create_token(conn, KEEPER, ["staff"], "reader")
        kept["api_tokens"] += 1
        victim_only = [h for (h,) in conn.execute(
            "SELECT content_hash FROM chunks WHERE tenant_id = %s EXCEPT SELECT content_hash FROM chunks"
            " WHERE tenant_id = %s", (VICTIM, KEEPER))]
        shared = [h for (h,) in conn.execute(
            "SELECT content_hash FROM chunks WHERE tenant_id = %s INTERSECT SELECT content_hash FROM chunks"
            " WHERE tenant_id = %s", (VICTIM, KEEPER))]
        assert victim_only and shared
        cached = conn.execute("SELECT count(*) FROM extraction_cache WHERE content_hash = ANY(%s)",
                              (victim_only,)).fetchone()[0]
        assert cached == len(victim_only)  # the offline build cached its extractions

    done = json.loads(crossroads(cli_env, "tenants", "delete", VICTIM, "--yes", "--json").stdout)

    assert done["rows"] == {t: n for t, n in before.items()}
    assert done["hnsw_indexes_dropped"] == ([] if partitioned else [own_index[VICTIM]])
    assert done["partition_dropped"] == (own_index[VICTIM] if partitioned else None)
    assert done["left"] == {} and done["notes"] == []
    assert done["extraction_cache"] >= len(victim_only) + 1  # its extractions and its summary
    with db.connection() as conn:
        assert {t: n for t, n in counts(conn, VICTIM).items() if n} == {}
        assert counts(conn, KEEPER) == {t: n for t, n in kept.items() if t != own_index[VICTIM]}
        assert not index_exists(conn, own_index[VICTIM]) and index_exists(conn, own_index[KEEPER])
        # no text of it survives in the shared cache; what the other tenant uses stays
        assert conn.execute("SELECT count(*) FROM extraction_cache WHERE content_hash = ANY(%s) OR content_hash ="
                            " md5(%s)", (victim_only, VICTIM)).fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM extraction_cache WHERE content_hash = ANY(%s) OR content_hash ="
                            " md5(%s)", (shared, KEEPER)).fetchone()[0] == len(shared) + 1
        assert tokens.verify_token(conn, token).tenant == KEEPER
        assert conn.execute("SELECT revoked_at FROM api_tokens WHERE id = %s", (keeper_token,)).fetchone()[0] is None
        assert VICTIM not in {t.tenant for t in tenant_store.tenants(conn)}
    with HybridSearcher(db, local_embedder) as searcher:
        hits = searcher.search(KEEPER, ["staff"], "how often are failed payment calls retried", k=3).hits
    assert hits and hits[0].title == "Payments Gateway"


def test_a_queued_or_running_job_refuses_the_delete_until_it_ends(db, cli_env, tenant):
    with db.connection() as conn:
        graph_store.set_level(conn, tenant, "staff", ["staff"])
        job = conn.execute("INSERT INTO jobs (kind, tenant_id, status, queued_at) VALUES ('graph-build', %s,"
                           " 'queued', now()) RETURNING id", (tenant,)).fetchone()[0]
    refused = crossroads(cli_env, "tenants", "delete", tenant, "--yes", rc=1)
    assert f"job {job} (graph-build, queued)" in refused.stderr
    assert f"crossroads graph cancel --tenant {tenant} --job {job}" in refused.stderr
    with db.connection() as conn:
        conn.execute("UPDATE jobs SET status = 'running', queued_at = NULL, started_at = now(), heartbeat_at = now()"
                     " WHERE id = %s", (job,))
    with pytest.raises(tenant_store.TenantBusy, match="running"):
        tenant_deletion.delete_tenant(db, tenant)
    with db.connection() as conn:
        assert counts(conn, tenant)["access_levels"] == 1  # nothing deleted
        # its process died (no heartbeat for longer than the lease): it runs no more, the delete goes ahead
        conn.execute("UPDATE jobs SET heartbeat_at = now() - make_interval(secs => %s) WHERE id = %s",
                     (db.job_lease_s + 60, job))
    assert tenant_deletion.delete_tenant(db, tenant).rows["jobs"] == 1
    with db.connection() as conn:
        assert {t: n for t, n in counts(conn, tenant).items() if n} == {}


def test_a_document_write_in_flight_holds_the_delete_off(db, tenant, monkeypatch):
    """A document write holds the tenant's write lock shared until it commits: the delete waits for it
    (here past its lock timeout, so it gives up whole) instead of deleting under it."""
    from core.errors import CrossroadsError
    from vector import store

    monkeypatch.setattr(tenant_store, "LOCK_TIMEOUT", "200ms")
    with db.connection() as conn:
        graph_store.set_level(conn, tenant, "staff", ["staff"])
    with db.connection() as writer, writer.transaction():
        store.lock_tenant_writes(writer, tenant)  # as vector.store.write_document does for each document
        with pytest.raises(CrossroadsError, match="stayed in use for 200ms"):
            tenant_deletion.delete_tenant(db, tenant)
    with db.connection() as conn:
        assert counts(conn, tenant)["access_levels"] == 1
    assert tenant_deletion.delete_tenant(db, tenant).rows["access_levels"] == 1  # the write committed: it goes ahead


def test_an_unknown_tenant_or_no_confirmation_deletes_nothing(db, cli_env, tenant):
    with db.connection() as conn:
        graph_store.set_level(conn, tenant, "staff", ["staff"])
        first = tenant_store.tenants(conn)[0].tenant
    unknown = crossroads(cli_env, "tenants", "delete", tenant + "_typo", "--yes", rc=1)
    assert f"no tenant '{tenant}_typo' (tenants: {first}" in " ".join(unknown.stderr.split())
    # no terminal to confirm at and no --yes: refused (the test's stdin is no terminal)
    unconfirmed = crossroads(cli_env, "tenants", "delete", tenant, rc=1)
    assert "--yes" in unconfirmed.stderr
    with db.connection() as conn:
        assert counts(conn, tenant)["access_levels"] == 1


def test_a_tenants_partition_goes_with_it(make_database, settings, local_embedder, tmp_path):
    pdb = open_database(settings, url=make_database())  # its own database: partitioning changes the layout
    try:
        for name in ("pa", "pb"):
            ingest_corpus(pdb, settings, local_embedder, tmp_path / name, CORPUS, name)
        with pdb.connection() as conn:
            partitions.partition(conn)
        done = tenant_deletion.delete_tenant(pdb, "pa")
        assert done.partition_dropped == partitions.partition_name("pa") and done.rows["chunks"] > 0
        with pdb.connection() as conn:
            names = {p["name"] for p in partitions.layout(conn)["partitions"]}
            assert names == {partitions.partition_name("pb"), partitions.DEFAULT_PARTITION}
            assert {t: n for t, n in counts(conn, "pa").items() if n} == {}
        with HybridSearcher(pdb, local_embedder) as searcher:
            assert searcher.search("pb", ["staff"], "when do database backups run", k=3).hits
    finally:
        pdb.close()
