"""CLI: graph builds, status, cancel and export, communities."""
from __future__ import annotations

from typing import Optional

import typer
from rich.table import Table
from rich.text import Text

from api import usecases
from api.cli.common import (EXIT_PARTIAL, JsonOption, TenantOption, announce_queued, app, database, err, fail, interrupted, out,
                            print_json, progress_bar, require_tenant, tenant_connection)
from core.errors import CrossroadsError, JobNotFoundError, JobRunningError
from core.settings import get_settings
from graph.indexing.contracts import STAGE_UNITS

graph_app = typer.Typer(help="Build the entity graph, its communities and reports, per access level.", no_args_is_help=True)
communities_app = typer.Typer(help="Browse communities and their reports.", no_args_is_help=True)
app.add_typer(graph_app, name="graph")
app.add_typer(communities_app, name="communities")


@graph_app.command("build")
def graph_build(
    tenant: str = TenantOption,
    level: Optional[str] = typer.Option(None, "--level", "-l", help="Only this level (default: every level)."),
    max_cost: float = typer.Option(5.0, "--max-cost", help="Stop before LLM work estimated above this many dollars."),
    claims: Optional[bool] = typer.Option(None, "--claims/--no-claims", metavar="",
                                          help="With an LLM, also extract claims about entities and give them to the "
                                               "community reports (default: CROSSROADS_GRAPH_EXTRACT_CLAIMS; a "
                                               "different extraction, so cached chunks are extracted once more)."),
    queue: Optional[bool] = typer.Option(None, "--queue/--here", metavar="",
                                         help="Queue the build for `crossroads worker`, or run it in this process "
                                              "(default: queue when CROSSROADS_JOBS_RUN_IN=worker)."),
    batch: bool = typer.Option(False, "--batch", metavar="",
                               help="Send extraction, summaries and reports as Message Batches: half the price, "
                                    "answered within 24 h; a build stopped meanwhile is collected by the next."),
    dry_run: bool = typer.Option(False, "--dry-run", metavar="",
                                 help="Print the estimate, each figure with its range, and stop: no LLM call, no job."),
    json_out: bool = JsonOption,
) -> None:
    """Extract entities (cached per chunk), summarise merged descriptions, cluster with Leiden, write
    community reports. Resumable. With ANTHROPIC_API_KEY the LLM does the extraction, summaries and
    reports, after printing an estimate (stops above --max-cost); without, offline methods do (no
    summaries: the most central sentences)."""
    from core.embeddings import make_embedder
    from core.llm.pricing import BATCH_FACTOR

    settings = get_settings()
    with database(settings) as db:
        require_tenant(db, tenant)
        try:
            plan = usecases.plan_graph_build(db, settings, tenant, level, max_cost_usd=None if dry_run else max_cost,
                                             claims=claims, batch=batch)
        except usecases.BuildRefused as exc:
            fail(exc)
        _print_estimate(plan.estimate, plan.pipeline)
        if batch and plan.cost_usd is not None:
            low, high = (round(usd * BATCH_FACTOR, 4) for usd in plan.estimate["cost_usd_range"])
            err.print(f"estimate: sent as Message Batches, billed at the batch price: ~${plan.cost_usd:.4f} "
                      f"(${low}-${high})", markup=False)
        if dry_run:
            if json_out:
                print_json({"estimate": plan.estimate, "cost_usd": plan.cost_usd, "batch": batch})
            return
        if queue if queue is not None else settings.jobs_run_in == "worker":
            _queue_build(db, tenant, level, plan.pipeline, claims, json_out)
            return

        with progress_bar("graph build", STAGE_UNITS) as progress:
            try:
                job = usecases.run_graph_build(db, make_embedder(settings), tenant, plan, progress=progress)
            except JobRunningError as exc:
                fail(CrossroadsError(f"{exc}. Follow it with `crossroads graph status --tenant {tenant}`"))
            except CrossroadsError as exc:
                fail(exc)
            except KeyboardInterrupt:
                # Each extraction, description summary and report is saved as it is made, keyed by its inputs:
                # the next build finds them and does only the rest.
                interrupted(f"graph build stopped at {progress.describe(with_eta=False)}; the extractions, summaries "
                            "and reports made so far are saved: run the same command again to resume")
    job["estimate"] = plan.estimate
    pipeline = plan.pipeline
    if json_out:
        print_json(job)
    else:
        _print_build(job, pipeline)
    if job["status"] == "partial":  # done, but some input failed: the operator must know, and scripts too
        raise typer.Exit(EXIT_PARTIAL)


def _queue_build(db, tenant: str, level: str | None, pipeline, claims: bool | None, json_out: bool) -> None:
    from api.worker_jobs import enqueue_graph_build
    from core.errors import JobQueuedError

    try:
        job_id = enqueue_graph_build(db, tenant, level, pipeline, claims)
    except (JobRunningError, JobQueuedError) as exc:
        fail(CrossroadsError(f"{exc}. Follow it with `crossroads graph status --tenant {tenant}`"))
    except CrossroadsError as exc:
        fail(exc)
    announce_queued(job_id, json_out, f"`crossroads graph status --tenant {tenant}`")


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


