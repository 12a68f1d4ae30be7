"""Which tenants a database holds. A tenant is a name, not a row: it exists once it has documents, access
levels, API tokens or jobs, and lives on while any remain (deleting its last document keeps its levels)."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import psycopg


@dataclass(frozen=True)
class TenantSummary:
    tenant: str
    documents: int
    chunks: int
    updated_at: datetime | None  # the newest document change; None without documents


def tenants(conn: psycopg.Connection) -> list[TenantSummary]:
    """Every tenant, by name, with its documents and chunks."""
    rows = conn.execute(
        """
        SELECT t.tenant_id, coalesce(d.documents, 0), coalesce(c.chunks, 0), d.updated_at
        FROM (SELECT tenant_id FROM documents UNION SELECT tenant_id FROM access_levels
              UNION SELECT tenant_id FROM api_tokens UNION SELECT tenant_id FROM jobs) t
        LEFT JOIN (SELECT tenant_id, count(*) AS documents, max(updated_at) AS updated_at
                   FROM documents GROUP BY tenant_id) d USING (tenant_id)
        LEFT JOIN (SELECT tenant_id, count(*) AS chunks FROM chunks GROUP BY tenant_id) c USING (tenant_id)
        ORDER BY t.tenant_id
        """
    ).fetchall()
    return [TenantSummary(t, int(docs), int(chunks), updated) for t, docs, chunks, updated in rows]


def known_groups(conn: psycopg.Connection, tenant: str) -> set[str]:
    """The groups a tenant names anywhere: in its documents' ACLs, its access levels and its API tokens."""
    rows = conn.execute(
        """
        SELECT DISTINCT g FROM (
            SELECT unnest(acl) AS g FROM documents WHERE tenant_id = %(t)s
            UNION SELECT unnest(groups) FROM access_levels WHERE tenant_id = %(t)s AND groups IS NOT NULL
            UNION SELECT unnest(groups) FROM api_tokens WHERE tenant_id = %(t)s) named
        """, {"t": tenant}).fetchall()
    return {g for (g,) in rows}
