"""The `crossroads` command line: database, ingest, documents, configuration (tenants: api/cli/tenants.py).

Every command takes `--json` for machines; without it, output is for people (tables, progress on
stderr). Errors a user can fix are printed as one message with what to do next, exit code 1.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Optional

import psycopg
import typer
from rich.table import Table
from rich.text import Text

from api import usecases
# Command groups defined in their own modules register themselves on `app` when imported.
import api.cli.ask  # noqa: F401
import api.cli.embeddings  # noqa: F401
import api.cli.graph  # noqa: F401
import api.cli.judge  # noqa: F401
import api.cli.levels  # noqa: F401
import api.cli.llm  # noqa: F401
import api.cli.search  # noqa: F401
import api.cli.serve  # noqa: F401
import api.cli.tenants  # noqa: F401
import api.cli.worker  # noqa: F401
from api.cli import partitions as cli_partitions
from api.cli.common import (EXIT_PARTIAL, JsonOption, TenantOption, app, database, err, fail, interrupted, out,
                            parse_groups, print_json, progress_bar, tenant_connection)
from core import embedded
from core.embedding_engines import describe as describe_engine
from core.embeddings import make_embedder
from core.errors import CrossroadsError
from core.settings import Settings, get_settings

db_app = typer.Typer(help="The embedded PostgreSQL server (ignored when DATABASE_URL is set).", no_args_is_help=True)
docs_app = typer.Typer(help="List, delete and re-permission indexed documents.", no_args_is_help=True)
HUGE_PAGES_WORTH_BYTES = 2**30  # search data from which `db status` suggests huge pages

app.add_typer(db_app, name="db")
app.add_typer(docs_app, name="documents")


# --- db ----------------------------------------------------------------------------------------


@db_app.command("start")
def db_start(json_out: bool = JsonOption) -> None:
    """Start the embedded server (data in STATE_DIR/pg) and apply migrations."""
    settings = get_settings()
    with database(settings) as db:
        info = {"url": db.url, "pgvector": ".".join(map(str, db.pgvector_version)), "external": bool(settings.database_url)}
    if not settings.database_url:
        info["advice"] = embedded.memory_report(info["url"])["advice"]
    if json_out:
        print_json(info)
        return
    out.print(f"database ready at {info['url']} (pgvector {info['pgvector']})")
    if info.get("advice"):
        out.print(f"tip: {info['advice']}")


@db_app.command("stop")
def db_stop(json_out: bool = JsonOption) -> None:
    """Stop the embedded server."""
    stopped = embedded.stop(get_settings().pg_data_dir)
    print_json({"stopped": stopped}) if json_out else out.print("stopped" if stopped else "not running")


@db_app.command("status")
def db_status(json_out: bool = JsonOption) -> None:
    """Whether the embedded server runs, its pid and connection URI."""
    settings = get_settings()
    st = embedded.status(settings.pg_data_dir)
    info = {"data_dir": str(st.data_dir), "running": st.running, "pid": st.pid, "url": st.uri,
            "external_database_url": bool(settings.database_url)}
    if st.running and st.uri:
        info["memory"] = embedded.memory_report(st.uri)
    info["embedding_engine"] = describe_engine(settings)
    if json_out:
        print_json(info)
        return
    out.print(f"embedded PostgreSQL in {st.data_dir}: " + (f"running (pid {st.pid})" if st.running else "stopped"))
    out.print(f"embedding engine: {info['embedding_engine']}")
    if memory := info.get("memory"):
        out.print(f"shared_buffers {memory['shared_buffers']}, huge pages {memory['huge_pages']}")
        # huge pages pay off only once scans visit many heap pages: not worth a sysctl for a small corpus
        if memory["huge_pages"] != "on" and memory["search_data_bytes"] >= HUGE_PAGES_WORTH_BYTES:
            out.print(f"tip: reserve {memory['huge_pages_needed']} huge pages (as root: sysctl -w "
                      f"vm.nr_hugepages={memory['huge_pages_needed']}), then `crossroads db stop`: the next "
                      "start uses them, and scans that visit many heap pages run up to twice as fast")
        out.print(f"search data (chunks and documents, every database) {memory['search_data_bytes'] / 2**30:.2f} GB")
        if memory["advice"]:
            out.print(f"tip: {memory['advice']}")
    if settings.database_url:
        out.print("note: DATABASE_URL is set, so Crossroads uses that server, not the embedded one")


db_app.command("partition-chunks")(cli_partitions.partition_chunks)


# --- ingest ------------------------------------------------------------------------------------


@app.command()
def ingest(
    path: Path = typer.Argument(..., help="A folder of Markdown / text files, one file, or a JSONL corpus (_id, title, text)."),
    tenant: str = TenantOption,
    acl: Optional[str] = typer.Option(None, "--acl", help="Groups for documents without `acl` in their front matter, e.g. staff,hr."),
    prune: bool = typer.Option(False, "--prune", metavar="", help="Delete indexed documents of this tenant that the source no longer has."),
    yes: bool = typer.Option(False, "--yes", "-y", metavar="", help="Create the tenant without asking when it is new."),
    queue: bool = typer.Option(False, "--queue", metavar="", help="Queue it for `crossroads worker` (PATH on storage the workers mount)."),
    batch: bool = typer.Option(False, "--batch", metavar="", help="LLM chunk contexts as Message Batches: half the price, answered within 24 h; waits for them."),
    dry_run: bool = typer.Option(False, "--dry-run", metavar="", help="Print what the LLM's chunk contexts would cost, each figure with its range, and stop: nothing is written."),
    json_out: bool = JsonOption,
) -> None:
    """Index documents as a sync: unchanged text costs nothing, changed text re-embeds only changed chunks.
    Interrupted (Ctrl-C), it keeps the documents written: run it again to resume (with --batch or without,
    it collects the Message Batches a --batch run already sent instead of paying for them again)."""
    from core.llm.usage import UsageMeter
    from vector.ingest.runner import STAGE_UNITS, IngestInterrupted
    from vector.ingest.sources import load_source

    settings = get_settings()
    if queue and not dry_run:
        from api.cli.worker import queued
        from api.worker_jobs import enqueue_reindex

        refused = usecases.batch_ingest_refused(settings) if batch else None
        if refused:
            fail(CrossroadsError(refused))
        queued(settings, lambda db: enqueue_reindex(db, tenant, path, parse_groups(acl), prune, batch), json_out)
        return
    try:
        documents, skipped = load_source(path, parse_groups(acl), settings.max_document_bytes)
    except FileNotFoundError as exc:
        fail(exc)
    if dry_run:
        with database(settings) as db:
            try:
                estimate = usecases.estimate_ingest(db, settings, tenant, documents, batch=batch)
            except CrossroadsError as exc:
                fail(exc)
        if json_out:
            print_json({"estimate": estimate})
        else:
            _print_context_estimate(estimate)
        return
    meter = UsageMeter()
    with database(settings) as db:
        created = _confirm_new_tenant(db, tenant, yes)
        with progress_bar("ingest", STAGE_UNITS) as progress:
            try:
                indexed = usecases.index_documents(db, make_embedder(settings), settings, tenant, documents, skipped,
                                                   prune=prune, progress=progress, meter=meter, batch=batch)
            except CrossroadsError as exc:
                fail(exc)
            except IngestInterrupted as exc:
                where = progress.describe(with_eta=False)
                sent = " and collects the Message Batches already sent" if batch else ""
                interrupted(f"{exc.saved} of {exc.documents} documents saved (stopped at {where}); run the same "
                            f"command again to resume: it skips the saved ones{sent}")
            except KeyboardInterrupt:  # before the ingest began: reading the model, opening the database
                interrupted("nothing was saved; run the same command again")
    report = indexed.report
    llm = meter.summary() | {"contexts": indexed.contexts}
    if json_out:
        print_json(report.to_dict() | {"llm": llm, "tenant_created": created})
    else:
        _print_ingest(report, tenant)
        if llm["llm_calls"]:
            out.print(f"LLM: {llm['llm_calls']} calls, {llm['prompt_tokens']} input / {llm['output_tokens']} output tokens, "
                      + ("cost unknown" if llm['cost_usd'] is None else f"${llm['cost_usd']:.4f}"))
    if not report.clean:
        raise typer.Exit(EXIT_PARTIAL)


def _print_context_estimate(e: dict) -> None:
    if not e["calls"]:
        out.print(f"chunk contexts ({e['contexts']}): no LLM call: nothing to pay")
        return
    cost = ("cost unknown: set the model's price in CROSSROADS_LLM_PRICES" if e["cost_usd"] is None else
            f"~${e['cost_usd']:.4f} (${e['cost_usd_range'][0]}-${e['cost_usd_range'][1]})")
    price = " at the Message Batches price" if e["batch"] else ""
    out.print(f"chunk contexts ({e['model']}): {e['calls']:,} calls for {e['documents']:,} documents, "
              f"{e['input_tokens']:,} input tokens ({e['input_tokens_range'][0]:,}-{e['input_tokens_range'][1]:,}) "
              f"+ {e['cache_write_tokens']:,} cache writes / {e['cache_read_tokens']:,} cache reads, "
              f"{e['output_tokens']:,} output ({e['output_tokens_range'][0]:,}-{e['output_tokens_range'][1]:,}); "
              f"{cost}{price}", markup=False)
    if e["cache_min_tokens"] is None:
        out.print("prompt caching not counted: the model's minimum cacheable prefix is unknown", markup=False)
    else:
        out.print(f"prompt caching counted for {e['documents_cached']:,} of {e['documents']:,} documents (those of "
                  f"at least {e['cache_min_tokens']:,} tokens, the model's minimum cacheable prefix)", markup=False)


def _confirm_new_tenant(db, tenant: str, yes: bool) -> bool:
    """Whether this ingest creates `tenant`; on a terminal, a new tenant is confirmed first (--yes skips).

    A typo in --tenant would otherwise fill a stray tenant that nobody reads. Only a person at a terminal
    is asked: a script, CI or `make demo` (stdin no terminal) is not stopped, since a script that must pass
    --yes always passes it, and then the question protects no one; it gets a note on stderr instead, and
    `tenant_created` in the JSON."""
    from core.tenants import tenants

    with db.connection() as conn:
        known = [t.tenant for t in tenants(conn)]
    if tenant in known:
        return False
    if not yes and sys.stdin.isatty():
        others = f" (tenants: {', '.join(known[:20])})" if known else ""
        if not typer.confirm(f"tenant {tenant!r} does not exist yet{others}; create it?", default=False, err=True):
            err.print("nothing ingested; name an existing tenant with --tenant (`crossroads tenants list`)")
            raise typer.Exit(1)
    elif not yes:
        err.print(Text.assemble(("note:", "yellow"), f" tenant {tenant!r} is new: this ingest creates it"))
    return True


def _print_ingest(report, tenant: str) -> None:
    d, c = report.documents, report.chunks
    table = Table(title=f"ingest into tenant '{tenant}' ({report.seconds:.1f} s)")
    for name in ("", "added", "changed", "unchanged", "deleted", "skipped", "failed"):
        table.add_column(name, justify="right" if name else "left")
    table.add_row("documents", *(str(d[k]) for k in ("added", "changed", "unchanged", "deleted", "skipped", "failed")))
    table.add_row("chunks", str(c["added"]), str(c["changed"]), "", str(c["deleted"]), "", "")
    out.print(table)
    out.print(f"embeddings computed: {report.embeddings_computed}, vectors reused: {report.vectors_reused}, "
              f"ACL/metadata-only updates: {d['metadata_updated']}")
    # File names and reasons are the corpus's text: printed as Text, never read as markup or emoji codes
    for item in report.skipped:
        err.print(Text.assemble(("skipped", "yellow"), f" {item['where']}: {item['reason']}"))
    for item in report.errors:
        err.print(Text.assemble(("failed", "red"), f" {item['doc_id']}: {item['error']}"))
    for note in report.notes:
        err.print(Text.assemble(("note:", "yellow"), f" {note}"))


# --- documents ---------------------------------------------------------------------------------


@docs_app.command("list")
def documents_list(
    tenant: str = TenantOption,
    limit: int = typer.Option(1000, min=1, max=100_000),
    json_out: bool = JsonOption,
) -> None:
    """Indexed documents of a tenant with their groups and chunk counts."""
    from vector import store

    with database(get_settings()) as db, tenant_connection(db, tenant) as conn:
        rows = store.list_documents(conn, tenant, limit)
    if json_out:
        print_json({"documents": rows})
        return
    table = Table(title=f"{len(rows)} documents in tenant '{tenant}'")
    for col in ("doc_id", "title", "lang", "acl", "chunks", "version"):
        # ids are what `documents delete` and `documents acl` take: wrapped when long, never cut
        table.add_column(col, overflow="fold" if col == "doc_id" else "ellipsis")
    for r in rows:
        table.add_row(Text(r["doc_id"]), Text(r["title"]), r["lang"], Text(",".join(r["acl"])), str(r["chunks"]),
                      str(r["version"]))
    out.print(table)


@docs_app.command("delete")
def documents_delete(
    doc_ids: list[str] = typer.Argument(..., help="Document ids to remove from every index."),
    tenant: str = TenantOption,
    json_out: bool = JsonOption,
) -> None:
    """Remove documents and all their chunks."""
    with database(get_settings()) as db:
        deletion = usecases.delete_documents(db, tenant, doc_ids)
    result = {"documents_deleted": len(deletion.deleted), "chunks_deleted": deletion.chunks_deleted,
              "not_found": deletion.not_found, "notes": deletion.notes}
    if json_out:
        print_json(result)
    else:
        out.print(f"deleted {len(deletion.deleted)} documents ({deletion.chunks_deleted} chunks)")
        for doc_id in deletion.not_found:
            err.print(Text.assemble(("not found:", "yellow"), f" {doc_id} (see `crossroads documents list --tenant {tenant}`)"))
        for note in deletion.notes:
            out.print(f"note: {note}")
    if deletion.not_found:
        raise typer.Exit(EXIT_PARTIAL)


@docs_app.command("acl")
def documents_acl(
    doc_id: str = typer.Argument(..., help="Document id."),
    tenant: str = TenantOption,
    acl: str = typer.Option(..., "--acl", help="The new groups, comma-separated (replaces the old ones)."),
    json_out: bool = JsonOption,
) -> None:
    """Replace a document's groups without re-embedding anything."""
    groups = parse_groups(acl)
    if not groups:
        fail(CrossroadsError("--acl needs at least one group"))
    with database(get_settings()) as db:
        found = usecases.change_acl(db, tenant, doc_id, groups)
    if not found:
        fail(CrossroadsError(f"no document {doc_id!r} in tenant {tenant!r}: see `crossroads documents list`"))
    print_json({"doc_id": doc_id, "acl": groups}) if json_out else out.print(f"{doc_id}: acl = {','.join(groups)}")


