"""A tenant's own HNSW graph (migration 013): built, registered, dropped.

The model's shared graph spans every tenant, and the vector leg walks it under the tenant filter.
When tenants' corpora sit in separate regions of the embedding space, the greedy walk can settle in
another tenant's region and return the wrong neighbours (bench/tenant_recall.py). A tenant of at
least `min_rows` chunks of a model that other tenants also use therefore gets a partial index
`WHERE embed_model = M AND tenant_id = T`; a model served to one tenant only needs none (the shared
graph is its graph). Tenants below `min_rows` are searched with exact distances anyway
(`vector.search.hybrid.use_exact_scan`).

An index is registered in `tenant_vector_indexes` only once it is valid; the vector leg names the
tenant as a literal whatever the registry says, so the planner picks the tenant's graph whenever it
exists and the shared one otherwise.
"""
from __future__ import annotations

import hashlib
import logging
from contextlib import contextmanager

import psycopg
from psycopg import sql

from core.database import Database
from core.errors import CrossroadsError
from vector.store import HNSW_BUILD

log = logging.getLogger(__name__)

_LOCK_SPACE = 0x7E1A  # advisory locks of index builds: (this, hash of the index name)
BUILD_LOCK_TIMEOUT = "5min"  # longest wait of a concurrent build for older transactions to end


def index_name(tenant: str, model: str) -> str:
    return "chunks_hnsw_t_" + hashlib.sha1(f"{tenant}\0{model}".encode()).hexdigest()[:16]


def wants_own_index(tenant_rows: int, other_tenants: bool, min_rows: int) -> bool:
    return other_tenants and tenant_rows >= min_rows


def _create(name: str, tenant: str, model: str, dimension: int, concurrently: bool) -> sql.Composed:
    return sql.SQL(
        "CREATE INDEX {how} IF NOT EXISTS {name} ON chunks USING hnsw ((embedding::vector({dim})) vector_cosine_ops)"
        " WITH (" + HNSW_BUILD + ") WHERE embed_model = {model} AND tenant_id = {tenant}"
    ).format(how=sql.SQL("CONCURRENTLY" if concurrently else ""), name=sql.Identifier(name),
             dim=sql.Literal(dimension), model=sql.Literal(model), tenant=sql.Literal(tenant))


def _needs_graph(conn: psycopg.Connection, tenant: str, model: str, min_rows: int) -> bool:
    """Whether the tenant should get its own graph of the model and has none registered. Cheap on a
    large database, since every ingest (an API upload of one document too) asks: the other tenants
    come from the small statistics table, and the tenant's rows are counted only up to `min_rows`."""
    # partitioned by tenant (vector/partitions.py): each partition's index is its tenant's own graph
    registered, others, rows = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM tenant_vector_indexes WHERE tenant_id = %(t)s AND embed_model = %(m)s)"
        " OR EXISTS (SELECT 1 FROM pg_partitioned_table WHERE partrelid = 'chunks'::regclass),"
        " EXISTS (SELECT 1 FROM (SELECT DISTINCT tenant_id FROM fulltext_acl_stats WHERE tenant_id <> %(t)s) o"
        "         WHERE EXISTS (SELECT 1 FROM chunks c WHERE c.tenant_id = o.tenant_id AND c.embed_model = %(m)s)),"
        " (SELECT count(*) FROM (SELECT 1 FROM chunks WHERE tenant_id = %(t)s AND embed_model = %(m)s"
        "  LIMIT %(min)s) s)",
        {"t": tenant, "m": model, "min": min_rows},
    ).fetchone()
    return not registered and wants_own_index(rows, others, min_rows)


def _rows(conn: psycopg.Connection, tenant: str, model: str) -> int:
    return conn.execute("SELECT count(*) FROM chunks WHERE tenant_id = %s AND embed_model = %s",
                        (tenant, model)).fetchone()[0]


def _register(conn: psycopg.Connection, tenant: str, model: str, dimension: int, name: str, rows: int) -> None:
    conn.execute(
        "INSERT INTO tenant_vector_indexes (tenant_id, embed_model, dimension, index_name, built_rows)"
        " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (tenant_id, embed_model) DO NOTHING",
        (tenant, model, dimension, name, rows),
    )


def ensure(db: Database, tenant: str, model: str, dimension: int, min_rows: int) -> dict | None:
    """Build the tenant's graph if it needs one and has none: what was built, else None.

    The check runs on a pooled connection (every ingest asks). The build is CREATE INDEX
    CONCURRENTLY, so other tenants' writes and every search go on during it; it runs outside any
    transaction, hence on its own autocommit connection. Two processes finishing an ingest of the
    same tenant at once: the advisory lock lets one build, the other returns. A build that died (its
    index left invalid) is dropped and redone."""
    name = index_name(tenant, model)
    with db.connection() as conn:
        needed = _needs_graph(conn, tenant, model, min_rows)
    if not needed:
        return None
    with psycopg.connect(db.url, autocommit=True, prepare_threshold=None) as conn:
        if not _needs_graph(conn, tenant, model, min_rows):  # built by another process meanwhile
            return None
        if not conn.execute("SELECT pg_try_advisory_lock(%s, hashtext(%s))", (_LOCK_SPACE, name)).fetchone()[0]:
            log.info("another process is building the HNSW graph of tenant %s", tenant)
            return None
        try:
            invalid = conn.execute(
                "SELECT NOT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = %s",
                (name,),
            ).fetchone()
            if invalid and invalid[0]:
                conn.execute(sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(sql.Identifier(name)))
            # CONCURRENTLY waits for every transaction older than its snapshot, in any table: one left
            # open somewhere must fail this build (retried by the next ingest), not hang the ingest
            conn.execute(sql.SQL("SET maintenance_work_mem = '512MB'; SET lock_timeout = {}").format(
                sql.Literal(BUILD_LOCK_TIMEOUT)))
            conn.execute(_create(name, tenant, model, dimension, concurrently=True))
            rows = _rows(conn, tenant, model)
            _register(conn, tenant, model, dimension, name, rows)
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", (_LOCK_SPACE, name))
    log.info("built the HNSW graph of tenant %s (%s rows of %s): %s", tenant, rows, model, name)
    return {"index": name, "rows": rows}


