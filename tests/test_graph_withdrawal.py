"""Graph text withdrawn the moment a chunk behind it can no longer be read at its level (invariant 2).

One tenant of this module's own, built once; the tests run in file order and each measures what is
served before and after its own change, so earlier withdrawals do not blur what it checks. "Behind"
sets are read straight from the tables (withdrawn or not); "served" sets go through the read paths.
"""
from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from api import tokens
from api.http.app import create_app
from graph import browse_store, store
from graph.indexing.contracts import BuildSettings, OfflineReporter
from graph.indexing.runner import build_graph
from graph.indexing.extract_offline import OfflineExtractor
from answers.themes.answer import themes_in_scope
from graph.query.runner import ask_global
from tests.conftest import FIXTURES, crossroads
from vector import store as vector_store
from vector.ingest.runner import ingest_documents
from vector.ingest.sources import load_source

TENANT = "graph_withdrawal"
STAFF = ["public", "staff"]
EVERY_GROUP = ["finance", "hr", "public", "staff"]
LEVELS = ("all", "staff")
KINDS = ("entities", "relationships", "reports")


@pytest.fixture(scope="module")
def graph(db, settings, local_embedder):
    docs, skipped = load_source(FIXTURES / "corpus", [], settings.max_document_bytes)
    ingest_documents(db, local_embedder, settings, TENANT, docs, skipped)
    with db.connection() as conn:
        store.set_level(conn, TENANT, "staff", STAFF)
    build_graph(db, TENANT, None, OfflineExtractor(), OfflineReporter(), local_embedder, BuildSettings())
    return TENANT






def doc_chunks(conn, doc_id: str) -> list[int]:
    return [r[0] for r in conn.execute("SELECT id FROM chunks WHERE tenant_id = %s AND doc_id = %s", (TENANT, doc_id))]


def behind(conn, level: str, chunk_ids: list[int]) -> dict[str, set]:
    """Every row of the level (served or withdrawn) written from any of these chunks."""
    args = (TENANT, level, chunk_ids)
    return {
        "entities": {r[0] for r in conn.execute(
            "SELECT key FROM graph_entities WHERE tenant_id = %s AND access_level = %s AND chunk_ids && %s::bigint[]", args)},
        "relationships": {tuple(r) for r in conn.execute(
            "SELECT source_key, target_key FROM graph_relationships"
            " WHERE tenant_id = %s AND access_level = %s AND chunk_ids && %s::bigint[]", args)},
        "reports": {r[0] for r in conn.execute(
            "SELECT community_id FROM community_reports"
            " WHERE tenant_id = %s AND access_level = %s AND input_chunk_ids && %s::bigint[]", args)},
    }


def served(conn, level: str) -> dict[str, set]:
    """What the read paths serve at the level."""
    keys = [r[0] for r in conn.execute(
        "SELECT key FROM graph_entities WHERE tenant_id = %s AND access_level = %s", (TENANT, level))]
    return {
        "entities": {e["key"] for e in browse_store.find_entities(conn, TENANT, level, None, 1_000_000)},
        "relationships": {(r["source"], r["target"])
                          for r in browse_store.relationships_among(conn, TENANT, level, keys, 1_000_000)},
        "reports": {r["id"] for r in store.list_reports(conn, TENANT, level)},
    }


def snapshot(db, chunk_ids: list[int]) -> tuple[dict, dict]:
    with db.connection() as conn:
        return ({lvl: served(conn, lvl) for lvl in LEVELS}, {lvl: behind(conn, lvl, chunk_ids) for lvl in LEVELS})


def assert_withdrawn_exactly(before: dict, after: dict, gone: dict) -> None:
    for kind in KINDS:
        assert before[kind] & gone[kind], f"the change should touch served {kind}: the test could not fail"
        assert after[kind] == before[kind] - gone[kind], kind


def test_narrowed_acl_withdraws_the_documents_text_from_the_level_that_lost_it(db, graph, cli_env):
    doc = "incidents/2025-04-geomesh-outage.md"  # staff
    with db.connection() as conn:
        chunks = doc_chunks(conn, doc)
    before, gone = snapshot(db, chunks)

    with db.connection() as conn:
        assert vector_store.set_acl(conn, TENANT, doc, ["hr"])
    after, _ = snapshot(db, chunks)

    assert_withdrawn_exactly(before["staff"], after["staff"], gone["staff"])
    assert gone["all"]["entities"] and after["all"] == before["all"]  # `all` still reads an `hr` chunk
    listed = json.loads(crossroads(cli_env, "communities", "list", "--tenant", TENANT, "--level", "staff", "--json").stdout)
    assert {c["id"] for c in listed["communities"]} == after["staff"]["reports"]
    with db.connection() as conn:
        names = {e["name"] for e in browse_store.entities_by_key(conn, TENANT, "staff", sorted(gone["staff"]["entities"]))}
    assert names == set()


