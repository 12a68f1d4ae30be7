"""CLI: access levels, graph builds, communities."""
from __future__ import annotations

from typing import Optional

import typer
from rich.table import Table

from api.cli import JsonOption, TenantOption, _database, _fail, _groups, _print_json, _progress, app, err, out
from core.errors import CrossroadsError
from core.settings import get_settings

levels_app = typer.Typer(help="Access levels: the graph of a level is built only from chunks its groups may read.",
                         no_args_is_help=True)
graph_app = typer.Typer(help="Build the entity graph, its communities and reports, per access level.", no_args_is_help=True)
communities_app = typer.Typer(help="Browse communities and their reports.", no_args_is_help=True)
app.add_typer(levels_app, name="levels")
app.add_typer(graph_app, name="graph")
app.add_typer(communities_app, name="communities")


@levels_app.command("set")
def levels_set(
    tenant: str = typer.Argument(..., help="Tenant."),
    name: str = typer.Argument(..., help="Level name, e.g. staff."),
    groups: str = typer.Argument(..., help="Comma-separated groups; users need all of them to be served from it."),
) -> None:
    """Create or change a level."""
    from graph import store

    chosen = _groups(groups)
    if not chosen:
        _fail(CrossroadsError("a level needs at least one group"))
    with _database(get_settings()) as db, db.connection() as conn:
        store.set_level(conn, tenant, name, chosen)
    out.print(f"level {name} of {tenant}: {','.join(chosen)} (run `crossroads graph build --tenant {tenant} --level {name}`)")


@levels_app.command("list")
def levels_list(tenant: str = TenantOption, json_out: bool = JsonOption) -> None:
    """Levels with their groups and how many chunks their graphs draw on."""
    from graph import store

    with _database(get_settings()) as db, db.connection() as conn:
        levels = store.list_levels(conn, tenant)
    rows = [{"name": lvl.name, "groups": list(lvl.groups), "chunks": lvl.chunks} for lvl in levels]
    if json_out:
        _print_json({"levels": rows})
        return
    table = Table(title=f"access levels of {tenant}")
    for col in ("name", "groups", "chunks"):
        table.add_column(col)
    for r in rows:
        table.add_row(r["name"], ",".join(r["groups"]), str(r["chunks"]))
    out.print(table)


@levels_app.command("delete")
def levels_delete(tenant: str = typer.Argument(...), name: str = typer.Argument(...)) -> None:
    """Delete a level and its graph."""
    from graph import store

    with _database(get_settings()) as db, db.connection() as conn:
        found = store.delete_level(conn, tenant, name)
    out.print("deleted" if found else f"no level {name!r} (its graph, if any, was removed)")


@graph_app.command("build")
def graph_build(
    tenant: str = TenantOption,
    level: Optional[str] = typer.Option(None, "--level", "-l", help="Only this level (default: every level)."),
    max_cost: float = typer.Option(5.0, "--max-cost", help="Stop before LLM work estimated above this many dollars."),
    json_out: bool = JsonOption,
) -> None:
    """Extract entities (cached per chunk), cluster with Leiden, write community reports. Resumable."""
    from core.embeddings import make_embedder
    from core.llm import UsageMeter, make_llm
    from graph import store
    from graph.build import (BuildSettings, OfflineReporter, build_graph, communities_to_report, estimate_extraction,
                             estimate_reports)
    from graph.extract_llm import LLMExtractor
    from graph.reports_llm import LLMReporter
    from graph.extract_offline import OfflineExtractor

    settings = get_settings()
    meter = UsageMeter()
    llm = make_llm(settings, meter)
    extractor = LLMExtractor(llm, settings.llm_model_fast) if llm else OfflineExtractor()
    reporter = LLMReporter(llm, settings.llm_model_answer) if llm else OfflineReporter()
    with _database(settings) as db:
        with db.connection() as conn:
            levels = [lvl for lvl in store.list_levels(conn, tenant) if level in (None, lvl.name)]
        estimate = estimate_extraction(db, tenant, levels, extractor)
        err.print(f"estimate: {estimate['to_extract']} of {estimate['chunks']} chunks to extract, "
                  f"{estimate['calls']} LLM calls, ~{estimate['input_tokens']:,} input / {estimate['output_tokens']:,} "
                  f"output tokens, ~${estimate['cost_usd']} ({estimate['model'] or 'offline extractor, no LLM'})")
        # Communities exist only after clustering: counted from the previous build (see communities_to_report).
        to_report = communities_to_report(db, tenant, levels, reporter.model, estimate["to_extract"] > 0) if llm else 0
        reports = estimate_reports(to_report, reporter.model)
        err.print(f"estimate: up to {reports['calls']} report LLM calls, ~{reports['input_tokens']:,} input / "
                  f"{reports['output_tokens']:,} output tokens, ~${reports['cost_usd']} "
                  f"({reports['model'] or 'offline reports, no LLM'})")
        estimate = {**estimate, "reports": reports, "cost_usd": round(estimate["cost_usd"] + reports["cost_usd"], 4)}
        if estimate["cost_usd"] > max_cost:
            _fail(CrossroadsError(f"estimated ${estimate['cost_usd']} is over --max-cost {max_cost}; raise it to proceed"))

        def usage() -> dict:
            total = meter.total
            return {"calls": total.calls, "input_tokens": total.prompt_tokens, "output_tokens": total.output_tokens,
                    "cost_usd": round(total.cost_usd, 6)}

        with _progress("graph build") as progress:
            try:
                job = build_graph(db, tenant, level, extractor, reporter, make_embedder(settings),
                                  BuildSettings(), lambda stage, done, total: progress(done, total), usage)
            except CrossroadsError as exc:
                _fail(exc)
    job["estimate"] = estimate
    if json_out:
        _print_json(job)
        return
    for lvl in job["counts"]["levels"]:
        out.print(f"level {lvl['level']}: {lvl['chunks']} chunks, {lvl['entities']} entities, "
                  f"{lvl['relationships']} relationships, {lvl['communities']} communities "
                  f"{lvl['communities_per_level']}, reports {lvl['reports_generated']} written / {lvl['reports_kept']} kept, "
                  f"{lvl['extracted']} chunks extracted ({lvl['extraction_cached']} cached), {sum(lvl['seconds'].values()):.1f} s")
    out.print(f"job {job['id']}: {job['status']}; LLM usage {job['usage']}")


