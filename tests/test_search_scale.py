"""The search legs on a larger synthetic tenant: the HNSW index is used, a selective ACL filter still
returns k results, and full-text candidates come from the rare term."""
from __future__ import annotations

import numpy as np
import pytest
from psycopg import sql

from tests.conftest import unit
from vector import store
from vector.search import sql as search_sql
from vector.search.bm25 import acl_on_heap
from vector.search.hybrid import HybridSearcher


# --- the vector leg at scale: selective filter, HNSW index -----------------------------------

ROWS, RARE_EVERY = 5000, 100  # 1% of the rows are readable by group `rare`


class SyntheticModel:
    """The session's model under a model id of its own: the synthetic rows get a partial HNSW index of
    their own, built in one pass after the COPY, instead of going one by one into the graph the session's
    other modules built (what made this module's set-up the suite's slowest)."""

    model_id = "test/synthetic-random-vectors"

    def __init__(self, inner):
        self.inner, self.dimension = inner, inner.dimension

    def embed_query(self, text: str):
        return self.inner.embed_query(text)

    def embed_documents(self, texts):
        return self.inner.embed_documents(texts)


@pytest.fixture(scope="module")
def synthetic_model(local_embedder) -> SyntheticModel:
    return SyntheticModel(local_embedder)


@pytest.fixture(scope="module")
def synthetic_tenant(db, synthetic_model) -> str:
    """5,000 chunks with random unit vectors, written directly (no embedding), and the HNSW index."""
    tenant, model, dim = "t_synthetic", synthetic_model.model_id, synthetic_model.dimension
    rng = np.random.default_rng(7)
    with db.connection() as conn:
        with conn.transaction():
            conn.execute(
                "INSERT INTO documents (tenant_id, doc_id, lang, acl, content_hash, index_key)"
                " VALUES (%s, 'synthetic', 'simple', '{common,rare}', 'x', 'x')", (tenant,)
            )
            with conn.cursor().copy(
                "COPY chunks (tenant_id, doc_id, chunk_no, content, acl, content_hash, lang, embedding, embed_model)"
                " FROM STDIN (FORMAT BINARY)"
            ) as copy:
                copy.set_types(["text", "text", "int4", "text", "text[]", "text", "text", "vector", "text"])
                for i in range(ROWS):
                    acl = ["rare"] if i % RARE_EVERY == 0 else ["common"]
                    copy.write_row((tenant, "synthetic", i, f"row {i}", acl, f"h{i}", "simple", unit(rng.normal(size=dim)), model))
        store.ensure_vector_index(conn, model, dim)
        conn.execute("ANALYZE chunks")
        conn.commit()
    return tenant


def run_vector_sql(db, model, tenant, groups, vector, *, limit, ef_search=40, iterative=True, planner=(), explain=False):
    """The vector leg's exact statement under the leg's settings, plus planner settings for tests."""
    local = {"hnsw.ef_search": str(ef_search), "hnsw.iterative_scan": "strict_order" if iterative else "off",
             **dict(planner)}
    with db.connection() as conn, search_sql.read_only(conn):
        dimension = search_sql.set_local_and_dimension(conn, local, model=model, staged=False)
        statement = search_sql.vector_query(model, dimension, tenant)
        rows = conn.execute(
            sql.SQL("EXPLAIN ") + statement if explain else statement,
            {"vec": vector, "tenant": tenant, "groups": groups, "limit": limit},
        ).fetchall()
    return "\n".join(r[0] for r in rows) if explain else [r[0] for r in rows]


def test_explain_shows_the_hnsw_index_is_used(db, synthetic_model, synthetic_tenant):
    vector = synthetic_model.embed_query("any question")
    plan = run_vector_sql(db, synthetic_model.model_id, synthetic_tenant, ["common"], vector, limit=50, explain=True)
    assert store.vector_index_name(synthetic_model.model_id) in plan, plan


