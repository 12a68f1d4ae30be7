"""chunks partitioned by tenant (vector/partitions.py, migration 022) on a real PostgreSQL of its own:
the conversion keeps every row, id and ACL; search, ingest sync, deletes (full-text statistics, staged
vectors) and new tenants work on the partitioned table; a rerun gives new tenants their own partition;
undo restores the default layout with its foreign key. The whole suite runs against a partitioned
database with CROSSROADS_TEST_PARTITIONED=1 (tests/conftest.py)."""
from __future__ import annotations

import pytest

from core.database import open_database
from tests.test_bm25_statistics import kept_fulltext_stats, live_fulltext_stats
from vector import partitions
from vector.ingest.runner import ingest_documents
from vector.ingest.sources import load_source
from vector.search import sql as search_sql
from vector.search.hybrid import HybridSearcher

CORPUS = {
    "gateway.md": "---\ntitle: Payments Gateway\nacl: [staff]\n---\nFailed payment calls are retried five times.\n",
    "bonus.md": "---\ntitle: Bonus formula\nacl: [hr]\n---\nThe Thornbury bonus multiplies the base salary.\n",
    "backup.md": "---\ntitle: Backups\nacl: [staff, hr]\n---\nDatabase backups run every night at two.\n",
}


@pytest.fixture(scope="module")
def pdb(make_database, settings):
    """A database of this module's own: converting the session's would change every other test's layout."""
    database = open_database(settings, url=make_database())
    yield database
    database.close()


def ingest(db, settings, embedder, tmp_path, tenant: str, corpus: dict[str, str], prune: bool = False):
    for name, text in corpus.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    docs, skipped = load_source(tmp_path, [], settings.max_document_bytes)
    report = ingest_documents(db, embedder, settings, tenant, docs, skipped, prune=prune)
    assert report.clean, report.to_dict()
    return report


def titles(db, embedder, tenant, groups, query, mode="hybrid") -> list[str]:
    with HybridSearcher(db, embedder) as searcher:
        return [h.title for h in searcher.search(tenant, groups, query, k=5, mode=mode).hits]


def snapshot(conn) -> list[tuple]:
    return conn.execute("SELECT id, tenant_id, doc_id, chunk_no, acl, content_hash, embedding::text, tsv::text"
                        " FROM chunks ORDER BY id").fetchall()


def test_partitioned_chunks_serve_search_ingest_acl_and_deletes_then_undo(pdb, settings, local_embedder,
                                                                          tmp_path_factory):
    ingest(pdb, settings, local_embedder, tmp_path_factory.mktemp("a"), "pa", CORPUS)
    ingest(pdb, settings, local_embedder, tmp_path_factory.mktemp("b"), "pb", {"gateway.md": CORPUS["gateway.md"]})
    with pdb.connection() as conn:
        before, max_id = snapshot(conn), conn.execute("SELECT max(id) FROM chunks").fetchone()[0]
        report = partitions.partition(conn)
        assert (report.direction, report.partitions, report.chunks) == ("partitioned", ["pa", "pb"], len(before))
        assert snapshot(conn) == before  # ids, ACLs, vectors and the generated tsv unchanged
        names = {p["name"] for p in partitions.layout(conn)["partitions"]}
        assert names == {partitions.partition_name("pa"), partitions.partition_name("pb"), partitions.DEFAULT_PARTITION}
        # each partition has its own HNSW graph of the model, built from the shared one's definition
        graphs = conn.execute("SELECT count(*) FROM pg_indexes WHERE tablename = %s AND indexdef LIKE '%%hnsw%%'",
                              (partitions.partition_name("pa"),)).fetchone()[0]
        assert graphs == 1
        # the search sizes its walk by the tenant's rows, as on a tenant's own partial graph
        assert search_sql.scan_sizes(conn, tenant="pa", groups=["staff"], model=local_embedder.model_id)[2]

    # search and ACL in SQL: a staff reader never sees the hr document, in any mode
    for mode in ("dense", "bm25", "hybrid"):
        assert "Bonus formula" not in titles(pdb, local_embedder, "pa", ["staff"], "Thornbury bonus salary", mode)
        assert "Bonus formula" in titles(pdb, local_embedder, "pa", ["hr"], "Thornbury bonus salary", mode)
    assert "Backups" not in titles(pdb, local_embedder, "pb", ["staff", "hr"], "database backups night")

    # ingest sync on the partitioned table: a change rewrites chunks, a prune deletes a document
    folder = tmp_path_factory.mktemp("a2")
    changed = dict(CORPUS, **{"gateway.md": CORPUS["gateway.md"].replace("five", "seven")})
    del changed["backup.md"]
    report = ingest(pdb, settings, local_embedder, folder, "pa", changed, prune=True)
    assert (report.documents["changed"], report.documents["deleted"]) == (1, 1)
    assert "Backups" not in titles(pdb, local_embedder, "pa", ["staff", "hr"], "database backups night")
    with pdb.connection() as conn:
        assert conn.execute("SELECT min(id) FROM chunks WHERE tenant_id = 'pa' AND doc_id = 'gateway.md'"
                            ).fetchone()[0] > max_id  # the identity continues after the copied ids
        for groups in (["staff"], ["hr"]):
            assert kept_fulltext_stats(conn, "pa", groups) == live_fulltext_stats(conn, "pa", groups)
        # a deleted chunk's staged vectors go with it (the trigger standing in for the foreign key)
        chunk_id = conn.execute("SELECT id FROM chunks WHERE tenant_id = 'pb'").fetchone()[0]
        conn.execute("INSERT INTO chunk_vectors_staged (chunk_id, embed_model, content_hash, embedding)"
                     " VALUES (%s, 'next', 'h', '[1,1,1]'::vector)", (chunk_id,))
        conn.execute("DELETE FROM documents WHERE tenant_id = 'pb'")
        assert conn.execute("SELECT count(*) FROM chunk_vectors_staged").fetchone()[0] == 0
        conn.commit()

    # a tenant that arrives afterwards lands in the default partition; a rerun gives it its own
    ingest(pdb, settings, local_embedder, tmp_path_factory.mktemp("c"), "pc", {"bonus.md": CORPUS["bonus.md"]})
    with pdb.connection() as conn:
        report = partitions.partition(conn)
        assert (report.direction, report.partitions) == ("split", ["pc"])
        assert conn.execute(f"SELECT count(*) FROM {partitions.DEFAULT_PARTITION}").fetchone()[0] == 0
    assert titles(pdb, local_embedder, "pc", ["hr"], "Thornbury bonus") == ["Bonus formula"]

    with pdb.connection() as conn:
        before = snapshot(conn)
        report = partitions.unpartition(conn)
        assert not partitions.is_partitioned(conn) and snapshot(conn) == before
        fks = conn.execute("SELECT count(*) FROM pg_constraint WHERE conrelid = 'chunk_vectors_staged'::regclass"
                           " AND contype = 'f'").fetchone()[0]
        assert fks == 1
        with pytest.raises(partitions.PartitionError, match="not partitioned"):
            partitions.unpartition(conn)
    assert "Bonus formula" not in titles(pdb, local_embedder, "pa", ["staff"], "Thornbury bonus salary")
