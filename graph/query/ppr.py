"""Personalized PageRank over a level's graph of entities and passages (pure: no database).

HippoRAG 2's recipe (Gutiérrez et al., 2025, "From RAG to Memory"): one graph holds entity nodes and
passage nodes; a passage links to every entity it mentions (weight 1), entities link by their
relationships (weight = the relationship's weight, a co-occurrence count offline). Synonym edges are
not added: resolution (graph/indexing/resolve.py) already merged the near-duplicate names a synonym edge
would join, so each is one node here. The walk restarts at the question's linked entities and, with
a small weight, at every passage by its dense score (HippoRAG 2 scores all passage nodes, so a passage
near the question keeps a base mass wherever it sits in the graph); passages are ranked by the mass
they collect. A caller that has the first hop (the top passage of a search) adds it as a seed of its
own (HEAD_SHARE): mass flows from it through the entities it mentions to the second hop's passages.

Defaults are HippoRAG 2's published ones, not fitted here: damping 0.5 and a passage-node reset
weight of 0.05 relative to the entities. A linked entity's reset weight is divided by the number of
passages it appears in (HippoRAG's node specificity): a name in every passage says little.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Iterable, Mapping, Sequence

import numpy as np
from scipy import sparse

from core.text.skeletons import SpellingIndex
from graph.query.entity_link import key_spellings

DAMPING = 0.5  # probability of following an edge (HippoRAG 2's igraph call); 1 - DAMPING restarts
PASSAGE_NODE_WEIGHT = 0.05  # HippoRAG 2: dense passage scores enter the reset vector at this weight
TOLERANCE = 1e-5  # L1 change between iterations at which the walk has converged (float32 resolution)
# The first hop's share of the restart mass, when a search found it (graph_leg: hybrid's top passage):
# half, so neither the question's own seeds nor the first hop is trusted over the other (as RRF treats
# two rankings), not a fitted weight. The walk then reaches "query -> passage -> entity -> passage", the
# second hop, as HippoRAG's bridge step does. Measured on multihop dev (docs/benchmarks.md, issue 20):
# shares 0.25-0.75 and 1-3 head passages all land within 0.73-0.80 evidence recall@10 fused.
HEAD_SHARE = 0.5
MAX_ITERATIONS = 50  # with damping 0.5 the error halves each step: ~17 iterations reach TOLERANCE


@dataclass(frozen=True)
class GraphMatrix:
    """A level's graph as a column-stochastic matrix: nodes 0..E-1 are entities, E.. are passages."""

    entity_keys: tuple[str, ...]
    chunk_ids: np.ndarray  # int64: passage node E + i is chunk chunk_ids[i]
    walk: sparse.csr_matrix  # walk[j, i] = probability of stepping from node i to node j
    passages_per_entity: np.ndarray  # int32, per entity node: how many passages mention it
    entity_index: dict[str, int] = field(repr=False, default_factory=dict)
    chunk_index: dict[int, int] = field(repr=False, default_factory=dict)

    @cached_property
    def entity_spellings(self) -> SpellingIndex:
        """The entities' names by their consonants, for a question's name in the other script
        (graph/query/entity_link.py): built at its first question, kept as long as the matrix is cached."""
        return key_spellings(self.entity_keys)

    @property
    def nodes(self) -> int:
        return self.walk.shape[0]

    @property
    def edges(self) -> int:
        return int(self.walk.nnz)

    @property
    def nbytes(self) -> int:
        """Memory of the arrays (the dicts for lookup by key / chunk id are not counted)."""
        w = self.walk
        return int(w.data.nbytes + w.indices.nbytes + w.indptr.nbytes + self.chunk_ids.nbytes
                   + self.passages_per_entity.nbytes)


def build_matrix(entities: Iterable[tuple[str, Sequence[int]]],
                 relationships: Iterable[tuple[str, str, float]]) -> GraphMatrix:
    """`entities`: (key, chunk ids mentioning it); `relationships`: (source key, target key, weight).
    Edges are undirected; a relationship to an unknown key (withdrawn meanwhile) is dropped."""
    keys: list[str] = []
    mentions: list[Sequence[int]] = []
    for key, chunks in entities:
        keys.append(key)
        mentions.append(chunks)
    entity_index = {k: i for i, k in enumerate(keys)}
    chunk_ids = np.array(sorted({int(c) for chunks in mentions for c in chunks}), dtype=np.int64)
    chunk_index = {int(c): i for i, c in enumerate(chunk_ids.tolist())}
    n_entities = len(keys)
    rows: list[int] = []
    cols: list[int] = []
    weights: list[float] = []
    for i, chunks in enumerate(mentions):
        for c in set(int(c) for c in chunks):
            rows.append(i)
            cols.append(n_entities + chunk_index[c])
            weights.append(1.0)
    for source, target, weight in relationships:
        a, b = entity_index.get(source), entity_index.get(target)
        if a is None or b is None or a == b or weight <= 0:
            continue
        rows.append(a)
        cols.append(b)
        weights.append(float(weight))
    n = n_entities + len(chunk_ids)
    half = sparse.coo_matrix((weights, (rows, cols)), shape=(n, n), dtype=np.float64)
    adjacency = (half + half.T).tocsr()  # duplicates summed: two relationships of one pair add up
    out_weight = np.asarray(adjacency.sum(axis=0)).ravel()  # symmetric: column sums = row sums
    inverse = np.divide(1.0, out_weight, out=np.zeros_like(out_weight), where=out_weight > 0)
    walk = (adjacency @ sparse.diags(inverse)).tocsr().astype(np.float32)
    passages_per_entity = np.array([len(set(c)) for c in mentions], dtype=np.int32)
    return GraphMatrix(tuple(keys), chunk_ids, walk, passages_per_entity, entity_index, chunk_index)


