"""Per-tenant partial HNSW indexes (today's layout) against chunks partitioned by tenant.

    .venv/bin/python -m bench.partitions [--tenants 20] [--chunks-per-tenant 50000] [--dim 384]
                                         [--queries 200] [--ef-search 40 400] [--json]

N tenants x M chunks of random unit vectors (fixed seed) in a scratch database. First the default
layout: the model's shared HNSW graph, then each tenant's partial graph (vector/hnsw_index.py, built
CONCURRENTLY as ingest builds it); then the same database converted (`crossroads db partition-chunks`,
vector/partitions.py: the copy and every partition's graphs, in one transaction). For each layout and
ef_search: latency p50/p95 of the vector leg's statement (the tenant as a literal, the ACL filter,
iterative scan in strict order) over random unit queries of random tenants, and recall@10 against the
exact top 10 (numpy over the tenant's vectors). The walk is forced (no sequential scan or sort), as
in bench/tenant_recall.py: the planner would price a small tenant's exact scan lower and hide the graph.
Random vectors are a hard case for any HNSW graph (no clusters), so the recall is lower than on text.
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np
from pgvector.psycopg import register_vector
from psycopg import sql

from bench.common import scratch_database
from core.settings import Settings
from vector import hnsw_index, partitions, store

MODEL = "bench/random-unit"
GROUP = "staff"
K = 10
CHUNKS_PER_DOC = 1000


def unit_vectors(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    v = rng.standard_normal((n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def load(db, tenants: list[str], vectors: dict[str, np.ndarray]) -> float:
    started = time.perf_counter()
    with db.connection() as conn:
        register_vector(conn)
        for tenant in tenants:
            docs = range(0, len(vectors[tenant]), CHUNKS_PER_DOC)
            with conn.cursor() as cur:
                cur.executemany("INSERT INTO documents (tenant_id, doc_id, lang, acl, content_hash, index_key)"
                                " VALUES (%s, %s, 'simple', %s, 'h', 'bench')",
                                [(tenant, f"d{d // CHUNKS_PER_DOC}", [GROUP]) for d in docs])
            copy_sql = "COPY chunks (tenant_id, doc_id, chunk_no, content, acl, content_hash, lang, embedding, " \
                       "embed_model) FROM STDIN (FORMAT BINARY)"
            with conn.cursor() as cur, cur.copy(copy_sql) as copy:
                copy.set_types(["text", "text", "int4", "text", "text[]", "text", "text", "vector", "text"])
                for i, vec in enumerate(vectors[tenant]):
                    copy.write_row((tenant, f"d{i // CHUNKS_PER_DOC}", i, "x", [GROUP], "h", "simple", vec, MODEL))
            conn.commit()
        conn.execute("ANALYZE chunks")
    return time.perf_counter() - started


def vector_leg(dim: int, tenant: str) -> sql.Composed:
    """What the vector leg runs for one tenant (vector/search/sql.py): the tenant as a literal."""
    return sql.SQL(
        "SELECT chunk_no FROM chunks WHERE embed_model = {model} AND tenant_id = {tenant} AND acl && {groups}"
        " ORDER BY embedding::vector({dim}) <=> %s::vector({dim}) LIMIT {k}"
    ).format(model=sql.Literal(MODEL), tenant=sql.Literal(tenant), groups=sql.Literal([GROUP]),
             dim=sql.Literal(dim), k=sql.Literal(K))


def measure(db, dim: int, queries: list[tuple[str, np.ndarray]], truth: list[set[int]], ef_search: int) -> dict:
    latencies, recalls = [], []
    with db.connection() as conn:
        register_vector(conn)
        conn.execute(sql.SQL("SET hnsw.ef_search = {}").format(sql.Literal(ef_search)))
        conn.execute("SET hnsw.iterative_scan = strict_order; SET enable_seqscan = off; SET enable_sort = off")
        statements = {tenant: vector_leg(dim, tenant) for tenant, _ in queries}
        for tenant, q in queries[:20]:  # warm the caches: the first queries of a graph read it from disk
            conn.execute(statements[tenant], (q,)).fetchall()
        for (tenant, q), exact in zip(queries, truth):
            started = time.perf_counter()
            rows = conn.execute(statements[tenant], (q,)).fetchall()
            latencies.append((time.perf_counter() - started) * 1000)
            recalls.append(len({n for (n,) in rows} & exact) / K)  # chunk_no: the row of the tenant's vectors
        conn.rollback()
    return {"ef_search": ef_search, "p50_ms": round(float(np.percentile(latencies, 50)), 2),
            "p95_ms": round(float(np.percentile(latencies, 95)), 2), "recall_at_10": round(float(np.mean(recalls)), 4),
            "recall_min": round(float(np.min(recalls)), 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tenants", type=int, default=20)
    parser.add_argument("--chunks-per-tenant", type=int, default=50_000)
    parser.add_argument("--dim", type=int, default=384, help="the default model's (multilingual-e5-small)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--ef-search", type=int, nargs="+", default=[40, 400])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    tenants = [f"bench_t{i:02d}" for i in range(args.tenants)]
    vectors = {t: unit_vectors(rng, args.chunks_per_tenant, args.dim) for t in tenants}
    picks = rng.integers(0, len(tenants), args.queries)
    queries = [(tenants[i], unit_vectors(rng, 1, args.dim)[0]) for i in picks]
    truth = [set(np.argsort(-(vectors[t] @ q), kind="stable")[:K].tolist()) for t, q in queries]
    result = {"tenants": args.tenants, "chunks_per_tenant": args.chunks_per_tenant, "dim": args.dim,
              "queries": args.queries, "seed": args.seed}

    with scratch_database(Settings()) as db:
        result["load_s"] = round(load(db, tenants, vectors), 1)
        started = time.perf_counter()
        with db.connection() as conn:
            store.ensure_vector_index(conn, MODEL, args.dim)
        shared_s = time.perf_counter() - started
        started = time.perf_counter()
        built = hnsw_index.ensure_tenants(db, min_rows=1)
        tenant_s = time.perf_counter() - started
        assert sum(1 for b in built if b["built"]) == len(tenants), built
        result["tenant_indexes"] = {
            "build_s": {"shared_graph": round(shared_s, 1), "tenant_graphs": round(tenant_s, 1)},
            "search": [measure(db, args.dim, queries, truth, ef) for ef in args.ef_search]}
        with db.connection() as conn:
            conversion = partitions.partition(conn)
        result["partitions"] = {
            "build_s": {"conversion": conversion.seconds},
            "search": [measure(db, args.dim, queries, truth, ef) for ef in args.ef_search]}

    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"{args.tenants} tenants x {args.chunks_per_tenant} chunks, dim {args.dim}, {args.queries} queries, "
          f"seed {args.seed}; load {result['load_s']} s")
    ti, pa = result["tenant_indexes"], result["partitions"]
    print(f"build: per-tenant partial graphs {ti['build_s']['tenant_graphs']} s (after the shared graph, "
          f"{ti['build_s']['shared_graph']} s); partition conversion (copy + every partition's indexes) "
          f"{pa['build_s']['conversion']} s")
    print(f"{'layout':16} {'ef_search':>9} {'p50 ms':>8} {'p95 ms':>8} {'recall@10':>10} {'min':>5}")
    for name, part in (("tenant indexes", ti), ("partitions", pa)):
        for m in part["search"]:
            print(f"{name:16} {m['ef_search']:>9} {m['p50_ms']:>8} {m['p95_ms']:>8} {m['recall_at_10']:>10} "
                  f"{m['recall_min']:>5}")


if __name__ == "__main__":
    main()
