"""Fits the learned reader (answers/reader_model.json): a logistic regression over candidate units,
a Platt calibration of the answer's confidence on held-out folds, and the no-answer threshold.

    python -m bench.train_reader --collect   # search every training question once (cached in .crossroads/)
    python -m bench.train_reader             # fit, report leave-one-dataset-out, write nothing
    python -m bench.train_reader --write     # ... and write answers/reader_model.json

The data (bench/reader_data/README.md says where each part comes from):
- the dev questions of ../shared/data multihop and xquad_ru and the local questions of
  fixtures/questions.jsonl, and the questions written for this reader over fixtures/corpus
  (bench/reader_data/questions.jsonl), each searched as the local route searches it ("asked");
- the same questions with every passage of their gold documents taken out of the search's results
  ("removed": the passages a search returns when the corpus lacks the answer, near the topic);
- the same questions asked of another corpus ("elsewhere": off-topic passages; the dev questions of
  the fixtures corpus, the fixtures' questions of xquad_ru's);
- the negatives written for the fixtures corpus (no document answers them).
A negative whose remaining passages hold the gold string anywhere is dropped (it may be answerable).

Validation is leave-one-dataset-out: each dataset's questions (all their variants) are scored by a
model fitted on the other datasets, and the threshold it is held to is the one the other datasets'
held-out scores pick. The threshold rule, fixed before any blind set was run: the highest confidence
that withholds at most 5% of the right answers among the pooled held-out scores.
"""
from __future__ import annotations

import argparse
import datetime
import json
import sys
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np

from answers.extractive import offline_answer
from answers.local import reader_pool
from answers.reader import ANSWER_FEATURES, FEATURES, MODEL_PATH, ReaderModel
from answers.types import Passage
from answers.units import display
from bench.answer_eval import contains_answer
from bench.common import ROOT, SHARED_DATA
from answers.question import Question

CACHE = ROOT / ".crossroads" / "reader_cases.json"
SIMS = ROOT / ".crossroads" / "reader_similarities.json"
WRITTEN = ROOT / "bench" / "reader_data" / "questions.jsonl"
KEEP = 0.95  # the threshold withholds at most 1 - KEEP of the right answers
L2 = 1.0
PASSAGES = 5
REMOVED_K = 20
# What the answer model learns: "answerable" (the passages hold a gold: the documents answer the question,
# whoever reads them) or "right" (the extractive answer holds it). Right-or-wrong carries each dataset's
# difficulty for the extractive reader (most multi-hop questions are answered wrong by the local route
# from passages that hold the answer), which did not transfer held out; answerability is what a no-answer
# claims.
LABEL = "right"  # the shipped model's; --label answerable refits on the other (docs/reader.md has both)


# --- collection ------------------------------------------------------------------------------------

def _questions() -> list[dict]:
    """Every training question as {group, qid, question, golds, tenant, groups, docs, negative}."""
    out = []
    for name in ("multihop", "xquad_ru"):
        path = SHARED_DATA / name / "queries.jsonl"
        if not path.exists():
            print(f"{path} is absent: {name} is left out", file=sys.stderr)
            continue
        for line in path.open(encoding="utf-8"):
            if not line.strip():
                continue
            q = json.loads(line)
            golds = [q["answer"], *q.get("aliases", [])] if name == "multihop" else list(q["answers"])
            out.append({"group": name, "qid": q["qid"], "question": q["question"], "golds": golds,
                        "tenant": f"eval_{name}", "groups": ["public"], "docs": [str(d) for d in q["gold"]],
                        "negative": False})
    for group, path in (("fixtures", ROOT / "fixtures" / "questions.jsonl"), ("written", WRITTEN)):
        for line in path.open(encoding="utf-8"):
            if not line.strip():
                continue
            q = json.loads(line)
            if q["route"] != "local":
                continue
            negative = not q["expected_docs"]
            out.append({"group": group, "qid": q["qid"], "question": q["question"],
                        "golds": [] if negative else [q["answer"], *q.get("aliases", [])], "tenant": "demo",
                        "groups": q["groups"], "docs": list(q["expected_docs"]), "negative": negative})
    return out