def test_selective_filter_still_returns_k_results(db, synthetic_model, synthetic_tenant):
    if not db.supports_iterative_scan:
        pytest.skip("pgvector < 0.8 has no iterative index scans")
    # Through the searcher: the planner may pick the HNSW walk or an exact scan of the 50 rare rows.
    s = HybridSearcher(db, synthetic_model, ef_search=40, candidates=20)
    result = s.search(synthetic_tenant, ["rare"], "any question", k=10, mode="dense")
    s.close()
    vector_stage = result.trace["stages"]["vector"]
    assert len(vector_stage) == 20 and len(result.hits) == 10
    with db.connection() as conn:
        chunk_nos = [r[0] for r in conn.execute("SELECT chunk_no FROM chunks WHERE id = ANY(%s)", ([e["id"] for e in vector_stage],))]
    assert all(n % RARE_EVERY == 0 for n in chunk_nos)
    # Through the HNSW walk itself (sorting priced out so the planner cannot take the exact path):
    # ef_search = 40 sees ~0.4 rare rows, so only the iterative scan fills the LIMIT.
    vector = synthetic_model.embed_query("any question")
    args = (db, synthetic_model.model_id, synthetic_tenant, ["rare"], vector)
    forced = (("enable_sort", "off"),)
    plan = run_vector_sql(*args, limit=20, planner=forced, explain=True)
    assert store.vector_index_name(synthetic_model.model_id) in plan and "Sort" not in plan, plan
    assert len(run_vector_sql(*args, limit=20, planner=forced)) == 20
    assert len(run_vector_sql(*args, limit=20, planner=forced, iterative=False)) < 20


def test_full_text_on_a_large_tenant_selects_candidates_by_the_rare_term(db, synthetic_model, synthetic_tenant):
    """'row' is in all 5,000 rows, '17' in one: only '17' selects."""
    s = HybridSearcher(db, synthetic_model)
    result = s.search(synthetic_tenant, ["common", "rare"], "row 17", k=3, mode="bm25")
    s.close()
    bm25 = result.trace["bm25"]
    assert bm25["df"]["row"] == ROWS and bm25["df"]["17"] == 1 and bm25["match"] == ["17"]
    assert [h.text for h in result.hits] == ["row 17"]


def test_full_text_checks_a_broad_readers_acl_on_the_rows_and_a_narrow_ones_in_the_index():
    assert acl_on_heap(850, 1000) and acl_on_heap(400, 1000)
    assert not acl_on_heap(399, 1000) and not acl_on_heap(10, 1000) and not acl_on_heap(0, 0)


@pytest.mark.parametrize("groups, check, readable_rows", [(["common"], "heap", ROWS - ROWS // RARE_EVERY),
                                                          (["rare"], "index", ROWS // RARE_EVERY)])
def test_both_acl_checks_return_only_readable_rows(db, synthetic_model, synthetic_tenant, groups, check, readable_rows):
    """'row' is in every row, readable or not, so only the ACL check keeps the other group's rows out."""
    with HybridSearcher(db, synthetic_model, candidates=200, bm25_max_scored=5000) as s:
        result = s.search(synthetic_tenant, groups, "row", k=10, mode="bm25")
    assert result.trace["bm25"]["acl_check"] == check
    ids = [e["id"] for e in result.trace["stages"]["fts"]]
    assert len(ids) == min(200, readable_rows)
    with db.connection() as conn:
        acls = conn.execute("SELECT DISTINCT acl FROM chunks WHERE id = ANY(%s)", (ids,)).fetchall()
    assert acls == [(groups,)]


def test_one_gin_index_serves_text_alone_groups_alone_and_both(db, synthetic_tenant):
    with db.connection() as conn:
        gins = [r[0] for r in conn.execute(
            "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam"
            " WHERE i.indrelid = 'chunks'::regclass AND a.amname = 'gin' ORDER BY 1")]
        assert gins == ["chunks_tsv_acl_gin"]  # migration 016: no single-column copies
        for condition in ("tsv @@ '17'::tsquery", "acl && '{rare}'", "tsv @@ '17'::tsquery AND acl && '{rare}'"):
            plan = "\n".join(r[0] for r in conn.execute(
                "EXPLAIN SELECT id FROM chunks WHERE tenant_id = %s AND " + condition, (synthetic_tenant,)))
            assert "Bitmap Index Scan on chunks_tsv_acl_gin" in plan, plan


def test_the_trace_says_which_distances_the_vector_leg_computed(db, synthetic_model, synthetic_tenant):
    with HybridSearcher(db, synthetic_model, ef_search=40) as searcher:
        broad = searcher.search(synthetic_tenant, ["common"], "any question", k=5, mode="dense")
        narrow = searcher.search(synthetic_tenant, ["rare"], "any question", k=5, mode="dense")
    assert broad.trace["timings_ms"]["vector_graph"] == "shared"  # written by COPY, not ingest: no own graph
    assert narrow.trace["timings_ms"]["vector_graph"] == "exact"  # 50 readable rows
