"""BM25's statistics kept by the chunk triggers (migration 008): exact for every reader after every
kind of write, and folded (compacted) by ingests, deletes and ACL changes alike."""
from __future__ import annotations

import uuid

from vector import store
from vector.ingest.runner import ingest_documents
from vector.ingest.sources import load_source


STATS_CORPUS = {
    "a.md": "---\nacl: [staff]\n---\nGateway retries back off exponentially. The gateway parks calls.\n",
    "b.md": "---\nacl: [hr]\n---\nThe bonus formula multiplies salary. Gateway access needs approval.\n",
    "c.md": "---\nacl: [staff, public]\n---\nStatus page: the gateway was down for a minute.\n",
}


def live_fulltext_stats(conn, tenant, groups) -> tuple[int, int, dict[str, int]]:
    """N, total length and per-lexeme document frequencies counted from the chunks themselves."""
    n, total = conn.execute("SELECT count(*), coalesce(sum(length(tsv)), 0) FROM chunks"
                            " WHERE tenant_id = %s AND acl && %s", (tenant, groups)).fetchone()
    dfs = conn.execute("SELECT x, count(*) FROM chunks, unnest(tsvector_to_array(tsv)) AS x"
                       " WHERE tenant_id = %s AND acl && %s GROUP BY x", (tenant, groups)).fetchall()
    return int(n), int(total), {x: int(df) for x, df in dfs}


def kept_fulltext_stats(conn, tenant, groups) -> tuple[int, int, dict[str, int]]:
    n, total = conn.execute("SELECT coalesce(sum(chunks), 0), coalesce(sum(lexemes), 0) FROM fulltext_acl_stats"
                            " WHERE tenant_id = %s AND acl && %s", (tenant, groups)).fetchone()
    dfs = conn.execute("SELECT lexeme, sum(df) FROM fulltext_lexeme_stats WHERE tenant_id = %s AND acl && %s"
                       " GROUP BY lexeme HAVING sum(df) <> 0", (tenant, groups)).fetchall()
    return int(n), int(total), {x: int(df) for x, df in dfs}


def test_fulltext_statistics_follow_every_write_per_reader(db, settings, local_embedder, tmp_path):
    tenant, readers = "t_stats", (["staff"], ["hr"], ["public"], ["hr", "public", "staff"])

    def ingest(files: dict[str, str]) -> None:
        for name, text in files.items():
            (tmp_path / name).write_text(text, encoding="utf-8")
        docs, skipped = load_source(tmp_path, [], settings.max_document_bytes)
        assert ingest_documents(db, local_embedder, settings, tenant, docs, skipped, prune=True).clean

    def check(step: str) -> dict:
        with db.connection() as conn:
            kept = {tuple(g): kept_fulltext_stats(conn, tenant, g) for g in readers}
            for groups in readers:
                assert kept[tuple(groups)] == live_fulltext_stats(conn, tenant, groups), (step, groups)
        return kept

    ingest(STATS_CORPUS)
    first = check("ingest")
    assert first[("staff",)][2]["gateway"] == 2 and first[("hr",)][2]["gateway"] == 1  # per reader, not per table
    assert "bonus" not in first[("staff",)][2]
    with db.connection() as conn, conn.transaction(force_rollback=True):
        deltas = "SELECT count(*) FROM fulltext_lexeme_stats WHERE tenant_id = %s"
        before = conn.execute(deltas, (tenant,)).fetchone()[0]
        conn.execute("UPDATE chunks SET embedding = embedding, updated_at = now() WHERE tenant_id = %s", (tenant,))
        assert conn.execute(deltas, (tenant,)).fetchone()[0] == before  # a vector swap writes no statistics
        conn.execute("UPDATE chunks SET lang = 'simple' WHERE tenant_id = %s AND doc_id = 'a.md'", (tenant,))
        assert kept_fulltext_stats(conn, tenant, ["staff"]) == live_fulltext_stats(conn, tenant, ["staff"])
    with db.connection() as conn:
        store.set_acl(conn, tenant, "b.md", ["staff"])
        conn.commit()
    assert check("acl change")[("staff",)][2]["bonus"] == 1
    ingest({"c.md": "---\nacl: [public]\n---\nStatus page: all systems normal.\n"})  # changed text and ACL
    check("changed document")
    (tmp_path / "a.md").unlink()
    ingest({})  # prune: a.md is deleted (and b.md's file puts it back under hr)
    after = check("delete")
    assert "gateway" not in after[("staff",)][2] and after[("hr",)][2]["gateway"] == 1
    with db.connection() as conn:
        assert store.compact_fulltext_stats(conn, tenant, min_pending=1)
        conn.commit()
        assert conn.execute("SELECT count(*) FROM fulltext_lexeme_stats WHERE tenant_id = %s AND NOT compacted",
                            (tenant,)).fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM fulltext_lexeme_stats WHERE tenant_id = %s"
                            " GROUP BY lexeme, acl HAVING count(*) > 1", (tenant,)).fetchall() == []
    check("compaction")
    with db.connection() as conn:  # TRUNCATE fires no DELETE trigger: its own trigger empties the statistics
        with conn.transaction(force_rollback=True):
            conn.execute("TRUNCATE chunks CASCADE")
            assert kept_fulltext_stats(conn, tenant, ["hr", "public", "staff"]) == (0, 0, {})


