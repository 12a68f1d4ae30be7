"""bench-search's measurements: latency per leg, ANN recall against exact search, and the known-item
check of the full-text leg's candidate selection (see bench/search.py for the corpus and the run)."""
from __future__ import annotations

import statistics
import threading
import time

import numpy as np
from psycopg import sql

from bench.synthetic_corpus import DIM, MODEL, PROFILES, TENANT, PrecomputedQueryEmbedder, QuerySpec
from core.database import Database
from vector import store
from vector.search import sql as search_sql
from vector.search.hybrid import HybridSearcher


def percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    a = np.asarray(values)
    return {"p50": round(float(np.percentile(a, 50)), 2), "p95": round(float(np.percentile(a, 95)), 2),
            "p99": round(float(np.percentile(a, 99)), 2), "mean": round(float(a.mean()), 2),
            "max": round(float(a.max()), 2)}


def exact_neighbours(db: Database, groups: list[str], vector: np.ndarray, k: int) -> list[int]:
    """Exact top-k with the vector leg's filter: ORDER BY an expression no index serves."""
    with db.connection() as conn, search_sql.read_only(conn):
        conn.execute("SET LOCAL enable_indexscan = off")
        rows = conn.execute(
            "SELECT id FROM chunks WHERE embed_model = %(model)s AND tenant_id = %(tenant)s AND acl && %(groups)s"
            " ORDER BY embedding <=> %(vec)s, id LIMIT %(k)s",
            {"model": MODEL, "tenant": TENANT, "groups": groups, "vec": vector, "k": k},
        ).fetchall()
    return [int(r[0]) for r in rows]


def vector_plan(db: Database, groups: list[str], vector: np.ndarray, ef: int, limit: int) -> str:
    """How the planner runs the vector leg for this filter: `hnsw` or the exact alternative it chose."""
    local = {"hnsw.ef_search": str(ef)}
    if db.supports_iterative_scan:
        local["hnsw.iterative_scan"] = "strict_order"
    with db.connection() as conn, search_sql.read_only(conn):
        dimension = search_sql.set_local_and_dimension(conn, local, model=MODEL, staged=False) or DIM
        statement = sql.SQL("EXPLAIN (FORMAT JSON) ") + search_sql.vector_query(MODEL, dimension, TENANT)
        plan = conn.execute(statement, {"vec": vector, "tenant": TENANT, "groups": groups, "limit": limit}).fetchone()[0]
    nodes = []

    def walk(node):
        nodes.append(node["Node Type"] + (f" {node['Index Name']}" if "Index Name" in node else ""))
        for child in node.get("Plans", []):
            walk(child)

    walk(plan[0]["Plan"])
    if any(store.vector_index_name(MODEL) in n for n in nodes):
        return "hnsw"
    return "exact: " + " > ".join(n.replace(" on chunks", "") for n in nodes)


class StepTimer:
    """Times the full-text leg's two SQL steps (document frequencies, BM25 scoring) by wrapping
    `vector.search.sql`'s functions for the duration of a measurement; queries run one at a time."""

    STEPS = {"corpus_stats": "fts_stats", "lexeme_frequencies": "fts_df", "bm25_leg": "fts_score"}

    def __init__(self):
        self.lock = threading.Lock()
        self.current: dict[str, float] = {}
        self.originals = {name: getattr(search_sql, name) for name in self.STEPS}

    def _wrap(self, name: str):
        original, label = self.originals[name], self.STEPS[name]

        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                with self.lock:
                    self.current[label] = self.current.get(label, 0.0) + (time.perf_counter() - t0) * 1000

        return timed

    def __enter__(self) -> "StepTimer":
        for name in self.STEPS:
            setattr(search_sql, name, self._wrap(name))
        return self

    def __exit__(self, *exc) -> None:
        for name, original in self.originals.items():
            setattr(search_sql, name, original)

    def take(self) -> dict[str, float]:
        with self.lock:
            out, self.current = self.current, {}
        return out


def target_ids(db: Database, queries: dict[str, list[QuerySpec]]) -> dict[tuple[str, int], int]:
    """(doc_id, chunk_no) -> chunk id of every chunk a query was made from."""
    keys = sorted({s.target for specs in queries.values() for s in specs if s.target})
    with db.connection() as conn:
        rows = conn.execute(
            "SELECT c.doc_id, c.chunk_no, c.id FROM chunks c"
            " JOIN unnest(%s::text[], %s::int[]) AS k(doc_id, chunk_no) USING (doc_id, chunk_no)"
            " WHERE c.tenant_id = %s", ([k[0] for k in keys], [k[1] for k in keys], TENANT)).fetchall()
    return {(d, n): int(i) for d, n, i in rows}


