"""Deleting a tenant (`crossroads tenants delete`): every row of it, then its own HNSW indexes and
partition. The SQL is core/tenants.py; this use case adds the locks and the vector store's parts."""
from __future__ import annotations

from dataclasses import dataclass, field

import psycopg
from psycopg import sql as psql

from core import tenants as tenant_store
from core.database import Database
from core.errors import CrossroadsError
from vector import hnsw_index, partitions, store
from vector.model_switch.sql import lock_tenant as lock_embeddings


@dataclass
class TenantDeletion:
    tenant: str
    rows: dict[str, int]  # table -> rows of the tenant it held (those removed by cascade included)
    extraction_cache: int  # cached graph-build LLM output whose text no tenant holds any longer
    hnsw_indexes_dropped: list[str]
    partition_dropped: str | None  # chunks partitioned by tenant (vector/partitions.py): its partition
    left: dict[str, int]  # rows of the tenant found once it was done: written by something still running
    notes: list[str] = field(default_factory=list)  # what could not be done, and what to do


def tenant_rows(db: Database, tenant: str) -> dict[str, int]:
    """What deleting `tenant` would remove, table by table; refuses as `delete_tenant` does (an unknown
    tenant, a job queued or running) so that a person is asked nothing about a delete that cannot run."""
    with db.connection() as conn:
        rows = tenant_store.row_counts(conn, tenant, tenant_store.tenant_tables(conn))
        if not any(rows.values()):
            raise tenant_store.unknown_tenant(conn, tenant)
        live = tenant_store.live_jobs(conn, tenant, db.job_lease_s)
    if live:
        raise tenant_store.TenantBusy(tenant, live)
    return rows


def delete_tenant(db: Database, tenant: str) -> TenantDeletion:
    """Delete every row of `tenant` in every table with a tenant_id column, in one transaction, with its
    partition (partitioned chunks) and the shared extraction cache's output no tenant uses; then drop its
    own HNSW indexes. Refused (TenantBusy) while one of its jobs is queued or running.

    The transaction holds the tenant's write lock (vector.store.lock_tenant_writes, which every document
    write holds shared), the embedding-switch lock and the graph's swap lock, so no ingest, embedding
    stage or graph swap of the tenant commits inside the delete and leaves part of it behind."""
    try:
        with db.connection() as conn, conn.transaction():
            conn.execute(psql.SQL("SET LOCAL lock_timeout = {}").format(psql.Literal(tenant_store.LOCK_TIMEOUT)))
            store.lock_tenant_writes(conn, tenant, exclusive=True)
            lock_embeddings(conn, tenant)
            conn.execute("SELECT lock_graph_sources(%s, true)", (tenant,))
            tables = tenant_store.tenant_tables(conn)
            rows = tenant_store.row_counts(conn, tenant, tables)
            if not any(rows.values()):
                raise tenant_store.unknown_tenant(conn, tenant)
            live = tenant_store.live_jobs(conn, tenant, db.job_lease_s)
            if live:
                raise tenant_store.TenantBusy(tenant, live)
            tenant_store.delete_rows(conn, tenant, tables)
            cache = tenant_store.prune_extraction_cache(conn)
            partition = _drop_partition(conn, tenant)
            rest = [t for t in tables if t != tenant_store.INDEX_REGISTRY]
            stuck = {t: n for t, n in tenant_store.row_counts(conn, tenant, rest).items() if n}
            if stuck:  # a table the delete cannot empty (a foreign key, a trigger): roll back, delete nothing
                raise CrossroadsError(f"rows of tenant {tenant!r} stayed in {stuck} inside the delete: nothing "
                                      "deleted. This is a bug of `crossroads tenants delete`; report it with this message")
    except psycopg.errors.LockNotAvailable:
        raise CrossroadsError(f"tenant {tenant!r} stayed in use for {tenant_store.LOCK_TIMEOUT} (an ingest, a graph "
                              "build or an embedding switch writing to it): nothing deleted. Stop them, then delete "
                              "again") from None
    outcome = TenantDeletion(tenant, rows, cache, [], partition, {})
    try:
        outcome.hnsw_indexes_dropped = hnsw_index.drop_tenant_graphs(db, tenant)
    except psycopg.Error as exc:  # its registry row stays: the tenant stays known, and deleting it again retries
        outcome.notes.append(f"the tenant's own HNSW index could not be dropped ({exc}); it holds no row any more. "
                             f"Run `crossroads tenants delete {tenant}` again to drop it")
    with db.connection() as conn:
        after = tenant_store.row_counts(conn, tenant, tenant_store.tenant_tables(conn))
    outcome.left = {t: n for t, n in after.items() if n}
    if outcome.left and not outcome.notes:
        outcome.notes.append(f"rows of {tenant!r} were written after the delete, by an ingest or a request still "
                             f"running: stop it, then run `crossroads tenants delete {tenant}` again")
    return outcome


def _drop_partition(conn: psycopg.Connection, tenant: str) -> str | None:
    """The tenant's own partition of chunks, once the delete has emptied it (one that still holds rows is
    never dropped). DROP TABLE takes an exclusive lock on chunks, so it comes last, just before the commit,
    under the transaction's lock timeout."""
    if not partitions.is_partitioned(conn):
        return None
    name = partitions.partition_name(tenant)
    if not conn.execute("SELECT 1 FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
                        " WHERE i.inhparent = 'chunks'::regclass AND c.relname = %s", (name,)).fetchone():
        return None
    if conn.execute(psql.SQL("SELECT EXISTS (SELECT 1 FROM {})").format(psql.Identifier(name))).fetchone()[0]:
        return None
    conn.execute(psql.SQL("DROP TABLE {}").format(psql.Identifier(name)))
    return name
