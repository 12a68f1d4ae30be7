"""The SQL of the hybrid index's read side: read-only transactions, the vector leg, scan sizes, candidate
details. The full-text leg's statements are in vector/search/fulltext_sql.py.

Every statement that returns chunk rows carries `tenant_id = ... AND acl && groups` itself: access
control lives in the WHERE clause of each query, never in a post-filter in Python.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Mapping, Sequence

import numpy as np
import psycopg
from psycopg import sql

from core.errors import ModelNotServedError

# `settings` for the rest of the transaction: set_config(..., true) is SET LOCAL, so nothing leaks
# into other users of the pooled connection
_SET_LOCAL = ("SELECT count(set_config(name, value, true)) AS applied"
              " FROM unnest(%(names)s::text[], %(values)s::text[]) AS s(name, value)")


@contextmanager
def read_only(conn: psycopg.Connection, settings: Mapping[str, str] | None = None) -> Iterator[psycopg.Connection]:
    """One read-only transaction: the search path can never write, whatever a bug makes it run.

    The mode goes into the BEGIN statement itself (`BEGIN READ ONLY`), so it costs no round trip of
    its own; the connection (idle, fresh from the pool) gets its previous mode back afterwards.
    `settings` hold for this transaction alone (SET LOCAL), applied in one statement before any
    other, so that a statement timeout among them governs every statement the caller runs.
    """
    previous = conn.read_only
    conn.read_only = True
    try:
        with conn.transaction():
            if settings:
                conn.execute(_SET_LOCAL, {"names": list(settings), "values": list(settings.values())})
            yield conn
    finally:
        if conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:  # a broken one is discarded
            conn.read_only = previous


# For the transaction these are set in, scans return rows in the same order on every run: no
# parallel workers (their rows interleave by timing) and no synchronised sequential scans (a scan of
# a large table joins one already running, mid-table). The full-text leg's capped candidate list
# depends on it.
STABLE_SCAN_ORDER = {"max_parallel_workers_per_gather": "0", "synchronize_seqscans": "off"}


def statement_timeout(ms: int) -> dict[str, str]:
    """The setting that cancels any one statement of a search running longer than `ms` (0: never)."""
    return {"statement_timeout": f"{ms}ms"} if ms > 0 else {}


def model_dimension(conn: psycopg.Connection, model: str) -> int | None:
    """The dimension of the model's partial HNSW index, None while it has no index yet."""
    row = conn.execute("SELECT dimension FROM embedding_models WHERE embed_model = %s", (model,)).fetchone()
    return row[0] if row else None


def set_local_and_dimension(conn: psycopg.Connection, settings: dict[str, str], *, model: str, staged: bool) -> int | None:
    """In one round trip: `settings` for the rest of this transaction (SET LOCAL), and the dimension
    of the model's served (or staged) HNSW index, None while it has none."""
    registry = "staged_embedding_models" if staged else "embedding_models"
    return conn.execute(
        sql.SQL("WITH applied AS (" + _SET_LOCAL + ")"
                " SELECT (SELECT dimension FROM {registry} WHERE embed_model = %(model)s) FROM applied"
                ).format(registry=sql.Identifier(registry)),
        {"names": list(settings), "values": list(settings.values()), "model": model},
    ).fetchone()[0]


def vector_query(model: str, dimension: int, tenant: str, cyrillic: bool | None = None) -> sql.Composed:
    """The vector leg's SELECT, shaped to match the model's partial indexes exactly.

    The shared index is `USING hnsw ((embedding::vector(DIM)) vector_cosine_ops) WHERE embed_model = 'M'`,
    a tenant's own one (vector/hnsw_index.py) adds `AND tenant_id = 'T'`: the planner uses one only
    when ORDER BY carries the same cast expression and the WHERE clause implies its predicate, and
    of the two it takes the tenant's smaller one. Dimension, model and tenant are therefore literals
    (from embedding_models, the embedder and the verified token, quoted by psycopg): a `$n`
    parameter would leave the predicates unprovable under a generic plan and silently turn the
    search into a sequential scan. `cyrillic` keeps only the chunks written in Russian (True) or only
    the others (False): one script's nearest, as vector/search/language_bias.py asks for them.
    """
    script = sql.SQL("") if cyrillic is None else sql.SQL(" AND (lang = 'russian') = {}").format(sql.Literal(cyrillic))
    return sql.SQL(
        "SELECT id, embedding::vector({dim}) <=> %(vec)s AS dist FROM chunks"
        " WHERE embed_model = {model} AND tenant_id = {tenant} AND acl && %(groups)s{script}"
        " ORDER BY embedding::vector({dim}) <=> %(vec)s LIMIT %(limit)s"
    ).format(dim=sql.Literal(dimension), model=sql.Literal(model), tenant=sql.Literal(tenant), script=script)


