"""CLI: the tenants a database holds (`crossroads tenants list|delete`)."""
from __future__ import annotations

import sys

import typer
from rich.table import Table
from rich.text import Text

from api import tenant_deletion
from api.cli.common import EXIT_PARTIAL, JsonOption, app, database, err, fail, out, print_json
from core.errors import CrossroadsError
from core.settings import get_settings

tenants_app = typer.Typer(help="The tenants this database holds.", no_args_is_help=True)
app.add_typer(tenants_app, name="tenants")


@tenants_app.command("list")
def tenants_list(json_out: bool = JsonOption) -> None:
    """Every tenant (documents, access levels, tokens or jobs): its documents and chunks, and the last change."""
    from core.tenants import tenants

    with database(get_settings()) as db, db.connection() as conn:
        rows = tenants(conn)
    if json_out:
        print_json({"tenants": [{"tenant": t.tenant, "documents": t.documents, "chunks": t.chunks,
                                 "updated_at": t.updated_at} for t in rows]})
        return
    if not rows:
        out.print("no tenants yet: `crossroads ingest PATH --tenant NAME` creates one")
        return
    table = Table(title=f"{len(rows)} tenants")
    for col in ("tenant", "documents", "chunks", "last change"):
        table.add_column(col, justify="right" if col in ("documents", "chunks") else "left")
    for t in rows:
        changed = f"{t.updated_at:%Y-%m-%d %H:%M}" if t.updated_at else ""
        table.add_row(Text(t.tenant), str(t.documents), str(t.chunks), changed)
    out.print(table)


@tenants_app.command("delete")
def tenants_delete(
    tenant: str = typer.Argument(..., help="The tenant to delete, as `crossroads tenants list` names it."),
    yes: bool = typer.Option(False, "--yes", "-y", metavar="",
                             help="Delete without asking (needed without a terminal)."),
    json_out: bool = JsonOption,
) -> None:
    """Delete a tenant for good: every row of it in every table (documents, chunks, graph, reports, levels,
    tokens, jobs, LLM records, statistics), its partition and its own HNSW indexes, and the cached graph
    LLM output whose text no other tenant holds. Refused while one of its jobs is queued or running."""
    with database(get_settings()) as db:
        try:
            rows = tenant_deletion.tenant_rows(db, tenant)
        except CrossroadsError as exc:
            fail(exc)
        if not yes:
            # irreversible: unlike a new tenant at ingest, a script without a terminal is refused, not noted
            if not sys.stdin.isatty():
                fail(CrossroadsError(f"deleting tenant {tenant!r} cannot be undone: pass --yes to delete it without "
                                     "a terminal to confirm at"))
            held = ", ".join(f"{n} {table}" for table, n in rows.items() if n)
            if not typer.confirm(f"delete tenant {tenant!r} for good ({held})?", default=False, err=True):
                err.print("nothing deleted")
                raise typer.Exit(1)
        try:
            deletion = tenant_deletion.delete_tenant(db, tenant)
        except CrossroadsError as exc:
            fail(exc)
    if json_out:
        print_json({"tenant": tenant, "rows": deletion.rows, "extraction_cache": deletion.extraction_cache,
                    "hnsw_indexes_dropped": deletion.hnsw_indexes_dropped,
                    "partition_dropped": deletion.partition_dropped, "left": deletion.left, "notes": deletion.notes})
    else:
        table = Table(title=Text(f"deleted tenant {tenant!r}"))  # the name is the user's text, never markup
        table.add_column("table")
        table.add_column("rows", justify="right")
        for name, n in deletion.rows.items():
            if n:
                table.add_row(name, str(n))
        table.add_row("extraction_cache (shared)", str(deletion.extraction_cache))
        out.print(table)
        for name in deletion.hnsw_indexes_dropped:
            out.print(f"dropped its HNSW index {name}")
        if deletion.partition_dropped:
            out.print(f"dropped its partition {deletion.partition_dropped}")
        for note in deletion.notes:
            err.print(Text.assemble(("note:", "yellow"), f" {note}"))
    if deletion.left:
        raise typer.Exit(EXIT_PARTIAL)
