"""Read replicas: searches and asks read from a streaming replica, writes and jobs stay on the primary.

`CROSSROADS_DATABASE_READ_URLS` names one or more replicas. A checker thread asks each, every
`CROSSROADS_REPLICA_CHECK_S`, how far it has replayed the primary's WAL, and samples the primary's own
WAL position at the same pace. A replica's lag is the age of the oldest primary sample it has not yet
replayed: 0 while it keeps up (an idle primary makes no lag), growing while it falls behind or stops
receiving. A read goes to a replica that answered its last check and lags at most
`CROSSROADS_READ_MAX_LAG_S`, in turn; with none, to the primary. A replica that fails a checkout or a
query is skipped until its next good check: a read never waits on a dead replica twice.

Read-your-writes: a caller that wrote passes the primary's WAL position after its write (`min_lsn`;
the API's `X-Crossroads-LSN` response header) and a replica serves it only once it has replayed that
far, waiting at most `CROSSROADS_READ_YOUR_WRITES_WAIT_MS`; else the primary does.

A request's reads share one `ReadSession` (a context variable: code that fans a request out to
threads copies the context): every read of the request goes to the same replica, so its reads agree
with each other, and a replica lost mid-request is recorded there, so the API can run the request
again on the primary (api/http/read_routing.py) instead of answering 503.
"""
from __future__ import annotations

import logging
import threading
import time
from collections import deque
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Callable, ContextManager, Iterator, Protocol, Sequence

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

log = logging.getLogger(__name__)


class Primary(Protocol):
    """What replicas need of the primary database (core.database.Database, which holds a ReplicaSet)."""

    supports_iterative_scan: bool
    job_lease_s: float
    _configure: Callable[[psycopg.Connection], None]

    def connection(self, timeout: float | None = None) -> ContextManager[psycopg.Connection]: ...

    def read_connection(self, min_lsn: int | None = None,
                        timeout: float | None = None) -> ContextManager[psycopg.Connection]: ...

PRIMARY = -1  # ReadSession.replica when the request reads from the primary
# Longest a read waits for a replica's pooled connection before reading the primary: a replica is an
# optimisation, so a saturated or dying one spills reads over instead of holding them.
CHECKOUT_WAIT_S = 1.0
LSN_POLL_S = 0.005  # how often a read-your-writes read re-asks a replica how far it has replayed


def parse_lsn(text: str) -> int:
    """PostgreSQL's `X/Y` WAL position (two hex numbers) as one integer, comparable across servers."""
    high, sep, low = text.strip().partition("/")
    if not sep or not high or not low or len(high) > 8 or len(low) > 8:
        raise ValueError(f"{text!r} is not a WAL position: it looks like 0/16B3748 (hexadecimal X/Y)")
    try:
        return (int(high, 16) << 32) | int(low, 16)
    except ValueError:
        raise ValueError(f"{text!r} is not a WAL position: it looks like 0/16B3748 (hexadecimal X/Y)") from None


def format_lsn(value: int) -> str:
    return f"{value >> 32:X}/{value & 0xFFFFFFFF:X}"


def lag_seconds(samples: Sequence[tuple[float, int]], replay_lsn: int | None, now: float) -> float:
    """How stale a replica is: the age of the oldest primary sample `(time, lsn)` (oldest first) it has
    not replayed; 0 when it has replayed them all; infinite when it has never replayed anything."""
    if replay_lsn is None:
        return float("inf")
    for at, lsn in samples:
        if lsn > replay_lsn:
            return max(0.0, now - at)
    return 0.0


@dataclass
class ReplicaHealth:
    """What the last check of one replica found."""

    name: str  # host, port and database, for logs: never the password
    up: bool = False
    replay_lsn: int | None = None
    lag_s: float = float("inf")
    problem: str | None = "not checked yet"


def usable(health: Sequence[ReplicaHealth], max_lag_s: float) -> list[int]:
    """Indexes of the replicas a read may use now."""
    return [i for i, h in enumerate(health) if h.up and h.lag_s <= max_lag_s]


def candidates(health: Sequence[ReplicaHealth], max_lag_s: float, turn: int, sticky: int | None = None) -> list[int]:
    """The replicas to try for a read, in order: the request's earlier choice if still usable, else every
    usable one starting at `turn` (round robin spreads the load)."""
    ready = usable(health, max_lag_s)
    if sticky is not None and sticky in ready:
        return [sticky]
    if not ready:
        return []
    start = turn % len(ready)
    return ready[start:] + ready[:start]


