"""One access level's entity graph as a file for other tools (Gephi, yEd, Cytoscape, scripts):
GraphML, GEXF or JSON node-link, written with networkx.

Nodes are the level's served entities (id = merge key; name, type, description, degree, and the ids
of the communities holding them), edges its served relationships (weight, description). Withdrawn
text (its sources deleted or narrowed since the build, see graph/status.py) is never exported, and
neither is an edge whose entity was withdrawn. Output is sorted by id, so one graph always exports
to the same bytes.
"""
from __future__ import annotations

import json
from typing import Sequence

import networkx as nx
import psycopg

from graph import store
from graph.types import Community
from graph.types import GraphEntity, GraphRelationship

FORMATS = ("graphml", "gexf", "json")


def level_graph(entities: Sequence[GraphEntity], relationships: Sequence[GraphRelationship],
                communities: Sequence[Community], tenant: str, level: str) -> nx.Graph:
    """The undirected graph the build clustered (relationships are stored with source < target)."""
    memberships: dict[str, list[int]] = {}
    for community in communities:
        for key in community.members:
            memberships.setdefault(key, []).append(community.id)
    graph = nx.Graph(tenant=tenant, level=level)
    for e in sorted(entities, key=lambda e: e.key):
        # GraphML and GEXF hold scalars only: the community ids are one comma-separated string there
        graph.add_node(e.key, name=e.name, type=e.type, description=e.description, degree=e.degree,
                       communities=",".join(str(c) for c in sorted(memberships.get(e.key, ()))))
    for r in sorted(relationships, key=lambda r: (r.source_key, r.target_key)):
        if r.source_key in graph and r.target_key in graph:
            graph.add_edge(r.source_key, r.target_key, weight=float(r.weight), description=r.description)
    return graph


def serialize(graph: nx.Graph, fmt: str) -> bytes:
    if fmt == "graphml":
        return ("\n".join(nx.generate_graphml(graph)) + "\n").encode("utf-8")
    if fmt == "gexf":
        writer = nx.readwrite.gexf.GEXFWriter(encoding="utf-8")
        writer.add_graph(graph)
        for meta in writer.xml.iter("meta"):
            meta.attrib.pop("lastmodifieddate", None)  # today's date: the same graph would export differently
        return str(writer).encode("utf-8")
    if fmt == "json":
        data = nx.node_link_data(graph, edges="edges")
        for node in data["nodes"]:  # JSON has lists: no need for the comma-separated string
            node["communities"] = [int(c) for c in node["communities"].split(",") if c]
        return (json.dumps(data, ensure_ascii=False, indent=2) + "\n").encode("utf-8")
    raise ValueError(f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}")


def export_level(conn: psycopg.Connection, tenant: str, level: str, fmt: str) -> tuple[bytes, int, int]:
    """The level's graph in `fmt`, with its node and edge counts."""
    graph = level_graph(store.load_entities(conn, tenant, level), store.load_relationships(conn, tenant, level),
                        store.load_communities(conn, tenant, level), tenant, level)
    return serialize(graph, fmt), graph.number_of_nodes(), graph.number_of_edges()