def test_deletes_and_acl_changes_outside_an_ingest_fold_their_statistics_once_due(
        db, settings, local_embedder, tmp_path, monkeypatch):
    tenant = f"stats_fold_{uuid.uuid4().hex[:6]}"
    for name, text in STATS_CORPUS.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    docs, skipped = load_source(tmp_path, [], settings.max_document_bytes)
    assert ingest_documents(db, local_embedder, settings, tenant, docs, skipped).clean
    pending = "SELECT count(*) FROM fulltext_lexeme_stats WHERE tenant_id = %s AND NOT compacted"
    with db.connection() as conn:
        store.set_acl(conn, tenant, "b.md", ["staff"])  # below the threshold: the deltas wait
        assert conn.execute(pending, (tenant,)).fetchone()[0] > 0
    monkeypatch.setattr(store, "STATS_COMPACT_MIN_PENDING", 1)
    with db.connection() as conn:
        store.set_acl(conn, tenant, "b.md", ["hr"])
        assert conn.execute(pending, (tenant,)).fetchone()[0] == 0
        store.delete_documents(conn, tenant, ["a.md"])
        assert conn.execute(pending, (tenant,)).fetchone()[0] == 0
        for groups in (["staff"], ["hr"], ["hr", "public", "staff"]):
            assert kept_fulltext_stats(conn, tenant, groups) == live_fulltext_stats(conn, tenant, groups)


def test_a_tenant_emptied_by_deletes_keeps_no_statistics(db, settings, local_embedder, tmp_path):
    """Below the compaction threshold deltas wait for the next write; an emptied tenant may get none."""
    tenant = f"stats_empty_{uuid.uuid4().hex[:6]}"
    for name, text in STATS_CORPUS.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    docs, skipped = load_source(tmp_path, [], settings.max_document_bytes)
    assert ingest_documents(db, local_embedder, settings, tenant, docs, skipped).clean
    rows = ("SELECT (SELECT count(*) FROM fulltext_lexeme_stats WHERE tenant_id = %(t)s)"
            " + (SELECT count(*) FROM fulltext_acl_stats WHERE tenant_id = %(t)s)")
    with db.connection() as conn:
        store.delete_documents(conn, tenant, ["a.md", "b.md"])
        assert conn.execute(rows, {"t": tenant}).fetchone()[0] > 0  # c.md is left: deltas wait
        store.delete_documents(conn, tenant, ["c.md"])
        assert conn.execute(rows, {"t": tenant}).fetchone()[0] == 0
    assert ingest_documents(db, local_embedder, settings, tenant, docs, skipped).clean  # and back
    with db.connection() as conn:
        assert kept_fulltext_stats(conn, tenant, ["hr", "public", "staff"]) == \
            live_fulltext_stats(conn, tenant, ["hr", "public", "staff"])