@dataclass
class ReadSession:
    """The reads of one request (or one CLI command): where they go and what happened there."""

    min_lsn: int | None = None  # read-your-writes: a replica must have replayed this far
    replica: int | None = None  # the replica chosen by its first read, or PRIMARY
    replica_failed: bool = False  # a replica failed under one of its reads
    reads: int = 0  # read connections taken


_session: ContextVar[ReadSession | None] = ContextVar("crossroads_read_session", default=None)


@contextmanager
def read_session(min_lsn: int | None = None, *, primary: bool = False) -> Iterator[ReadSession]:
    """Group the reads of the block: one replica for all of them, the primary with `primary=True`."""
    session = ReadSession(min_lsn=min_lsn, replica=PRIMARY if primary else None)
    token = _session.set(session)
    try:
        yield session
    finally:
        _session.reset(token)


def _display(url: str) -> str:
    info = psycopg.conninfo.conninfo_to_dict(url)
    return f"{info.get('host', 'localhost')}:{info.get('port', 5432)}/{info.get('dbname', '')}"


class ReplicaSet:
    """The replicas' pools, their health, and the choice of one for each read."""

    def __init__(self, urls: Sequence[str], primary: Primary, *, max_lag_s: float, wait_ms: int, check_s: float,
                 pool_max_size: int, connect_timeout: int, session_options: str):
        self.primary, self.max_lag_s, self.wait_s, self.check_s = primary, max_lag_s, wait_ms / 1000, check_s
        self.urls = list(urls)
        self.health = [ReplicaHealth(_display(u)) for u in self.urls]
        self.connect_timeout = connect_timeout
        # (monotonic time, primary WAL position), oldest first: enough history to measure any lag up to
        # the limit and see past it
        self._samples: deque[tuple[float, int]] = deque()
        self._turn = 0
        self._lock = threading.Lock()
        self.pools = [
            ConnectionPool(url, min_size=0, max_size=pool_max_size, name=f"crossroads-replica-{i}",
                           kwargs={"prepare_threshold": None, "options": session_options,
                                   "connect_timeout": connect_timeout},
                           configure=primary._configure, check=ConnectionPool.check_connection,
                           timeout=CHECKOUT_WAIT_S, reconnect_timeout=max(check_s, 1.0), open=True)
            for i, url in enumerate(self.urls)
        ]
        self._check_conns: list[psycopg.Connection | None] = [None] * len(self.urls)
        self._stop = threading.Event()
        self.check()  # the first reads already know which replicas answer
        self._thread = threading.Thread(target=self._run, name="replica-check", daemon=True)
        self._thread.start()

    # --- health ---------------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.wait(self.check_s):
            try:
                self.check()
            except Exception:  # noqa: BLE001 - the checker must outlive any surprise; reads fall back meanwhile
                log.exception("checking the read replicas failed; retrying in %.1f s", self.check_s)

    def check(self) -> None:
        """Sample the primary's WAL position, then ask each replica how far it has replayed."""
        now = time.monotonic()
        try:
            with self.primary.connection() as conn:
                lsn = parse_lsn(conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0])
        except psycopg.Error as exc:
            # without the primary's position no lag can be measured: keep the last measurements
            log.warning("could not read the primary's WAL position (%s); replica lags are not updated", exc)
            return
        with self._lock:
            self._samples.append((now, lsn))
            while len(self._samples) > 2 and self._samples[1][0] < now - 2 * self.max_lag_s - self.check_s:
                self._samples.popleft()
            samples = list(self._samples)
        for i in range(len(self.urls)):
            self._check_one(i, samples, now)

    def _check_one(self, i: int, samples: list[tuple[float, int]], now: float) -> None:
        health = self.health[i]
        try:
            conn = self._check_conns[i]
            if conn is None or conn.closed:
                conn = self._check_conns[i] = psycopg.connect(self.urls[i], autocommit=True, prepare_threshold=None,
                                                              connect_timeout=self.connect_timeout)
            in_recovery, replayed = conn.execute(
                "SELECT pg_is_in_recovery(), pg_last_wal_replay_lsn()::text").fetchone()
        except psycopg.Error as exc:
            self._close_check(i)
            self._mark(i, up=False, problem=f"unreachable ({type(exc).__name__}: {str(exc).strip()[:200]})")
            return
        if not in_recovery:
            self._mark(i, up=False, problem="is not a replica (not in recovery: promoted, or a primary's URL); "
                       "remove it from CROSSROADS_DATABASE_READ_URLS")
            return
        replay_lsn = parse_lsn(replayed) if replayed else None
        lag = lag_seconds(samples, replay_lsn, now)
        health.replay_lsn, health.lag_s = replay_lsn, lag
        if lag > self.max_lag_s:
            self._mark(i, up=True, problem=f"lags {lag:.1f} s behind the primary (limit CROSSROADS_READ_MAX_LAG_S="
                       f"{self.max_lag_s:g})")
        else:
            self._mark(i, up=True, problem=None)

    def _close_check(self, i: int) -> None:
        conn, self._check_conns[i] = self._check_conns[i], None
        if conn is not None:
            conn.close()

    def _mark(self, i: int, *, up: bool, problem: str | None) -> None:
        """Record a replica's state, logging each change once (not every check)."""
        health = self.health[i]
        if (health.up, health.problem) != (up, problem) and (problem or health.problem):
            if problem:
                log.warning("read replica %s %s: its reads go to the primary", health.name, problem)
            else:
                log.info("read replica %s serves reads (lag %.1f s)", health.name, health.lag_s)
        health.up, health.problem = up, problem

    def _lost(self, i: int, exc: BaseException) -> None:
        """A read found replica `i` failing: skip it until its next good check."""
        self._mark(i, up=False, problem=f"failed a read ({type(exc).__name__}: {str(exc).strip()[:200]})")

    # --- reads ----------------------------------------------------------------------------------

    @contextmanager
    def connection(self, min_lsn: int | None = None, timeout: float | None = None) -> Iterator[psycopg.Connection]:
        """A connection for reading: a healthy replica's (caught up to `min_lsn`), else the primary's."""
        session = _session.get() or ReadSession()
        session.reads += 1
        if min_lsn is None:
            min_lsn = session.min_lsn
        chosen = None
        if session.replica != PRIMARY:
            with self._lock:
                turn, self._turn = self._turn, self._turn + 1
            for i in candidates(self.health, self.max_lag_s, turn, session.replica):
                chosen = self._checkout(i, min_lsn)
                if chosen is not None:
                    break
        if chosen is None:
            session.replica = PRIMARY
            with self.primary.connection(timeout) as conn:
                yield conn
            return
        i, checkout = chosen
        session.replica = i
        with checkout as conn:
            try:
                yield conn
            except psycopg.OperationalError as exc:
                # the replica died under the read, or cancelled it (a conflict with replayed WAL)
                session.replica_failed = True
                if conn.broken:
                    self._lost(i, exc)
                raise

    def _checkout(self, i: int, min_lsn: int | None):
        """(i, an entered pooled connection context) when replica `i` can serve now, else None."""
        checkout = self.pools[i].connection(timeout=CHECKOUT_WAIT_S)
        try:
            conn = checkout.__enter__()
        except (PoolTimeout, psycopg.OperationalError) as exc:
            self._lost(i, exc)
            return None
        try:
            if min_lsn is not None and not self._caught_up(conn, i, min_lsn):
                checkout.__exit__(None, None, None)
                return None
        except psycopg.OperationalError as exc:
            self._lost(i, exc)
            checkout.__exit__(type(exc), exc, exc.__traceback__)
            return None
        return i, _Entered(checkout, conn)

    def _caught_up(self, conn: psycopg.Connection, i: int, min_lsn: int) -> bool:
        """Whether replica `i` has replayed `min_lsn`, waiting for it at most the read-your-writes wait."""
        known = self.health[i].replay_lsn
        if known is not None and known >= min_lsn:
            return True
        deadline = time.monotonic() + self.wait_s
        while True:
            replayed = conn.execute("SELECT pg_last_wal_replay_lsn()::text").fetchone()[0]
            conn.rollback()  # no snapshot held across the wait: the read must see what was replayed
            if replayed and parse_lsn(replayed) >= min_lsn:
                return True
            if time.monotonic() >= deadline:
                log.info("read replica %s had not replayed %s after %.0f ms; reading the primary",
                         self.health[i].name, format_lsn(min_lsn), self.wait_s * 1000)
                return False
            time.sleep(LSN_POLL_S)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        for i in range(len(self.urls)):
            self._close_check(i)
        for pool in self.pools:
            pool.close()


class _Entered:
    """A pooled connection context already entered: `with` gives its connection and exits it."""

    def __init__(self, checkout, conn):
        self.checkout, self.conn = checkout, conn

    def __enter__(self) -> psycopg.Connection:
        return self.conn

    def __exit__(self, *exc):
        return self.checkout.__exit__(*exc)


class ReadView:
    """The database as code that only reads sees it (the searcher, the router): every connection comes
    from `Database.read_connection`, so it is a replica's when one can serve."""

    def __init__(self, db: Primary):
        self.db = db

    @property
    def supports_iterative_scan(self) -> bool:
        return self.db.supports_iterative_scan

    @property
    def job_lease_s(self) -> float:
        return self.db.job_lease_s

    def connection(self, timeout: float | None = None):
        return self.db.read_connection(timeout=timeout)