def ensure_tenants(db: Database, min_rows: int, tenant: str | None = None) -> list[dict]:
    """`ensure` for each model serving `tenant`, or with no tenant for every (tenant, model) big
    enough to need a graph (after an upgrade, or once a model that served one tenant serves a
    second): [{tenant, model, chunks, built}]."""
    with db.connection() as conn:
        sizes = conn.execute(
            "SELECT c.tenant_id, c.embed_model, m.dimension, count(*) FROM chunks c"
            " JOIN embedding_models m USING (embed_model) WHERE %(t)s::text IS NULL OR c.tenant_id = %(t)s"
            " GROUP BY 1, 2, 3 HAVING %(t)s::text IS NOT NULL OR count(*) >= %(min)s ORDER BY 1, 2",
            {"t": tenant, "min": min_rows},
        ).fetchall()
    if tenant is not None and not sizes:
        raise CrossroadsError(f"tenant {tenant!r} has no indexed chunks: ingest its documents first")
    return [{"tenant": t, "model": model, "chunks": int(chunks), "built": ensure(db, t, model, dimension, min_rows)}
            for t, model, dimension, chunks in sizes]


def ensure_in_transaction(conn: psycopg.Connection, tenant: str, model: str, dimension: int,
                          min_rows: int) -> dict | None:
    """As `ensure`, inside the caller's transaction (an embedding switch: the rows and their graph
    commit together). A plain CREATE INDEX: it holds off other writers to chunks while it builds."""
    if not _needs_graph(conn, tenant, model, min_rows):
        return None
    name, rows = index_name(tenant, model), _rows(conn, tenant, model)
    conn.execute("SET LOCAL maintenance_work_mem = '512MB'")
    conn.execute(_create(name, tenant, model, dimension, concurrently=False))
    _register(conn, tenant, model, dimension, name, rows)
    return {"index": name, "rows": rows}


_UNSERVED = (
    "SELECT embed_model, index_name FROM tenant_vector_indexes r WHERE tenant_id = %s AND NOT EXISTS"
    " (SELECT 1 FROM chunks c WHERE c.tenant_id = r.tenant_id AND c.embed_model = r.embed_model)"
    " ORDER BY embed_model"
)


def drop_unserved(db: Database, tenant: str) -> list[str]:
    """Drop the tenant's graphs of models that no longer serve any of its chunks: after a switch,
    and after deletes that emptied the tenant (an empty partial index is still a catalog entry the
    planner weighs for every query on chunks). The check runs on a pooled connection, so a delete
    that leaves chunks behind costs one index probe; DROP INDEX CONCURRENTLY needs its own
    autocommit connection; the registry row goes only once the index is gone, so a drop that fails
    (held up past BUILD_LOCK_TIMEOUT by a long transaction) is retried by the next call."""
    with db.connection() as conn:
        if not conn.execute(_UNSERVED, (tenant,)).fetchall():
            return []
    dropped = []
    with _dropping(db) as conn:
        for model, name in conn.execute(_UNSERVED, (tenant,)).fetchall():
            conn.execute(sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(sql.Identifier(name)))
            conn.execute("DELETE FROM tenant_vector_indexes WHERE tenant_id = %s AND embed_model = %s", (tenant, model))
            log.info("dropped the HNSW graph %s of tenant %s: no chunk of %s left", name, tenant, model)
            dropped.append(name)
    return dropped


def drop_tenant_graphs(db: Database, tenant: str) -> list[str]:
    """Every HNSW graph of a tenant none of whose chunks is left (`crossroads tenants delete`): the
    registered ones (`drop_unserved`) and any a build that died left unregistered, named as a build
    names them."""
    dropped = drop_unserved(db, tenant)
    with db.connection() as conn:
        models = [r[0] for r in conn.execute(
            "SELECT embed_model FROM embedding_models UNION SELECT embed_model FROM staged_embedding_models")]
        left = [r[0] for r in conn.execute("SELECT relname FROM pg_class WHERE relkind = 'i' AND relname = ANY(%s)"
                                           " ORDER BY 1", ([index_name(tenant, m) for m in models],))]
    if left:
        with _dropping(db) as conn:
            for name in left:
                conn.execute(sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(sql.Identifier(name)))
    return dropped + left


@contextmanager
def _dropping(db: Database):
    """DROP INDEX CONCURRENTLY needs an autocommit connection of its own; held up past BUILD_LOCK_TIMEOUT
    by a long transaction, it fails rather than hangs (the caller retries later)."""
    with psycopg.connect(db.url, autocommit=True, prepare_threshold=None) as conn:
        conn.execute(sql.SQL("SET lock_timeout = {}").format(sql.Literal(BUILD_LOCK_TIMEOUT)))
        yield conn


def registered_indexes(conn: psycopg.Connection, tenant: str) -> list[dict]:
    rows = conn.execute(
        "SELECT embed_model, index_name, built_rows, built_at FROM tenant_vector_indexes"
        " WHERE tenant_id = %s ORDER BY embed_model",
        (tenant,),
    ).fetchall()
    return [{"model": m, "index": n, "built_rows": r, "built_at": b.isoformat()} for m, n, r, b in rows]