# (multihop's questions are asked nowhere else: its 100 searches of another corpus would cost a quarter of
# an hour of embedding on the shared machine, and xquad_ru's already ask the fixtures corpus)
ELSEWHERE = {"eval_multihop": None, "eval_xquad_ru": ("demo", ["public", "staff"]),
             "demo": ("eval_xquad_ru", ["public"])}


def _passages(searcher, tenant: str, groups: list[str], question: str, k: int, drop: set[str] = frozenset()):
    result = searcher.search(tenant, groups, question, k=k, mode="hybrid+rerank")
    calibrated = result.trace.get("rerank_threshold") is not None and not result.degraded
    hits = [h for h in result.hits if str(h.doc_id) not in drop][:PASSAGES]
    return [asdict(Passage.of_chunk(h, h.score if calibrated else None)) for h in hits]


def _holds_gold(passages: list[dict], golds: list[str]) -> bool:
    return bool(golds) and contains_answer(" ".join(f"{p['title']} {p['text']}" for p in passages), golds)


def collect(only: set[str] | None = None) -> list[dict]:
    """Searches the questions (of the `only` datasets, the cache keeping the others') and embeds
    their pooled units; returns every cached case."""
    from core.database import open_database
    from core.settings import Settings
    from router.service import QuestionRouter

    settings = Settings()
    db = open_database(settings)
    cases = []
    try:
        with QuestionRouter(db, settings, use_llm=False) as router:
            searcher = router.local_searcher
            questions = [q for q in _questions() if only is None or q["group"] in only]
            for i, q in enumerate(questions, 1):
                base = {k: q[k] for k in ("group", "qid", "question", "golds")}
                asked = _passages(searcher, q["tenant"], q["groups"], q["question"], settings.answer_passages)
                cases.append({**base, "variant": "asked", "negative": q["negative"], "passages": asked})
                if q["negative"]:
                    continue
                removed = _passages(searcher, q["tenant"], q["groups"], q["question"], REMOVED_K, set(q["docs"]))
                if not _holds_gold(removed, q["golds"]):
                    cases.append({**base, "variant": "removed", "negative": True, "passages": removed})
                if ELSEWHERE[q["tenant"]] is None:
                    continue
                tenant, groups = ELSEWHERE[q["tenant"]]
                elsewhere = _passages(searcher, tenant, groups, q["question"], settings.answer_passages)
                if not _holds_gold(elsewhere, q["golds"]):
                    cases.append({**base, "variant": "elsewhere", "negative": True, "passages": elsewhere})
                if i % 25 == 0:
                    print(f"collect: {i}/{len(questions)} questions, {len(cases)} cases", file=sys.stderr, flush=True)
            similarity = CachedSimilarity(router.writer.similarity)
            for i, case in enumerate(cases, 1):  # the pooled units' closeness, embedded once
                reader_pool(Question(case["question"]), _as_passages(case), similarity=similarity)
                if i % 100 == 0:
                    print(f"embed: {i}/{len(cases)} cases", file=sys.stderr, flush=True)
                    similarity.save()
            similarity.save()
    finally:
        db.close()
    kept = [c for c in json.loads(CACHE.read_text(encoding="utf-8"))
            if only is not None and c["group"] not in only] if CACHE.exists() else []
    cases = kept + cases
    CACHE.parent.mkdir(parents=True, exist_ok=True)
    CACHE.write_text(json.dumps(cases, ensure_ascii=False), encoding="utf-8")
    return cases


class CachedSimilarity:
    """The search's e5 closeness of units to questions, remembered in SIMS (a fit reads only these)."""

    def __init__(self, inner=None):
        self.inner = inner
        self.missed = 0
        self.cache: dict[str, float] = json.loads(SIMS.read_text(encoding="utf-8")) if SIMS.exists() else {}

    def __call__(self, question: str, texts):
        keys = [f"{question}\u241e{t}" for t in texts]
        missing = list(dict.fromkeys(t for k, t in zip(keys, texts) if k not in self.cache))
        if missing:
            if self.inner is None:  # the hand-weighted answer embeds more of a cross-language lead than the pool
                from answers.unit_similarity import EmbeddingSimilarity
                from core.embeddings import make_embedder
                from core.settings import Settings
                self.inner = EmbeddingSimilarity(make_embedder(Settings()))
            self.missed += len(missing)
            for t, v in zip(missing, self.inner(question, missing)):
                self.cache[f"{question}\u241e{t}"] = round(float(v), 6)
        return [self.cache[k] for k in keys]

    def save(self) -> None:
        SIMS.parent.mkdir(parents=True, exist_ok=True)
        SIMS.write_text(json.dumps(self.cache, ensure_ascii=False), encoding="utf-8")


