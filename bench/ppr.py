"""`make bench-ppr`: personalized PageRank latency and graph-matrix memory.

    .venv/bin/python -m bench.ppr [--nodes 100000] [--questions 200] [--tenant eval_multihop] [--json]

1. A synthetic graph of `--nodes` nodes (30% entities, 70% passages; each passage mentions 3-8
   entities drawn Zipf-like, as names are; entities co-occurring in a passage are related), built
   with graph.query.ppr.build_matrix; latency of one walk (reset vector from 1-3 entities, every
   passage's dense score and one first-hop passage, as graph_search seeds it; power iteration to convergence, top-30 passages) over `--questions` random seeds.
2. When `--tenant` has a graph in the configured database (`crossroads eval ../shared/data/multihop
   --config graph` builds it): the same over its level `all` with the dataset's own questions, timing
   the name linking + passage seeds (the SQL cosine of every passage) + walk + passage SQL of GraphSearcher.search (without the question embedding,
   measured apart as the search's own latency), and the matrix load that the cache saves.
Targets (issue 20): p95 <= 300 ms at 100k nodes, <= 50 ms on the multihop dev graph.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from bench.common import SHARED_DATA
from graph.query.ppr import build_matrix, personalized_pagerank, rank_passages, reset_vector


def _pct(values: list[float], p: float) -> float:
    return round(float(np.percentile(values, p)), 2)


def synthetic(nodes: int, seed: int = 7):
    rng = np.random.default_rng(seed)
    n_entities = int(nodes * 0.3)
    n_passages = nodes - n_entities
    popularity = 1.0 / np.arange(1, n_entities + 1) ** 0.8  # a few names everywhere, most rare
    popularity /= popularity.sum()
    sizes = rng.integers(3, 9, size=n_passages)
    drawn = rng.choice(n_entities, size=int(sizes.sum()), p=popularity)  # one draw: per passage is O(E) each
    ends = np.cumsum(sizes)
    mentions: dict[int, list[int]] = {}
    pairs: dict[tuple[int, int], float] = {}
    for passage in range(n_passages):
        named = np.unique(drawn[ends[passage] - sizes[passage]:ends[passage]])
        for e in named:
            mentions.setdefault(int(e), []).append(passage)
        for a in range(len(named)):
            for b in range(a + 1, len(named)):
                key = (int(named[a]), int(named[b]))
                pairs[key] = pairs.get(key, 0.0) + 1.0
    entities = [(f"e{e}", mentions.get(e, [])) for e in range(n_entities)]
    relationships = [(f"e{a}", f"e{b}", w) for (a, b), w in pairs.items()]
    return entities, relationships


def bench_synthetic(nodes: int, questions: int) -> dict:
    t0 = time.perf_counter()
    entities, relationships = synthetic(nodes)
    generated = time.perf_counter() - t0
    t0 = time.perf_counter()
    matrix = build_matrix(entities, relationships)
    built = time.perf_counter() - t0
    rng = np.random.default_rng(11)
    keys = [k for k, chunks in entities if chunks]
    latencies = []
    for _ in range(questions):
        linked = {keys[i]: 1.0 for i in rng.choice(len(keys), size=rng.integers(1, 4), replace=False)}
        # as graph_search seeds a walk: every passage's dense score (HippoRAG 2) and one first-hop passage
        seeds = dict(zip(matrix.chunk_ids.tolist(), rng.random(len(matrix.chunk_ids)).tolist()))
        head = [int(rng.choice(matrix.chunk_ids))]
        t0 = time.perf_counter()
        reset = reset_vector(matrix, linked, seeds, head=head)
        rank_passages(matrix, personalized_pagerank(matrix, reset), 30)
        latencies.append((time.perf_counter() - t0) * 1000)
    return {"nodes": matrix.nodes, "edges": matrix.edges, "entities": len(entities),
            "passages": len(matrix.chunk_ids), "relationships": len(relationships),
            "matrix_mb": round(matrix.nbytes / 2**20, 1), "generate_s": round(generated, 1),
            "build_matrix_s": round(built, 2), "ppr_p50_ms": _pct(latencies, 50), "ppr_p95_ms": _pct(latencies, 95)}


def bench_tenant(tenant: str, questions: int) -> dict | None:
    from core.database import open_database
    from core.embeddings import make_embedder
    from core.settings import Settings
    from graph.query.graph_search import GraphSearcher
    from evaluation.datasets import load_dataset

    settings = Settings()
    db = open_database(settings)
    try:
        graph = GraphSearcher(db, make_embedder(settings))
        level = graph.level(tenant, ["public"])
        if level is None:
            return None
        t0 = time.perf_counter()
        matrix, _ = graph.matrix(tenant, level.name)
        load_s = time.perf_counter() - t0
        if not matrix.nodes:
            return None
        dataset = load_dataset(SHARED_DATA / tenant.removeprefix("eval_"))
        asked = [q.question for q in dataset.scored_queries][:questions]
        graph.search(tenant, ["public"], asked[0], 10)  # warm-up: the model loads once
        walks, searches, links, dense = [], [], [], []
        for question in asked:
            vector = graph.embedder.embed_query(question)
            t0 = time.perf_counter()
            result = graph.search(tenant, ["public"], question, 10, vector=vector, level=level)
            searches.append((time.perf_counter() - t0) * 1000)
            walks.append(result.trace.get("ppr_ms", 0.0))
            dense.append(result.trace.get("dense_ms", 0.0))  # every passage's cosine, in SQL
            links.append(len(result.links))
        return {"tenant": tenant, "level": level.name, "nodes": matrix.nodes, "edges": matrix.edges,
                "matrix_mb": round(matrix.nbytes / 2**20, 2), "matrix_load_s": round(load_s, 2),
                "questions": len(asked), "mean_links": round(float(np.mean(links)), 2),
                "ppr_p50_ms": _pct(walks, 50), "ppr_p95_ms": _pct(walks, 95),
                "dense_p50_ms": _pct(dense, 50), "dense_p95_ms": _pct(dense, 95),
                "search_p50_ms": _pct(searches, 50), "search_p95_ms": _pct(searches, 95)}
    finally:
        db.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--tenant", default="eval_multihop")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    report = {"synthetic": bench_synthetic(args.nodes, args.questions), "tenant": bench_tenant(args.tenant, args.questions)}
    if args.json:
        print(json.dumps(report))
        return 0
    s = report["synthetic"]
    print(f"synthetic: {s['nodes']:,} nodes ({s['entities']:,} entities, {s['passages']:,} passages), {s['edges']:,} "
          f"matrix entries, {s['matrix_mb']} MB; build {s['build_matrix_s']} s; PPR p50 {s['ppr_p50_ms']} ms, "
          f"p95 {s['ppr_p95_ms']} ms")
    t = report["tenant"]
    if t is None:
        print(f"{args.tenant}: no graph (build it with `crossroads eval ../shared/data/multihop --config graph`)")
    else:
        print(f"{t['tenant']} level {t['level']}: {t['nodes']:,} nodes, {t['edges']:,} entries, {t['matrix_mb']} MB "
              f"(load {t['matrix_load_s']} s); PPR p50 {t['ppr_p50_ms']} ms, p95 {t['ppr_p95_ms']} ms; passage seeds "
              f"(SQL cosine of every passage) p50 {t['dense_p50_ms']} ms, p95 {t['dense_p95_ms']} ms; linking + "
              f"seeds + walk + SQL p50 {t['search_p50_ms']} ms, p95 {t['search_p95_ms']} ms; {t['mean_links']} links per question")
    return 0


if __name__ == "__main__":
    sys.exit(main())
