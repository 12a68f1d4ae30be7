"""`chunks` partitioned by tenant, an option for many large tenants (`crossroads db partition-chunks`).

The default layout is one `chunks` table with one HNSW graph per model plus a partial graph per big
tenant (vector/hnsw_index.py). Partitioned, `chunks` is LIST-partitioned on tenant_id: each tenant
has a partition of its own (`chunks_p_<hash>`) and the indexes defined on `chunks` are built per
partition, so every tenant gets its own HNSW graph of each model, its own full-text index and its
own VACUUM. The vector leg names the tenant as a literal, so the planner prunes to its partition.
A tenant that appears after the conversion lands in the DEFAULT partition (shared by such tenants,
searched like the one table); running the command again gives each of them a partition of its own.

What changes with the layout (migration 022): the primary key is (tenant_id, id), so
chunk_vectors_staged's foreign key to chunks (id) is replaced by a trigger deleting staged vectors of
deleted chunks; a plain index on id keeps lookups by id alone cheap. The per-tenant partial graphs
and their registry rows go (each partition's graph is the tenant's own); `undo` rebuilds them.

Both directions copy the table in one transaction under an ACCESS EXCLUSIVE lock: writers and
readers of chunks wait for it (a maintenance window: about the time of an HNSW build of the corpus),
and a failure leaves the database as it was. Chunk ids are kept, so graph citations stay valid.
"""
from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass, field

import psycopg
from psycopg import sql

log = logging.getLogger(__name__)

DEFAULT_PARTITION = "chunks_p_default"
STAGED_TRIGGER = "chunks_delete_staged_vectors"  # migration 022
STAGED_FK = "chunk_vectors_staged_chunk_id_fkey"
ID_INDEX = "chunks_id"  # partitioned only: lookups by id alone
TENANT_GRAPH_PREFIX = "chunks_hnsw_t_"  # vector.hnsw_index.index_name
LOCK_TIMEOUT = "10s"  # how long the conversion waits for running queries before it gives up
_CONSTRAINTS = ("chunks_pkey", "chunks_tenant_id_doc_id_chunk_no_key")
_LIKE = ("LIKE chunks INCLUDING DEFAULTS INCLUDING GENERATED INCLUDING IDENTITY INCLUDING STORAGE"
         " INCLUDING COMPRESSION")


class PartitionError(Exception):
    """The conversion cannot run as asked; the message says what to do."""


@dataclass
class Conversion:
    direction: str  # "partitioned", "unpartitioned" or "split" (tenants moved out of the default partition)
    chunks: int = 0
    partitions: list[str] = field(default_factory=list)  # tenants given a partition of their own
    dropped_tenant_graphs: int = 0
    orphan_staged_vectors: int = 0  # deleted by `undo` before its foreign key came back
    seconds: float = 0.0


def partition_name(tenant: str) -> str:
    return "chunks_p_" + hashlib.sha1(tenant.encode()).hexdigest()[:16]


def is_partitioned(conn: psycopg.Connection) -> bool:
    return conn.execute("SELECT EXISTS (SELECT 1 FROM pg_partitioned_table WHERE partrelid = 'chunks'::regclass)"
                        ).fetchone()[0]


def layout(conn: psycopg.Connection) -> dict:
    """The partitions and their rows (estimated from statistics: exact counts would read every row)."""
    if not is_partitioned(conn):
        return {"partitioned": False, "partitions": []}
    rows = conn.execute(
        "SELECT c.relname, pg_get_expr(c.relpartbound, c.oid), greatest(c.reltuples, 0)::bigint"
        " FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'chunks'::regclass"
        " ORDER BY 1").fetchall()
    return {"partitioned": True, "partitions": [{"name": n, "bound": b, "rows_estimate": r} for n, b, r in rows]}


def _columns(conn: psycopg.Connection) -> sql.Composed:
    """The stored columns (tsv is generated: recomputed on insert, never copied)."""
    names = [r[0] for r in conn.execute(
        "SELECT attname FROM pg_attribute WHERE attrelid = 'chunks'::regclass AND attnum > 0"
        " AND NOT attisdropped AND attgenerated = '' ORDER BY attnum").fetchall()]
    return sql.SQL(", ").join(map(sql.Identifier, names))