def _usd(stage: dict) -> str:
    """A stage's cost with its range, or why there is none."""
    if stage["cost_usd"] is None:
        return "cost unknown (no price for the model: set CROSSROADS_LLM_PRICES)"
    low, high = stage["cost_usd_range"]
    return f"~${stage['cost_usd']} (${low}-${high})"


def _tokens(stage: dict) -> str:
    """A stage's tokens with their ranges, and what they come from: the tenant's measured calls or the defaults."""
    (in_low, in_high), (out_low, out_high) = stage["input_tokens_range"], stage["output_tokens_range"]
    measured = stage["measured_calls"]
    basis = (f"measured on {max(measured.values()):,} earlier calls" if measured
             else "default sizes, not yet measured on this tenant")
    thinking = f" + up to {stage['thinking_tokens']:,} thinking" if stage["thinking_tokens"] else ""
    return (f"~{stage['input_tokens']:,} ({in_low:,}-{in_high:,}) input / {stage['output_tokens']:,} "
            f"({out_low:,}-{out_high:,}){thinking} output tokens [{basis}]")


def _print_estimate(estimate: dict, pipeline) -> None:
    err.print(f"estimate: {estimate['to_extract']} of {estimate['chunks']} chunks to extract, "
              f"{estimate['calls']} LLM calls, {_tokens(estimate)}, "
              f"{_usd({'cost_usd': estimate['extraction_cost_usd'], 'cost_usd_range': estimate['extraction_cost_usd_range']})} "
              f"({estimate['model'] or 'offline extractor, no LLM'})", markup=False)
    summaries, reports = estimate["summaries"], estimate["reports"]
    if pipeline.summarizer is not None:
        err.print(f"estimate: ~{summaries['calls']} description summary LLM calls ({summaries['cached']} cached), "
                  f"{_tokens(summaries)}, {_usd(summaries)} ({summaries['model']}; an estimate, not a bound)",
                  markup=False)
    err.print(f"estimate: up to {reports['calls']} report LLM calls, {_tokens(reports)}, {_usd(reports)} "
              f"({reports['model'] or 'offline reports, no LLM'})", markup=False)
    if estimate["cost_usd"] is not None:
        low, high = estimate["cost_usd_range"]
        err.print(f"estimate: ~${estimate['cost_usd']} in all (${low}-${high})", markup=False)


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


def _usage_text(usage: dict | None) -> str:
    """A job's LLM usage in words: nothing for an offline build, else calls, tokens and cost."""
    usage = usage or {}
    if not usage.get("llm_calls"):
        return ", no LLM calls"
    cost = usage.get("cost_usd")
    return (f", {usage['llm_calls']} LLM calls, {usage.get('prompt_tokens', 0):,} input / "
            f"{usage.get('output_tokens', 0):,} output tokens, " + (f"${cost:.4f}" if cost is not None else "cost unknown"))


