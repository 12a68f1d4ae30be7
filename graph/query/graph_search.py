"""Graph retrieval with its I/O: link a question to the reader's level, walk it, return passages.

The reader's level is chosen as for global search (graph.levels.choose_level: a level whose groups
are all the reader's), so every entity, relationship and passage node of the walk comes from chunks
the reader may read; an entity known only from a document the reader may not read is in no graph
the reader is served from, so it can neither seed nor route the walk. The passages come back through
SQL with the reader's ACL (graph.store.readable_chunks), as every search does, in case an ACL changed
after the build.

The level's graph matrix is cached in memory per (tenant, level, graph version): migration 019 bumps
the version on every change of the level's entities or relationships (builds and withdrawals), so a
question costs one primary-key read until the graph changes.
"""
from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from core.database import Database
from core.embeddings import Embedder
from core.passages import ChunkText
from graph import retrieval_store, store
from graph.levels import AccessLevel, choose_level
from graph.query.entity_link import DENSE_LINKS, Link, link_scores, meaning_links, name_links
from graph.query.ppr import GraphMatrix, build_matrix, personalized_pagerank, rank_entities, rank_passages, reset_vector

CACHED_LEVELS = 16  # graph matrices kept in memory (one per tenant level served recently)
# Every passage's dense score seeds the walk up to this many passage nodes in the level (an exact scan,
# some ms per thousand passages); a larger level is seeded by its nearest passages from the vector index.
EXACT_SEEDS_UP_TO = 20_000
NEAREST_SEEDS = 1_000


@dataclass
class GraphHit(ChunkText):
    score: float  # PPR mass


def hit_of(row: tuple, score: float) -> GraphHit:
    """A readable_chunks row as a hit."""
    return GraphHit(*row[:5], score=score, blocks=ChunkText.stored_blocks(row[5]))


@dataclass
class GraphResult:
    hits: list[GraphHit]
    level: str | None
    links: list[Link] = field(default_factory=list)
    bridges: list[tuple[str, float]] = field(default_factory=list)  # entities with the most mass
    trace: dict = field(default_factory=dict)


class _MatrixCache:
    def __init__(self, size: int):
        self.size, self._lock, self._items = size, threading.Lock(), OrderedDict()

    def get(self, key: tuple) -> GraphMatrix | None:
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
            return found

    def put(self, key: tuple, matrix: GraphMatrix) -> None:
        with self._lock:
            # an older version of the same level is never asked for again
            for stale in [k for k in self._items if k[:-1] == key[:-1]]:
                del self._items[stale]
            self._items[key] = matrix
            while len(self._items) > self.size:
                self._items.popitem(last=False)


