"""All SQL of embedding model migration: staged vectors, their index, the switch, the migration log.

A staged vector is *current* when its content_hash equals its chunk's: chunk rows are never updated
in place (a changed chunk is a new row, whose deletion cascades here), but the check costs nothing
and keeps a stale vector from ever being promoted.
"""
from __future__ import annotations

import hashlib
import json
from typing import Iterable, Sequence

import numpy as np
import psycopg
from psycopg import sql

from vector.store import create_hnsw_index

# Chunks of the tenant not yet covered for `model`: neither served by it nor staged with a current vector.
_MISSING = """
FROM chunks c
WHERE c.tenant_id = %(tenant)s AND c.embed_model IS DISTINCT FROM %(model)s
  AND NOT EXISTS (SELECT 1 FROM chunk_vectors_staged s
                  WHERE s.chunk_id = c.id AND s.embed_model = %(model)s AND s.content_hash = c.content_hash)
"""


def lock_tenant(conn: psycopg.Connection, tenant: str) -> None:
    """Serialises staging batches, switch and drop of one tenant (held until the transaction ends)."""
    conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"embeddings\x1f{tenant}",))


def served_models(conn: psycopg.Connection, tenant: str) -> dict[str | None, int]:
    """Model -> chunks of the tenant whose served vector it made (usually one model)."""
    rows = conn.execute(
        "SELECT embed_model, count(*) FROM chunks WHERE tenant_id = %s GROUP BY embed_model ORDER BY 2 DESC",
        (tenant,),
    ).fetchall()
    return {m: int(n) for m, n in rows}


def known_dimension(conn: psycopg.Connection, model: str) -> int | None:
    """The dimension this model was registered with, served or staged (they must agree)."""
    row = conn.execute(
        "SELECT dimension FROM embedding_models WHERE embed_model = %(m)s"
        " UNION ALL SELECT dimension FROM staged_embedding_models WHERE embed_model = %(m)s LIMIT 1",
        {"m": model},
    ).fetchone()
    return row[0] if row else None


def staged_index_name(model: str) -> str:
    return "chunk_vectors_staged_hnsw_" + hashlib.sha1(model.encode()).hexdigest()[:12]


def staged_dimension(conn: psycopg.Connection, model: str) -> int | None:
    row = conn.execute("SELECT dimension FROM staged_embedding_models WHERE embed_model = %s", (model,)).fetchone()
    return row[0] if row else None


def ensure_staged_index(conn: psycopg.Connection, model: str, dimension: int) -> bool:
    """The partial HNSW index of one model's staged vectors; True when just built.

    Built after the first complete run, like the served index: one bulk build beats growing the
    graph row by row during the load.
    """
    if staged_dimension(conn, model) is not None:
        return False
    name = staged_index_name(model)
    with conn.transaction():
        create_hnsw_index(conn, "chunk_vectors_staged", "staged_embedding_models", name, model, dimension)
    return True


def drop_staged_index_if_unused(conn: psycopg.Connection, model: str) -> bool:
    """No tenant has staged vectors of `model` any more: its index only costs space."""
    if conn.execute("SELECT 1 FROM chunk_vectors_staged WHERE embed_model = %s LIMIT 1", (model,)).fetchone():
        return False
    row = conn.execute("DELETE FROM staged_embedding_models WHERE embed_model = %s RETURNING index_name",
                       (model,)).fetchone()
    if row:
        conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(row[0])))
    return bool(row)


def count_missing(conn: psycopg.Connection, tenant: str, model: str) -> int:
    return conn.execute("SELECT count(*) " + _MISSING, {"tenant": tenant, "model": model}).fetchone()[0]


def missing_ids(conn: psycopg.Connection, tenant: str, model: str) -> list[int]:
    """Ids of the uncovered chunks, listed once per run: one pass over the tenant, where paging
    through it batch by batch would rescan it for every batch."""
    return [r[0] for r in conn.execute("SELECT c.id " + _MISSING + " ORDER BY c.id", {"tenant": tenant, "model": model})]