@graph_app.command("status")
def graph_status(tenant: str = TenantOption, json_out: bool = JsonOption) -> None:
    """The last graph builds of a tenant."""
    with _database(get_settings()) as db, db.connection() as conn:
        rows = conn.execute(
            "SELECT id, status, stage, created_at, finished_at, usage, errors FROM jobs"
            " WHERE tenant_id = %s AND kind = 'graph-build' ORDER BY id DESC LIMIT 10", (tenant,)
        ).fetchall()
    jobs = [dict(zip(("id", "status", "stage", "created_at", "finished_at", "usage", "errors"), r)) for r in rows]
    if json_out:
        _print_json({"jobs": jobs})
        return
    for j in jobs:
        out.print(f"job {j['id']}: {j['status']} ({j['stage']}) started {j['created_at']:%Y-%m-%d %H:%M} usage {j['usage']}")


@communities_app.command("list")
def communities_list(
    tenant: str = TenantOption,
    level: str = typer.Option("all", "--level", "-l", help="Access level."),
    json_out: bool = JsonOption,
) -> None:
    """Communities of a level: id, hierarchy level, parent, title, rating, member entities."""
    from graph import store

    with _database(get_settings()) as db, db.connection() as conn:
        reports = store.list_reports(conn, tenant, level)
        names = {e.key: e.name for e in store.load_entities(conn, tenant, level)}
    rows = [{"id": r["id"], "level": r["level"], "parent": r["parent"], "title": r["title"], "rating": r["rating"],
             "entities": [names.get(k, k) for k in r["members"]]} for r in reports]
    if json_out:
        _print_json({"communities": rows})
        return
    table = Table(title=f"{len(rows)} communities of {tenant}/{level}")
    for col in ("id", "level", "parent", "rating", "title", "entities"):
        table.add_column(col)
    for r in rows:
        table.add_row(str(r["id"]), str(r["level"]), str(r["parent"] if r["parent"] is not None else ""),
                      f"{r['rating']:.1f}", r["title"], ", ".join(r["entities"][:6]) + ("…" if len(r["entities"]) > 6 else ""))
    out.print(table)


@communities_app.command("show")
def communities_show(
    community_id: int = typer.Argument(...),
    tenant: str = TenantOption,
    level: str = typer.Option("all", "--level", "-l"),
    json_out: bool = JsonOption,
) -> None:
    """One community's report: summary, rating, findings with their sources."""
    from graph import store

    with _database(get_settings()) as db, db.connection() as conn:
        report = next((r for r in store.list_reports(conn, tenant, level) if r["id"] == community_id), None)
    if report is None:
        _fail(CrossroadsError(f"no community {community_id} in {tenant}/{level}: see `crossroads communities list`"))
    report.pop("embedding", None)
    if json_out:
        _print_json(report)
        return
    out.print(f"[bold]{report['title']}[/bold] (rating {report['rating']}: {report['rating_explanation']})")
    out.print(report["summary"])
    for f in report["findings"]:
        out.print(f"- [bold]{f['summary']}[/bold]: {f['explanation']} (chunks {f['chunk_ids']})")
    if not report["model"]:
        out.print("[dim]offline extractive report (no LLM)[/dim]")