class GraphSearcher:
    """Personalized PageRank retrieval for one database; the embedder links by meaning and may be None."""

    def __init__(self, db: Database, embedder: Embedder | None = None, cache_size: int = CACHED_LEVELS):
        self.db, self.embedder = db, embedder
        self._cache = _MatrixCache(cache_size)

    def level(self, tenant: str, groups: Sequence[str]) -> AccessLevel | None:
        with self.db.connection() as conn:
            return choose_level(store.list_levels(conn, tenant), set(groups))

    def matrix(self, tenant: str, level: str) -> tuple[GraphMatrix, bool]:
        """The level's matrix and whether it came from the cache."""
        with self.db.connection() as conn:
            version = retrieval_store.graph_version(conn, tenant, level)
            key = (id(self.db), tenant, level, version)
            cached = self._cache.get(key)
            if cached is not None:
                return cached, True
            entities = [(e.key, e.chunk_ids) for e in store.load_entities(conn, tenant, level)]
            relationships = [(r.source_key, r.target_key, r.weight) for r in store.load_relationships(conn, tenant, level)]
        matrix = build_matrix(entities, relationships)
        self._cache.put(key, matrix)
        return matrix, False

    def passage_scores(self, tenant: str, groups: Sequence[str], matrix: GraphMatrix, vector) -> dict[int, float]:
        """chunk id -> cosine to `vector` of every passage node the reader may read (HippoRAG 2's
        passage seeds: all passages, not only a search's nearest candidates). The exact scan is linear in
        the level's passages: past EXACT_SEEDS_UP_TO the nearest NEAREST_SEEDS by the vector index seed it
        instead (measured on multihop dev: 500 nearest 0.74 against all 0.78 evidence recall@10)."""
        with self.db.connection() as conn:
            if len(matrix.chunk_ids) <= EXACT_SEEDS_UP_TO:
                return dict(retrieval_store.passage_similarities(conn, tenant, list(groups), self.embedder.model_id,
                                                                 vector, matrix.chunk_ids.tolist()))
            nodes = set(matrix.chunk_ids.tolist())
            nearest = retrieval_store.nearest_passages(conn, tenant, list(groups), self.embedder.model_id, vector,
                                                       NEAREST_SEEDS)
            return {i: s for i, s in nearest if i in nodes}

    def link(self, tenant: str, level: str, matrix: GraphMatrix, question: str, vector=None) -> list[Link]:
        named = name_links(question, matrix.entity_index, matrix.entity_spellings)
        links = list(named)
        if self.embedder is None:
            return links
        with self.db.connection() as conn:
            # a level built without an embedder has no entity vectors: no question embedding for nothing
            if not retrieval_store.has_entity_vectors(conn, tenant, level, self.embedder.model_id):
                return links
            if vector is None:
                vector = self.embedder.embed_query(question)
            nearest = retrieval_store.nearest_entities(conn, tenant, level, self.embedder.model_id, vector, DENSE_LINKS)
        return links + meaning_links(nearest, {link.key for link in named})

    def search(self, tenant: str, groups: Sequence[str], question: str, k: int = 10, *,
               passage_scores: Mapping[int, float] | None = None, vector=None,
               level: AccessLevel | None | bool = True, head: Sequence[int] = ()) -> GraphResult:
        """The top-k passages by PPR mass. `passage_scores`: chunk id -> dense score (the walk's
        passage seeds); None: every passage node's cosine to the question, when there is an embedder;
        `vector`: the question's embedding when the caller has it; `level`: the reader's level
        (`self.level`) when the caller chose it already (one choice per question, not per search),
        True to choose it here; `head`: chunk ids of the first hop a search of the same reader found
        (seeded with ppr.HEAD_SHARE of the restart mass). No level, no graph or nothing to seed: no hits."""
        started = time.perf_counter()
        groups = sorted({g for g in groups if g})
        trace: dict = {"k": k}
        if level is True:
            level = self.level(tenant, groups) if groups else None
        if level is None:
            return GraphResult([], None, trace=trace | {"empty_reason": "no access level fits the reader"})
        matrix, cached = self.matrix(tenant, level.name)
        trace |= {"level": level.name, "nodes": matrix.nodes, "edges": matrix.edges, "cached": cached,
                  "matrix_bytes": matrix.nbytes}
        t0 = time.perf_counter()
        links = self.link(tenant, level.name, matrix, question, vector)
        trace["link_ms"] = round((time.perf_counter() - t0) * 1000, 2)
        if passage_scores is None and self.embedder is not None and matrix.nodes:
            t0 = time.perf_counter()
            if vector is None:
                vector = self.embedder.embed_query(question)
            passage_scores = self.passage_scores(tenant, groups, matrix, vector)
            trace["dense_ms"] = round((time.perf_counter() - t0) * 1000, 2)
        reset = reset_vector(matrix, link_scores(links), passage_scores, head=head)
        if reset is None:
            return GraphResult([], level.name, links, trace=trace | {"empty_reason": "nothing linked"})
        t0 = time.perf_counter()
        scores = personalized_pagerank(matrix, reset)
        trace["ppr_ms"] = round((time.perf_counter() - t0) * 1000, 2)
        # more than k: a cited chunk the reader may no longer read is dropped below
        ranked = rank_passages(matrix, scores, 3 * k)
        with self.db.connection() as conn:
            rows = {r[0]: r for r in retrieval_store.readable_chunks(conn, tenant, groups, [c for c, _ in ranked])}
        hits = [hit_of(rows[c], mass) for c, mass in ranked if c in rows][:k]
        trace["latency_ms"] = round((time.perf_counter() - started) * 1000, 2)
        trace["head"] = list(head)
        trace["links"] = [{"key": link.key, "score": round(link.score, 3), "how": link.how} for link in links]
        return GraphResult(hits, level.name, links, rank_entities(matrix, scores, 5), trace)