def test_broadened_acl_withdraws_nothing_and_narrowing_it_again_does(db, graph):
    doc = "handbook/company-overview.md"  # public
    with db.connection() as conn:
        chunks = doc_chunks(conn, doc)
        counts = store.graph_text_counts(conn, TENANT)
    before, gone = snapshot(db, chunks)

    with db.connection() as conn:
        assert vector_store.set_acl(conn, TENANT, doc, ["finance", "public", "staff"])
        assert store.graph_text_counts(conn, TENANT) == counts
    assert snapshot(db, chunks)[0] == before

    with db.connection() as conn:
        assert vector_store.set_acl(conn, TENANT, doc, ["finance"])  # the staff level reads neither group
    after, _ = snapshot(db, chunks)
    assert_withdrawn_exactly(before["staff"], after["staff"], gone["staff"])
    assert after["all"] == before["all"]


def test_deleted_document_disappears_from_every_level(db, graph, settings, local_embedder):
    doc = "services/route-optimizer.md"  # staff
    with db.connection() as conn:
        chunks = doc_chunks(conn, doc)
        staff_token = tokens.create_token(conn, TENANT, STAFF, "reader", "staff")[0]
        all_token = tokens.create_token(conn, TENANT, EVERY_GROUP, "reader", "everyone")[0]
    before, gone = snapshot(db, chunks)

    with db.connection() as conn:
        assert vector_store.delete_documents(conn, TENANT, [doc]) == (1, len(chunks))
    after, _ = snapshot(db, chunks)

    for level in LEVELS:
        assert_withdrawn_exactly(before[level], after[level], gone[level])
    with TestClient(create_app(settings, db, embedder=local_embedder), raise_server_exceptions=False) as client:
        for level, token in (("staff", staff_token), ("all", all_token)):
            headers = {"Authorization": f"Bearer {token}"}
            listed = client.get("/v1/communities", headers=headers).json()
            assert listed["access_level"] == level
            assert {c["id"] for c in listed["communities"]} == after[level]["reports"]
            for community_id in sorted(before[level]["reports"] & gone[level]["reports"]):
                assert client.get(f"/v1/communities/{community_id}", headers=headers).status_code == 404
            for community_id in sorted(after[level]["reports"])[:5]:
                detail = client.get(f"/v1/communities/{community_id}", headers=headers).json()
                assert not {m["key"] for m in detail["members"]} & gone[level]["entities"]
                assert not {(r["source"], r["target"]) for r in detail["relationships"]} & gone[level]["relationships"]
            for key in sorted(before[level]["entities"] & gone[level]["entities"])[:10]:
                found = client.get("/v1/entities", params={"q": key, "limit": 500}, headers=headers).json()
                assert key not in {e["key"] for e in found["entities"]}
    answer = ask_global(db, local_embedder, TENANT, STAFF, "What are the main themes across all services?",
                        scope_themes=themes_in_scope)
    assert answer.level == "staff" and answer.reports
    assert not {r.id for r in answer.reports} & gone["staff"]["reports"]


def test_build_racing_a_deletion_withdraws_what_it_wrote_from_the_deleted_chunks(db, graph, local_embedder,
                                                                                 monkeypatch):
    doc = "teams/routing.md"  # staff
    with db.connection() as conn:
        chunks = doc_chunks(conn, doc)
    before, gone = snapshot(db, chunks)
    read_chunks = store.level_chunks
    served_meanwhile = {}

    def read_then_delete(conn, tenant, groups):
        """The build reads the level's chunks; the document is deleted before it writes its graph."""
        read = read_chunks(conn, tenant, groups)
        with db.connection() as other:
            vector_store.delete_documents(other, tenant, [doc])
            served_meanwhile.update(served(other, "staff"))
        return read

    monkeypatch.setattr(store, "level_chunks", read_then_delete)
    build_graph(db, TENANT, "staff", OfflineExtractor(), OfflineReporter(), local_embedder, BuildSettings())

    assert_withdrawn_exactly(before["staff"], served_meanwhile, gone["staff"])  # the old graph, at the deletion
    with db.connection() as conn:
        written = behind(conn, "staff", chunks)  # the new graph, written from the chunks read before
        now_served = served(conn, "staff")
        counts = store.graph_text_counts(conn, TENANT)["staff"]
    assert written["entities"] and written["reports"]
    for kind in KINDS:
        assert not now_served[kind] & written[kind], kind
    assert counts["entities"]["withdrawn"] > 0 and counts["reports"]["withdrawn"] > 0


