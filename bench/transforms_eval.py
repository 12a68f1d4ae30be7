"""Measure the query transforms (multi-query, HyDE) against plain search on the dev datasets.

    .venv/bin/python -m bench.transforms_eval [--datasets anthropic_docs xquad_ru multihop]
        [--mode hybrid+rerank] [--k 10] [--limit 100] [--paraphrases 3] [--json]

The transforms are off by default until numbers like these show they pay for their LLM calls and
latency, so this compares, in one run and on the same index: plain, multi-query, HyDE and both.
Each question costs 1-2 `fast`-model calls per transformed variant, so it needs ANTHROPIC_API_KEY;
without one it says so and exits 0 (nothing to measure offline). Datasets are indexed into their
`eval_<name>` tenant first, as `crossroads eval` does (free when already indexed); `--limit` takes
the first N scored questions to bound the cost. Prints one line per (dataset, variant) with the
same metrics as `crossroads eval`, plus degraded answers (failed transforms) and LLM cost.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from bench.common import SHARED_DATA
from core.settings import Settings

VARIANTS = {"plain": {}, "multi-query": {"multi_query": True}, "hyde": {"hyde": True},
            "multi-query+hyde": {"multi_query": True, "hyde": True}}


class _Counting:
    """Counts degraded results: a variant whose LLM calls fail is measuring plain search."""

    def __init__(self, inner):
        self.inner, self.degraded = inner, 0

    def search(self, *args, **kwargs):
        result = self.inner.search(*args, **kwargs)
        self.degraded += result.degraded
        return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="+", default=["anthropic_docs", "xquad_ru", "multihop"])
    parser.add_argument("--mode", default="hybrid+rerank", choices=["dense", "bm25", "hybrid", "hybrid+rerank"])
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--limit", type=int, default=None, help="first N scored questions per dataset")
    parser.add_argument("--paraphrases", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    settings = Settings()
    if not settings.llm_enabled:
        print("ANTHROPIC_API_KEY is not set: query transforms need an LLM, nothing to measure (exit 0).")
        return 0

    from vector.search.factory import make_searcher
    from core.database import open_database
    from core.embeddings import make_embedder
    from core.llm.client import make_llm
    from core.llm.usage import UsageMeter
    from evaluation.datasets import load_dataset
    from evaluation.runner import evaluate, index_dataset
    from vector.search.transforms import TransformingSearcher

    rows = []
    db = open_database(settings)
    try:
        embedder = make_embedder(settings)
        for name in args.datasets:
            dataset = load_dataset(SHARED_DATA / name)
            index_dataset(db, embedder, settings, dataset)
            if args.limit:
                dataset = dataclasses.replace(dataset, queries=dataset.scored_queries[: args.limit])
            with make_searcher(db, settings, embedder=embedder, threshold=False) as searcher:
                for variant in args.variants:
                    meter = UsageMeter()  # per variant, so each line shows what it cost
                    with TransformingSearcher(searcher, make_llm(settings, meter), n_paraphrases=args.paraphrases,
                                              **VARIANTS[variant]) as transforming:
                        counted = _Counting(transforming)
                        summary = evaluate(counted, dataset, [args.mode], args.k)[args.mode]
                    usage = meter.total
                    row = {"dataset": name, "variant": variant, "mode": args.mode, "k": args.k,
                           **{key: summary[key] for key in ("n", "recall", "mrr", "ndcg", "evidence_recall",
                                                            "p50_ms", "p95_ms")},
                           "misses": len(summary["misses"]), "degraded": counted.degraded,
                           "llm_calls": usage.calls, "cost_usd": round(usage.cost_usd, 4)}
                    rows.append(row)
                    if not args.json:
                        print(" ".join(f"{key}={value:.3f}" if isinstance(value, float) else f"{key}={value}"
                                       for key, value in row.items()), flush=True)
    finally:
        db.close()
    if args.json:
        print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
