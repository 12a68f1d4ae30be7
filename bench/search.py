"""`make bench-search`: latency and ANN recall of hybrid search on a synthetic, access-controlled corpus.

    .venv/bin/python -m bench.search [--rows 100000] [--queries 200] [--ef-search 100 200 400] [--keep | --reuse DB]

Generates a corpus straight into a scratch database (documents + chunks by binary COPY, no
embedding model involved), builds the HNSW index with `vector.store.ensure_vector_index`, then
runs the real `HybridSearcher` (mode "hybrid", no rerank) and its vector leg alone, for several
ACL filters of different selectivity and each `--ef-search`. Reports p50 / p95 / p99 latency, the
vector leg's recall@10 (and @50) against exact search with the same filter, the index build time
and size, and how long each step took. Prints a table, then one JSON line.

The synthetic corpus, and why it looks like this:
- vectors (384-d, unit length) are clustered, not uniform noise (on which no ANN index works
  and "nearest" means nothing): 50 super-topics -> 1,000 topic centroids with skewed popularity;
  a chunk is its topic's centroid plus Gaussian noise in a 32-d subspace of its own topic (the
  low intrinsic dimension of text embeddings) plus a little isotropic noise. A document has one
  topic; 80% of its chunks use it, the rest a random topic.
- text is English words (taken from ../shared/data, else the repo's fixtures) drawn from a Zipf
  law over their real frequency ranks, 25% of them from the chunk's topic words, 80-200 words per
  chunk, so the `english` configuration stems real words and posting lists have real shapes
  (stop words everywhere, a long tail of rare terms).
- ACL per document, copied to its chunks: 60% `public`, 25% `staff`, 10% one of four
  departments, 5% one of five teams (~1% each).
- queries: 80% a readable chunk's vector perturbed to cosine ~0.85 with words from that chunk in
  an English question; 20% a fresh draw from a topic with that topic's words. The embedder is a
  `PrecomputedQueryEmbedder` (query text -> prepared vector), a harness only.
- loading: binary COPY over `--copy-workers` connections; the chunks' secondary indexes (GIN on
  tsv and acl, btrees) are dropped for the load and recreated from their own definitions after it
  (timed separately); the HNSW index is built last, by `ensure_vector_index`.
- exact search: the same filter with ORDER BY `embedding <=> q` on the uncast column, an
  expression no index serves, so it is always a full scan of the readable rows.
"""
from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np
from psycopg import sql

from bench.common import scratch_database
from bench.search_measure import exact_neighbours, measure, percentiles
from bench.synthetic_corpus import (
    DIM, GROUPS, MODEL, N_TOPICS, PROFILES, PrecomputedQueryEmbedder, Space, Words,
    build_queries, load_corpus, load_vocabulary, make_layout, pick_targets, recapture_targets,
)
from core import embedded
from core.database import Database, resolve_url
from core.settings import Settings
from vector import store

# --- main -----------------------------------------------------------------------------------------

def build_index(db: Database, build_memory: str | None) -> dict:
    notices: list[str] = []
    with db.connection() as conn:
        def on_notice(diag):
            notices.append(diag.message_primary)

        conn.add_notice_handler(on_notice)
        started = time.perf_counter()
        if build_memory:
            # Same index (name and definition as ensure_vector_index), built with more memory first;
            # ensure_vector_index then finds it (IF NOT EXISTS) and registers the model.
            with conn.transaction():
                conn.execute(sql.SQL("SET LOCAL maintenance_work_mem = {}").format(sql.Literal(build_memory)))
                conn.execute(sql.SQL(
                    "CREATE INDEX IF NOT EXISTS {name} ON chunks USING hnsw ((embedding::vector({dim})) vector_cosine_ops)"
                    " WITH ({build}) WHERE embed_model = {model}"
                ).format(name=sql.Identifier(store.vector_index_name(MODEL)), dim=sql.Literal(DIM),
                         build=sql.SQL(store.HNSW_BUILD), model=sql.Literal(MODEL)))
        built = store.ensure_vector_index(conn, MODEL, DIM)
        conn.commit()
        seconds = time.perf_counter() - started
        conn.remove_notice_handler(on_notice)
        started = time.perf_counter()
        conn.autocommit = True
        try:
            conn.execute("VACUUM (ANALYZE) chunks")
            conn.execute("ANALYZE documents")
        finally:
            conn.autocommit = False
        analyse_s = time.perf_counter() - started
    return {"built": built, "build_s": round(seconds, 1), **describe_index(db),
            "build_memory": build_memory or "512MB (ensure_vector_index)",
            "notices": notices, "vacuum_analyze_s": round(analyse_s, 1)}