@graph_app.command("status")
def graph_status(tenant: str = TenantOption, json_out: bool = JsonOption) -> None:
    """The last graph builds of a tenant, and per level (groups, chunks) what its graph serves and what it
    has withdrawn (text whose source chunks were deleted or narrowed since the build) until the next build."""
    from core.llm.batches import collect_finished, waiting
    from core.llm.client import AnthropicLLM, make_llm
    from graph import store
    from graph.status import level_statuses, recent_builds

    settings = get_settings()
    with database(settings) as db:
        require_tenant(db, tenant)  # an unknown tenant fails here, before any call to the API
        llm = make_llm(settings)
        if isinstance(llm, AnthropicLLM):  # finished Message Batches are downloaded now, kept for the next build
            try:
                collect_finished(llm, db, tenant)
            except CrossroadsError as exc:
                err.print(f"could not collect Message Batches: {exc}", markup=False)
        with tenant_connection(db, tenant) as conn:
            builds = recent_builds(conn, tenant, db.job_lease_s)
            batches = waiting(conn, tenant)
        levels = level_statuses(conn, tenant, store.list_levels(conn, tenant),
                                lambda level: f"crossroads graph build --tenant {tenant} --level {level}")
    if json_out:
        print_json({"jobs": builds, "levels": levels, "batches": batches})
        return
    for j in builds:
        why = f": {j['errors'][-1]['error']}" if j["status"] in ("partial", "failed", "cancelled") and j["errors"] else ""
        out.print(f"job {j['id']}: {j['status']} ({j['stage']}) started {j['created_at']:%Y-%m-%d %H:%M}"
                  f"{_usage_text(j['usage'])}{why}", markup=False)
    for lvl in levels:
        out.print(_status_line(lvl), markup=False)
    for b in batches:
        state = ("ended, results collected" if b["collected"] == b["requests"]
                 else "still running (or not looked at: no ANTHROPIC_API_KEY)")
        out.print(f"Message Batch {b['batch_id']} (job {b['job_id']}, sent {b['submitted_at']:%Y-%m-%d %H:%M}): "
                  f"{b['requests']} requests, {state}; the next `crossroads graph build --tenant {tenant}` uses them "
                  "without paying again", markup=False)


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

    with database(get_settings()) as db, db.connection() as conn:
        if job is None:
            running = jobs.running_job(conn, tenant, BUILD_KIND, db.job_lease_s)
            if running is None:
                fail(CrossroadsError(f"no graph build of tenant {tenant!r} is running: nothing to cancel"))
            job = running["id"]
        try:
            found = jobs.request_cancel(conn, job, tenant, db.job_lease_s)
        except JobNotFoundError as exc:
            fail(CrossroadsError(f"{exc}: see `crossroads graph status --tenant {tenant}`"))
        except CrossroadsError as exc:
            fail(exc)
    if json_out:
        print_json(found)
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

    with database(get_settings()) as db, tenant_connection(db, tenant) as conn:
        reports = store.list_reports(conn, tenant, level)
        names = {e.key: e.name for e in store.load_entities(conn, tenant, level)}
    rows = [{"id": r["id"], "level": r["level"], "parent": r["parent"], "title": r["title"], "rating": r["rating"],
             "entities": [names.get(k, k) for k in r["members"]]} for r in reports]
    if json_out:
        print_json({"communities": rows})
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

    with database(get_settings()) as db, tenant_connection(db, tenant) as conn:
        report = next((r for r in store.list_reports(conn, tenant, level) if r["id"] == community_id), None)
        cited = sorted({c for f in report["findings"] for c in f["chunk_ids"]}) if report else []
        sources = store.documents_of_chunks(conn, tenant, cited)
    if report is None:
        fail(CrossroadsError(f"no community {community_id} in {tenant}/{level}: see `crossroads communities list`"))
    report.pop("embedding", None)
    if json_out:
        print_json(report)
        return
    # the report's text comes from the corpus: printed as Text, never read as markup
    out.print(Text.assemble((report["title"], "bold"), f" (rating {report['rating']}: {report['rating_explanation']})"))
    out.print(Text(report["summary"]))
    for f in report["findings"]:
        docs = sorted({sources[c][0] for c in f["chunk_ids"] if c in sources})
        out.print(Text.assemble("- ", (f["summary"], "bold"), f": {f['explanation']}",
                                f" ({', '.join(docs)})" if docs else ""))
    if not report["model"]:
        out.print("[dim]offline extractive report (no LLM)[/dim]")


@graph_app.command("export")
def graph_export(
    tenant: str = TenantOption,
    level: str = typer.Option("all", "--level", "-l", help="Access level whose graph is exported."),
    fmt: str = typer.Option("graphml", "--format", "-f", help="graphml, gexf or json (networkx node-link)."),
    output: Optional[str] = typer.Option(None, "--output", "-o", help="File to write (default: standard output)."),
    json_out: bool = JsonOption,
) -> None:
    """Write a level's entity graph for Gephi, yEd or scripts: entities (name, type, description, degree,
    community ids) and relationships (weight, description), sorted by id. Withdrawn text is left out."""
    import sys
    from pathlib import Path

    from graph import store
    from graph.export import FORMATS, export_level

    if fmt not in FORMATS:
        raise typer.BadParameter(f"{fmt!r} is not a format: use one of {', '.join(FORMATS)}", param_hint="--format")
    if json_out and output is None:
        raise typer.BadParameter("--json describes the file written: give --output FILE too", param_hint="--json")
    with database(get_settings()) as db, db.connection() as conn:
        levels = [lvl.name for lvl in store.list_levels(conn, tenant)]
        if level not in levels:
            fail(CrossroadsError(f"no level {level!r} in tenant {tenant!r} (levels: {', '.join(levels)}): "
                                 f"see `crossroads levels list --tenant {tenant}`"))
        data, nodes, edges = export_level(conn, tenant, level, fmt)
    if nodes == 0:
        fail(CrossroadsError(f"level {level!r} of {tenant!r} has no graph to export: run "
                             f"`crossroads graph build --tenant {tenant} --level {level}`"))
    if output is None:
        sys.stdout.buffer.write(data)
        return
    try:
        Path(output).write_bytes(data)
    except OSError as exc:
        fail(CrossroadsError(f"cannot write {output}: {exc.strerror or exc}; choose another --output"))
    summary = {"tenant": tenant, "level": level, "format": fmt, "entities": nodes, "relationships": edges,
               "output": str(output)}
    if json_out:
        print_json(summary)
    else:
        err.print(f"wrote {nodes} entities and {edges} relationships of {tenant}/{level} to {output} ({fmt})",
                  markup=False)
