"""All SQL of the hybrid index's read side: the vector leg, the full-text leg, candidate details.

Every statement that returns chunk rows carries `tenant_id = ... AND acl && groups` itself: access
control lives in the WHERE clause of each query, never in a post-filter in Python.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import psycopg
from psycopg import sql

# Full-text ranking expressions the searcher may choose from (never free text in SQL). `q` is the
# tsquery. Normalisation 1 divides by 1 + log(length) so that long chunks, which match an OR query
# on more of its common words, do not win on length alone.
FTS_RANKS = {
    "ts_rank_cd": "ts_rank_cd(tsv, q)",
    "ts_rank_cd_log": "ts_rank_cd(tsv, q, 1)",
    "ts_rank": "ts_rank(tsv, q)",
    "ts_rank_log": "ts_rank(tsv, q, 1)",
}


def model_dimension(conn: psycopg.Connection, model: str) -> int | None:
    """The dimension of the model's partial HNSW index, None while it has no index yet."""
    row = conn.execute("SELECT dimension FROM embedding_models WHERE embed_model = %s", (model,)).fetchone()
    return row[0] if row else None


def vector_query(model: str, dimension: int) -> sql.Composed:
    """The vector leg's SELECT, shaped to match the model's partial index exactly.

    The index is `USING hnsw ((embedding::vector(DIM)) vector_cosine_ops) WHERE embed_model = 'M'`:
    the planner uses it only when ORDER BY carries the same cast expression and the WHERE clause
    implies the index predicate. The dimension and model are therefore literals (they come from
    embedding_models and the embedder, not from users): a `$n` parameter would leave the predicate
    unprovable under a generic plan and silently turn the search into a sequential scan.
    """
    return sql.SQL(
        "SELECT id, embedding::vector({dim}) <=> %(vec)s AS dist FROM chunks"
        " WHERE embed_model = {model} AND tenant_id = %(tenant)s AND acl && %(groups)s"
        " ORDER BY embedding::vector({dim}) <=> %(vec)s LIMIT %(limit)s"
    ).format(dim=sql.Literal(dimension), model=sql.Literal(model))


def vector_leg(
    conn: psycopg.Connection,
    *,
    tenant: str,
    groups: Sequence[str],
    model: str,
    fallback_dimension: int,
    vector: np.ndarray,
    limit: int,
    ef_search: int,
    iterative_scan: bool,
) -> list[tuple[int, float]]:
    """(chunk id, cosine similarity) best first, in a read-only transaction.

    `SET LOCAL` (via set_config(..., true)) lasts until the end of this transaction, so the
    settings never leak into other users of the pooled connection. Without an index yet (a tiny,
    fresh corpus) the same query runs as an exact sequential scan.
    """
    with conn.transaction():
        conn.execute("SET TRANSACTION READ ONLY")
        conn.execute("SELECT set_config('hnsw.ef_search', %s, true)", (str(ef_search),))
        if iterative_scan:
            # pgvector >= 0.8: keep walking the graph until LIMIT rows pass the tenant/ACL filter,
            # instead of returning fewer rows when the filter is selective.
            conn.execute("SELECT set_config('hnsw.iterative_scan', 'strict_order', true)")
        dimension = model_dimension(conn, model) or fallback_dimension
        rows = conn.execute(
            vector_query(model, dimension),
            {"vec": vector, "tenant": tenant, "groups": list(groups), "limit": limit},
        ).fetchall()
    return [(int(i), 1.0 - float(d)) for i, d in rows]


def phrase_queries(conn: psycopg.Connection, pieces: Sequence[tuple[str, str]]) -> list[str]:
    """tsquery text of `phraseto_tsquery(config, text)` per (text, config); '' for stop words.

    The server's own parser and stemmers turn text into lexemes, so the query side normalises
    exactly as the generated `tsv` column did.
    """
    if not pieces:
        return []
    with conn.transaction():
        rows = conn.execute(
            "SELECT phraseto_tsquery(cfg::regconfig, piece)::text"
            " FROM unnest(%s::text[], %s::text[]) WITH ORDINALITY AS u(piece, cfg, ord) ORDER BY ord",
            ([p for p, _ in pieces], [c for _, c in pieces]),
        ).fetchall()
    return [r[0] for r in rows]


def fts_leg(
    conn: psycopg.Connection,
    *,
    tenant: str,
    groups: Sequence[str],
    tsquery: str,
    limit: int,
    rank: str = "ts_rank_cd",
) -> list[tuple[int, float]]:
    """(chunk id, rank) best first for a tsquery given in tsquery syntax (already normalised)."""
    statement = sql.SQL(
        "SELECT id, {rank} AS score FROM chunks, CAST(%(q)s AS tsquery) AS q"
        " WHERE tenant_id = %(tenant)s AND acl && %(groups)s AND tsv @@ q"
        " ORDER BY score DESC, id LIMIT %(limit)s"
    ).format(rank=sql.SQL(FTS_RANKS[rank]))
    with conn.transaction():
        conn.execute("SET TRANSACTION READ ONLY")
        rows = conn.execute(
            statement, {"q": tsquery, "tenant": tenant, "groups": list(groups), "limit": limit}
        ).fetchall()
    return [(int(i), float(s)) for i, s in rows]


def fetch_candidates(
    conn: psycopg.Connection, *, tenant: str, groups: Sequence[str], ids: Sequence[int]
) -> dict[int, tuple]:
    """id -> (doc_id, title, heading, content, lang) for the fused ids, filtered again by tenant/ACL.

    The second filter closes the window between the legs and this read: a chunk whose ACL changed
    or which was deleted meanwhile is simply not returned.
    """
    if not ids:
        return {}
    with conn.transaction():
        rows = conn.execute(
            "SELECT c.id, c.doc_id, d.title, c.heading, c.content, c.lang"
            " FROM chunks c JOIN documents d ON d.tenant_id = c.tenant_id AND d.doc_id = c.doc_id"
            " WHERE c.id = ANY(%s) AND c.tenant_id = %s AND c.acl && %s",
            (list(ids), tenant, list(groups)),
        ).fetchall()
    return {int(r[0]): tuple(r[1:]) for r in rows}
