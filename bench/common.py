"""Shared set-up for benchmarks: a throw-away database on the configured server."""
from __future__ import annotations

import os
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import psycopg

from core.database import Database, open_database, resolve_url
from core.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
# The labelled evaluation sets (one folder per dataset: corpus.jsonl, queries.jsonl); benchmarks that need
# them skip when the folder is absent.
SHARED_DATA = Path(os.environ.get("CROSSROADS_EVAL_DATA") or ROOT.parent / "shared" / "data")


@contextmanager
def scratch_database(settings: Settings, keep: bool = False, reuse: str | None = None) -> Iterator[Database]:
    """A fresh, migrated database, dropped afterwards (unless `keep`: its name is printed), so runs
    never see each other's rows. `reuse` opens a database an earlier run kept instead, and keeps it."""
    admin = resolve_url(settings)
    if reuse:
        with psycopg.connect(admin, autocommit=True) as conn:
            if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (reuse,)).fetchone():
                raise SystemExit(f"no database {reuse!r} on {admin}: run with --keep first and pass the name it prints")
        keep = True
        name = reuse
    else:
        name = f"crossroads_bench_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        if keep:
            print(f'keeping database {name} (drop it with: DROP DATABASE "{name}")', flush=True)
    db = open_database(settings, url=psycopg.conninfo.make_conninfo(admin, dbname=name))
    try:
        yield db
    finally:
        db.close()
        if not keep:
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