def test_narrowed_level_withdraws_what_its_new_groups_cannot_read(db, graph):
    with db.connection() as conn:
        staff_only = [r[0] for r in conn.execute(
            "SELECT id FROM chunks WHERE tenant_id = %s AND acl && %s AND NOT acl && %s", (TENANT, STAFF, ["public"]))]
    before, gone = snapshot(db, staff_only)

    try:
        with db.connection() as conn:
            store.set_level(conn, TENANT, "staff", ["public"])
        after, _ = snapshot(db, staff_only)
    finally:
        with db.connection() as conn:
            store.set_level(conn, TENANT, "staff", STAFF)  # back as it was: withdrawn text waits for a build
    assert_withdrawn_exactly(before["staff"], after["staff"], gone["staff"])
    assert after["all"] == before["all"]
    assert snapshot(db, staff_only)[0] == after


def test_rebuild_serves_fresh_rows_and_writes_every_withdrawn_report_anew(db, graph, cli_env, local_embedder):
    doc = "policies/on-call-berlin.md"  # staff
    with db.connection() as conn:
        chunks = doc_chunks(conn, doc)
        assert vector_store.set_acl(conn, TENANT, doc, ["hr"])
        assert vector_store.set_acl(conn, TENANT, doc, ["staff"])  # as before: the same inputs, still withdrawn
        withdrawn_reports = {r[0] for r in conn.execute(
            "SELECT community_id FROM community_reports"
            " WHERE tenant_id = %s AND access_level = 'staff' AND withdrawn_at IS NOT NULL", (TENANT,))}
        started = conn.execute("SELECT now()").fetchone()[0]
    waiting, gone = snapshot(db, chunks)
    for kind in KINDS:
        assert gone["staff"][kind] and not waiting["staff"][kind] & gone["staff"][kind], kind
    assert gone["staff"]["reports"] <= withdrawn_reports
    command = f"crossroads graph build --tenant {TENANT} --level staff"
    status = json.loads(crossroads(cli_env, "graph", "status", "--tenant", TENANT, "--json").stdout)
    staff = next(lvl for lvl in status["levels"] if lvl["level"] == "staff")
    assert staff["withdrawn"]["reports"] > 0 and staff["rebuild"] == command
    assert f"run `{command}` to rebuild" in crossroads(cli_env, "graph", "status", "--tenant", TENANT).stdout

    build_graph(db, TENANT, None, OfflineExtractor(), OfflineReporter(), local_embedder, BuildSettings())

    with db.connection() as conn:
        counts = store.graph_text_counts(conn, TENANT)
        now_served = served(conn, "staff")
        fresh = behind(conn, "staff", chunks)
        generated = dict(conn.execute(
            "SELECT community_id, generated_at FROM community_reports WHERE tenant_id = %s AND access_level = 'staff'",
            (TENANT,)).fetchall())
        unreadable = conn.execute(
            "SELECT count(*) FROM graph_entities e, unnest(e.chunk_ids) AS x"
            " WHERE e.tenant_id = %s AND e.access_level = 'staff'"
            " AND NOT EXISTS (SELECT FROM chunks c WHERE c.id = x AND c.acl && %s)", (TENANT, STAFF)).fetchone()[0]
    for level in LEVELS:
        assert all(counts[level][k]["withdrawn"] == 0 and counts[level][k]["served"] > 0 for k in KINDS), level
    assert unreadable == 0
    for kind in KINDS:
        assert fresh[kind] and fresh[kind] <= now_served[kind], kind  # the document's text is served again
    assert withdrawn_reports & set(generated)
    assert all(generated[c] >= started for c in withdrawn_reports & set(generated))
    text = crossroads(cli_env, "graph", "status", "--tenant", TENANT).stdout
    assert "level staff: serves" in text and "withdrawn" not in text
