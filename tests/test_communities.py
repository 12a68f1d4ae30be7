"""Hierarchical Leiden communities: determinism, hierarchy, stable ids (pure functions, no database)."""
from __future__ import annotations

import itertools
import random
import time
from collections import Counter

import networkx as nx
import pytest

from graph.indexing.communities import (
    Community,
    canonical_edges,
    detect_communities,
    final_membership,
    match_communities,
    membership_hash,
    relabel,
)


def cliques(n: int, size: int, *, bridge: float = 0.1) -> list[tuple[str, str, float]]:
    """`n` cliques of `size` nodes (weight 1), clique i joined to clique i+1 by one weak edge."""
    edges = []
    for c in range(n):
        nodes = [f"k{c}_{i}" for i in range(size)]
        edges += [(a, b, 1.0) for a, b in itertools.combinations(nodes, 2)]
        if c + 1 < n:
            edges.append((f"k{c}_0", f"k{c + 1}_1", bridge))
    return edges


def nested(groups: int, prefix: str = "g") -> list[tuple[str, str, float]]:
    """Groups of 3 cliques of 5: a group (15 nodes > 10) is a level-0 community, its cliques level 1."""
    edges = []
    for g in range(groups):
        for c in range(3):
            nodes = [f"{prefix}{g}c{c}n{i}" for i in range(5)]
            edges += [(a, b, 5.0) for a, b in itertools.combinations(nodes, 2)]
        for c1, c2 in itertools.combinations(range(3), 2):
            edges += [(f"{prefix}{g}c{c1}n{i}", f"{prefix}{g}c{c2}n{i}", 2.0) for i in range(5)]
        edges.append((f"{prefix}{g}c0n0", f"{prefix}{(g + 1) % groups}c1n1", 0.2))
    return edges


def planted(seed: int = 7) -> list[tuple[str, str, float]]:
    """300 nodes in 10 planted groups of 30, integer weights 1..4."""
    g = nx.planted_partition_graph(10, 30, 0.5, 0.02, seed=seed)
    rng = random.Random(seed)
    return [(f"n{u:03d}", f"n{v:03d}", float(rng.randint(1, 4))) for u, v in g.edges()]


def member_sets(communities: list[Community], level: int | None = None) -> set[tuple[str, ...]]:
    return {c.members for c in communities if level is None or c.level == level}


def scramble(edges, rng: random.Random):
    """The same graph written differently: shuffled, random directions, weights split in pieces."""
    out = []
    for u, v, w in edges:
        # Halves and quarters are exact in binary, so the pieces sum back to w exactly.
        pieces = rng.choice([[w], [w / 2, w / 2], [w / 4, w / 2, w / 4]])
        for p in pieces:
            out.append((u, v, p) if rng.random() < 0.5 else (v, u, p))
        if rng.random() < 0.05:
            out.append((u, u, 3.0))  # self-loops are dropped
    rng.shuffle(out)
    return out


def test_canonical_edges_merges_and_sorts():
    edges = [("b", "a", 1.0), ("a", "b", 2.5), ("c", "c", 9.0), ("a", "c", 1.0)]
    assert canonical_edges(edges) == [("a", "b", 3.5), ("a", "c", 1.0)]
    with pytest.raises(ValueError):
        canonical_edges([("a", "b", 0.0)])
    with pytest.raises(ValueError):
        canonical_edges([("a", "b", float("nan"))])


@pytest.mark.parametrize("make", [planted, lambda: nested(6) + cliques(3, 6)])
def test_same_graph_gives_same_communities_whatever_the_edge_order(make):
    edges = make()
    expected = detect_communities(edges)
    assert len({c.level for c in expected}) > 1  # a real hierarchy, not one flat level
    for seed in range(20):
        assert detect_communities(scramble(edges, random.Random(seed))) == expected


def test_clear_cliques_each_end_in_one_final_community():
    communities = detect_communities(cliques(4, 6))
    final = final_membership(communities)
    for c in range(4):
        assert len({final[f"k{c}_{i}"] for i in range(6)}) == 1
    assert len(set(final.values())) == 4


