"""CLI: access levels, graph builds, communities."""
from __future__ import annotations

import re
from typing import Optional

import typer
from rich.table import Table

from api.cli import (EXIT_PARTIAL, JsonOption, TenantOption, _database, _fail, _groups, _print_json, _progress, app,
                     err, out)
from core.errors import CrossroadsError, JobNotFoundError, JobRunningError
from core.settings import get_settings
from core.text_safety import CONTROL

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
    json_out: bool = JsonOption,
) -> None:
    """Create or change a level (its graph is built by `crossroads graph build --level NAME`)."""
    from graph import store

    chosen = _groups(groups)
    _check_level_input(tenant, name, chosen)
    with _database(get_settings()) as db, db.connection() as conn:
        # a misspelt group is held by no document, and its level's graph would draw on nothing; a level
        # may still be defined before its documents are indexed, so this warns rather than refuses
        unknown = sorted(set(chosen) - _tenant_groups(conn, tenant))
        if unknown:
            err.print(f"warning: no document of tenant {tenant!r} has the group(s) {', '.join(unknown)} yet; check "
                      f"the spelling against `crossroads documents list --tenant {tenant}`", markup=False)
        store.set_level(conn, tenant, name, chosen)
    if json_out:
        _print_json({"tenant": tenant, "level": name, "groups": chosen})
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
def levels_delete(
    tenant: str = typer.Argument(..., help="Tenant."),
    name: str = typer.Argument(..., help="Level name."),
    json_out: bool = JsonOption,
) -> None:
    """Delete a level and its graph."""
    from graph import store

    with _database(get_settings()) as db, db.connection() as conn:
        found = store.delete_level(conn, tenant, name)
    if json_out:
        _print_json({"tenant": tenant, "level": name, "deleted": found})
        return
    out.print("deleted" if found else f"no level {name!r} (its graph, if any, was removed)")


@graph_app.command("build")
def graph_build(
    tenant: str = TenantOption,
    level: Optional[str] = typer.Option(None, "--level", "-l", help="Only this level (default: every level)."),
    max_cost: float = typer.Option(5.0, "--max-cost", help="Stop before LLM work estimated above this many dollars."),
    claims: Optional[bool] = typer.Option(None, "--claims/--no-claims",
                                          help="With an LLM, also extract claims about entities and give them to the "
                                               "community reports (default: CROSSROADS_GRAPH_EXTRACT_CLAIMS; a "
                                               "different extraction, so cached chunks are extracted once more)."),
    json_out: bool = JsonOption,
) -> None:
    """Extract entities (cached per chunk), summarise merged descriptions, cluster with Leiden, write
    community reports. Resumable. With ANTHROPIC_API_KEY the LLM does the extraction, summaries and
    reports, after printing an estimate (stops above --max-cost); without, offline methods do (no
    summaries: the most central sentences)."""
    from core.embeddings import make_embedder
    from core.llm import UsageMeter, make_llm
    from graph import store
    from graph.build.contracts import BuildSettings
    from graph.build.runner import build_graph
    from graph.build.estimate import estimate_build
    from graph.build.parts import make_pipeline

    settings = get_settings()
    meter = UsageMeter()
    pipeline = make_pipeline(settings, make_llm(settings, meter), claims=claims)
    build_settings = BuildSettings()
    with _database(settings) as db:
        with db.connection() as conn:
            levels = [lvl for lvl in store.list_levels(conn, tenant) if level in (None, lvl.name)]
        estimate = estimate_build(db, tenant, levels, pipeline.extractor, pipeline.reporter, pipeline.summarizer,
                                  build_settings.summary_min_chars)
        _print_estimate(estimate, pipeline)
        if estimate["cost_usd"] > max_cost:
            _fail(CrossroadsError(f"estimated ${estimate['cost_usd']} is over --max-cost {max_cost}; raise it to proceed"))

        with _progress("graph build") as progress:
            try:
                job = build_graph(db, tenant, level, pipeline.extractor, pipeline.reporter, make_embedder(settings),
                                  build_settings, lambda stage, done, total: progress(done, total), meter.summary,
                                  summarizer=pipeline.summarizer)
            except JobRunningError as exc:
                _fail(CrossroadsError(f"{exc}. Follow it with `crossroads graph status --tenant {tenant}`"))
            except CrossroadsError as exc:
                _fail(exc)
    job["estimate"] = estimate
    if json_out:
        _print_json(job)
    else:
        _print_build(job, pipeline)
    if job["status"] == "partial":  # done, but some input failed: the operator must know, and scripts too
        raise typer.Exit(EXIT_PARTIAL)


def _print_build(job: dict, pipeline) -> None:
    for lvl in job["counts"]["levels"]:
        out.print(f"level {lvl['level']}: {lvl['chunks']} chunks, {lvl['entities']} entities, "
                  f"{lvl['relationships']} relationships, {lvl['communities']} communities "
                  f"{lvl['communities_per_level']}, reports {lvl['reports_generated']} written / {lvl['reports_kept']} kept, "
                  f"{lvl['extracted']} chunks extracted ({lvl['extraction_cached']} cached), "
                  + (f"summaries {lvl['summaries_computed']} written / {lvl['summaries_cached']} cached / "
                     f"{lvl['summary_errors']} failed, " if pipeline.summarizer is not None else "")
                  + (f"{lvl['claims']} claims, " if lvl["claims"] else "")
                  + f"{sum(lvl['seconds'].values()):.1f} s")
        for failure in lvl["failures"]:
            err.print(f"failed: {failure}", markup=False)
    for problem in job["errors"]:
        err.print(f"partial: {problem['error']}", markup=False)
    out.print(f"job {job['id']}: {job['status']}; LLM usage {job['usage']}")


