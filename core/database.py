"""Connecting to PostgreSQL: embedded or external, pooled, migrated, with pgvector checked.

`prepare_threshold=None` and `plan_cache_mode=force_custom_plan` keep every query on a custom plan:
a generic plan cannot see the values behind `$n` and drops the HNSW index for a sequential scan.
`jit=off`: the planner JIT-compiles any query it prices above jit_above_cost, such as BM25 scoring
in a large tenant, and the compilation alone costs more than a search is allowed to take.

Outages are bounded by `CROSSROADS_DATABASE_WAIT_S`: no caller waits longer for a pooled
connection (it gets `psycopg_pool.PoolTimeout`, an `OperationalError`, which the API answers with
503), a new connection gives up once the server has not answered for that long, and the pool hands
out only connections that pass a round trip, so the first request after the server comes back
succeeds instead of getting a connection that died with the old server.
"""
from __future__ import annotations

import logging
import math
import re
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from typing import Iterator

import psycopg
from pgvector.psycopg import register_vector
from psycopg_pool import ConnectionPool

from core import embedded
from core.errors import DatabaseError
from core.replicas import ReadView, ReplicaSet, parse_lsn
from core.settings import Settings

log = logging.getLogger(__name__)

MIN_PGVECTOR = (0, 7)
ITERATIVE_SCAN_PGVECTOR = (0, 8)
SESSION_OPTIONS = "-c plan_cache_mode=force_custom_plan -c jit=off"
_MIGRATION_LOCK = 7_246_001  # advisory lock id: one migrator at a time across processes


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def load_migrations() -> list[Migration]:
    """Numbered SQL files `NNN_name.sql` from core/migrations, in order."""
    found = []
    for entry in resources.files("core.migrations").iterdir():
        match = re.fullmatch(r"(\d{3})_([a-z0-9_]+)\.sql", entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise DatabaseError(f"two migrations share a number: {versions}")
    return found


def _parse_version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


def resolve_url(settings: Settings) -> str:
    """The external DATABASE_URL, or the embedded server's URI (started if needed)."""
    if settings.database_url:
        return settings.database_url
    return embedded.start(settings.pg_data_dir, settings.pg_shared_buffers)


def check_pgvector_version(installed: str) -> tuple[int, ...]:
    """Parse the extension version; refuse versions older than 0.7 with what to do."""
    version = _parse_version(installed)
    if version < MIN_PGVECTOR:
        raise DatabaseError(
            f"pgvector {installed} is too old: Crossroads needs >= 0.7. Install a newer pgvector on the "
            "server, then run `ALTER EXTENSION vector UPDATE`."
        )
    return version


def ensure_pgvector(conn: psycopg.Connection) -> tuple[int, ...]:
    """Create the extension if missing and check its version."""
    row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
    if row is None:
        available = conn.execute(
            "SELECT default_version FROM pg_available_extensions WHERE name = 'vector'"
        ).fetchone()
        if available is None:
            raise DatabaseError(
                "PostgreSQL has no pgvector extension. Install pgvector >= 0.7 on the server "
                "(e.g. `apt install postgresql-17-pgvector`, or the pgvector/pgvector Docker image), "
                "or unset DATABASE_URL to use the embedded server."
            )
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
    return check_pgvector_version(row[0])


def connect_timeout(settings: Settings) -> int:
    """Whole seconds a new connection may take (libpq counts in seconds, 2 at least): an unreachable host
    must not hold a caller for the operating system's TCP timeout of minutes."""
    return max(2, math.ceil(settings.database_wait_s))


def apply_migrations(conn: psycopg.Connection) -> list[int]:
    """Apply each migration not yet recorded, each in its own transaction; returns those applied."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        " version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
    )
    conn.commit()
    applied = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        done = {r[0] for r in conn.execute("SELECT version FROM schema_migrations")}
        for migration in load_migrations():
            if migration.version in done:
                continue
            log.info("applying migration %03d_%s", migration.version, migration.name)
            with conn.transaction():
                conn.execute(migration.sql)
                conn.execute(
                    "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)",
                    (migration.version, migration.name),
                )
            applied.append(migration.version)
    return applied


class Database:
    """A connection pool plus what the server can do."""

    def __init__(self, url: str, settings: Settings, pgvector_version: tuple[int, ...]):
        self.url = url
        self.pgvector_version = pgvector_version
        # How long a running job may go without a heartbeat before every process counts it abandoned (core.jobs)
        self.job_lease_s = settings.job_lease_s
        self.pool = ConnectionPool(
            url,
            min_size=settings.pool_min_size,
            max_size=settings.pool_max_size,
            kwargs={"prepare_threshold": None, "options": SESSION_OPTIONS,
                    "connect_timeout": connect_timeout(settings)},
            configure=self._configure,
            check=self._check,
            timeout=settings.database_wait_s,
            # A lost connection is re-made in the background with a growing back-off; past this the
            # pool stops and the next request that finds it empty connects at once. With the default
            # (5 minutes) the back-off reaches minutes, and a server back after a long outage would
            # get no connection until the next retry: every request meanwhile a 503.
            reconnect_timeout=settings.database_wait_s,
            reconnect_failed=self._reconnect_failed,
            open=True,
            name="crossroads",
        )
        urls = [u.strip() for u in (settings.database_read_urls or "").split(",") if u.strip()]
        self.replicas = ReplicaSet(
            urls, self, max_lag_s=settings.read_max_lag_s, wait_ms=settings.read_your_writes_wait_ms,
            check_s=settings.replica_check_s, pool_max_size=settings.pool_max_size,
            connect_timeout=connect_timeout(settings), session_options=SESSION_OPTIONS) if urls else None

    @staticmethod
    def _configure(conn: psycopg.Connection) -> None:
        register_vector(conn)
        conn.commit()

    def _check(self, conn: psycopg.Connection) -> None:
        """Run by the pool on each connection it hands out: a dead one is replaced, not given to a caller."""
        try:
            ConnectionPool.check_connection(conn)
        except psycopg.OperationalError as exc:
            # The server went away (killed, restarted, failed over): every idle connection died with this
            # one. Drop them all now rather than fail one check, and wait out the pool's back-off, per
            # dead connection.
            log.warning("a pooled PostgreSQL connection is dead (%s); replacing every idle one", exc)
            self.pool.drain()
            raise

    @staticmethod
    def _reconnect_failed(pool: ConnectionPool) -> None:
        log.warning("PostgreSQL has not accepted a connection for %.0f s; requests get 503 until it does "
                    "(check the server, or `crossroads db start` for the embedded one)", pool.reconnect_timeout)

    @property
    def supports_iterative_scan(self) -> bool:
        return self.pgvector_version >= ITERATIVE_SCAN_PGVECTOR

    @contextmanager
    def connection(self, timeout: float | None = None) -> Iterator[psycopg.Connection]:
        """A pooled connection; waits at most `timeout` (default CROSSROADS_DATABASE_WAIT_S), then raises
        `psycopg_pool.PoolTimeout`."""
        with self.pool.connection(timeout=timeout) as conn:
            yield conn

    def read_connection(self, min_lsn: int | None = None, timeout: float | None = None):
        """A connection for reads only: a healthy read replica's (one that has replayed `min_lsn`, or the
        request's read-your-writes position, core.replicas) when CROSSROADS_DATABASE_READ_URLS names any,
        else the primary's. Writes must use `connection`: a replica refuses them."""
        if self.replicas is None:
            return self.connection(timeout)
        return self.replicas.connection(min_lsn, timeout)

    def reads(self) -> "Database | ReadView":
        """This database for code that only reads (search, ask): itself without replicas."""
        return self if self.replicas is None else ReadView(self)

    def current_lsn(self) -> int:
        """The primary's WAL position now: after a write, what a read-your-writes read passes as `min_lsn`."""
        with self.connection() as conn:
            return parse_lsn(conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0])

    def close(self) -> None:
        if self.replicas is not None:
            self.replicas.close()
        self.pool.close()

    def __enter__(self) -> "Database":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_database(settings: Settings, url: str | None = None) -> Database:
    """Connect (starting the embedded server if needed), check pgvector, migrate, open the pool."""
    url = url or resolve_url(settings)
    try:
        with psycopg.connect(url, prepare_threshold=None, connect_timeout=connect_timeout(settings)) as conn:
            version = ensure_pgvector(conn)
            conn.commit()
            applied = apply_migrations(conn)
    except psycopg.OperationalError as exc:
        raise DatabaseError(
            f"Cannot connect to PostgreSQL ({exc}). Check DATABASE_URL, or unset it to use the embedded server."
        ) from exc
    if applied:
        log.info("applied migrations %s", applied)
    return Database(url, settings, version)
