"""`make eval-agentic`: does the agentic multi-hop loop find all the evidence a single search misses?

    .venv/bin/python -m bench.multihop_agentic [--json] [--limit N] [--planner offline|llm]
        [--threshold] [--graph] [--max-iterations 3 --max-searches 8 --k 5 --max-evidence 24 --max-context 10]

On ../shared/data/multihop (MuSiQue 2-4 hop and HotpotQA bridge / comparison questions, each with
2-4 gold paragraphs; corpus `_id`s are the doc ids of tenant `eval_multihop`, group `public`), the
same run compares, question by question on the same index:
- single: one hybrid+rerank search of the question, top 10 passages;
- agentic: `router.agentic.agentic_search` with the offline planner (or the LLM planner, which
  needs ANTHROPIC_API_KEY) and the final context of at most `max_context` passages
  (`AgenticResult.context()`);
- with --graph: hybrid+graph (one search fused with personalized PageRank over the tenant's offline
  graph, router/graph_leg.py) and agentic+graph (the loop over hybrid+graph searches, as the router's
  multi-hop route runs it).
Metric: evidence recall@10 = the fraction of questions whose gold paragraphs are ALL among the
passages given to the answer (document level: a gold paragraph counts when any chunk of it is
there). Also per question type, the recall of everything the loop collected (before the context
cut), searches / rounds per question, stop reasons, degraded searches and latency p50 / p95.

The corpus must already be indexed (`crossroads eval ../shared/data/multihop` does it; embedding
1,470 paragraphs is slow on a small CPU): this bench never ingests unless `--index` is given (a
sync: free when already indexed). The reranker's score cut is off by default, as in `crossroads
eval` (ranking evaluation); `--threshold` applies the configured cut to both routes.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from collections import Counter, defaultdict

from bench.common import SHARED_DATA
from core.settings import Settings
from answers.question import Question

DATASET = "multihop"
TENANT = "eval_multihop"
GROUPS = ["public"]
MODE = "hybrid+rerank"


def _pct(values: list[float], p: float) -> float | None:
    from evaluation.metrics import percentile

    return round(percentile(values, p), 1) if values else None


def _all_in(gold: set[str], docs: list[str | None]) -> bool:
    return gold <= {d for d in docs if d}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    parser.add_argument("--limit", type=int, default=None, help="first N questions only")
    parser.add_argument("--planner", choices=["offline", "llm"], default="offline")
    parser.add_argument("--threshold", action="store_true", help="apply the configured reranker score cut")
    parser.add_argument("--index", action="store_true", help="index the corpus first if needed (slow the first time)")
    parser.add_argument("--max-iterations", type=int, default=None)
    parser.add_argument("--max-searches", type=int, default=None)
    parser.add_argument("--k", type=int, default=None)
    parser.add_argument("--max-evidence", type=int, default=None)
    parser.add_argument("--max-context", type=int, default=None)
    parser.add_argument("--misses", action="store_true", help="list the questions the agentic route missed")
    parser.add_argument("--graph", action="store_true",
                        help="also the graph leg (personalized PageRank over the tenant's offline graph, built if "
                             "missing): one hybrid+graph search and the agentic loop over hybrid+graph")
    args = parser.parse_args(argv)

    from api.cli.search import make_searcher
    from core.database import open_database
    from core.embeddings import make_embedder
    from core.llm.client import make_llm
    from core.llm.usage import UsageMeter
    from router.agentic import Limits, agentic_search
    from router.planner_llm import LLMPlanner
    from router.planner_offline import OfflinePlanner
    from router.evidence_search import HybridPassageSearcher
    from vector.search import fulltext_sql
    from evaluation.datasets import load_dataset

    overrides = {name: getattr(args, name) for name in ("max_iterations", "max_searches", "k", "max_evidence",
                                                         "max_context") if getattr(args, name) is not None}
    limits = dataclasses.replace(Limits(), **overrides)
    settings = Settings()
    dataset = load_dataset(SHARED_DATA / DATASET)
    queries = [q for q in dataset.scored_queries if len(q.relevant) >= 1]
    if args.limit:
        queries = queries[: args.limit]

    meter = UsageMeter()
    if args.planner == "llm":
        llm = make_llm(settings, meter)
        if llm is None:
            print("ANTHROPIC_API_KEY is not set: the LLM planner needs it (use --planner offline). Exit 0.")
            return 0
        planner = LLMPlanner(llm)
    else:
        planner = OfflinePlanner()

    db = open_database(settings)
    try:
        embedder = make_embedder(settings)
        if args.index:
            from evaluation.runner import index_dataset

            index_dataset(db, embedder, settings, dataset)
        with db.connection() as conn:
            indexed, _, _ = fulltext_sql.corpus_stats(conn, tenant=TENANT, groups=GROUPS)
        if not indexed:
            print(f"tenant {TENANT} has no chunks: index it first (`crossroads eval {SHARED_DATA / DATASET}` "
                  "or this bench with --index).", file=sys.stderr)
            return 2
        graph = None
        if args.graph:
            from evaluation.graph_configs import ensure_offline_graph
            from graph.query.graph_search import GraphSearcher

            ensure_offline_graph(db, TENANT, embedder)
            graph = GraphSearcher(db, embedder)
        with make_searcher(db, settings, embedder=embedder) as searcher:  # as the router builds it
            searcher.search(TENANT, GROUPS, "warm-up", k=1, mode=MODE)  # load models before timing
            rows = []
            for n, q in enumerate(queries, start=1):
                gold = set(q.relevant)
                t0 = time.perf_counter()
                single = searcher.search(TENANT, GROUPS, q.question, k=limits.max_context, mode=MODE,
                                         apply_threshold=args.threshold)
                single_ms = (time.perf_counter() - t0) * 1000
                passages = HybridPassageSearcher(searcher, TENANT, GROUPS, MODE, keep_traces=False,
                                                 apply_threshold=args.threshold)
                t0 = time.perf_counter()
                result = agentic_search(passages, planner, Question(q.question), limits)
                context = result.context()
                agentic_ms = (time.perf_counter() - t0) * 1000
                rows.append({
                    "qid": q.qid, "qtype": q.qtype or "?", "question": q.question, "gold": sorted(gold),
                    "single": _all_in(gold, [h.doc_id for h in single.hits]),
                    "agentic": _all_in(gold, [p.doc_id for p in context]),
                    "collected": _all_in(gold, [p.doc_id for p in result.evidence]),
                    "single_ms": single_ms, "agentic_ms": agentic_ms,
                    "searches": result.searches, "iterations": result.iterations,
                    "stop_reason": result.stop_reason, "partial": result.partial,
                    "degraded": single.degraded or passages.degraded, "queries": result.asked,
                    "missing": sorted(gold - {p.doc_id for p in context}),
                    "llm_fallbacks": sum(1 for r in result.rounds if r.decision and r.decision.get("error")),
                })
                if graph is not None:
                    rows[-1] |= _graph_arms(searcher, graph, planner, q.question, gold, limits, args.threshold)
                if not args.json and n % 10 == 0:
                    print(f"  {n}/{len(queries)} questions", file=sys.stderr, flush=True)
    finally:
        db.close()

    report = summarise(rows, limits, args.planner, args.threshold)
    if args.planner == "llm":
        usage = meter.total
        report["llm"] = {"calls": usage.calls, "cost_usd": round(usage.cost_usd, 4),
                         "fallbacks": sum(r["llm_fallbacks"] for r in rows)}
    if args.json:
        print(json.dumps(report | {"questions": rows if args.misses else None}, ensure_ascii=False))
        return 0
    print_report(report)
    if args.misses:
        for r in rows:
            if not r["agentic"]:
                print(f"MISS [{r['qtype']}] {r['question']}\n     missing {r['missing']}; queries {r['queries']}")
    return 0


def _graph_arms(searcher, graph, planner, question: str, gold: set[str], limits, threshold: bool) -> dict:
    """The same question through the graph leg: one hybrid+graph search (top max_context) and the
    agentic loop whose every search is hybrid+graph (router/graph_leg.py)."""
    from router.agentic import agentic_search
    from router.graph_leg import HybridGraphSearcher

    def leg() -> HybridGraphSearcher:
        return HybridGraphSearcher(searcher, graph, TENANT, GROUPS, MODE, keep_traces=False, apply_threshold=threshold)

    t0 = time.perf_counter()
    fused = leg().search(question, limits.max_context)
    fused_ms = (time.perf_counter() - t0) * 1000
    t0 = time.perf_counter()
    loop = leg()
    result = agentic_search(loop, planner, Question(question), loop.loop_limits(limits))
    context = result.context()
    return {"hybrid_graph": _all_in(gold, [p.doc_id for p in fused]),
            "agentic_graph": _all_in(gold, [p.doc_id for p in context]),
            "hybrid_graph_ms": fused_ms, "agentic_graph_ms": (time.perf_counter() - t0) * 1000}


def summarise(rows: list[dict], limits, planner: str, threshold: bool) -> dict:
    def block(items: list[dict]) -> dict:
        n = len(items)
        graph = {name: round(sum(r[name] for r in items) / n, 3) for name in ("hybrid_graph", "agentic_graph")
                 if n and name in items[0]}
        return graph | {
            "n": n,
            "single_recall": round(sum(r["single"] for r in items) / n, 3) if n else None,
            "agentic_recall": round(sum(r["agentic"] for r in items) / n, 3) if n else None,
            "collected_recall": round(sum(r["collected"] for r in items) / n, 3) if n else None,
            "mean_searches": round(statistics.fmean(r["searches"] for r in items), 2) if n else None,
            "mean_iterations": round(statistics.fmean(r["iterations"] for r in items), 2) if n else None,
        }

    by_type: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_type[r["qtype"]].append(r)
    return {
        "dataset": DATASET, "tenant": TENANT, "mode": MODE, "planner": planner, "rerank_threshold": threshold,
        "limits": dataclasses.asdict(limits),
        "overall": block(rows),
        "by_qtype": {t: block(items) for t, items in sorted(by_type.items(), key=lambda kv: -len(kv[1]))},
        "latency_ms": {
            "single_p50": _pct([r["single_ms"] for r in rows], 50), "single_p95": _pct([r["single_ms"] for r in rows], 95),
            "agentic_p50": _pct([r["agentic_ms"] for r in rows], 50),
            "agentic_p95": _pct([r["agentic_ms"] for r in rows], 95),
        },
        "graph_latency_ms": {f"{name}_{p}": _pct([r[f"{name}_ms"] for r in rows], q)
                             for name in ("hybrid_graph", "agentic_graph") if rows and f"{name}_ms" in rows[0]
                             for p, q in (("p50", 50), ("p95", 95))},
        "stop_reasons": dict(Counter(r["stop_reason"] for r in rows)),
        "partial": sum(r["partial"] for r in rows),
        "degraded": sum(r["degraded"] for r in rows),
        "won": sum(r["agentic"] and not r["single"] for r in rows),
        "lost": sum(r["single"] and not r["agentic"] for r in rows),
    }


def print_report(report: dict) -> None:
    o, lat = report["overall"], report["latency_ms"]
    print(f"{report['dataset']}: {o['n']} questions, {report['mode']}, planner {report['planner']}, "
          f"limits {report['limits']}")
    print(f"{'qtype':<12}{'n':>4}{'single@10':>11}{'agentic@10':>12}{'collected':>11}{'searches':>10}{'rounds':>8}")
    for name, b in [("ALL", o), *report["by_qtype"].items()]:
        print(f"{name:<12}{b['n']:>4}{b['single_recall']:>11.3f}{b['agentic_recall']:>12.3f}"
              f"{b['collected_recall']:>11.3f}{b['mean_searches']:>10.2f}{b['mean_iterations']:>8.2f}")
    print(f"latency ms: single p50 {lat['single_p50']} p95 {lat['single_p95']}; "
          f"agentic p50 {lat['agentic_p50']} p95 {lat['agentic_p95']}")
    if "hybrid_graph" in o:
        print(f"{'qtype':<12}{'n':>4}{'hybrid+graph@10':>17}{'agentic+graph@10':>18}")
        for name, b in [("ALL", o), *report["by_qtype"].items()]:
            print(f"{name:<12}{b['n']:>4}{b['hybrid_graph']:>17.3f}{b['agentic_graph']:>18.3f}")
        print(f"graph latency ms: {report['graph_latency_ms']}")
    print(f"agentic won {report['won']}, lost {report['lost']}; stop reasons {report['stop_reasons']}; "
          f"partial {report['partial']}; degraded {report['degraded']}")
    if "llm" in report:
        print(f"LLM planner: {report['llm']}")


if __name__ == "__main__":
    sys.exit(main())