def _definitions(conn: psycopg.Connection) -> tuple[list[str], list[str], list[str]]:
    """What the copy must recreate: the triggers, the indexes that are not constraints (the tenants'
    partial graphs and the partitioned layout's own id index left out) and the foreign keys."""
    triggers = [r[0] for r in conn.execute(
        "SELECT pg_get_triggerdef(oid) FROM pg_trigger WHERE tgrelid = 'chunks'::regclass AND NOT tgisinternal"
        " AND tgparentid = 0 AND tgname <> %s ORDER BY tgname", (STAGED_TRIGGER,)).fetchall()]
    indexes = [r[0].replace(" ON ONLY public.chunks ", " ON public.chunks ") for r in conn.execute(
        "SELECT pg_get_indexdef(i.indexrelid) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
        " WHERE i.indrelid = 'chunks'::regclass AND NOT EXISTS (SELECT 1 FROM pg_constraint k"
        " WHERE k.conindid = i.indexrelid AND k.conrelid = 'chunks'::regclass) AND c.relname <> %s"
        " AND c.relname NOT LIKE %s ORDER BY c.relname", (ID_INDEX, TENANT_GRAPH_PREFIX + "%")).fetchall()]
    fks = [f"ALTER TABLE chunks ADD CONSTRAINT {name} {definition}" for name, definition in conn.execute(
        "SELECT quote_ident(conname), pg_get_constraintdef(oid) FROM pg_constraint"
        " WHERE conrelid = 'chunks'::regclass AND contype = 'f' AND conparentid = 0 ORDER BY conname").fetchall()]
    return triggers, indexes, fks


def _lock(conn: psycopg.Connection) -> None:
    conn.execute(sql.SQL("SET LOCAL lock_timeout = {}").format(sql.Literal(LOCK_TIMEOUT)))
    conn.execute("SET LOCAL maintenance_work_mem = '1GB'")
    try:
        conn.execute("LOCK TABLE chunks, chunk_vectors_staged IN ACCESS EXCLUSIVE MODE")
    except psycopg.errors.LockNotAvailable:
        raise PartitionError(f"chunks stayed in use for {LOCK_TIMEOUT} (ingests, searches, a graph build): stop the "
                             "API and workers (a maintenance window), then run the command again") from None


def _rebuild(conn: psycopg.Connection, partitioned: bool, report: Conversion) -> None:
    """Copy chunks into a table of the other layout and put it in its place, under the same names."""
    triggers, indexes, fks = _definitions(conn)
    columns = _columns(conn)
    tenants = [r[0] for r in conn.execute("SELECT DISTINCT tenant_id FROM chunks ORDER BY 1").fetchall()]
    next_id = conn.execute("SELECT coalesce(max(id), 0) + 1 FROM chunks").fetchone()[0]
    conn.execute(sql.SQL("CREATE TABLE chunks_swap ({}) {}").format(
        sql.SQL(_LIKE), sql.SQL("PARTITION BY LIST (tenant_id)" if partitioned else "")))
    if partitioned:
        for tenant in tenants:
            conn.execute(sql.SQL("CREATE TABLE {} PARTITION OF chunks_swap FOR VALUES IN ({})").format(
                sql.Identifier(partition_name(tenant)), sql.Literal(tenant)))
        conn.execute(sql.SQL("CREATE TABLE {} PARTITION OF chunks_swap DEFAULT").format(sql.Identifier(DEFAULT_PARTITION)))
        report.partitions = tenants
    # no trigger on the copy yet: the full-text statistics and graph citations already count these rows
    report.chunks = conn.execute(sql.SQL("INSERT INTO chunks_swap ({c}) OVERRIDING SYSTEM VALUE SELECT {c} FROM chunks")
                                 .format(c=columns)).rowcount
    report.dropped_tenant_graphs = conn.execute("DELETE FROM tenant_vector_indexes").rowcount
    conn.execute(sql.SQL("ALTER TABLE chunk_vectors_staged DROP CONSTRAINT IF EXISTS {}").format(sql.Identifier(STAGED_FK)))
    conn.execute("DROP TABLE chunks")
    conn.execute("ALTER TABLE chunks_swap RENAME TO chunks")
    seq = conn.execute("SELECT pg_get_serial_sequence('chunks', 'id')").fetchone()[0]
    conn.execute(sql.SQL("ALTER SEQUENCE {} RENAME TO chunks_id_seq").format(sql.SQL(seq)))
    conn.execute(sql.SQL("ALTER TABLE chunks ALTER COLUMN id RESTART WITH {}").format(sql.Literal(next_id)))
    key = "tenant_id, id" if partitioned else "id"
    conn.execute(f"ALTER TABLE chunks ADD CONSTRAINT chunks_pkey PRIMARY KEY ({key}),"
                 " ADD CONSTRAINT chunks_tenant_id_doc_id_chunk_no_key UNIQUE (tenant_id, doc_id, chunk_no)")
    for statement in [*fks, *indexes, *triggers]:
        conn.execute(statement)
    if partitioned:
        conn.execute(sql.SQL("CREATE INDEX {} ON chunks (id)").format(sql.Identifier(ID_INDEX)))
        conn.execute(sql.SQL("CREATE TRIGGER {} AFTER DELETE ON chunks REFERENCING OLD TABLE AS old_rows FOR EACH "
                             "STATEMENT EXECUTE FUNCTION chunks_delete_staged_vectors()").format(
            sql.Identifier(STAGED_TRIGGER)))
    else:
        # staged vectors whose chunk went in a race the trigger could not see (inserted after the delete)
        report.orphan_staged_vectors = conn.execute(
            "DELETE FROM chunk_vectors_staged s WHERE NOT EXISTS (SELECT 1 FROM chunks c WHERE c.id = s.chunk_id)"
        ).rowcount
        conn.execute(sql.SQL("ALTER TABLE chunk_vectors_staged ADD CONSTRAINT {} FOREIGN KEY (chunk_id) REFERENCES "
                             "chunks (id) ON DELETE CASCADE").format(sql.Identifier(STAGED_FK)))
    conn.execute("ANALYZE chunks")