def script_means(conn: psycopg.Connection, *, tenant: str, groups: Sequence[str],
                 model: str) -> dict[bool, tuple[int, np.ndarray]]:
    """The reader's chunks of the model, split by script (True: written in Russian): how many, and
    their mean vector. Only what the reader may read counts (`acl && groups`)."""
    rows = conn.execute(
        "SELECT lang = 'russian', count(embedding), avg(embedding) FROM chunks"
        " WHERE embed_model = %(model)s AND tenant_id = %(tenant)s AND acl && %(groups)s GROUP BY 1",
        {"model": model, "tenant": tenant, "groups": list(groups)},
    ).fetchall()
    return {bool(cyrillic): (int(n), np.asarray(mean.to_numpy() if hasattr(mean, "to_numpy") else mean, dtype=np.float32))
            for cyrillic, n, mean in rows if mean is not None}


def staged_vector_query(model: str, dimension: int) -> sql.Composed:
    """The vector leg over a model's *staged* vectors (evaluating a migration before its switch).

    Same shape as `vector_query`, matching the staging table's partial index
    `((embedding::vector(DIM)) vector_cosine_ops) WHERE embed_model = 'M'`; tenant and ACL come
    from the chunk row, joined by id, so the filter is the same as on the served leg. A stale
    staged vector (its chunk's text changed) never matches.
    """
    return sql.SQL(
        "SELECT s.chunk_id, s.embedding::vector({dim}) <=> %(vec)s AS dist"
        " FROM chunk_vectors_staged s JOIN chunks c ON c.id = s.chunk_id"
        " WHERE s.embed_model = {model} AND c.tenant_id = %(tenant)s AND c.acl && %(groups)s"
        " AND s.content_hash = c.content_hash"
        " ORDER BY s.embedding::vector({dim}) <=> %(vec)s LIMIT %(limit)s"
    ).format(dim=sql.Literal(dimension), model=sql.Literal(model))


def check_model_has_vectors(conn: psycopg.Connection, tenant: str, model: str, staged: bool) -> None:
    """Called when the vector leg found nothing: fine for a reader who may read nothing, an error
    when the tenant has no vectors of the query's model at all (vectors of another model are not
    comparable, and an empty leg would silently turn hybrid search into full-text search)."""
    if staged:
        if not conn.execute(
            "SELECT EXISTS (SELECT 1 FROM chunk_vectors_staged s JOIN chunks c ON c.id = s.chunk_id"
            " WHERE c.tenant_id = %s AND s.embed_model = %s)", (tenant, model)
        ).fetchone()[0]:
            raise ModelNotServedError(
                f"tenant {tenant} has no staged vectors of {model}: run `crossroads embeddings stage "
                f"--tenant {tenant} --to {model}` first"
            )
        return
    has_model, served = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM chunks WHERE tenant_id = %(t)s AND embed_model = %(m)s),"
        " (SELECT embed_model FROM chunks WHERE tenant_id = %(t)s AND embed_model IS NOT NULL LIMIT 1)",
        {"t": tenant, "m": model},
    ).fetchone()
    if not has_model and served is not None:
        raise ModelNotServedError(
            f"tenant {tenant} is served by model {served}; set CROSSROADS_EMBED_PROVIDER accordingly "
            f"(and CROSSROADS_VOYAGE_MODEL for a voyage/ model): this query was embedded with {model}"
        )