def batch_rows(conn: psycopg.Connection, tenant: str, model: str, ids: Sequence[int]) -> list[tuple]:
    """(id, doc_id, context, heading, content, content_hash) of those chunks still uncovered now
    (a chunk deleted, or covered by a concurrent run, since the list was made is left out)."""
    return conn.execute(
        "SELECT c.id, c.doc_id, c.context, c.heading, c.content, c.content_hash " + _MISSING
        + " AND c.id = ANY(%(ids)s) ORDER BY c.id",
        {"tenant": tenant, "model": model, "ids": list(ids)},
    ).fetchall()


def reusable_vectors(conn: psycopg.Connection, tenant: str, model: str, hashes: Iterable[str]) -> dict[str, np.ndarray]:
    """Vectors of `model` the tenant already has for these exact texts, staged or served."""
    rows = conn.execute(
        """
        SELECT DISTINCT ON (h) h, v FROM (
            SELECT c.content_hash AS h, s.embedding AS v FROM chunks c
            JOIN chunk_vectors_staged s ON s.chunk_id = c.id AND s.embed_model = %(model)s
                                       AND s.content_hash = c.content_hash
            WHERE c.tenant_id = %(tenant)s AND c.content_hash = ANY(%(hashes)s)
            UNION ALL
            SELECT content_hash, embedding FROM chunks
            WHERE tenant_id = %(tenant)s AND embed_model = %(model)s AND content_hash = ANY(%(hashes)s)
              AND embedding IS NOT NULL
        ) found
        """,
        {"tenant": tenant, "model": model, "hashes": list(hashes)},
    ).fetchall()
    return {h: np.asarray(v.to_numpy() if hasattr(v, "to_numpy") else v, dtype=np.float32) for h, v in rows}


def write_staged(conn: psycopg.Connection, tenant: str, model: str, rows: Sequence[tuple[int, str, np.ndarray]]) -> int:
    """Upsert (chunk id, content hash, vector) rows; a chunk deleted or changed meanwhile is skipped.
    Returns the rows written."""
    with conn.cursor() as cur:
        cur.executemany(
            """
            INSERT INTO chunk_vectors_staged (chunk_id, embed_model, content_hash, embedding)
            SELECT c.id, %(model)s, c.content_hash, %(vec)s FROM chunks c
            WHERE c.id = %(id)s AND c.tenant_id = %(tenant)s AND c.content_hash = %(hash)s
            ON CONFLICT (chunk_id, embed_model) DO UPDATE
                SET content_hash = EXCLUDED.content_hash, embedding = EXCLUDED.embedding, created_at = now()
            """,
            [{"model": model, "vec": vec, "id": chunk_id, "tenant": tenant, "hash": h} for chunk_id, h, vec in rows],
        )
        return max(cur.rowcount, 0)  # executemany sums the rowcounts of its statements


def start_migration(conn: psycopg.Connection, tenant: str, model: str, source: str | None, dimension: int) -> None:
    conn.execute(
        """
        INSERT INTO embedding_migrations (tenant_id, target_model, source_model, dimension, status)
        VALUES (%s, %s, %s, %s, 'running')
        ON CONFLICT (tenant_id, target_model) DO UPDATE
            SET status = 'running', error = NULL, updated_at = now(), source_model = EXCLUDED.source_model,
                dimension = EXCLUDED.dimension,
                started_at = CASE WHEN embedding_migrations.status IN ('running', 'complete')
                                  THEN embedding_migrations.started_at ELSE now() END
        """,
        (tenant, model, source, dimension),
    )


def update_migration(conn: psycopg.Connection, tenant: str, model: str, *, status: str | None = None,
                     counts: dict | None = None, error: str | None = None) -> None:
    conn.execute(
        "UPDATE embedding_migrations SET status = coalesce(%s, status), counts = coalesce(%s, counts),"
        " error = %s, updated_at = now() WHERE tenant_id = %s AND target_model = %s",
        (status, json.dumps(counts) if counts is not None else None, error, tenant, model),
    )


def lock_chunk_writes(conn: psycopg.Connection) -> None:
    """Taken by the switch: waits for in-flight document writes and holds new ones back until it commits,
    so no chunk can appear between the coverage check and the swap. Searches (plain reads) go on."""
    conn.execute("LOCK TABLE chunks IN SHARE ROW EXCLUSIVE MODE")


