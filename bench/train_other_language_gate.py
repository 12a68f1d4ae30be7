"""Fit the gate of answers chosen in the other language's pages (answers/other_language_gate.py).

    python -m bench.train_other_language_gate [--dry-run] [--without-gate]

Asks the local route (offline, the gate open: every such answer shown, so each one's closeness is
seen) the 384 questions of bench/answer_xl_written on their own tenant, and every second one of them
on tenants that hold nothing about them (`demo`, `eval_xquad_ru`, `eval_multihop`, those present):
an answer there is an off-topic question answered. Its 160 negatives (`negatives_*.jsonl`: questions
naming what the corpora hold and asking what they never state) are asked too and reported as
near-topic questions answered; they were written after the first gate was fitted and stay out of the
fit. Of each answer chosen in the other language it keeps the chosen unit's cosine to the question
(`trace["closeness"]`), the share of the question's words its units hold in translation
(`trace["worded"]`, core/text/lexicon) and whether the answer holds the gold.

An answer whose units hold the question's names (`trace["named"]` at least MIN_CONFIDENCE) is shown on
that evidence, as before; the gate decides the others: P(right) = sigmoid(slope * cosine + word_slope *
words + intercept), fitted on them (off-topic ones count as wrong), and the least P shown is where a
right answer shown, a wrong one shown and an off-topic question answered weigh the same (shown right -
shown wrong - off-topic answered is highest). Reported leave one corpus out (hospital, museum, transit,
university: the fit and the cut chosen without the corpus, its questions and their off-topic askings
judged by them); the file is written from the fit on all of them, with the embedding model it holds for.

`--without-gate` asks the same questions of the route as it answers with no gate (the search holds
pages in the other script to the reranker's cut, and an answer from them is as sure as the search is
of its page) and reports what it shows: the baseline the gate is measured against. It writes nothing.
"""
from __future__ import annotations

import argparse
import datetime
import json
import sys
from dataclasses import asdict, dataclass

import numpy as np

from answers.other_language_gate import GATE_PATH, OtherLanguageGate
from answers.units import MIN_CONFIDENCE
from bench.answer_eval import DATASETS, contains_answer, dataset_questions
from core.database import open_database
from core.settings import Settings
from evaluation.datasets import load_dataset
from evaluation.runner import index_dataset
from router.service import QuestionRouter

OFF_TOPIC_TENANTS = {"demo": ["public", "staff", "finance", "hr"], "eval_xquad_ru": ["public"],
                     "eval_multihop": ["public"]}
CUTS = np.round(np.arange(0.01, 1.0, 0.005), 4)  # probabilities tried as the least shown


@dataclass(frozen=True)
class Asked:
    qid: str
    closeness: float | None  # None: not answered from the other language (the same-language path)
    named: float  # the share of the question's names the answer's units hold
    worded: float  # the share of the question's words they hold, in translation too (core/text/lexicon)
    right: bool  # the answer (shown or withheld) holds the gold; never for an unanswerable question
    shown: bool  # shown as the route shows it without the gate's decision (unanswerable: answered)
    unanswerable: str  # "": answerable; "off-topic": asked of a tenant without its corpus; "near-topic": a negative

    @property
    def corpus(self) -> str:
        """The corpus the question was written over: its qid's letter (h, m, t, u)."""
        return self.qid[0]


def _ask(router: QuestionRouter, tenant: str, groups: list[str], q: dict, unanswerable: str = "") -> Asked:
    answer = router.ask(tenant, groups, q["question"], route="local")
    said = answer.trace.get("withheld", "") if answer.no_answer else answer.answer
    return Asked(q["qid"], answer.trace.get("closeness"), answer.trace.get("named") or 0.0,
                 answer.trace.get("worded") or 0.0, not unanswerable and contains_answer(said, q["answers"]),
                 not answer.no_answer, unanswerable)


def collect(settings: Settings, gate_open: bool = True) -> tuple[list[Asked], str]:
    """Every asking's outcome; `gate_open`: every answer from the other language shown (to fit a gate), else
    the route as `settings` make it."""
    dataset = load_dataset(DATASETS["xl_written"])
    questions = dataset_questions("xl_written", "queries.jsonl")
    db = open_database(settings)
    try:
        with QuestionRouter(db, settings, use_llm=False) as router:
            index_dataset(db, router.embedder, settings, dataset)
            if gate_open:
                router.writer.gate = OtherLanguageGate.open(router.embedder.model_id)
            with db.connection() as conn:
                present = {t for (t,) in conn.execute("SELECT DISTINCT tenant_id FROM chunks").fetchall()}
            asked = [_ask(router, f"eval_{dataset.name}", ["public"], q) for q in questions]
            asked += [_ask(router, f"eval_{dataset.name}", ["public"], q, "near-topic")
                      for q in dataset_questions("xl_written", "negatives_*.jsonl")]
            for tenant, groups in OFF_TOPIC_TENANTS.items():
                if tenant not in present:
                    print(f"{tenant} is not indexed: its off-topic questions are skipped", file=sys.stderr)
                    continue
                asked += [_ask(router, tenant, groups, q, "off-topic") for q in questions[::2]]
            model_id = router.embedder.model_id
    finally:
        db.close()
    return asked, model_id


