"""All SQL of graph retrieval (graph/query/): entity vectors, a level's graph version, and the walk's
inputs read with the reader's ACL. The rest of the graph's SQL is graph/store.py."""
from __future__ import annotations

import psycopg

# The text an entity's vector is made from (name, type, the start of its description), written once
# in SQL so the build that embeds it and the query that joins the vector to the entity agree on it.
ENTITY_VECTOR_TEXT = "e.name || ' (' || e.type || '): ' || left(e.description, 100)"


def entities_missing_vectors(conn: psycopg.Connection, tenant: str, level: str, model: str) -> list[tuple[str, str, str]]:
    """(key, text, text hash) of the level's served entities without a vector of their current text."""
    return conn.execute(
        f"SELECT e.key, {ENTITY_VECTOR_TEXT}, md5({ENTITY_VECTOR_TEXT}) FROM graph_entities e"
        " LEFT JOIN graph_entity_vectors v ON v.tenant_id = e.tenant_id AND v.access_level = e.access_level"
        "  AND v.key = e.key AND v.embed_model = %s"
        f" WHERE e.tenant_id = %s AND e.access_level = %s AND e.withdrawn_at IS NULL"
        f"  AND v.text_hash IS DISTINCT FROM md5({ENTITY_VECTOR_TEXT}) ORDER BY e.key",
        (model, tenant, level),
    ).fetchall()


def reuse_entity_vectors(conn: psycopg.Connection, tenant: str, level: str, model: str) -> int:
    """Give the level's entities the vector another level of the tenant has for the same text (levels
    share most entities): a vector is a function of its text alone, so nothing crosses a level but
    what the level's own text would embed to. Returns how many were reused."""
    return conn.execute(
        "INSERT INTO graph_entity_vectors (tenant_id, access_level, key, embed_model, text_hash, embedding)"
        " SELECT DISTINCT ON (e.key) e.tenant_id, e.access_level, e.key, v.embed_model, v.text_hash, v.embedding"
        " FROM graph_entities e JOIN graph_entity_vectors v ON v.tenant_id = e.tenant_id AND v.embed_model = %s"
        f"  AND v.access_level <> e.access_level AND v.text_hash = md5({ENTITY_VECTOR_TEXT})"
        " WHERE e.tenant_id = %s AND e.access_level = %s AND e.withdrawn_at IS NULL"
        " ORDER BY e.key, v.access_level"
        " ON CONFLICT (tenant_id, access_level, key, embed_model)"
        " DO UPDATE SET text_hash = EXCLUDED.text_hash, embedding = EXCLUDED.embedding"
        " WHERE graph_entity_vectors.text_hash IS DISTINCT FROM EXCLUDED.text_hash",
        (model, tenant, level),
    ).rowcount


def save_entity_vectors(conn: psycopg.Connection, tenant: str, level: str, model: str,
                        rows: list[tuple[str, str, object]]) -> None:
    """Store (key, text hash, vector) rows, and drop the level's vectors of entities it no longer has
    (their text came from chunks the level may have lost)."""
    with conn.transaction():
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO graph_entity_vectors (tenant_id, access_level, key, embed_model, text_hash, embedding)"
                " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (tenant_id, access_level, key, embed_model)"
                " DO UPDATE SET text_hash = EXCLUDED.text_hash, embedding = EXCLUDED.embedding",
                [(tenant, level, key, model, digest, vector) for key, digest, vector in rows],
            )
        conn.execute(
            "DELETE FROM graph_entity_vectors v WHERE v.tenant_id = %s AND v.access_level = %s AND NOT EXISTS"
            " (SELECT 1 FROM graph_entities e WHERE e.tenant_id = v.tenant_id AND e.access_level = v.access_level"
            "  AND e.key = v.key)",
            (tenant, level),
        )


def has_entity_vectors(conn: psycopg.Connection, tenant: str, level: str, model: str) -> bool:
    return conn.execute(
        "SELECT EXISTS (SELECT 1 FROM graph_entity_vectors WHERE tenant_id = %s AND access_level = %s"
        " AND embed_model = %s)", (tenant, level, model),
    ).fetchone()[0]


def nearest_entities(conn: psycopg.Connection, tenant: str, level: str, model: str, vector, limit: int
                     ) -> list[tuple[str, float]]:
    """(key, cosine similarity) of the level's served entities nearest to `vector`: only a vector of
    the entity's current text counts, and never one of a withdrawn entity."""
    rows = conn.execute(
        "SELECT e.key, 1 - (v.embedding <=> %s::vector) AS similarity FROM graph_entity_vectors v"
        " JOIN graph_entities e ON e.tenant_id = v.tenant_id AND e.access_level = v.access_level AND e.key = v.key"
        f" WHERE v.tenant_id = %s AND v.access_level = %s AND v.embed_model = %s AND e.withdrawn_at IS NULL"
        f"  AND v.text_hash = md5({ENTITY_VECTOR_TEXT})"
        " ORDER BY v.embedding <=> %s::vector, e.key LIMIT %s",
        (vector, tenant, level, model, vector, limit),
    ).fetchall()
    return [(key, float(sim)) for key, sim in rows]


