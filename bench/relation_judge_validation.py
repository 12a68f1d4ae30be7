"""How the relation judge is validated and cut (bench/train_relation_judge.py's `--threshold` and `--report`): the
local route's answers on the reader cases, each judged as answers/writer.py judges it, the cut that withholds
JUDGE_BUDGET of the right answers the route shows (each dataset weighing the same), and leave-one-dataset-out with
that cut. Needs no torch.
"""
from __future__ import annotations

import json
import pickle

import numpy as np

from answers.relation_judge import RelationJudge
from bench.common import ROOT

OUTCOMES = ROOT / ".crossroads" / "relation_judge_outcomes.pkl"
# The bound is 5% of right answers withheld; the route's own checks already withhold some
# (3% held out at the judge's introduction), so the judge may add two points.
JUDGE_BUDGET = 0.02


def auc(scores, labels) -> float:
    s, y = np.asarray(scores, float), np.asarray(labels, bool)
    if y.all() or not y.any():
        return float("nan")
    ranks = np.argsort(np.argsort(s, kind="stable"), kind="stable") + 1
    return float((ranks[y].sum() - y.sum() * (y.sum() + 1) / 2) / (y.sum() * (~y).sum()))


def route_outcomes() -> list[dict]:
    """The local route's offline answer on every reader case (default confidence, the other-language gate
    on), with the units it quotes as the judge reads them (title, display form): what the judge is asked
    about in the route (cached)."""
    if OUTCOMES.exists():
        outcomes = pickle.loads(OUTCOMES.read_bytes())
        if outcomes and "units" in outcomes[0]:
            return outcomes
    from answers.extractive import offline_answer
    from answers.other_language_gate import load_gate
    from answers.question import Question
    from bench.answer_eval import contains_answer
    from bench.reader_cases import CACHE, CachedSimilarity, as_passages
    from core.embeddings import make_embedder
    from core.settings import Settings

    cases = json.loads(CACHE.read_text(encoding="utf-8"))
    similarity = CachedSimilarity()
    gate = load_gate(make_embedder(Settings()).model_id)
    outcomes = []
    for case in cases:
        passages = as_passages(case)
        extracted = offline_answer(Question(case["question"]), passages, similarity=similarity, gate=gate)
        outcomes.append({"dataset": case["group"], "variant": case["variant"], "negative": case["negative"],
                         "right": not case["negative"] and contains_answer(extracted.text, case["golds"]),
                         "shown": extracted.answered, "question": case["question"],
                         "units": [(passages[p.passage - 1].title or "", p.reading or p.text) for p in extracted.picked]})
    OUTCOMES.write_bytes(pickle.dumps(outcomes))
    return outcomes


def judged(outcomes: list[dict], judge: RelationJudge) -> list[dict]:
    """Each outcome with the judge's logit as the route uses it: the best of the units the answer quotes."""
    return [{**o, "logit": max(judge.logit(o["question"], title, unit) for title, unit in o["units"]) if o["units"] else None}
            for o in outcomes]


def right_shown(outcomes: list[dict]) -> list[dict]:
    """The asked questions' right answers the route shows and the judge read: what the cut is taken from."""
    return [o for o in outcomes if o["variant"] == "asked" and o["right"] and o["shown"] and o["logit"] is not None]


def cut(right_shown: list[dict]) -> float:
    """The logit below which JUDGE_BUDGET of these right answers fall, each dataset weighing the same."""
    from bench.train_reader import dataset_weights

    logits = np.asarray([o["logit"] for o in right_shown])
    order = np.argsort(logits, kind="stable")
    weights = dataset_weights([o["dataset"] for o in right_shown])[order]
    below = np.concatenate([[0.0], np.cumsum(weights)[:-1]]) / weights.sum()
    k = int(np.searchsorted(below, JUDGE_BUDGET, side="right")) - 1
    return float(logits[order][max(k, 0)])


def report(outcomes: list[dict]) -> dict:
    """Each dataset's asked questions (right answers and near-topic negatives) judged with the cut the other
    datasets give, against the route without the judge."""
    asked = [o for o in outcomes if o["variant"] == "asked" and (o["negative"] or o["right"])]
    datasets = sorted({o["dataset"] for o in asked})
    out = {}
    for d in datasets:
        threshold = cut(right_shown([o for o in asked if o["dataset"] != d]))
        mine = [o for o in asked if o["dataset"] == d]
        withheld = lambda o, judge: not o["shown"] or (judge and o["logit"] is not None and o["logit"] < threshold)  # noqa: E731
        row = {"cut_from_others": round(threshold, 4)}
        for name, judge in (("route", False), ("route_and_judge", True)):
            negatives = [o for o in mine if o["negative"]]
            right = [o for o in mine if not o["negative"]]
            row[name] = {"negatives_withheld": sum(withheld(o, judge) for o in negatives), "negatives": len(negatives),
                         "right_withheld": sum(withheld(o, judge) for o in right), "right": len(right)}
        shown = [o for o in mine if o["shown"] and o["logit"] is not None]
        row["auc_shown"] = round(auc([o["logit"] for o in shown], [not o["negative"] for o in shown]), 3)
        out[d] = row
    totals = {name: {k: sum(out[d][name][k] for d in datasets) for k in out[datasets[0]][name]}
              for name in ("route", "route_and_judge")}
    return {"datasets": out, "totals": totals}
