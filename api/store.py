"""The read queries the API needs beyond vector/store.py and graph/store.py, each with the caller's
tenant and groups in its WHERE clause (never filtered afterwards in Python)."""
from __future__ import annotations

import psycopg


def document_access(conn: psycopg.Connection, tenant: str, doc_id: str, groups: list[str]) -> bool | None:
    """None: no such document; True: the groups may read it; False: it exists but they may not."""
    row = conn.execute(
        "SELECT acl && %s FROM documents WHERE tenant_id = %s AND doc_id = %s", (list(groups), tenant, doc_id)
    ).fetchone()
    return None if row is None else bool(row[0])


def readable_documents(conn: psycopg.Connection, tenant: str, groups: list[str], limit: int, offset: int) -> list[dict]:
    rows = conn.execute(
        """
        SELECT d.doc_id, d.title, d.lang, d.acl, d.version, d.updated_at,
               (SELECT count(*) FROM chunks c WHERE c.tenant_id = d.tenant_id AND c.doc_id = d.doc_id)
        FROM documents d
        WHERE d.tenant_id = %s AND d.acl && %s
        ORDER BY d.doc_id LIMIT %s OFFSET %s
        """,
        (tenant, list(groups), limit, offset),
    ).fetchall()
    keys = ("doc_id", "title", "lang", "acl", "version", "updated_at", "chunks")
    return [dict(zip(keys, r)) for r in rows]


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


def find_entities(conn: psycopg.Connection, tenant: str, level: str, q: str | None, limit: int) -> list[dict]:
    """Entities of one access level whose name or key contains `q` (all when empty), best connected first."""
    pattern = "%" + (q or "").replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    rows = conn.execute(
        f"SELECT {_ENTITY_COLUMNS} FROM graph_entities"
        " WHERE tenant_id = %s AND access_level = %s AND (name ILIKE %s OR key ILIKE %s)"
        " ORDER BY degree DESC, key LIMIT %s",
        (tenant, level, pattern, pattern, limit),
    ).fetchall()
    return _entities(rows)


def entities_by_key(conn: psycopg.Connection, tenant: str, level: str, keys: list[str]) -> list[dict]:
    rows = conn.execute(
        f"SELECT {_ENTITY_COLUMNS} FROM graph_entities"
        " WHERE tenant_id = %s AND access_level = %s AND key = ANY(%s) ORDER BY degree DESC, key",
        (tenant, level, list(keys)),
    ).fetchall()
    return _entities(rows)


def last_job_id(conn: psycopg.Connection, tenant: str, kind: str) -> int:
    row = conn.execute("SELECT max(id) FROM jobs WHERE tenant_id = %s AND kind = %s", (tenant, kind)).fetchone()
    return row[0] or 0


def job_after(conn: psycopg.Connection, tenant: str, kind: str, after: int) -> int | None:
    row = conn.execute(
        "SELECT min(id) FROM jobs WHERE tenant_id = %s AND kind = %s AND id > %s", (tenant, kind, after)
    ).fetchone()
    return row[0]