def _as_passages(case: dict) -> list[Passage]:
    return [Passage(**p) for p in case["passages"]]


# --- fitting ---------------------------------------------------------------------------------------

def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = L2, iterations: int = 50) -> tuple[np.ndarray, float]:
    """L2-regularised logistic regression by Newton's method (the bias unpenalised)."""
    n, d = x.shape
    a = np.hstack([x, np.ones((n, 1))])
    w = np.zeros(d + 1)
    penalty = np.full(d + 1, l2)
    penalty[-1] = 0.0
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-np.clip(a @ w, -40, 40)))
        gradient = a.T @ (p - y) + penalty * w
        hessian = (a * (p * (1 - p))[:, None]).T @ a + np.diag(penalty) + 1e-9 * np.eye(d + 1)
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if np.max(np.abs(step)) < 1e-8:
            break
    return w[:-1], float(w[-1])


def unit_data(cases: list[dict], similarity: CachedSimilarity) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per case (index), its pooled units' feature rows and labels (the unit holds a gold string)."""
    out = {}
    for i, case in enumerate(cases):
        pool = reader_pool(Question(case["question"]), _as_passages(case), similarity=similarity)
        if pool is None:
            continue
        rows = pool.rows()
        labels = np.asarray([0.0 if case["negative"] else float(contains_answer(display(u), case["golds"]))
                             for u in pool.pool])
        out[i] = (rows, labels)
    return out


