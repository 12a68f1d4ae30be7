"""Database set-up: migrations once and in order, pgvector checks, the embedded server's lifecycle."""
from __future__ import annotations

import json
import os
import shutil
import time
import uuid

import psycopg
import pytest

from core import embedded
from core.database import check_pgvector_version, load_migrations, open_database
from core.errors import CrossroadsError, DatabaseError
from core.settings import Settings
from tests.conftest import ROOT, crossroads


def test_migrations_are_numbered_in_order_and_unique():
    migrations = load_migrations()
    versions = [m.version for m in migrations]
    assert versions == sorted(versions) and versions[0] == 1 and len(set(versions)) == len(versions)
    assert "CREATE TABLE chunks" in migrations[0].sql


def test_migrations_apply_once(make_database, settings):
    url = make_database()
    open_database(settings, url=url).close()
    db = open_database(settings, url=url)  # second start: nothing to apply, nothing breaks
    with db.connection() as conn:
        rows = conn.execute("SELECT version, count(*) FROM schema_migrations GROUP BY version ORDER BY version").fetchall()
        tables = {r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
    db.close()
    assert rows == [(m.version, 1) for m in load_migrations()]
    assert {"documents", "chunks", "embedding_models", "schema_migrations"} <= tables


def test_pool_uses_custom_plans_and_knows_iterative_scan(db):
    with db.connection() as conn:
        assert conn.execute("SHOW plan_cache_mode").fetchone() == ("force_custom_plan",)
        assert conn.execute("SHOW jit").fetchone() == ("off",)
        assert conn.prepare_threshold is None
    assert db.pgvector_version >= (0, 8)
    assert db.supports_iterative_scan


@pytest.mark.parametrize("installed, ok", [("0.8.6", True), ("0.7.0", True), ("0.6.2", False), ("0.5.1", False)])
def test_pgvector_version_check(installed, ok):
    if ok:
        assert check_pgvector_version(installed) >= (0, 7)
    else:
        with pytest.raises(DatabaseError, match="too old.*ALTER EXTENSION vector UPDATE"):
            check_pgvector_version(installed)


def test_unreachable_external_database_gives_a_clear_error(tmp_path):
    settings = Settings(database_url=f"postgresql://nobody@/nodb?host={tmp_path}&connect_timeout=2")
    with pytest.raises(DatabaseError, match="(?s)Cannot connect to PostgreSQL.*Check DATABASE_URL"):
        open_database(settings)


@pytest.mark.slow
def test_embedded_server_start_status_stop():
    state_dir = ROOT / ".crossroads" / f"lifecycle-{uuid.uuid4().hex[:6]}"
    data_dir = state_dir / "pg"  # where the CLI looks for it (CROSSROADS_STATE_DIR/pg)
    try:
        uri = embedded.start(data_dir, shared_buffers="160MB")
        state = embedded.status(data_dir)
        assert state.running and state.pid and state.uri == uri
        with psycopg.connect(uri) as conn:  # applied at the first start, by one restart
            assert conn.execute("SELECT current_setting('shared_buffers')").fetchone() == ("160MB",)
        env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CROSSROADS_DATABASE_URL")}
        env["CROSSROADS_STATE_DIR"] = str(state_dir)
        report = json.loads(crossroads(env, "db", "status", "--json").stdout)
        assert report["running"] and report["pid"] == state.pid
        memory = report["memory"]
        assert memory["shared_buffers"] == "160MB" and memory["huge_pages"] in ("on", "off")
        assert memory["huge_pages_needed"] > 0  # the whole shared memory, in huge pages
        text = crossroads(env, "db", "status").stdout
        assert "huge pages " + memory["huge_pages"] in text
        # an empty database is no reason to reserve huge pages: the tip waits for a gigabyte of search data
        from api.cli.main import HUGE_PAGES_WORTH_BYTES
        worth_it = memory["huge_pages"] != "on" and memory["search_data_bytes"] >= HUGE_PAGES_WORTH_BYTES
        assert (f"vm.nr_hugepages={memory['huge_pages_needed']}" in text) == worth_it
        open_database(Settings(database_url=uri)).close()  # the schema: chunks and documents, empty
        memory = embedded.memory_report(uri)
        assert 0 < memory["search_data_bytes"] < 10 * 2**20 and memory["advice"] is None  # fits in 160MB
        assert embedded.start(data_dir) == uri  # already running: reused, not started twice
        # autoprewarm: the pages shared_buffers held at shutdown are read back after a restart
        with psycopg.connect(uri, autocommit=True) as conn:
            conn.execute("CREATE TABLE warm AS SELECT g, repeat('x', 400) AS pad FROM generate_series(1, 20000) g")
            conn.execute("SELECT count(*) FROM warm").fetchone()
            conn.execute("ALTER SYSTEM SET shared_preload_libraries = 'auto_explain'")  # an operator's own choice
        assert embedded.stop(data_dir) is True
        assert (data_dir / "autoprewarm.blocks").exists()  # written at shutdown
        crossroads({**env, "CROSSROADS_PG_SHARED_BUFFERS": "160MB"}, "db", "start")  # a new process, as in use
        with psycopg.connect(uri, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_buffercache")
            # the next start added pg_prewarm to the operator's library (one more restart), and kept it
            assert conn.execute("SELECT current_setting('shared_preload_libraries')").fetchone() == \
                ("auto_explain, pg_prewarm",)
            cached = 0
            for _ in range(100):  # the worker loads in the background, right after the start
                cached = conn.execute("SELECT count(*) FROM pg_buffercache WHERE relfilenode = pg_relation_filenode('warm')"
                                      " AND reldatabase = (SELECT oid FROM pg_database WHERE datname = current_database())"
                                      ).fetchone()[0]
                if cached:
                    break
                time.sleep(0.1)
            assert cached >= 0.9 * conn.execute("SELECT pg_relation_size('warm') / 8192").fetchone()[0]  # never read since
        assert embedded.stop(data_dir) is True
        assert not embedded.status(data_dir).running
        assert embedded.stop(data_dir) is False
    finally:
        embedded.stop(data_dir)
        shutil.rmtree(state_dir, ignore_errors=True)


def test_embedded_server_settings_scale_with_memory():
    gib = 2**30
    assert embedded.server_settings(24 * gib)["shared_buffers"] == "4096MB"  # capped
    assert embedded.server_settings(2 * gib)["shared_buffers"] == "512MB"  # a quarter
    assert embedded.server_settings(256 * 2**20)["shared_buffers"] == "128MB"  # PostgreSQL's floor
    assert embedded.server_settings(24 * gib, "2GB")["shared_buffers"] == "2GB"
    assert embedded.server_settings(24 * gib)["effective_cache_size"] == "12288MB"
    with pytest.raises(CrossroadsError, match="write it like 512MB"):
        embedded.server_settings(24 * gib, "lots")


def test_pg_prewarm_joins_the_operators_own_preloaded_libraries():
    assert embedded.with_library("", "pg_prewarm") == ["pg_prewarm"]
    assert embedded.with_library("pg_stat_statements", "pg_prewarm") == ["pg_stat_statements", "pg_prewarm"]
    assert embedded.with_library("auto_explain, pg_prewarm", "pg_prewarm") is None  # nothing to change


def test_shared_buffers_advice_when_the_search_data_outgrows_them():
    gib = 2**30
    assert embedded.shared_buffers_advice(3 * gib, 4 * gib, 24 * gib, 2100) is None
    advice = embedded.shared_buffers_advice(int(7.2 * gib), 4 * gib, 24 * gib, 2140)
    # 7.2 GB + 10% room, rounded up to whole GB; the huge pages grow by the 4 GB added
    assert "CROSSROADS_PG_SHARED_BUFFERS=8GB" in advice and "vm.nr_hugepages=4188" in advice
    assert "7.2 GB" in advice
    advice = embedded.shared_buffers_advice(12 * gib, 4 * gib, 24 * gib, 2140)  # 14 GB > 40% of 24
    assert "CROSSROADS_PG_SHARED_BUFFERS" not in advice and "more memory" in advice


def test_embedded_data_dir_under_root_home_is_refused(monkeypatch):
    monkeypatch.setattr(embedded, "_run_as", lambda: "embedded_postgres")
    with pytest.raises(CrossroadsError, match="CROSSROADS_STATE_DIR"):
        embedded.start(__import__("pathlib").Path("/root/somewhere/pg"))