def measure(db: Database, embedder: PrecomputedQueryEmbedder, queries: dict[str, list[QuerySpec]], ef_values: list[int],
            exact: dict[str, list[list[int]]], warmup: int, candidates: int, max_scored: int,
            statement_timeout_ms: int = 0) -> list[dict]:
    """Latency per leg and ANN recall, plus a known-item check of the full-text leg's candidate
    selection: a "chunk" query holds two words of the chunk it was made from, so that chunk should
    be among the leg's candidates (`fts_known_item`) and the hybrid top 10 (`hybrid_known_item`)."""
    targets = target_ids(db, queries)
    results = []
    for ef in ef_values:
        with HybridSearcher(db, embedder, ef_search=ef, candidates=candidates, bm25_max_scored=max_scored,
                            statement_timeout_ms=statement_timeout_ms) as searcher:
            for profile, specs in queries.items():
                groups = PROFILES[profile]
                for spec in specs[:warmup]:
                    searcher.search(TENANT, groups, spec.text, k=10, mode="hybrid")
                hybrid, legs = [], {"vector": [], "fts": [], "fetch": [], "fts_df": [], "fts_score": []}
                degraded, known, fts_found, hybrid_found = 0, 0, 0, 0
                with StepTimer() as steps:
                    for spec in specs[warmup:]:
                        steps.take()
                        t0 = time.perf_counter()
                        result = searcher.search(TENANT, groups, spec.text, k=10, mode="hybrid")
                        hybrid.append((time.perf_counter() - t0) * 1000)
                        degraded += result.degraded
                        if spec.target in targets:
                            known += 1
                            fts_found += targets[spec.target] in {e["id"] for e in result.trace["stages"].get("fts", [])}
                            hybrid_found += targets[spec.target] in {h.id for h in result.hits}
                        timings = {**result.trace["timings_ms"], **steps.take()}
                        for name in legs:
                            legs[name].append(timings.get(name, 0.0))
                vector_ms, r10, r50, short = [], [], [], 0
                for i, spec in enumerate(specs):
                    t0 = time.perf_counter()
                    with db.connection() as conn, search_sql.read_only(conn):
                        found = search_sql.vector_leg(
                            conn, tenant=TENANT, groups=groups, model=MODEL, fallback_dimension=DIM,
                            vector=embedder.embed_query(spec.text), limit=candidates, ef_search=ef,
                            iterative_scan=db.supports_iterative_scan)
                    vector_ms.append((time.perf_counter() - t0) * 1000)
                    ids = [c for c, _ in sorted(found, key=lambda p: (-p[1], p[0]))]
                    short += len(ids) < candidates
                    if i < len(exact[profile]):
                        truth = exact[profile][i]
                        r10.append(len(set(ids[:10]) & set(truth[:10])) / max(1, min(10, len(truth))))
                        r50.append(len(set(ids) & set(truth)) / max(1, len(truth)))
                row = {
                    "ef_search": ef, "profile": profile, "groups": groups, "queries": len(specs),
                    "hybrid_ms": percentiles(hybrid),
                    "hybrid_legs_ms": {name: percentiles(v) for name, v in legs.items()},
                    "vector_leg_ms": percentiles(vector_ms),
                    "recall_at_10": round(statistics.fmean(r10), 4) if r10 else None,
                    "recall_at_50": round(statistics.fmean(r50), 4) if r50 else None,
                    "recall_queries": len(r10), "recall_at_10_min": round(min(r10), 2) if r10 else None,
                    "recall_at_10_below_half": round(sum(x < 0.5 for x in r10) / len(r10), 3) if r10 else None,
                    "short_results": short, "degraded": degraded, "known_item_queries": known,
                    "fts_known_item": round(fts_found / known, 3) if known else None,
                    "hybrid_known_item": round(hybrid_found / known, 3) if known else None,
                    "plan": vector_plan(db, groups, specs[0].vector, ef, candidates),
                }
                results.append(row)
                print(f"  ef={ef:<4} {profile:<12} hybrid p50 {row['hybrid_ms']['p50']:7.1f} p95 {row['hybrid_ms']['p95']:7.1f}"
                      f" | vector p95 {row['vector_leg_ms']['p95']:7.1f} | recall@10 {row['recall_at_10']}", flush=True)
    return results