def _split_default(conn: psycopg.Connection, report: Conversion) -> None:
    """Give each tenant in the DEFAULT partition one of its own. The default partition is detached
    while its rows move (a partition for a value the default holds cannot be created), the rows go
    straight into the new partitions (no statement trigger of chunks fires: the full-text statistics
    and graph citations already count them), and it is attached back, empty of them."""
    tenants = [r[0] for r in conn.execute(
        sql.SQL("SELECT DISTINCT tenant_id FROM {} ORDER BY 1").format(sql.Identifier(DEFAULT_PARTITION))).fetchall()]
    report.partitions = tenants
    if not tenants:
        return
    columns = _columns(conn)
    default = sql.Identifier(DEFAULT_PARTITION)
    conn.execute(sql.SQL("ALTER TABLE chunks DETACH PARTITION {}").format(default))
    for tenant in tenants:
        name = sql.Identifier(partition_name(tenant))
        conn.execute(sql.SQL("CREATE TABLE {} PARTITION OF chunks FOR VALUES IN ({})").format(name, sql.Literal(tenant)))
        report.chunks += conn.execute(sql.SQL(
            "WITH moved AS (DELETE FROM {d} WHERE tenant_id = {t} RETURNING {c})"
            " INSERT INTO {p} ({c}) OVERRIDING SYSTEM VALUE SELECT {c} FROM moved").format(
            d=default, t=sql.Literal(tenant), c=columns, p=name)).rowcount
    conn.execute(sql.SQL("ALTER TABLE chunks ATTACH PARTITION {} DEFAULT").format(default))
    conn.execute("ANALYZE chunks")


def partition(conn: psycopg.Connection) -> Conversion:
    """Partition chunks by tenant; on a partitioned database, give the tenants that arrived since (in
    the default partition) partitions of their own. One transaction: all or nothing."""
    started = time.perf_counter()
    with conn.transaction():
        _lock(conn)
        if is_partitioned(conn):
            report = Conversion("split")
            _split_default(conn, report)
        else:
            report = Conversion("partitioned")
            _rebuild(conn, True, report)
    report.seconds = round(time.perf_counter() - started, 3)
    log.info("chunks %s: %d rows, %d partitions created", report.direction, report.chunks, len(report.partitions))
    return report


def unpartition(conn: psycopg.Connection) -> Conversion:
    """Back to the default layout (one table, primary key on id, the staged vectors' foreign key). The
    tenants' own partial graphs are built afterwards by the caller (vector.hnsw_index.ensure_tenants),
    concurrently, so searches run meanwhile on the models' shared graphs."""
    started = time.perf_counter()
    report = Conversion("unpartitioned")
    with conn.transaction():
        _lock(conn)
        if not is_partitioned(conn):
            raise PartitionError("chunks is not partitioned: nothing to undo")
        _rebuild(conn, False, report)
    report.seconds = round(time.perf_counter() - started, 3)
    return report