# --- config ------------------------------------------------------------------------------------


@app.command()
def config(
    markdown: bool = typer.Option(False, "--markdown", metavar="", help="Print the README's table of every option."),
    json_out: bool = JsonOption,
) -> None:
    """Show the effective settings (secrets masked), or the Markdown table of all options.

    Settings come from, in order: CROSSROADS_* environment variables (and DATABASE_URL,
    ANTHROPIC_API_KEY, VOYAGE_API_KEY, COHERE_API_KEY), a .env file, then crossroads.toml.
    """
    if markdown:
        out.print(settings_markdown(), markup=False, soft_wrap=True)
        return
    values = get_settings().model_dump(mode="json")
    engine = describe_engine(get_settings())
    if values.get("database_url"):  # a URL may carry a password
        values["database_url"] = re.sub(r"(://[^:/@]+:)[^@]*@", r"\1********@", values["database_url"])
    if json_out:
        print_json(values | {"embedding_engine_running": engine})
        return
    table = Table("setting", "value", "environment variable")
    for name, value in values.items():
        table.add_row(name, str(value), f"CROSSROADS_{name.upper()}")
    out.print(table)
    out.print(f"embedding engine: {engine}")


def settings_markdown() -> str:
    lines = ["| environment variable | default | meaning |", "|---|---|---|"]
    for name, fld in Settings.model_fields.items():
        env = f"CROSSROADS_{name.upper()}"
        alias = fld.validation_alias
        if alias is not None and hasattr(alias, "choices"):
            env = " / ".join(c for c in alias.choices if c.isupper())
        default = "(unset)" if fld.default is None else f"`{fld.default}`"
        lines.append(f"| `{env}` | {default} | {fld.description or ''} |")
    return "\n".join(lines)



def run() -> None:
    try:
        app()
    except CrossroadsError as exc:
        err.print(Text.assemble(("error:", "red"), f" {exc}"))
        sys.exit(1)
    except psycopg.OperationalError as exc:  # the server went away mid-command
        err.print(Text.assemble(("error:", "red"), f" the database stopped answering ({type(exc).__name__}: {exc}). "
                                "Check `crossroads db status` (or CROSSROADS_DATABASE_URL), then run the command "
                                "again: documents already written are kept"))
        sys.exit(1)


if __name__ == "__main__":
    # `python -m api.cli.main` runs this file as `__main__`, a second copy of the module: the command
    # groups above registered themselves on `api.cli.main.app`, so run that one.
    from api.cli.main import run as _run

    _run()