def _outcome(asked: list[Asked], shown_at) -> dict:
    """Counts when an answer from the other language is shown iff `shown_at(answer)`; the others as they were."""
    out = {"shown_right": 0, "shown_wrong": 0, "right_withheld": 0, "off_topic_answered": 0, "near_topic_answered": 0}
    for a in asked:
        shown = a.shown if a.closeness is None else shown_at(a)
        if a.unanswerable:
            out[f"{a.unanswerable.replace('-', '_')}_answered"] += shown
        else:
            out["shown_right"] += shown and a.right
            out["shown_wrong"] += shown and not a.right
            out["right_withheld"] += (not shown) and a.right and a.closeness is not None
    return out


def _utility(o: dict) -> int:
    """What the cut maximises (the near-topic negatives are never among the answers it is chosen on)."""
    return o["shown_right"] - o["shown_wrong"] - o["off_topic_answered"]


def _shown(gate: OtherLanguageGate):
    """How the route decides an answer from the other language: its names' evidence, else the gate."""
    return lambda a: a.named >= MIN_CONFIDENCE or gate.confidence(a.closeness, a.worded) >= gate.threshold


def fit(asked: list[Asked], model_id: str) -> OtherLanguageGate:
    """The gate fitted on these answers: a logistic regression of the cosine and the share of words held
    in translation on the answers without the names' evidence (those the gate decides), then the least P
    shown. The near-topic negatives take no part: they are the gate's independent check."""
    asked = [a for a in asked if a.unanswerable != "near-topic"]
    read = [a for a in asked if a.closeness is not None and a.named < MIN_CONFIDENCE]
    design = np.array([[a.closeness, a.worded, 1.0] for a in read])
    y = np.array([float(a.right) for a in read])
    w = np.zeros(3)
    for _ in range(100):  # Newton's method, a small ridge for separable folds
        p = 1 / (1 + np.exp(-design @ w))
        w -= np.linalg.solve((design.T * (p * (1 - p))) @ design + 1e-3 * np.eye(3), design.T @ (p - y) + 1e-3 * w)
    cut = max(CUTS, key=lambda c: (_utility(_outcome(asked, _shown(OtherLanguageGate(model_id, *w, c)))), -c))
    slope, word_slope, intercept = (round(float(v), 4) for v in w)
    return OtherLanguageGate(model_id, slope, word_slope, intercept, float(cut))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="report only; never write the gate")
    parser.add_argument("--without-gate", action="store_true",
                        help="report what the route shows with no gate (the baseline); writes nothing")
    args = parser.parse_args()
    if args.without_gate:
        asked, _ = collect(Settings(answer_other_language_gate=False), gate_open=False)
        print(json.dumps({"without a gate": _outcome(asked, lambda a: a.shown)}, indent=1))
        return 0
    # the shipped gate is not read (it may be the one being replaced): the open one is set in its place
    asked, model_id = collect(Settings(answer_other_language_gate=False))
    report: dict = {"by corpus held out": {}}
    total = dict.fromkeys(("shown_right", "shown_wrong", "right_withheld", "off_topic_answered", "near_topic_answered"), 0)
    for corpus in sorted({a.corpus for a in asked}):
        gate = fit([a for a in asked if a.corpus != corpus], model_id)
        held = _outcome([a for a in asked if a.corpus == corpus], _shown(gate))
        report["by corpus held out"][corpus] = {"slope": gate.slope, "word_slope": gate.word_slope,
                                                "intercept": gate.intercept,
                                                "threshold": gate.threshold, **held}
        total = {k: total[k] + held[k] for k in total}
    report["held out, summed"] = total
    gate = fit(asked, model_id)
    report["all corpora"] = _outcome(asked, _shown(gate))
    report["answers"] = {"asked": len(asked), "from the other language": sum(a.closeness is not None for a in asked),
                         "off-topic": sum(a.unanswerable == "off-topic" for a in asked),
                         "near-topic": sum(a.unanswerable == "near-topic" for a in asked)}
    print(json.dumps(report, indent=1))
    if args.dry_run:
        return 0
    GATE_PATH.write_text(json.dumps({**asdict(gate), "provenance": {
        "trained": datetime.date.today().isoformat(), "script": "bench/train_other_language_gate.py",
        "questions": "bench/answer_xl_written", "off_topic_tenants": sorted(OFF_TOPIC_TENANTS),
        "report": report}}, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {GATE_PATH}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