def _print_estimate(estimate: dict, pipeline) -> None:
    err.print(f"estimate: {estimate['to_extract']} of {estimate['chunks']} chunks to extract, "
              f"{estimate['calls']} LLM calls, ~{estimate['input_tokens']:,} input / {estimate['output_tokens']:,} "
              f"output tokens, ~${estimate['extraction_cost_usd']} ({estimate['model'] or 'offline extractor, no LLM'})")
    summaries, reports = estimate["summaries"], estimate["reports"]
    if pipeline.summarizer is not None:
        err.print(f"estimate: ~{summaries['calls']} description summary LLM calls ({summaries['cached']} cached), "
                  f"~{summaries['input_tokens']:,} input / {summaries['output_tokens']:,} output tokens, "
                  f"~${summaries['cost_usd']} ({summaries['model']}; an estimate, not a bound)")
    err.print(f"estimate: up to {reports['calls']} report LLM calls, ~{reports['input_tokens']:,} input / "
              f"{reports['output_tokens']:,} output tokens, ~${reports['cost_usd']} "
              f"({reports['model'] or 'offline reports, no LLM'})")


def _status_line(lvl: dict) -> str:
    """One level of `graph status`, ending with the build to run (`rebuild`) when one would change it."""
    from graph.status import GRAPH_TEXT_KINDS

    build = lvl["rebuild"]
    groups = ",".join(lvl["groups"]) or "none"
    withdrawn = ", ".join(f"{lvl['withdrawn'][k]} {k}" for k in GRAPH_TEXT_KINDS)
    state = lvl["state"]
    if state == "empty":
        return (f"level {lvl['level']}: empty, no chunk its groups ({groups}) may read; nothing to build until "
                "documents readable by them are ingested")
    if state == "emptied":
        return (f"level {lvl['level']}: no chunk its groups ({groups}) may read any more; withdrawn {withdrawn}, "
                f"{lvl['communities']} communities left: run `{build}` to clear them")
    if state == "unbuilt":
        return f"level {lvl['level']}: not built yet ({lvl['chunks']} chunks, groups {groups}): run `{build}`"
    served = ", ".join(f"{lvl['served'][k]} {k}" for k in GRAPH_TEXT_KINDS)
    line = f"level {lvl['level']}: serves {served}, {lvl['communities']} communities ({lvl['chunks']} chunks, groups {groups})"
    if state == "withdrawn":
        line += f"; withdrawn {withdrawn} (their sources were deleted or narrowed): run `{build}` to rebuild"
    if state == "partial":
        failed = lvl["failures"]
        refused = sum(failed["refusals"].values())
        line += (f"; its last build (job {failed['job']}) left {failed['extraction_errors']} chunk extractions, "
                 f"{failed['summary_errors']} summaries and {failed['report_fallbacks']} LLM reports undone"
                 + (f" ({refused} refused by the model)" if refused else "") + f": run `{build}` to retry them")
    return line


@graph_app.command("status")
def graph_status(tenant: str = TenantOption, json_out: bool = JsonOption) -> None:
    """The last graph builds of a tenant, and per level (groups, chunks) what its graph serves and what it
    has withdrawn (text whose source chunks were deleted or narrowed since the build) until the next build."""
    from graph import store
    from graph.status import level_statuses, recent_builds

    with _database(get_settings()) as db, db.connection() as conn:
        builds = recent_builds(conn, tenant, db.job_lease_s)
        levels = level_statuses(conn, tenant, store.list_levels(conn, tenant),
                                lambda level: f"crossroads graph build --tenant {tenant} --level {level}")
    if json_out:
        _print_json({"jobs": builds, "levels": levels})
        return
    for j in builds:
        why = f": {j['errors'][-1]['error']}" if j["status"] in ("partial", "failed", "cancelled") and j["errors"] else ""
        out.print(f"job {j['id']}: {j['status']} ({j['stage']}) started {j['created_at']:%Y-%m-%d %H:%M} "
                  f"usage {j['usage']}{why}", markup=False)
    for lvl in levels:
        out.print(_status_line(lvl), markup=False)


@graph_app.command("cancel")
def graph_cancel(
    tenant: str = TenantOption,
    job: Optional[int] = typer.Option(None, "--job", min=1, help="The job to stop (default: the tenant's running build)."),
    json_out: bool = JsonOption,
) -> None:
    """Stop a running graph build, in whichever process runs it: it stops at its next progress step and
    records `cancelled`; what it saved (extractions, summaries, reports) is kept, and the next build
    resumes from it."""
    from core import jobs
    from graph.status import BUILD_KIND

    with _database(get_settings()) as db, db.connection() as conn:
        if job is None:
            running = jobs.running_job(conn, tenant, BUILD_KIND, db.job_lease_s)
            if running is None:
                _fail(CrossroadsError(f"no graph build of tenant {tenant!r} is running: nothing to cancel"))
            job = running["id"]
        try:
            found = jobs.request_cancel(conn, job, tenant, db.job_lease_s)
        except JobNotFoundError as exc:
            _fail(CrossroadsError(f"{exc}: see `crossroads graph status --tenant {tenant}`"))
        except CrossroadsError as exc:
            _fail(exc)
    if json_out:
        _print_json(found)
    elif found["status"] == "cancelled":
        out.print(f"job {job}: cancelled")
    else:
        out.print(f"job {job}: cancel requested; it stops at its next progress step "
                  f"(follow it with `crossroads graph status --tenant {tenant}`)")


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