def graph_version(conn: psycopg.Connection, tenant: str, level: str) -> int:
    """The level's graph version (0 before its first build): changes whenever its entities or
    relationships do, withdrawals included (migration 019)."""
    row = conn.execute("SELECT version FROM graph_versions WHERE tenant_id = %s AND access_level = %s",
                       (tenant, level)).fetchone()
    return int(row[0]) if row else 0


def readable_chunks(conn: psycopg.Connection, tenant: str, groups: list[str], chunk_ids: list[int]) -> list[tuple]:
    """(id, doc id, title, heading, content, blocks) of these chunks that the groups may read, ACL in SQL as
    every search does (a graph may cite a chunk whose ACL changed since)."""
    return conn.execute(
        "SELECT c.id, c.doc_id, d.title, c.heading, c.content, c.blocks FROM chunks c"
        " JOIN documents d ON d.tenant_id = c.tenant_id AND d.doc_id = c.doc_id"
        " WHERE c.tenant_id = %s AND c.id = ANY(%s) AND c.acl && %s",
        (tenant, list(chunk_ids), list(groups)),
    ).fetchall()


def count_readable_chunks(conn: psycopg.Connection, tenant: str, groups: list[str]) -> int:
    """How many chunks the groups may read (the size of a level's text, before reading it)."""
    return int(conn.execute("SELECT count(*) FROM chunks WHERE tenant_id = %s AND acl && %s",
                            (tenant, list(groups))).fetchone()[0])


def passage_similarities(conn: psycopg.Connection, tenant: str, groups: list[str], model: str, vector,
                          chunk_ids: list[int]) -> list[tuple[int, float]]:
    """(id, cosine similarity to `vector`) of these chunks that the groups may read and that have a
    vector of `model`: exact, over all of them (HippoRAG 2 seeds the walk with every passage's dense
    score, not only the nearest few)."""
    rows = conn.execute(
        "SELECT id, 1 - (embedding <=> %s::vector) FROM chunks"
        " WHERE tenant_id = %s AND id = ANY(%s) AND acl && %s AND embed_model = %s AND embedding IS NOT NULL",
        (vector, tenant, list(chunk_ids), list(groups), model),
    ).fetchall()
    return [(int(i), float(s)) for i, s in rows]


def nearest_passages(conn: psycopg.Connection, tenant: str, groups: list[str], model: str, vector,
                     limit: int) -> list[tuple[int, float]]:
    """(id, cosine similarity to `vector`) of the `limit` nearest chunks the groups may read, by the
    tenant's vector index (approximate, as every dense search)."""
    rows = conn.execute(
        "SELECT id, 1 - (embedding <=> %s::vector) FROM chunks"
        " WHERE tenant_id = %s AND acl && %s AND embed_model = %s AND embedding IS NOT NULL"
        " ORDER BY embedding <=> %s::vector, id LIMIT %s",
        (vector, tenant, list(groups), model, vector, limit),
    ).fetchall()
    return [(int(i), float(s)) for i, s in rows]


def relationships_of(conn: psycopg.Connection, tenant: str, level: str, keys: list[str], limit: int) -> list[dict]:
    """The level's served relationships touching any of `keys`, strongest first (graph-local context)."""
    rows = conn.execute(
        "SELECT source_key, target_key, description, weight, chunk_ids FROM graph_relationships"
        " WHERE tenant_id = %s AND access_level = %s AND (source_key = ANY(%s) OR target_key = ANY(%s))"
        " AND withdrawn_at IS NULL ORDER BY weight DESC, source_key, target_key LIMIT %s",
        (tenant, level, list(keys), list(keys), limit),
    ).fetchall()
    return [{"source": s, "target": t, "description": d, "weight": float(w), "chunk_ids": list(c)}
            for s, t, d, w, c in rows]


def entity_chunk_ids(conn: psycopg.Connection, tenant: str, level: str, keys: list[str]) -> dict[str, list[int]]:
    """key -> the chunks behind each of these served entities."""
    return dict(conn.execute(
        "SELECT key, chunk_ids FROM graph_entities WHERE tenant_id = %s AND access_level = %s AND key = ANY(%s)"
        " AND withdrawn_at IS NULL", (tenant, level, list(keys)),
    ).fetchall())
