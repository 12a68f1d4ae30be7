"""Which tenants a database holds. A tenant is a name, not a row: it exists once it has documents, access
levels, API tokens or jobs, and lives on while any remain (deleting its last document keeps its levels)."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import psycopg
from psycopg import sql

from core import jobs
from core.errors import CrossroadsError


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


# --- deleting a tenant (`crossroads tenants delete`; the steps outside SQL are api.tenant_deletion.delete_tenant) ---

# Kept until its HNSW index is dropped, after the rows' transaction (DROP INDEX CONCURRENTLY cannot run
# inside one): a drop that fails leaves the row, so the tenant stays known and the next delete retries it.
INDEX_REGISTRY = "tenant_vector_indexes"
LOCK_TIMEOUT = "10s"  # how long the delete waits for a writer or reader of the tenant before it gives up


class TenantBusy(CrossroadsError):
    """A job of the tenant is queued or running: deleting under it would let it write part of the tenant back."""

    def __init__(self, tenant: str, live: list[dict]):
        self.tenant, self.jobs = tenant, live
        named = ", ".join(f"job {j['id']} ({j['kind']}, {j['status']})" for j in live)
        first = live[0]["id"]
        super().__init__(f"tenant {tenant!r} has {named}: nothing deleted. Stop it with `crossroads graph cancel "
                         f"--tenant {tenant} --job {first}` (one per job), or wait for it to end, then delete again")


def tenant_tables(conn: psycopg.Connection) -> list[str]:
    """Every table of the schema with a tenant_id column, read from the catalog at each delete so that a
    table a later migration adds is never forgotten. Partitions are left out: their parent deletes their rows."""
    return [r[0] for r in conn.execute(
        "SELECT c.table_name FROM information_schema.columns c"
        " JOIN information_schema.tables t USING (table_schema, table_name)"
        " JOIN pg_namespace n ON n.nspname = c.table_schema"
        " JOIN pg_class k ON k.relnamespace = n.oid AND k.relname = c.table_name"
        " WHERE c.table_schema = current_schema() AND c.column_name = 'tenant_id' AND t.table_type = 'BASE TABLE'"
        " AND NOT k.relispartition ORDER BY 1").fetchall()]


def row_counts(conn: psycopg.Connection, tenant: str, tables: list[str]) -> dict[str, int]:
    """Rows of the tenant in each table."""
    return {table: conn.execute(sql.SQL("SELECT count(*) FROM {} WHERE tenant_id = %s").format(sql.Identifier(table)),
                                (tenant,)).fetchone()[0] for table in tables}


def unknown_tenant(conn: psycopg.Connection, tenant: str) -> CrossroadsError:
    known = ", ".join(t.tenant for t in tenants(conn)[:20]) or "none"
    return CrossroadsError(f"no tenant {tenant!r} (tenants: {known}); see `crossroads tenants list`")


def live_jobs(conn: psycopg.Connection, tenant: str, lease_s: float) -> list[dict]:
    """The tenant's queued and running jobs, as core.jobs reads them: a running job whose process died
    (its lease ran out) reads as failed and does not count, one a worker will resume reads as queued."""
    ids = [r[0] for r in conn.execute(
        "SELECT id FROM jobs WHERE tenant_id = %s AND status IN ('queued', 'running') ORDER BY id", (tenant,))]
    live = [jobs.get_job(conn, job_id, lease_s) for job_id in ids]
    return [j for j in live if j is not None and j["status"] in ("queued", "running")]


def delete_rows(conn: psycopg.Connection, tenant: str, tables: list[str]) -> None:
    """Delete the tenant's rows from `tables` (all but INDEX_REGISTRY) in the caller's transaction.

    The graph tables go before the documents, so the chunks' delete trigger finds no graph text left to
    withdraw; the triggers of chunks and graph_entities write rows of the tenant as they fire (full-text
    statistics deltas, graph versions), so every table is swept once more at the end."""
    def sweep(which: list[str]) -> None:
        for table in which:
            conn.execute(sql.SQL("DELETE FROM {} WHERE tenant_id = %s").format(sql.Identifier(table)), (tenant,))

    tables = [t for t in tables if t != INDEX_REGISTRY]
    sweep([t for t in tables if t != "documents"])
    sweep(["documents"])
    sweep(tables)


def prune_extraction_cache(conn: psycopg.Connection) -> int:
    """Delete the graph build's cached LLM output whose text no tenant holds any longer; returns the rows.

    The cache is shared by every tenant, keyed by text, not by tenant: an extraction by the content_hash of
    the chunk it was made from, a description summary (`result.summary`) by a hash of the descriptions it
    was written from. An extraction stays while some chunk has its text; a summary while some graph serves
    it as an entity's or relationship's description. So a deleted tenant's output goes, and what other
    tenants still use stays (their old, unused output goes too: a later build computes it again if needed)."""
    return conn.execute(
        "DELETE FROM extraction_cache e WHERE NOT EXISTS (SELECT 1 FROM chunks c WHERE c.content_hash = e.content_hash)"
        " AND NOT (e.result ? 'summary' AND ("
        "     EXISTS (SELECT 1 FROM graph_entities g WHERE g.description = e.result->>'summary')"
        "  OR EXISTS (SELECT 1 FROM graph_relationships g WHERE g.description = e.result->>'summary')))").rowcount
