"""CLI: access levels, the sets of groups whose graphs are built (`crossroads levels set|list|delete`)."""
from __future__ import annotations

import re

import typer
from rich.table import Table

from api.cli.common import (JsonOption, TenantOption, app, database, err, out, parse_groups, print_json,
                            tenant_connection)
from core.settings import get_settings
from core.text_safety import CONTROL

levels_app = typer.Typer(help="Access levels: the graph of a level is built only from chunks its groups may read.",
                         no_args_is_help=True)
app.add_typer(levels_app, name="levels")


@levels_app.command("set")
def levels_set(
    tenant: str = typer.Argument(..., help="Tenant."),
    name: str = typer.Argument(..., help="Level name, e.g. staff."),
    groups: str = typer.Argument(..., help="Comma-separated groups; users need all of them to be served from it."),
    json_out: bool = JsonOption,
) -> None:
    """Create or change a level (its graph is built by `crossroads graph build --level NAME`)."""
    from graph import store

    chosen = parse_groups(groups)
    _check_level_input(tenant, name, chosen)
    with database(get_settings()) as db, db.connection() as conn:
        # a misspelt group is held by no document, and its level's graph would draw on nothing; a level
        # may still be defined before its documents are indexed, so this warns rather than refuses
        unknown = sorted(set(chosen) - _tenant_groups(conn, tenant))
        if unknown:
            err.print(f"warning: no document of tenant {tenant!r} has the group(s) {', '.join(unknown)} yet; check "
                      f"the spelling against `crossroads documents list --tenant {tenant}`", markup=False)
        store.set_level(conn, tenant, name, chosen)
    if json_out:
        print_json({"tenant": tenant, "level": name, "groups": chosen})
        return
    out.print(f"level {name} of {tenant}: {','.join(chosen)} (run `crossroads graph build --tenant {tenant} --level {name}`)")


_LEVEL_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")  # as the access_levels table's CHECK


def _check_level_input(tenant: str, name: str, groups: list[str]) -> None:
    """Exit 2 (a usage error) with the rule, rather than let the database refuse it with a traceback."""
    from graph.levels import DEFAULT_LEVEL

    if CONTROL.search(tenant):
        raise typer.BadParameter("a tenant must not contain control characters", param_hint="TENANT")
    if not groups:
        raise typer.BadParameter("a level needs at least one group, e.g. public,staff", param_hint="GROUPS")
    if any(CONTROL.search(g) for g in groups):
        raise typer.BadParameter("a group name must not contain control characters", param_hint="GROUPS")
    if name == DEFAULT_LEVEL:
        raise typer.BadParameter(f"`{DEFAULT_LEVEL}` is the built-in level of every group; choose another name",
                                 param_hint="NAME")
    if not _LEVEL_NAME.fullmatch(name):
        raise typer.BadParameter(f"{name[:80]!r} is not a level name: use 1-64 letters, digits, '_', '.' or '-' "
                                 "(e.g. staff or finance-eu)", param_hint="NAME")


def _tenant_groups(conn, tenant: str) -> set[str]:
    return {r[0] for r in conn.execute("SELECT DISTINCT g FROM chunks, unnest(acl) AS g WHERE tenant_id = %s",
                                       (tenant,))}


@levels_app.command("list")
def levels_list(tenant: str = TenantOption, json_out: bool = JsonOption) -> None:
    """Levels with their groups and how many chunks their graphs draw on."""
    from graph import store

    with database(get_settings()) as db, tenant_connection(db, tenant) as conn:
        levels = store.list_levels(conn, tenant)
    rows = [{"name": lvl.name, "groups": list(lvl.groups), "chunks": lvl.chunks} for lvl in levels]
    if json_out:
        print_json({"levels": rows})
        return
    table = Table(title=f"access levels of {tenant}")
    for col in ("name", "groups", "chunks"):
        table.add_column(col)
    for r in rows:
        table.add_row(r["name"], ",".join(r["groups"]), str(r["chunks"]))
    out.print(table)


@levels_app.command("delete")
def levels_delete(
    tenant: str = typer.Argument(..., help="Tenant."),
    name: str = typer.Argument(..., help="Level name."),
    json_out: bool = JsonOption,
) -> None:
    """Delete a level and its graph."""
    from graph import store

    with database(get_settings()) as db, db.connection() as conn:
        found = store.delete_level(conn, tenant, name)
    if json_out:
        print_json({"tenant": tenant, "level": name, "deleted": found})
        return
    out.print("deleted" if found else f"no level {name!r} (its graph, if any, was removed)")