def _standardised(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    means = x.mean(axis=0)
    scales = x.std(axis=0)
    scales[scales < 1e-9] = 1.0
    return means, scales


def fit_ranker(data: dict, indices: list[int], cases: list[dict]) -> ReaderModel:
    """The unit ranker over the answerable questions' pools (a negative's units teach no order); the
    answer model left neutral (its logit is the ranker's), for the held-out folds' choices."""
    keep = [i for i in indices if i in data and not cases[i]["negative"]]
    x = np.vstack([data[i][0] for i in keep])
    y = np.concatenate([data[i][1] for i in keep])
    means, scales = _standardised(x)
    w, b = fit_logistic((x - means) / scales, y)
    m = len(ANSWER_FEATURES)
    neutral = np.zeros(m)
    neutral[-1] = 1.0
    return ReaderModel(FEATURES, means, scales, w, b, np.zeros(m), np.ones(m), neutral, 0.0,
                       platt_a=1.0, platt_b=0.0, threshold=0.0, provenance={})


def fit_answer(ranker: ReaderModel, rows: np.ndarray, right: np.ndarray) -> ReaderModel:
    """The answer model over the chosen units' answer rows (ANSWER_FEATURES), on top of `ranker`."""
    means, scales = _standardised(rows)
    w, b = fit_logistic((rows - means) / scales, right.astype(float))
    return replace(ranker, answer_means=means, answer_scales=scales, answer_weights=w, answer_bias=b)


def answer_case(case: dict, model: ReaderModel | None, similarity: CachedSimilarity) -> dict:
    """The local answer over the case's passages, by `model` (None: the hand-weighted scorer)."""
    extracted = offline_answer(Question(case["question"]), _as_passages(case), similarity=similarity, reader=model)
    right = not case["negative"] and contains_answer(extracted.text, case["golds"])
    return {"right": bool(right), "picked": bool(extracted.picked), "negative": case["negative"],
            "answerable": not case["negative"] and _holds_gold(case["passages"], case["golds"]),
            "score": extracted.logit if model is not None else extracted.confidence,
            "row": extracted.row, "answered_baseline": extracted.answered if model is None else None}


def pick_threshold(right_scores: list[float]) -> float:
    """The highest score that withholds at most 1 - KEEP of these right answers (withheld: below it)."""
    ordered = sorted(right_scores)
    return ordered[int((1 - KEEP) * len(ordered))] if ordered else 0.0


def fit_platt(scores: np.ndarray, right: np.ndarray) -> tuple[float, float]:
    w, b = fit_logistic(scores[:, None], right.astype(float), l2=1e-3)
    return float(w[0]), b


def _summary(outcomes: list[dict], withheld) -> dict:
    positives = [o for o in outcomes if not o["negative"]]
    negatives = [o for o in outcomes if o["negative"]]
    right = [o for o in positives if o["right"]]
    return {"questions": len(positives), "accuracy": round(sum(o["right"] and not withheld(o) for o in positives)
                                                           / max(len(positives), 1), 3),
            "right_before_threshold": round(len(right) / max(len(positives), 1), 3),
            "right_withheld": round(sum(withheld(o) for o in right) / max(len(right), 1), 3),
            "negatives": len(negatives),
            "negatives_withheld": round(sum(withheld(o) for o in negatives) / max(len(negatives), 1), 3)}


def _rows(outcomes: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    chosen = [o for o in outcomes if o["row"] is not None]
    return (np.vstack([o["row"] for o in chosen]) if chosen else np.zeros((0, len(ANSWER_FEATURES))),
            np.asarray([o[LABEL] for o in chosen], dtype=float))


def _answer_score(model: ReaderModel, o: dict) -> float:
    """The answer model's logit for an outcome; no candidates: withheld whatever the threshold."""
    if o["row"] is None:
        return -np.inf
    z = ((o["row"] - model.answer_means) / model.answer_scales) @ model.answer_weights + model.answer_bias
    return float(z)


def _validate(cases, groups, by_group, rankers, final_ranker, chooser, baseline, similarity):
    """Leave-one-dataset-out for one chooser: stage 1 (each dataset's answers chosen with a ranker fitted
    without it), stage 2 (each dataset's answers scored by an answer model fitted on the other datasets'
    held-out choices, held to the threshold those datasets' scores pick); then the final model, its
    Platt calibration on the pooled held-out scores and its threshold by the rule."""
    chosen = {i: answer_case(cases[i], replace(rankers[g], chooser=chooser), similarity)
              for g in groups for i in by_group[g]}
    report: dict = {"lodo": {}, "baseline": {}}
    held_out: dict[int, float] = {}
    for g in groups:
        others = [chosen[i] for h in groups if h != g for i in by_group[h]]
        model = fit_answer(final_ranker, *_rows(others))
        threshold = pick_threshold([_answer_score(model, o) for o in others if o["right"]])
        for i in by_group[g]:
            held_out[i] = _answer_score(model, chosen[i])
        outcomes = [{**chosen[i], "withheld": held_out[i] < threshold} for i in by_group[g]]
        report["lodo"][g] = {"threshold_logit_from_others": round(float(threshold), 4),
                             **_summary(outcomes, lambda o: o["withheld"])}
        report["baseline"][g] = _summary([baseline[i] for i in by_group[g]], lambda o: not o["answered_baseline"])
        for variant in ("asked", "removed", "elsewhere"):
            idx = [k for k, i in enumerate(by_group[g]) if cases[i]["variant"] == variant]
            report["lodo"][g][variant] = _summary([outcomes[k] for k in idx], lambda o: o["withheld"])
            report["baseline"][g][variant] = _summary([baseline[by_group[g][k]] for k in idx],
                                                      lambda o: not o["answered_baseline"])
    finite = [i for i in held_out if np.isfinite(held_out[i])]
    a, b = fit_platt(np.asarray([held_out[i] for i in finite]), np.asarray([chosen[i][LABEL] for i in finite]))
    if a <= 0:
        print(f"the held-out scores do not rank right answers above wrong ones (platt slope {a:.3f}): nothing written",
              file=sys.stderr)
        return report, None
    final = replace(fit_answer(final_ranker, *_rows(list(chosen.values()))), platt_a=a, platt_b=b, chooser=chooser)
    # the threshold rule on the pooled held-out scores, calibrated
    threshold = final.confidence(pick_threshold([held_out[i] for i in held_out if chosen[i]["right"]]))
    bins = []
    conf = np.asarray([final.confidence(held_out[i]) for i in finite])
    hit = np.asarray([chosen[i][LABEL] for i in finite], dtype=float)
    for lo in (0.0, 0.2, 0.4, 0.6, 0.8):
        mask = (conf >= lo) & ((conf < lo + 0.2) if lo < 0.8 else (conf <= 1.0))
        if mask.any():
            bins.append({"bin": f"{lo:.1f}-{lo + 0.2:.1f}", "n": int(mask.sum()),
                         "mean_confidence": round(float(conf[mask].mean()), 3), "right": round(float(hit[mask].mean()), 3)})
    report["calibration"] = {"platt_a": round(a, 4), "platt_b": round(b, 4), "threshold": round(threshold, 4),
                             "reliability (held-out)": bins}
    return report, replace(final, threshold=round(threshold, 4))


def main() -> int:
    global LABEL
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--collect", action="store_true", help="search every training question (needs the tenants)")
    parser.add_argument("--groups", default=None, help="with --collect: only these datasets (comma-separated)")
    parser.add_argument("--write", action="store_true", help=f"write {MODEL_PATH.relative_to(ROOT)}")
    parser.add_argument("--json", type=Path, default=None, help="write the report here too")
    parser.add_argument("--label", choices=("right", "answerable"), default="right",
                        help="what the answer model learns (see LABEL)")
    args = parser.parse_args()
    LABEL = args.label
    cases = collect(set(args.groups.split(",")) if args.groups else None) if args.collect else json.loads(CACHE.read_text(encoding="utf-8"))
    similarity = CachedSimilarity()
    groups = sorted({c["group"] for c in cases})
    data = unit_data(cases, similarity)
    by_group = {g: [i for i, c in enumerate(cases) if c["group"] == g] for g in groups}
    baseline = {i: answer_case(c, None, similarity) for i, c in enumerate(cases)}
    rankers = {g: fit_ranker(data, [i for h in groups if h != g for i in by_group[h]], cases) for g in groups}
    final_ranker = fit_ranker(data, list(range(len(cases))), cases)
    reports, finals = {}, {}
    for chooser in ("rules", "ranker"):
        report, final = _validate(cases, groups, by_group, rankers, final_ranker, chooser, baseline, similarity)
        if final is None:
            return 1
        reports[chooser], finals[chooser] = report, final
    if similarity.missed:
        similarity.save()
    # the rule fixed before the fit: the ranker chooses the unit only if, held out, it finds the right
    # answer at least as often as the rules on every dataset; else the rules choose and the model only
    # says how sure the answer is
    ranker_wins = all(reports["ranker"]["lodo"][g]["right_before_threshold"]
                      >= reports["rules"]["lodo"][g]["right_before_threshold"] for g in groups)
    chooser = "ranker" if ranker_wins else "rules"
    report, final = reports[chooser], finals[chooser]
    report["chooser"] = chooser
    report["other_chooser"] = {k: v for k, v in reports["ranker" if chooser == "rules" else "rules"].items()
                               if k in ("lodo", "calibration")}
    report["cases"] = {g: {v: sum(1 for i in by_group[g] if cases[i]["variant"] == v) for v in ("asked", "removed", "elsewhere")}
                       for g in groups}
    report["weights"] = dict(zip(FEATURES, np.round(final.weights, 3).tolist()))
    report["answer_weights"] = dict(zip(ANSWER_FEATURES, np.round(final.answer_weights, 3).tolist()))
    print(json.dumps(report, indent=1))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1), encoding="utf-8")
    if args.write:
        model = replace(final, provenance={
            "trained": datetime.date.today().isoformat(), "by": "python -m bench.train_reader --write",
            "data": "bench/reader_data/README.md", "cases": report["cases"], "lodo": report["lodo"],
            "chooser_rule": "the ranker chooses only if, held out, it finds the right answer at least as often as the "
                            "rules on every dataset",
            "threshold_rule": f"the highest confidence withholding at most {1 - KEEP:.0%} of the right answers "
                              "among the pooled leave-one-dataset-out scores"})
        MODEL_PATH.write_text(json.dumps(model.to_dict(), ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {MODEL_PATH}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
