"""Two runs of `bench.answer_eval --dump` compared question by question: per set and route, how many
answers changed, and for the lenient score (the gold anywhere in the answer) and the head score (the
gold in its first line) the means, the questions that moved each way and a 95% bootstrap interval of
the difference (evaluation/paired.py). Verdicts and counts only, never an answer's text, so it may be
run on held-out sets.

    python -m bench.answer_eval --sets ... --dump before.json   # on the old code
    python -m bench.answer_eval --sets ... --dump after.json    # on the new code
    python -m bench.answer_diff before.json after.json [--json]
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from evaluation.paired import PairedDifference, paired_difference


@dataclass(frozen=True)
class ScoreChange:
    before: float
    after: float
    paired: PairedDifference


@dataclass(frozen=True)
class RunChange:
    set: str
    route: str
    questions: int  # in both runs
    changed: int  # answers whose text differs
    lenient: ScoreChange
    head: ScoreChange


def _scores(record: dict) -> tuple[float, float]:
    """(lenient, head) of one dumped answer: the datasets' records hold right / head_right, the golden
    sets' score / head, whose head is the score where there is no gold to find in a line (a negative, a
    global question's themes), as bench.answer_eval counts it."""
    if "right" in record:
        return float(bool(record["right"])), float(bool(record.get("head_right")))
    score = float(record.get("score") or 0.0)
    return score, score if record.get("head") is None else float(record["head"])


def _key(record: dict) -> tuple[str, str, str]:
    return str(record["set"]), str(record["route"]), str(record["qid"])


def compare(before: list[dict], after: list[dict]) -> list[RunChange]:
    """One RunChange per (set, route) both runs answered, in name order."""
    old = {_key(r): r for r in before}
    new = {_key(r): r for r in after}
    runs = sorted({k[:2] for k in old.keys() & new.keys()})
    out = []
    for run in runs:
        qids = sorted(k for k in old.keys() & new.keys() if k[:2] == run)
        changed = sum(old[k].get("answer") != new[k].get("answer") for k in qids)
        changes = []
        for which in (0, 1):
            a = {k[2]: _scores(old[k])[which] for k in qids}
            b = {k[2]: _scores(new[k])[which] for k in qids}
            changes.append(ScoreChange(sum(a.values()) / len(a), sum(b.values()) / len(b), paired_difference(a, b)))
        out.append(RunChange(run[0], run[1], len(qids), changed, *changes))
    return out


def _records(dump) -> list[dict]:
    """The dump's answer records; anything else is an error the caller reports."""
    if not isinstance(dump, list) or not all(isinstance(r, dict) and {"set", "route", "qid"} <= r.keys() for r in dump):
        raise ValueError("not a list of answer records with set, route and qid")
    return dump


def _line(c: RunChange) -> str:
    def score(s: ScoreChange) -> str:
        p = s.paired
        mark = " *" if p.significant else ""
        return (f"{s.before:.3f} -> {s.after:.3f} (+{p.better}/-{p.worse}, 95% {p.low:+.3f} .. {p.high:+.3f}){mark}")
    return (f"{c.set:16s} {c.route:9s} {c.changed:3d} of {c.questions:3d} changed; "
            f"lenient {score(c.lenient)}; head {score(c.head)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    try:
        before, after = (_records(json.loads(p.read_text(encoding="utf-8"))) for p in (args.before, args.after))
        changes = compare(before, after)
    except (OSError, ValueError, TypeError) as exc:
        print(f"cannot read the dumps: {exc}; write them with `python -m bench.answer_eval --dump FILE`",
              file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps([asdict(c) for c in changes], indent=1))
    else:
        for c in changes:
            print(_line(c))
        print(f"answers changed: {sum(c.changed for c in changes)} of {sum(c.questions for c in changes)} "
              "(* : the interval excludes zero)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