def swap_served(conn: psycopg.Connection, tenant: str, new_model: str) -> dict[str, int]:
    """Inside the caller's transaction, after the coverage check: park the served vectors, promote the staged."""
    params = {"tenant": tenant, "model": new_model}
    parked = conn.execute(
        """
        INSERT INTO chunk_vectors_staged (chunk_id, embed_model, content_hash, embedding)
        SELECT id, embed_model, content_hash, embedding FROM chunks
        WHERE tenant_id = %(tenant)s AND embed_model IS DISTINCT FROM %(model)s
          AND embed_model IS NOT NULL AND embedding IS NOT NULL
        ON CONFLICT (chunk_id, embed_model) DO UPDATE
            SET content_hash = EXCLUDED.content_hash, embedding = EXCLUDED.embedding, created_at = now()
        """, params).rowcount
    promoted = conn.execute(
        """
        UPDATE chunks c SET embedding = s.embedding, embed_model = s.embed_model, updated_at = now()
        FROM chunk_vectors_staged s
        WHERE s.chunk_id = c.id AND s.embed_model = %(model)s AND s.content_hash = c.content_hash
          AND c.tenant_id = %(tenant)s AND c.embed_model IS DISTINCT FROM %(model)s
        """, params).rowcount
    # The promoted copies are served now; keeping them staged too would only double the storage.
    conn.execute(
        "DELETE FROM chunk_vectors_staged s USING chunks c"
        " WHERE s.chunk_id = c.id AND c.tenant_id = %(tenant)s AND s.embed_model = %(model)s", params)
    # index_key ends with `;embed=<model>`: naming the new model there is what keeps the next ingest
    # with the new provider from re-chunking and re-embedding every unchanged document.
    keys = conn.execute(
        "UPDATE documents SET index_key = regexp_replace(index_key, ';embed=.*$', '') || ';embed=' || %(model)s"
        " WHERE tenant_id = %(tenant)s AND index_key LIKE '%%;embed=%%'"
        " AND index_key IS DISTINCT FROM regexp_replace(index_key, ';embed=.*$', '') || ';embed=' || %(model)s",
        params).rowcount
    conn.execute(
        "UPDATE embedding_migrations SET status = CASE WHEN target_model = %(model)s THEN 'switched' ELSE 'complete' END,"
        " switched_at = CASE WHEN target_model = %(model)s THEN now() ELSE switched_at END, updated_at = now()"
        " WHERE tenant_id = %(tenant)s AND (target_model = %(model)s OR status = 'switched')", params)
    return {"vectors_parked": parked, "vectors_promoted": promoted, "index_keys_updated": keys}


def delete_staged(conn: psycopg.Connection, tenant: str, model: str) -> int:
    deleted = conn.execute(
        "DELETE FROM chunk_vectors_staged s USING chunks c"
        " WHERE s.chunk_id = c.id AND c.tenant_id = %s AND s.embed_model = %s", (tenant, model)).rowcount
    conn.execute("UPDATE embedding_migrations SET status = 'dropped', updated_at = now()"
                 " WHERE tenant_id = %s AND target_model = %s", (tenant, model))
    return deleted


def staged_coverage(conn: psycopg.Connection, tenant: str) -> list[tuple[str, int, int]]:
    """(model, current staged vectors, stale staged vectors) per staged model of the tenant."""
    rows = conn.execute(
        "SELECT s.embed_model, count(*) FILTER (WHERE s.content_hash = c.content_hash),"
        " count(*) FILTER (WHERE s.content_hash <> c.content_hash)"
        " FROM chunk_vectors_staged s JOIN chunks c ON c.id = s.chunk_id"
        " WHERE c.tenant_id = %s GROUP BY s.embed_model ORDER BY s.embed_model", (tenant,)).fetchall()
    return [(m, int(a), int(b)) for m, a, b in rows]


def migration_log(conn: psycopg.Connection, tenant: str) -> list[dict]:
    rows = conn.execute(
        "SELECT target_model, source_model, dimension, status, counts, error, started_at, updated_at, switched_at"
        " FROM embedding_migrations WHERE tenant_id = %s ORDER BY started_at", (tenant,)).fetchall()
    keys = ("target_model", "source_model", "dimension", "status", "counts", "error", "started_at", "updated_at",
            "switched_at")
    return [dict(zip(keys, r)) for r in rows]