def describe_index(db: Database) -> dict:
    name = store.vector_index_name(MODEL)
    with db.connection() as conn:
        size, definition = conn.execute(
            "SELECT pg_relation_size(%s::regclass), pg_get_indexdef(%s::regclass)", (name, name)).fetchone()
        table, total = conn.execute(
            "SELECT pg_relation_size('chunks'), pg_total_relation_size('chunks')").fetchone()
    return {"index_bytes": size, "index_mb": round(size / 2**20, 1), "definition": definition,
            "table_heap_mb": round(table / 2**20, 1), "table_total_mb": round(total / 2**20, 1)}


def reused_corpus(db: Database, rows: int) -> dict:
    """The kept corpus of an earlier run, checked to be the one this run's arguments describe."""
    with db.connection() as conn:
        found = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
    if found != rows:
        raise SystemExit(f"the reused database holds {found:,} chunks, not --rows {rows:,}: pass the --rows and"
                         " --seed of the run that kept it")
    print(f"reusing the kept corpus ({found:,} chunks): load and index build skipped", flush=True)
    return {"reused": True, **describe_index(db)}


def print_table(results: list[dict], default_ef: int) -> None:
    print()
    print(f"{'ef':>4} {'profile':<12} {'hybrid p50':>10} {'p95':>7} {'p99':>7} | {'vector p50':>10} {'p95':>7} {'p99':>7}"
          f" | {'fts p50':>7} {'p95':>7} {'df p50':>6} {'bm25 p50':>8} | {'R@10':>6} {'R@50':>6} | {'KI fts':>6} {'KI@10':>6} | plan")
    for r in results:
        h, v, legs = r["hybrid_ms"], r["vector_leg_ms"], r["hybrid_legs_ms"]
        mark = "*" if r["ef_search"] == default_ef else " "
        recall = [f"{x:>6.3f}" if x is not None else f"{'-':>6}" for x in (r["recall_at_10"], r["recall_at_50"])]
        print(f"{r['ef_search']:>3}{mark} {r['profile']:<12} {h['p50']:>10.1f} {h['p95']:>7.1f} {h['p99']:>7.1f} |"
              f" {v['p50']:>10.1f} {v['p95']:>7.1f} {v['p99']:>7.1f} | {legs['fts']['p50']:>7.1f} {legs['fts']['p95']:>7.1f}"
              f" {legs.get('fts_df', {}).get('p50', 0):>6.1f} {legs.get('fts_score', {}).get('p50', 0):>8.1f} |"
              f" {recall[0]} {recall[1]} | {r['fts_known_item'] or 0:>6.3f} {r['hybrid_known_item'] or 0:>6.3f} | {r['plan']}")
    print("(ms; * = the default hnsw_ef_search; hybrid = HybridSearcher.search, mode hybrid, no rerank, k=10;"
          " vector = the vector leg alone; fts = the full-text leg inside the hybrid search, df = its document-frequency"
          " counts, bm25 = its scoring query; R@k = the vector leg's recall against exact search, same filter;"
          " KI = share of queries made from a chunk that find it: among the full-text candidates, in the hybrid top 10)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000, help="chunks to generate")
    parser.add_argument("--queries", type=int, default=200, help="queries per ACL profile")
    parser.add_argument("--ef-search", type=int, nargs="+", default=None,
                        help="hnsw.ef_search values (default: 100, 200, 400 and the configured one)")
    parser.add_argument("--recall-queries", type=int, default=None,
                        help="queries per profile checked against exact search (default: all; 50 above 200k rows)")
    parser.add_argument("--profiles", nargs="+", choices=list(PROFILES), default=list(PROFILES),
                        help="ACL profiles to measure (default: all)")
    parser.add_argument("--warmup", type=int, default=20, help="untimed queries before each measurement")
    parser.add_argument("--batch", type=int, default=20_000, help="rows generated and copied per batch")
    parser.add_argument("--copy-workers", type=int, default=2, help="parallel COPY connections")
    parser.add_argument("--build-memory", default=None,
                        help="maintenance_work_mem for the HNSW build (default: ensure_vector_index's own 512MB)")
    parser.add_argument("--max-scored", type=int, default=None,
                        help="rows the full-text leg scores (default: CROSSROADS_BM25_MAX_SCORED), to compare budgets")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--keep", action="store_true", help="keep the scratch database (its name is printed)")
    parser.add_argument("--reuse", metavar="DATABASE", default=None,
                        help="measure on a database an earlier --keep run left (same --rows and --seed): no load, no build")
    args = parser.parse_args()

    settings = Settings()
    max_scored = args.max_scored or settings.bm25_max_scored
    ef_values = args.ef_search or sorted({settings.hnsw_ef_search, 100, 200, 400})
    steps: dict[str, float] = {}
    wall = time.perf_counter()
    rng = np.random.default_rng(args.seed)

    started = time.perf_counter()
    vocabulary, vocab_origin = load_vocabulary()
    words = Words(vocabulary, rng)
    space = Space.make(rng)
    layout = make_layout(args.rows, rng)
    plan = pick_targets(layout, args.queries, rng)
    steps["layout_s"] = time.perf_counter() - started
    shares = {g: round(float(np.mean(layout.acl == i)), 4) for i, g in enumerate(GROUPS)}
    selectivity = {p: round(float(np.mean(np.isin(layout.acl, [GROUPS.index(g) for g in gs]))), 4)
                   for p, gs in PROFILES.items()}
    print(f"corpus: {args.rows:,} chunks in {len(layout.doc_acl):,} documents, {N_TOPICS} topics, "
          f"vocabulary {len(vocabulary):,} words from {vocab_origin}; {os.cpu_count()} cores", flush=True)
    print(f"ACL profiles (share of chunks readable): {selectivity}", flush=True)

    with scratch_database(settings, keep=args.keep, reuse=args.reuse) as db:
        if args.reuse:
            index = reused_corpus(db, args.rows)
            recapture_targets(layout, space, words, plan, args.batch, args.seed)
        else:
            load = load_corpus(db, layout, space, words, plan, args.batch, args.seed, args.copy_workers)
            steps.update({k: v for k, v in load.items() if k.endswith("_s")})
            print(f"load: documents {load['documents_copy_s']:.1f} s, chunks COPY {load['chunks_copy_s']:.1f} s "
                  f"({args.rows / load['chunks_copy_s']:,.0f} rows/s, of which generating {load['generate_s']:.1f} s), "
                  f"secondary indexes {load['secondary_indexes_s']:.1f} s, "
                  f"full-text statistics compacted in {load['fulltext_stats_compact_s']:.1f} s", flush=True)
            index = build_index(db, args.build_memory)
            steps["hnsw_build_s"] = index["build_s"]
            steps["vacuum_analyze_s"] = index["vacuum_analyze_s"]
            print(f"HNSW build: {index['build_s']:.1f} s, index {index['index_mb']:,.1f} MB "
                  f"(table {index['table_total_mb']:,.1f} MB with indexes); VACUUM ANALYZE {index['vacuum_analyze_s']:.1f} s"
                  + (f"; notices: {index['notices']}" if index["notices"] else ""), flush=True)

        queries = build_queries(layout, space, words, plan, args.queries, args.seed)
        queries = {p: specs for p, specs in queries.items() if p in args.profiles}
        embedder = PrecomputedQueryEmbedder(MODEL, {s.text: s.vector for specs in queries.values() for s in specs})

        started = time.perf_counter()
        exact: dict[str, list[list[int]]] = {}
        # exact search scans every readable row (seconds per query at 1M): a sample there
        limit = args.recall_queries if args.recall_queries is not None else (
            args.queries if args.rows <= 200_000 else min(args.queries, 50))
        exact_ms: dict[str, list[float]] = {}
        for profile, specs in queries.items():
            exact[profile], exact_ms[profile] = [], []
            for spec in specs[:limit]:
                t0 = time.perf_counter()
                exact[profile].append(exact_neighbours(db, PROFILES[profile], spec.vector, settings.search_candidates))
                exact_ms[profile].append((time.perf_counter() - t0) * 1000)
        steps["exact_search_s"] = time.perf_counter() - started
        print(f"exact search: {steps['exact_search_s']:.1f} s (p50 per query: "
              + ", ".join(f"{p} {percentiles(v).get('p50', 0):.0f} ms" for p, v in exact_ms.items()) + ")", flush=True)

        load_before = os.getloadavg()
        started = time.perf_counter()
        # as served: with the statement timeout (one more round trip for the vector leg and the fetch)
        results = measure(db, embedder, queries, ef_values, exact, args.warmup, settings.search_candidates, max_scored,
                          settings.search_statement_timeout_ms)
        steps["measure_s"] = time.perf_counter() - started
        load_after = os.getloadavg()
        # the numbers depend on whether the corpus fits in shared_buffers and on huge pages: say which
        server = None if settings.database_url else embedded.memory_report(resolve_url(settings))

    steps = {k: round(v, 1) for k, v in steps.items()}
    print_table(results, settings.hnsw_ef_search)
    default = [r for r in results if r["ef_search"] == settings.hnsw_ef_search]
    goal = None
    if default:
        worst_p95 = max(r["hybrid_ms"]["p95"] for r in default)
        recalls = [r["recall_at_10"] for r in default if r["recall_at_10"] is not None]
        worst_recall = min(recalls) if recalls else None  # None with --recall-queries 0
        goal = {"ef_search": settings.hnsw_ef_search, "worst_hybrid_p95_ms": worst_p95, "worst_recall_at_10": worst_recall,
                "p95_le_30ms": worst_p95 <= 30, "recall_ge_0_95": worst_recall >= 0.95 if recalls else None}
        print(f"\nat the default ef_search={settings.hnsw_ef_search}: worst hybrid p95 {worst_p95:.1f} ms (goal <= 30 at 1M),"
              f" worst recall@10 {'not measured' if worst_recall is None else f'{worst_recall:.3f}'} (goal >= 0.95)")
    print(f"steps (s): {steps}; total {time.perf_counter() - wall:.0f} s")
    if server:
        print(f"server: shared_buffers {server['shared_buffers']}, huge pages {server['huge_pages']}, search data "
              f"{server['search_data_bytes'] / 2**30:.1f} GB" + (f"; {server['advice']}" if server["advice"] else ""))
    # other work on the machine inflates latency: the load average says how busy it was
    print(f"load average (1/5/15 min) before measuring {tuple(round(x, 1) for x in load_before)},"
          f" after {tuple(round(x, 1) for x in load_after)} on {os.cpu_count()} cores")
    print(json.dumps({
        "rows": args.rows, "max_scored": max_scored, "documents": int(len(layout.doc_acl)), "dimension": DIM, "queries_per_profile": args.queries,
        "cores": os.cpu_count(), "group_shares": shares, "profile_selectivity": selectivity, "vocabulary": len(vocabulary),
        "vocabulary_source": vocab_origin, "steps_s": steps, "index": index, "results": results, "goal": goal,
        "exact_search_ms": {p: percentiles(v) for p, v in exact_ms.items()},
        "server": server, "load_average": {"before_measure": [round(x, 2) for x in load_before], "after_measure": [round(x, 2) for x in load_after]},
        "total_s": round(time.perf_counter() - wall, 1),
    }))


if __name__ == "__main__":
    main()