def reset_vector(matrix: GraphMatrix, entity_scores: Mapping[str, float],
                 passage_scores: Mapping[int, float] | None = None,
                 passage_weight: float = PASSAGE_NODE_WEIGHT, head: Sequence[int] = (),
                 head_share: float = HEAD_SHARE) -> np.ndarray | None:
    """The restart distribution: the linked entities (score / passages mentioning them, scaled to sum 1)
    plus dense passage scores (min-max scaled to (0, 1], the top passage 1) times `passage_weight`, so
    the passages' share keeps HippoRAG's ratio however many entities were linked; then the `head`
    passages (the first hop another search found) take `head_share` of the whole, equally. None when
    nothing of the question is in the graph: no walk then."""
    n_entities = len(matrix.entity_keys)
    reset = np.zeros(matrix.nodes, dtype=np.float64)
    for key, score in entity_scores.items():
        i = matrix.entity_index.get(key)
        if i is not None and score > 0:
            reset[i] += score / max(1, int(matrix.passages_per_entity[i]))
    linked = reset[:n_entities].sum()
    if linked > 0:
        reset[:n_entities] /= linked
    known = {c: s for c, s in (passage_scores or {}).items() if c in matrix.chunk_index}
    if known:
        low, high = min(known.values()), max(known.values())
        for c, s in known.items():
            scaled = 1.0 if high == low else 0.01 + 0.99 * (s - low) / (high - low)
            reset[n_entities + matrix.chunk_index[c]] += passage_weight * scaled
    total = reset.sum()
    first_hop = sorted({matrix.chunk_index[c] for c in head if c in matrix.chunk_index})
    if not first_hop:
        return reset / total if total > 0 else None
    share = head_share if total > 0 else 1.0
    reset = reset / total * (1 - share) if total > 0 else reset
    reset[[n_entities + i for i in first_hop]] += share / len(first_hop)
    return reset


def personalized_pagerank(matrix: GraphMatrix, reset: np.ndarray, damping: float = DAMPING,
                          tolerance: float = TOLERANCE, max_iterations: int = MAX_ITERATIONS) -> np.ndarray:
    """Power iteration of p = (1 - d) r + d W p; mass stuck on a node without edges restarts.
    In float32 as the matrix is: a float64 vector would make scipy convert the matrix every step."""
    walk = matrix.walk
    restart = reset.astype(np.float32)
    scores = restart.copy()
    for _ in range(max_iterations):
        stepped = walk @ scores
        # a node without edges keeps no outgoing column: its mass goes back to the reset vector
        lost = float(scores.sum() - stepped.sum())
        nxt = (1 - damping) * restart + damping * (stepped + lost * restart)
        if float(np.abs(nxt - scores).sum()) < tolerance:
            return nxt
        scores = nxt
    return scores


def rank_passages(matrix: GraphMatrix, scores: np.ndarray, limit: int) -> list[tuple[int, float]]:
    """(chunk id, PPR mass) of the `limit` passages with the most mass, ties by chunk id."""
    n_entities = len(matrix.entity_keys)
    mass = scores[n_entities:]
    if not len(mass) or limit <= 0:
        return []
    return [(int(matrix.chunk_ids[i]), float(mass[i])) for i in _top(mass, limit) if mass[i] > 0]


def rank_entities(matrix: GraphMatrix, scores: np.ndarray, limit: int) -> list[tuple[str, float]]:
    """(entity key, PPR mass) of the `limit` entities with the most mass (the walk's bridges)."""
    mass = scores[: len(matrix.entity_keys)]
    return [(matrix.entity_keys[i], float(mass[i])) for i in _top(mass, limit) if mass[i] > 0]


def _top(mass: np.ndarray, limit: int) -> np.ndarray:
    """Indices of the `limit` largest values, largest first, ties by index (a partition, then a sort
    of only those: the full sort of every passage would cost more than the walk on a big graph)."""
    if limit < len(mass):
        cut = np.partition(mass, len(mass) - limit)[len(mass) - limit]
        candidates = np.flatnonzero(mass >= cut)
    else:
        candidates = np.arange(len(mass))
    order = np.lexsort((candidates, -mass[candidates]))
    return candidates[order][:limit]
