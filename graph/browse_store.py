"""The reads that show a level's graph to a reader (GET /v1/entities, /v1/relationships, a community's detail,
the graph-local context): entities and relationships by name, key or strength, paged, and the documents behind
chunks that the reader's groups may read now. The build's writes and reads stay in graph/store.py, retrieval's
in graph/retrieval_store.py.
"""
from __future__ import annotations

import psycopg


def readable_documents_of_chunks(conn: psycopg.Connection, tenant: str, groups: list[str], chunk_ids: list[int]) -> list[dict]:
    """The documents behind these chunks that the groups may read now (a graph may predate an ACL change)."""
    rows = conn.execute(
        """
        SELECT DISTINCT d.doc_id, d.title FROM chunks c
        JOIN documents d ON d.tenant_id = c.tenant_id AND d.doc_id = c.doc_id
        WHERE c.tenant_id = %s AND c.id = ANY(%s) AND c.acl && %s
        ORDER BY d.doc_id
        """,
        (tenant, list(chunk_ids), list(groups)),
    ).fetchall()
    return [{"doc_id": d, "title": t} for d, t in rows]


_ENTITY_COLUMNS = "key, name, type, description, degree"


def _entities(rows) -> list[dict]:
    return [dict(zip(("key", "name", "type", "description", "degree"), r)) for r in rows]


def find_entities(conn: psycopg.Connection, tenant: str, level: str, q: str | None, limit: int,
                  offset: int = 0) -> list[dict]:
    """Entities of one access level whose name or key contains `q` (all when empty), best connected first."""
    rows = conn.execute(
        f"SELECT {_ENTITY_COLUMNS} FROM graph_entities WHERE {_ENTITY_MATCH}"
        " ORDER BY degree DESC, key LIMIT %s OFFSET %s",
        (tenant, level, *_name_patterns(q), limit, offset),
    ).fetchall()
    return _entities(rows)


def count_entities(conn: psycopg.Connection, tenant: str, level: str, q: str | None) -> int:
    """How many entities `find_entities` pages through (a list's total)."""
    return conn.execute(f"SELECT count(*) FROM graph_entities WHERE {_ENTITY_MATCH}",
                        (tenant, level, *_name_patterns(q))).fetchone()[0]


_ENTITY_MATCH = ("tenant_id = %s AND access_level = %s AND (name ILIKE %s OR key ILIKE %s) AND withdrawn_at IS NULL")


def _name_patterns(q: str | None) -> tuple[str, str]:
    pattern = "%" + (q or "").replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    return pattern, pattern


def entities_by_key(conn: psycopg.Connection, tenant: str, level: str, keys: list[str]) -> list[dict]:
    rows = conn.execute(
        f"SELECT {_ENTITY_COLUMNS} FROM graph_entities"
        " WHERE tenant_id = %s AND access_level = %s AND key = ANY(%s) AND withdrawn_at IS NULL"
        " ORDER BY degree DESC, key",
        (tenant, level, list(keys)),
    ).fetchall()
    return _entities(rows)


def relationships_among(conn: psycopg.Connection, tenant: str, level: str, keys: list[str], limit: int = 500) -> list[dict]:
    """Relationships of one level with both ends among `keys` (a community's members), strongest first."""
    rows = conn.execute(
        "SELECT source_key, target_key, description, weight FROM graph_relationships"
        " WHERE tenant_id = %s AND access_level = %s AND source_key = ANY(%s) AND target_key = ANY(%s)"
        " AND withdrawn_at IS NULL"
        " ORDER BY weight DESC, source_key, target_key LIMIT %s",
        (tenant, level, list(keys), list(keys), limit),
    ).fetchall()
    return [{"source": s, "target": t, "description": d, "weight": float(w)} for s, t, d, w in rows]


# A relationship is listed only with both of its entities served: a withdrawn entity's name came from a
# chunk the level no longer reads, so it must not come back as an edge's end.
_RELATIONSHIP_FROM = (
    " FROM graph_relationships r"
    " JOIN graph_entities s ON s.tenant_id = r.tenant_id AND s.access_level = r.access_level"
    "  AND s.key = r.source_key AND s.withdrawn_at IS NULL"
    " JOIN graph_entities t ON t.tenant_id = r.tenant_id AND t.access_level = r.access_level"
    "  AND t.key = r.target_key AND t.withdrawn_at IS NULL"
    " WHERE r.tenant_id = %s AND r.access_level = %s AND r.withdrawn_at IS NULL"
    "  AND (%s::text IS NULL OR r.source_key = %s OR r.target_key = %s)"
)


def find_relationships(conn: psycopg.Connection, tenant: str, level: str, entity: str | None, limit: int,
                       offset: int = 0) -> list[dict]:
    """One level's served relationships (only those touching entity key `entity` when given), strongest
    first, ties by source and target key: (source, target) is the table's key, so the order is total."""
    rows = conn.execute(
        "SELECT r.source_key, r.target_key, s.name, t.name, r.description, r.weight" + _RELATIONSHIP_FROM
        + " ORDER BY r.weight DESC, r.source_key, r.target_key LIMIT %s OFFSET %s",
        (tenant, level, entity, entity, entity, limit, offset),
    ).fetchall()
    return [{"source": s, "target": t, "source_name": sn, "target_name": tn, "description": d, "weight": float(w)}
            for s, t, sn, tn, d, w in rows]


def count_relationships(conn: psycopg.Connection, tenant: str, level: str, entity: str | None) -> int:
    """How many relationships `find_relationships` pages through (a list's total)."""
    return conn.execute("SELECT count(*)" + _RELATIONSHIP_FROM, (tenant, level, entity, entity, entity)).fetchone()[0]