def assert_consistent(communities: list[Community]) -> None:
    by_id = {c.id: c for c in communities}
    assert len(by_id) == len(communities)
    assert communities == sorted(communities, key=lambda c: (c.level, c.id))
    for c in communities:
        assert list(c.members) == sorted(set(c.members)) and c.members
        if c.parent is None:
            assert c.level == 0
        else:
            parent = by_id[c.parent]
            assert parent.level == c.level - 1 and c.id in parent.children
            assert set(c.members) <= set(parent.members)
        if c.children:  # a split community is exactly the union of its children
            kids = [by_id[k] for k in c.children]
            assert all(k.parent == c.id for k in kids)
            assert sorted(m for k in kids for m in k.members) == list(c.members)
    # Ragged levels: a node is at most once per level, and at level L+1 only if split at level L.
    levels = sorted({c.level for c in communities})
    for level in levels:
        counts = Counter(m for c in communities if c.level == level for m in c.members)
        assert max(counts.values()) == 1
        if level + 1 in levels:
            split = {m for c in communities if c.level == level and c.children for m in c.members}
            assert set(counts) >= split
            assert {m for c in communities if c.level == level + 1 for m in c.members} == split


@pytest.mark.parametrize("make", [planted, lambda: nested(6) + cliques(3, 6)])
def test_hierarchy_is_consistent(make):
    edges = make()
    communities = detect_communities(edges)
    assert_consistent(communities)
    nodes = {n for u, v, _ in edges for n in (u, v)}
    assert set(final_membership(communities)) == nodes
    assert {m for c in communities if c.level == 0 for m in c.members} == nodes


def test_ids_follow_level_then_smallest_member():
    communities = detect_communities(nested(6))
    assert [c.id for c in communities] == list(range(len(communities)))
    assert communities == sorted(communities, key=lambda c: (c.level, c.members[0]))
    levels = Counter(c.level for c in communities)
    assert levels == {0: 6, 1: 18}  # six groups, each split into its three cliques


def test_max_cluster_size_is_respected_at_the_final_level():
    communities = detect_communities(planted(), max_cluster_size=10)
    assert max(c.level for c in communities) >= 1
    assert all(len(c.members) <= 10 for c in communities if not c.children)
    assert any(len(c.members) > 10 for c in communities if c.children)


def test_an_unsplittable_clique_stays_whole_above_max_cluster_size():
    # Leiden cannot split a clique, and hierarchical_leiden keeps it final: the size is a target.
    communities = detect_communities(cliques(1, 15), max_cluster_size=10)
    assert [(c.level, len(c.members), c.children) for c in communities] == [(0, 15, ())]


def test_every_component_is_clustered_unless_only_the_largest_is_kept():
    edges = cliques(1, 6) + [("x1", "x2", 1.0), ("x2", "x3", 1.0)]
    assert member_sets(detect_communities(edges)) == {
        tuple(f"k0_{i}" for i in range(6)),
        ("x1", "x2", "x3"),
    }
    assert member_sets(detect_communities(edges, use_lcc=True)) == {tuple(f"k0_{i}" for i in range(6))}
    # Equal components: the one with the smallest node key is kept, whatever the input order.
    tie = [("b", "c", 1.0), ("y", "z", 1.0)]
    assert member_sets(detect_communities(tie[::-1], use_lcc=True)) == {("b", "c")}


def test_empty_graph_and_single_edge():
    assert detect_communities([]) == []
    assert detect_communities([("a", "a", 1.0)]) == []  # only a self-loop: no edge left
    assert detect_communities([("b", "a", 2.0)]) == [
        Community(id=0, level=0, parent=None, members=("a", "b"), children=())
    ]


def recluster(old: list[Community], edges) -> list[Community]:
    new = detect_communities(edges)
    return relabel(new, match_communities(old, new))


def ids_by_members(communities: list[Community]) -> dict[tuple[str, ...], int]:
    return {c.members: c.id for c in communities}


# "a_new" sorts before every other key, so fresh numbering would shift ids: only matching keeps them.
NEWCOMER = [("a_new", f"g2c1n{i}", 5.0) for i in range(3)]


def test_adding_a_node_keeps_every_id():
    edges = nested(6)
    old = detect_communities(edges)
    new = recluster(old, edges + NEWCOMER)
    assert ids_by_members(detect_communities(edges + NEWCOMER)) != ids_by_members(new)
    assert_consistent(new)
    assert [c.id for c in new] == [c.id for c in old]  # same ids, same parents, same children
    assert [(c.parent, c.children) for c in new] == [(c.parent, c.children) for c in old]
    changed = {c.id for c in new if c.members != next(o for o in old if o.id == c.id).members}
    grown = {c.id for c in old if "g2c1n0" in c.members}
    assert changed == grown  # the group and the clique that took the node, nothing else


