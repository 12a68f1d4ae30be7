"""Router accuracy of the offline heuristic on the dev data and the project's fixtures.

    .venv/bin/python -m bench.router_eval [--data ../shared/data] [--json] [--examples 15]

Labels come from where a question comes from: podcast/ (corpus-wide questions) -> global,
multihop/ (MuSiQue and HotpotQA) -> multihop, every other folder's queries.jsonl -> local;
fixtures/questions.jsonl carries its own `route`. Prints accuracy per dataset and overall, the
confusion matrix, misclassified examples and the speed in questions per second. The data folder
is optional: without it only the fixtures are measured.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

from bench.common import ROOT, SHARED_DATA
from router.classify import HeuristicClassifier
from router.types import ROUTES

FIXTURES = ROOT / "fixtures" / "questions.jsonl"
LABEL_BY_FOLDER = {"podcast": "global", "multihop": "multihop"}  # every other folder: local


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def load_labelled(data: Path) -> dict[str, list[tuple[str, str]]]:
    """dataset name -> [(question, expected route)]: each folder of `data` with a queries.jsonl."""
    sets: dict[str, list[tuple[str, str]]] = {}
    if data.is_dir():
        for queries in sorted(data.glob("*/queries.jsonl")):
            label = LABEL_BY_FOLDER.get(queries.parent.name, "local")
            sets[queries.parent.name] = [(row["question"], label) for row in read_jsonl(queries)]
    if FIXTURES.exists():
        sets["fixtures"] = [(row["question"], row["route"]) for row in read_jsonl(FIXTURES)]
    return sets


def evaluate(sets: dict[str, list[tuple[str, str]]], classifier: HeuristicClassifier) -> dict:
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


def print_report(result: dict, examples: int) -> None:
    for name, s in result["per_dataset"].items():
        print(f"{name:16} {s['correct']:4}/{s['n']:<4} accuracy {s['accuracy']:.3f}")
    overall = result["overall"]
    if overall["n"]:
        print(f"{'overall (dev)':16} {overall['n']:9} accuracy {overall['accuracy']:.3f}")
        print("\nconfusion (rows: expected, columns: predicted)")
        print(" " * 10 + "".join(f"{r:>10}" for r in ROUTES))
        for expected in ROUTES:
            row = "".join(f"{result['confusion'].get(f'{expected}->{got}', 0):>10}" for got in ROUTES)
            print(f"{expected:10}{row}")
    print(f"\nspeed: {result['questions_per_s']:,.0f} questions/s")
    shown = result["errors"][:examples]
    if shown:
        print(f"\nmisclassified ({len(result['errors'])}, first {len(shown)}):")
        for e in shown:
            print(f"  [{e['dataset']}] {e['expected']} -> {e['got']} ({e['confidence']:.2f}) {e['question'].strip()}\n"
                  f"      {e['reason']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=SHARED_DATA, help="folder of datasets (default ../shared/data)")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object")
    parser.add_argument("--examples", type=int, default=40, help="misclassified questions to show")
    args = parser.parse_args(argv)
    if not args.data.is_dir():
        print(f"{args.data} is absent: measuring the fixtures only", file=sys.stderr)
    sets = load_labelled(args.data)
    if not sets:
        print("no labelled questions found: nothing to evaluate", file=sys.stderr)
        return 0
    result = evaluate(sets, HeuristicClassifier())
    if args.json:
        print(json.dumps(result, ensure_ascii=False, indent=1))
    else:
        print_report(result, args.examples)
    return 0


if __name__ == "__main__":
    sys.exit(main())
