"""Hierarchical Leiden communities over the entity graph (pure functions, no I/O).

`graspologic_native.hierarchical_leiden` runs Leiden once over the whole graph (level 0), then
re-runs it on every cluster of `max_cluster_size` nodes or more, giving that cluster's sub-clusters
at the next level, and repeats. Even with a fixed seed its partition depends on the order of the
edge list (shuffling or reversing the edges of a 300-node graph changes it), so edges are put into
one canonical order first: the same graph then gives the same communities however it arrived.

Levels are ragged, as in GraphRAG: a node appears at level L+1 only if its level-L community was
split. A community with no children is final; every node is in exactly one community per level at
which it appears, and in exactly one final community (`final_membership`). Nodes without edges
(or with only self-loops) are not in the graph and belong to no community: the caller decides
whether an isolated entity deserves a report of its own.

Native cluster ids are an artefact of one run, so they are replaced: a fresh clustering numbers its
communities 0.. by (level, smallest member key). `match_communities` + `relabel` then carry ids over
from the previous clustering so stored reports keep their ids across rebuilds.
"""
from __future__ import annotations

import hashlib
import json
import math
from collections import Counter, defaultdict
from itertools import groupby
from operator import itemgetter
from typing import Iterable

import graspologic_native
import networkx as nx

from graph.types import Community

Edge = tuple[str, str, float]


def canonical_edges(edges: Iterable[Edge]) -> list[Edge]:
    """Undirected edges as (min, max, total weight), self-loops dropped, duplicates merged, sorted.

    Weights must be finite and > 0: modularity is defined for positive weights, and a zero-weight
    edge would add a node with no connection at all.
    """
    norm = []
    for u, v, w in edges:
        w = float(w)
        if not (math.isfinite(w) and w > 0):
            raise ValueError(f"edge {u!r}-{v!r}: weight must be finite and > 0, got {w}")
        # A self-loop (u == v) says nothing about which community a node belongs to: dropped.
        if u < v:
            norm.append((u, v, w))
        elif v < u:
            norm.append((v, u, w))
    norm.sort()
    # fsum is exactly rounded, so a merged weight does not depend on how it was split or ordered.
    return [(u, v, math.fsum(e[2] for e in dup)) for (u, v), dup in groupby(norm, itemgetter(0, 1))]


def _largest_component(edges: list[Edge]) -> list[Edge]:
    graph = nx.Graph()
    graph.add_weighted_edges_from(edges)
    # Ties between equally large components go to the one with the smallest node key (stable).
    keep = min(nx.connected_components(graph), key=lambda nodes: (-len(nodes), min(nodes)))
    return [e for e in edges if e[0] in keep]


def detect_communities(
    edges: Iterable[Edge],
    *,
    max_cluster_size: int = 10,
    seed: int = 42,
    iterations: int = 2,
    resolution: float = 1.0,
    use_lcc: bool = False,
) -> list[Community]:
    """Hierarchical Leiden communities of an undirected weighted graph, sorted by (level, id).

    Every connected component is clustered unless `use_lcc` keeps only the largest one (GraphRAG's
    option). `max_cluster_size` is a target, not a bound: a cluster Leiden cannot split (a clique,
    say) stays whole and final whatever its size.
    """
    canon = canonical_edges(edges)
    if not canon:
        return []  # the native call raises EmptyNetworkError on an empty edge list
    if use_lcc:
        canon = _largest_component(canon)
    entries = graspologic_native.hierarchical_leiden(
        canon,
        resolution=resolution,
        iterations=iterations,
        max_cluster_size=max_cluster_size,
        seed=seed,
    )
    # Keyed by (level, native id) so nothing relies on native ids being unique across levels.
    members: dict[tuple[int, int], list[str]] = defaultdict(list)
    native_parent: dict[tuple[int, int], int | None] = {}
    for e in entries:
        members[(e.level, e.cluster)].append(e.node)
        native_parent[(e.level, e.cluster)] = e.parent_cluster
    order = sorted(members, key=lambda key: (key[0], min(members[key])))
    new_id = {key: i for i, key in enumerate(order)}
    parent = {
        key: None if native_parent[key] is None else new_id[(key[0] - 1, native_parent[key])]
        for key in order
    }
    children: dict[int, list[int]] = defaultdict(list)
    for key in order:
        if parent[key] is not None:
            children[parent[key]].append(new_id[key])
    return [
        Community(
            id=new_id[key],
            level=key[0],
            parent=parent[key],
            members=tuple(sorted(members[key])),
            children=tuple(sorted(children[new_id[key]])),
        )
        for key in order
    ]


def final_membership(communities: Iterable[Community]) -> dict[str, int]:
    """Each node's final (finest, never split) community id."""
    return {m: c.id for c in communities if not c.children for m in c.members}


def match_communities(
    old: list[Community], new: list[Community], *, min_jaccard: float = 0.5
) -> dict[int, int]:
    """Map each new community id to the id it should keep: an old one's, or a fresh one.

    Per level, candidate pairs (old, new) are taken greedily by descending Jaccard overlap of
    members, ties by old id then new id; a pair is accepted if both sides are still free and the
    overlap is at least `min_jaccard` (0.5: the two share at least half of their union, so a
    community that gains or loses a few members keeps its id). Unmatched new communities get fresh
    ids above the largest old id, in the order of their new ids.
    """
    mapping: dict[int, int] = {}
    old_by_level: dict[int, list[Community]] = defaultdict(list)
    for c in old:
        old_by_level[c.level].append(c)
    new_by_level: dict[int, list[Community]] = defaultdict(list)
    for c in new:
        new_by_level[c.level].append(c)
    for level, news in new_by_level.items():
        olds = {c.id: c for c in old_by_level.get(level, [])}
        # Communities of one level are disjoint, so each node points to at most one old community.
        old_of = {m: c.id for c in olds.values() for m in c.members}
        candidates = []
        for c in news:
            shared = Counter(old_of[m] for m in c.members if m in old_of)
            for old_id, inter in shared.items():
                union = len(c.members) + len(olds[old_id].members) - inter
                candidates.append((-inter / union, old_id, c.id))
        taken: set[int] = set()
        for neg_jaccard, old_id, new_id in sorted(candidates):
            if -neg_jaccard < min_jaccard:
                break
            if old_id not in taken and new_id not in mapping:
                mapping[new_id] = old_id
                taken.add(old_id)
    fresh = max((c.id for c in old), default=-1) + 1
    for c in sorted(new, key=lambda c: c.id):
        if c.id not in mapping:
            mapping[c.id] = fresh
            fresh += 1
    return mapping


def relabel(communities: list[Community], mapping: dict[int, int]) -> list[Community]:
    """The same communities with ids, parents and children rewritten through `mapping`."""
    out = [
        Community(
            id=mapping[c.id],
            level=c.level,
            parent=None if c.parent is None else mapping[c.parent],
            members=c.members,
            children=tuple(sorted(mapping[ch] for ch in c.children)),
        )
        for c in communities
    ]
    return sorted(out, key=lambda c: (c.level, c.id))


def membership_hash(community: Community) -> str:
    """sha256 of the sorted member keys: a report is stale when this changes.

    JSON encoding keeps the boundary between keys unambiguous whatever characters they contain.
    """
    payload = json.dumps(sorted(community.members), ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()