def test_removing_a_node_keeps_every_id():
    edges = nested(6)
    old = detect_communities(edges + NEWCOMER)
    new = recluster(old, edges)
    assert_consistent(new)
    assert sorted(c.id for c in new) == sorted(c.id for c in old)
    kept = ids_by_members(old)
    untouched = [c for c in new if c.members in kept]
    assert all(kept[c.members] == c.id for c in untouched)
    assert len(untouched) == len(old) - 2  # all but the group and the clique that lost it
    assert {c.id for c in new} - {c.id for c in untouched} == {
        c.id for c in old if "a_new" in c.members
    }


def test_a_brand_new_cluster_gets_fresh_ids():
    edges = nested(6)
    old = detect_communities(edges)
    top = max(c.id for c in old)
    # Its keys ("a0...") sort first: fresh numbering alone would give it ids 0.. and shift the rest.
    new = recluster(old, edges + nested(1, prefix="a") + [("a0c0n0", "g0c0n0", 0.2)])
    assert_consistent(new)
    fresh = [c for c in new if c.members[0].startswith("a")]
    assert len(fresh) == 4  # the new group and its three cliques
    assert sorted(c.id for c in fresh) == list(range(top + 1, top + 5))
    assert all(ids_by_members(new).get(m) == i for m, i in ids_by_members(old).items())


def test_matching_rule():
    def com(cid, level, members, parent=None, children=()):
        return Community(cid, level, parent, tuple(sorted(members)), children)

    old = [com(0, 0, "abcd"), com(1, 0, "efgh"), com(5, 0, "xy")]
    new = [com(0, 0, "abce"), com(1, 0, "dfgh"), com(2, 0, "pq"), com(3, 0, "xyzw")]
    # abce~abcd: 3/5, dfgh~efgh: 3/5, xyzw~xy: 2/4 (the threshold, accepted), pq: fresh above 5.
    assert match_communities(old, new) == {0: 0, 1: 1, 3: 5, 2: 6}
    # Each old id is given once: two halves of an old community, the tie goes to the lower new id.
    split = [com(0, 0, "ab"), com(1, 0, "cd")]
    assert match_communities([com(3, 0, "abcd")], split) == {0: 3, 1: 4}
    # Levels never match each other.
    assert match_communities([com(0, 1, "ab")], [com(0, 0, "ab")]) == {0: 1}


def test_relabel_rewrites_ids_parents_and_children():
    communities = detect_communities(nested(2))
    mapping = {c.id: 100 - c.id for c in communities}
    out = relabel(communities, mapping)
    assert_consistent(out)
    assert {c.members: c.id for c in out} == {c.members: 100 - c.id for c in communities}


def test_membership_hash_changes_only_with_members():
    a = Community(id=1, level=0, parent=None, members=("a", "b"), children=())
    same = Community(id=7, level=2, parent=3, members=("a", "b"), children=(9,))
    assert membership_hash(a) == membership_hash(same)
    assert membership_hash(a) != membership_hash(Community(1, 0, None, ("a", "b", "c"), ()))
    assert membership_hash(a) != membership_hash(Community(1, 0, None, ("a",), ()))
    assert membership_hash(Community(1, 0, None, ("a,b",), ())) != membership_hash(a)


def test_speed_on_200k_edges():
    rng = random.Random(0)
    edges = []
    for g in range(400):  # 400 groups of 50 nodes, ~490 edges inside each, 4k edges across
        edges += [
            (f"e{g}_{rng.randrange(50)}", f"e{g}_{rng.randrange(50)}", float(rng.randint(1, 10)))
            for _ in range(490)
        ]
    edges += [(f"e{rng.randrange(400)}_0", f"e{rng.randrange(400)}_1", 1.0) for _ in range(4000)]
    start = time.perf_counter()
    canon = canonical_edges(edges)
    mid = time.perf_counter()
    communities = detect_communities(edges)
    end = time.perf_counter()
    rematch = match_communities(communities, communities)
    levels = Counter(c.level for c in communities)
    print(
        f"\n{len(edges)} edges ({len(canon)} distinct): canonical {mid - start:.2f}s, "
        f"detect (incl. canonical) {end - mid:.2f}s, match {time.perf_counter() - end:.2f}s, "
        f"communities per level {dict(sorted(levels.items()))}"
    )
    assert all(k == v for k, v in rematch.items())