# The chunks a reader may see and the tenant's chunks, from the per-ACL statistics kept at write time
# (migration 008): each leg sizes its work by them (exact scan or walk; ACL check in the index or on the rows).
READER_AND_TENANT_CHUNKS = "coalesce(sum(chunks) FILTER (WHERE acl && %(groups)s), 0), coalesce(sum(chunks), 0)"


def scan_sizes(conn: psycopg.Connection, *, tenant: str, groups: Sequence[str], model: str) -> tuple[int, int, bool]:
    """(chunks the reader may see, chunks an HNSW walk may step over, whether the tenant has its own
    graph of the model): the first from the kept statistics (migration 008); the second the tenant's
    chunks when it has its own graph (migration 013), else the planner's estimate for the whole table,
    which VACUUM and ANALYZE keep current (0 before the first ANALYZE, so at least the readable count)."""
    readable, tenant_rows, table, own = conn.execute(
        "SELECT " + READER_AND_TENANT_CHUNKS + ", (SELECT reltuples FROM pg_class WHERE oid = 'chunks'::regclass),"
        " EXISTS (SELECT 1 FROM tenant_vector_indexes WHERE tenant_id = %(tenant)s AND embed_model = %(m)s)"
        # partitioned by tenant (vector/partitions.py): the tenant's partition has its own graph
        " OR EXISTS (SELECT 1 FROM pg_partitioned_table WHERE partrelid = 'chunks'::regclass)"
        " FROM fulltext_acl_stats WHERE tenant_id = %(tenant)s",
        {"tenant": tenant, "groups": list(groups), "m": model},
    ).fetchone()
    return int(readable), max(int(readable), int(tenant_rows if own else table)), bool(own)


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
    staged: bool = False,
    exact: bool = False,
    cyrillic: bool | None = None,
) -> list[tuple[int, float]]:
    """(chunk id, cosine similarity) best first, inside the caller's `read_only` transaction (its
    planner settings last until that transaction ends). Without an index yet (a tiny, fresh corpus)
    the same query runs as an exact sequential scan. `staged` searches the model's staged vectors
    instead of the served ones (see `staged_vector_query`); `cyrillic` searches one script's chunks
    (see `vector_query`).
    """
    local = {"hnsw.ef_search": str(ef_search)}
    if exact:
        # The model's HNSW graph spans every tenant: under a filter that keeps a small share of
        # it, the approximate walk loses recall, while exact distances over a few thousand rows
        # cost milliseconds.
        local["enable_indexscan"] = "off"
    elif iterative_scan:
        # pgvector >= 0.8: keep walking the graph until LIMIT rows pass the tenant/ACL filter,
        # instead of returning fewer rows when the filter is selective.
        local["hnsw.iterative_scan"] = "strict_order"
    dimension = set_local_and_dimension(conn, local, model=model, staged=staged) or fallback_dimension
    statement = staged_vector_query(model, dimension) if staged else vector_query(model, dimension, tenant, cyrillic)
    rows = conn.execute(
        statement, {"vec": vector, "tenant": tenant, "groups": list(groups), "limit": limit}
    ).fetchall()
    if not rows:
        check_model_has_vectors(conn, tenant, model, staged)
    return [(int(i), 1.0 - float(d)) for i, d in rows]


def fetch_candidates(
    conn: psycopg.Connection, *, tenant: str, groups: Sequence[str], ids: Sequence[int],
    settings: Mapping[str, str] | None = None,
) -> dict[int, tuple]:
    """id -> (doc_id, title, heading, content, lang, blocks) for the fused ids, filtered again by tenant/ACL.

    The second filter closes the window between the legs and this read: a chunk whose ACL changed
    or which was deleted meanwhile is simply not returned.
    """
    if not ids:
        return {}
    with read_only(conn, settings):
        rows = conn.execute(
            "SELECT c.id, c.doc_id, d.title, c.heading, c.content, c.lang, c.blocks"
            " FROM chunks c JOIN documents d ON d.tenant_id = c.tenant_id AND d.doc_id = c.doc_id"
            " WHERE c.id = ANY(%s) AND c.tenant_id = %s AND c.acl && %s",
            (list(ids), tenant, list(groups)),
        ).fetchall()
    return {int(r[0]): tuple(r[1:]) for r in rows}
