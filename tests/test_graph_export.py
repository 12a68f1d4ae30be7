"""`crossroads graph export`: a level's entities and relationships as GraphML, GEXF or JSON node-link,
parsed back with networkx, sorted and byte-stable, and never with withdrawn text."""
from __future__ import annotations

import io
import json
import shutil

import networkx as nx
import pytest

from graph import store
from graph.types import Community
from graph.export import level_graph, serialize
from graph.types import GraphEntity, GraphRelationship
from tests.conftest import FIXTURES, crossroads

ENTITIES = [GraphEntity("payments gateway", "Payments Gateway", "service", "Takes card payments.", (1,), 2),
            GraphEntity("billing", "Billing", "team", "Owns invoices; «Ларкспур».", (2,), 1),
            GraphEntity("irina volkova", "Irina Volkova", "person", "Leads billing.", (3,), 1)]
RELATIONSHIPS = [GraphRelationship("billing", "payments gateway", "Billing owns it.", 7.0, (1, 2)),
                 GraphRelationship("irina volkova", "payments gateway", "She reviews it.", 2.5, (3,)),
                 # its other end was withdrawn: the edge must not bring the entity's key back as a node
                 GraphRelationship("payments gateway", "withdrawn entity", "Withdrawn text.", 1.0, (9,))]
COMMUNITIES = [Community(0, 0, None, ("billing", "irina volkova", "payments gateway"), (1,)),
               Community(1, 1, 0, ("billing", "payments gateway"), ())]


def graph(entities=ENTITIES, relationships=RELATIONSHIPS):
    return level_graph(entities, relationships, COMMUNITIES, "acme", "staff")


def test_graphml_parses_back_with_every_attribute_and_no_withdrawn_end():
    back = nx.read_graphml(io.BytesIO(serialize(graph(), "graphml")))
    assert sorted(back.nodes) == ["billing", "irina volkova", "payments gateway"]
    assert back.nodes["billing"] == {"name": "Billing", "type": "team", "description": "Owns invoices; «Ларкспур».",
                                     "degree": 1, "communities": "0,1"}
    assert back.edges["billing", "payments gateway"] == {"weight": 7.0, "description": "Billing owns it."}
    assert back.number_of_edges() == 2 and (back.graph["tenant"], back.graph["level"]) == ("acme", "staff")


def test_gexf_and_json_parse_back_and_every_format_is_byte_stable():
    gexf = nx.read_gexf(io.BytesIO(serialize(graph(), "gexf")))
    assert sorted(gexf.nodes) == ["billing", "irina volkova", "payments gateway"] and gexf.number_of_edges() == 2
    data = json.loads(serialize(graph(), "json"))
    assert [n["id"] for n in data["nodes"]] == ["billing", "irina volkova", "payments gateway"]
    assert data["nodes"][0]["communities"] == [0, 1]
    assert nx.node_link_graph(data, edges="edges").number_of_edges() == 2
    shuffled = graph(ENTITIES[::-1], RELATIONSHIPS[::-1])
    for fmt in ("graphml", "gexf", "json"):
        assert serialize(graph(), fmt) == serialize(shuffled, fmt), fmt
    assert b"lastmodifieddate" not in serialize(graph(), "gexf")


@pytest.fixture(scope="module")
def small_graph(db, settings, local_embedder, tmp_path_factory):
    """Four documents of the fixtures corpus, their offline graph built at levels `all` and `staff`."""
    from graph.indexing.contracts import BuildSettings, OfflineReporter
    from graph.indexing.extract_offline import OfflineExtractor
    from graph.indexing.runner import build_graph
    from vector.ingest.runner import ingest_documents
    from vector.ingest.sources import load_source

    tenant = "graph_export"
    root = tmp_path_factory.mktemp("export")
    for name in ("services/payments-gateway.md", "services/shipments-api.md", "teams/billing.md", "teams/integrations.md"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(FIXTURES / "corpus" / name, root / name)
    docs, skipped = load_source(root, [], settings.max_document_bytes)
    ingest_documents(db, local_embedder, settings, tenant, docs, skipped)
    with db.connection() as conn:
        store.set_level(conn, tenant, "staff", ["public", "staff"])
    build_graph(db, tenant, None, OfflineExtractor(), OfflineReporter(), local_embedder, BuildSettings())
    return tenant


def test_cli_exports_a_built_level_and_leaves_out_what_was_withdrawn(db, small_graph, cli_env, tmp_path):
    from vector import store as vector_store

    out = tmp_path / "staff.graphml"
    proc = crossroads(cli_env, "graph", "export", "--tenant", small_graph, "--level", "staff", "--output", str(out),
                      "--json")
    summary = json.loads(proc.stdout)
    exported = nx.read_graphml(out)
    with db.connection() as conn:
        served = store.load_entities(conn, small_graph, "staff")
    assert sorted(exported.nodes) == [e.key for e in served] and summary["entities"] == len(served) > 0
    assert summary["relationships"] == exported.number_of_edges() > 0
    assert all(exported.nodes[e.key]["name"] == e.name for e in served)

    with db.connection() as conn:  # the staff level can no longer read this document: its text is withdrawn
        assert vector_store.set_acl(conn, small_graph, "teams/billing.md", ["hr"])
        still_served = {e.key for e in store.load_entities(conn, small_graph, "staff")}
    assert still_served < set(exported.nodes)
    proc = crossroads(cli_env, "graph", "export", "--tenant", small_graph, "--level", "staff", "--format", "json")
    assert {n["id"] for n in json.loads(proc.stdout)["nodes"]} == still_served

    proc = crossroads(cli_env, "graph", "export", "--tenant", small_graph, "--level", "nope", rc=1)
    assert "crossroads levels list" in proc.stderr
