"""Fusion functions for hybrid search, compared offline on cached legs (document level, k=10).

    .venv/bin/python -m bench.fusion_eval [--refresh] [--datasets ...] [--rerank]

Step 1 (needs the database; cached): every labelled dataset's questions are searched once on its
tenant `eval_<name>` (never ingested here) with the configured searcher; both legs' top-N lists
(N = settings.search_candidates) with their scores, the full-text leg's term statistics and the
details of every chunk either leg returned go to .crossroads/fusion_cache.json.

Step 2 (pure Python): each candidate fusion function fuses the two cached lists exactly as
`HybridSearcher.search` would (top-N fused candidates, the first k * CHUNKS_PER_DOC_SLACK chunks
as hits), hits are mapped to documents and scored with `evaluation.metrics.score_query`,
the metrics of `crossroads eval`. Free parameters (one per function; two for weighted RRF and the
query-adaptive one) are chosen on the mean nDCG@10 over datasets and checked leave-one-dataset-out,
never per dataset. The cache is reused while it exists: --refresh after re-indexing a dataset. With --rerank each fusion's top-N
is also reranked by the shipped offline reranker (its weights unchanged).

Result on the dev split (2026-11-30): z-score fusion with alpha (vector weight) = 0.6 has the best
mean nDCG@10 of the one-parameter functions (0.732; RRF k=60 0.704) and became the default (`vector.search.fusion`). It beats both legs
on anthropic_docs, xquad_ru and multihop but stays below dense on beir_msmarco and beir_dbpedia;
so does every fixed weighting here, and the query-adaptive one (peakedness-weighted z: mean 0.735
with two parameters, leave-one-dataset-out 0.720 against 0.716, but lower recall and multihop
evidence recall: within noise, not worth the second parameter). Also tried outside this script and
not kept: scoring every candidate on both legs (cosine of BM25-only chunks, BM25 of vector-only
chunks) before a convex combination, about +0.002 mean nDCG@10 for an extra query per search.
Tried later on the same cache, not kept: ranking chunks by their document's evidence (best chunk +
beta x the next ones: anthropic_docs nDCG 0.766 -> 0.75-0.69 for beta 0.1-0.5, others unchanged),
and a BM25 weight scaled by the two legs' top-10 document overlap (moves nDCG from anthropic_docs
to BEIR: at best mean 0.7336 against 0.7321, BEIR still not above dense on both sets).
Re-measured 2026-12-01 after chunk contexts gained the document's location: z-score 0.6 mean 0.7396
(RRF k=60 0.7130, dense 0.7287, BM25 0.6435); 0.7 edges it (0.7414) by moving nDCG from
anthropic_docs, xquad_ru and multihop to BEIR (MRR 0.886 -> 0.879, 0.968 -> 0.955, 0.960 -> 0.946),
still below dense on beir_msmarco: within noise of 19-50 questions, so the default stays 0.6.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Callable, Sequence

from bench.common import ROOT, SHARED_DATA
from evaluation.datasets import load_dataset
from evaluation.metrics import score_query, summarise
from evaluation.runner import CHUNKS_PER_DOC_SLACK, EVAL_GROUP
from vector.search.fusion import zscore_fusion, zscores

CACHE = ROOT / ".crossroads" / "fusion_cache.json"
DATASETS = ("anthropic_docs", "xquad_ru", "multihop", "beir_msmarco", "beir_dbpedia")
K = 10
METRICS = ("recall", "mrr", "ndcg", "evidence_recall")

Leg = list[tuple[int, float]]


# --- step 1: the legs, once ------------------------------------------------------------------


def collect(names: Sequence[str], refresh: bool) -> dict:
    cached = json.loads(CACHE.read_text(encoding="utf-8")) if CACHE.exists() and not refresh else {}
    missing = [n for n in names if n not in cached]
    if not missing:
        return cached
    from core.database import open_database
    from core.settings import Settings
    from vector.search import sql as search_sql
    from vector.search.factory import make_searcher

    settings = Settings()
    db = open_database(settings)
    try:
        with db.connection() as conn:
            present = dict(conn.execute("SELECT tenant_id, count(*) FROM chunks GROUP BY 1").fetchall())
        with make_searcher(db, settings, reranker="none", threshold=False) as searcher:
            for name in missing:
                tenant = f"eval_{name}"
                if tenant not in present:
                    print(f"{name}: tenant {tenant} not ingested; skipped", flush=True)
                    continue
                dataset = load_dataset(SHARED_DATA / name)
                rows, ids, started = [], set(), time.perf_counter()
                for q in dataset.scored_queries:
                    result = searcher.search(tenant, [EVAL_GROUP], q.question, k=searcher.candidates, mode="hybrid")
                    stages = result.trace["stages"]
                    vector = [(e["id"], e["score"]) for e in stages.get("vector", [])]
                    fts = [(e["id"], e["score"]) for e in stages.get("fts", [])]
                    ids.update(i for i, _ in vector + fts)
                    rows.append({"qid": q.qid, "question": q.question, "vector": vector, "fts": fts,
                                 "bm25": result.trace.get("bm25"), "tsquery": result.trace.get("tsquery"),
                                 "degraded": result.degraded})
                with db.connection() as conn:
                    details = search_sql.fetch_candidates(conn, tenant=tenant, groups=[EVAL_GROUP], ids=sorted(ids))
                cached[name] = {"tenant": tenant, "chunks": present[tenant], "candidates": searcher.candidates,
                                "queries": rows, "chunks_by_id": {str(i): list(v) for i, v in details.items()}}
                print(f"{name}: {len(rows)} questions in {time.perf_counter() - started:.0f} s", flush=True)
                CACHE.parent.mkdir(exist_ok=True)
                CACHE.write_text(json.dumps(cached), encoding="utf-8")
    finally:
        db.close()
    return cached


# --- step 2: fusion functions (pure) ---------------------------------------------------------


def _ordered(scores: dict[int, float]) -> Leg:
    return sorted(scores.items(), key=lambda p: (-p[1], p[0]))


def _ranks(leg: Leg) -> dict[int, int]:
    return {i: r for r, (i, _) in enumerate(leg, start=1)}


def fuse_rrf(vector: Leg, fts: Leg, k: float = 60, w_dense: float = 0.5) -> Leg:
    """(Weighted) RRF: 2 * w / (k + rank) per leg, so w_dense = 0.5 is plain RRF."""
    scores: dict[int, float] = {}
    for leg, w in ((vector, w_dense), (fts, 1 - w_dense)):
        for i, r in _ranks(leg).items():
            scores[i] = scores.get(i, 0.0) + 2 * w / (k + r)
    return _ordered(scores)


def _minmax(leg: Leg, floor: float | None = None) -> dict[int, float]:
    if not leg:
        return {}
    hi = max(s for _, s in leg)
    lo = min(s for _, s in leg) if floor is None else floor
    return {i: (s - lo) / (hi - lo) if hi > lo else 1.0 for i, s in leg}


def _dbsf(leg: Leg) -> dict[int, float]:
    """Distribution-based score fusion (Qdrant): (s - (mu - 3 sd)) / 6 sd, clipped to 0..1."""
    if not leg:
        return {}
    values = [s for _, s in leg]
    mu, sd = statistics.fmean(values), statistics.pstdev(values)
    if sd == 0:
        return {i: 1.0 for i, _ in leg}
    return {i: min(1.0, max(0.0, (s - mu + 3 * sd) / (6 * sd))) for i, s in leg}


def convex(normalised: tuple[dict[int, float], dict[int, float]], alpha: float, missing=(0.0, 0.0),
           mnz: bool = False) -> Leg:
    """alpha * dense + (1 - alpha) * full text; a leg that did not return a chunk gives `missing`."""
    dense, text = normalised
    scores = {}
    for i in set(dense) | set(text):
        s = alpha * dense.get(i, missing[0]) + (1 - alpha) * text.get(i, missing[1])
        if mnz:
            s *= (i in dense) + (i in text)
        scores[i] = s
    return _ordered(scores)


def fuse_mm(vector, fts, alpha=0.5):  # M2C2: min-max over the returned list
    return convex((_minmax(vector), _minmax(fts)), alpha)


def fuse_tmm(vector, fts, alpha=0.5):  # TM2C2: theoretical minimum (cosine -1... used as 0 here, BM25 0)
    return convex((_minmax(vector, floor=0.0), _minmax(fts, floor=0.0)), alpha)


def fuse_z(vector, fts, alpha=0.5):  # z-scores; a missing chunk gets its leg's lowest z: what ships
    return zscore_fusion([vector, fts], [alpha, 1 - alpha])


def fuse_peaked_z(vector, fts, gamma=1.0, alpha=0.5):
    """Query-adaptive z-score fusion: each leg's weight scaled by its peakedness (its best z-score)
    to the power gamma, so a leg whose top stands out from its list counts more for this question."""
    zd, zt = zscores(vector), zscores(fts)
    peak_d, peak_t = (max(max(z.values(), default=0.0), 1e-6) ** gamma for z in (zd, zt))
    w_d, w_t = alpha * peak_d, (1 - alpha) * peak_t
    return zscore_fusion([vector, fts], [w_d / (w_d + w_t), w_t / (w_d + w_t)])


def fuse_dbsf(vector, fts, alpha=0.5):
    return convex((_dbsf(vector), _dbsf(fts)), alpha)


def fuse_mnz(vector, fts, alpha=0.5):  # CombMNZ over min-max scores
    return convex((_minmax(vector), _minmax(fts)), alpha, mnz=True)


# --- scoring ---------------------------------------------------------------------------------


Fusion = Callable[[Leg, Leg, dict], Leg]


def _single(name: str) -> Fusion:
    return lambda vector, fts, row: list(vector if name == "vector" else fts)


DENSE, BM25 = _single("vector"), _single("fts")


class Scorer:
    def __init__(self, cache: dict, names: Sequence[str], reranker=None):
        self.data = {}
        for name in names:
            if name not in cache:
                continue
            labels = {q.qid: q for q in load_dataset(SHARED_DATA / name).scored_queries}
            entry = cache[name]
            rows = [(r, labels[r["qid"]]) for r in entry["queries"]]
            details = {int(i): v for i, v in entry["chunks_by_id"].items()}
            self.data[name] = (rows, details, entry["candidates"])
        self.reranker = reranker

    @property
    def names(self) -> list[str]:
        return list(self.data)

    def run(self, name: str, fusion: Fusion, rerank: bool = False) -> dict:
        rows, details, n_candidates = self.data[name]
        per_query = []
        for row, label in rows:
            vector = [tuple(p) for p in row["vector"]]
            fts = [tuple(p) for p in row["fts"]]
            fused = [p for p in fusion(vector, fts, row)[:n_candidates] if p[0] in details]
            if rerank:
                order = self._rerank(row, vector, fts, fused, details)
            else:
                order = [i for i, _ in fused[: K * CHUNKS_PER_DOC_SLACK]]
            per_query.append(score_query(label.qid, [details[i][0] for i in order], label.grades, K,
                                         multi_gold=label.multi_gold))
        summary = summarise(per_query)
        return {m: summary[m] for m in METRICS}

    def _rerank(self, row, vector, fts, fused, details) -> list[int]:
        from vector.search.hybrid import Candidate

        vr, fr = _ranks(vector), _ranks(fts)
        vs, fs = dict(vector), dict(fts)
        candidates = []
        for rank, (i, score) in enumerate(fused, start=1):
            doc_id, title, heading, text, lang = details[i]
            # the reranker's `rrf` feature: plain RRF (k=60) of the leg ranks, whatever fused the list
            rrf60 = (1 / (60 + vr[i]) if i in vr else 0.0) + (1 / (60 + fr[i]) if i in fr else 0.0)
            candidates.append(Candidate(i, doc_id, title, heading, text, lang, vr.get(i), vs.get(i), fr.get(i),
                                        fs.get(i), rank, rrf60, score))
        ranked = self.reranker.rerank(row["question"], candidates, K * CHUNKS_PER_DOC_SLACK)
        return [candidates[index].id for index, _ in ranked]


# --- the comparison --------------------------------------------------------------------------

# family -> (parameter grid, fusion of (vector, fts, param)); one free parameter each, except
# weighted RRF (k and the dense weight)
FAMILIES: dict[str, tuple[list, Callable]] = {
    "rrf (k)": ([1, 5, 10, 20, 40, 60, 100], lambda v, t, p: fuse_rrf(v, t, k=p)),
    "weighted rrf (k, w_dense)": ([(k, w) for k in (1, 5, 10, 20, 60, 100) for w in (0.4, 0.5, 0.6, 0.7, 0.8)],
                                  lambda v, t, p: fuse_rrf(v, t, k=p[0], w_dense=p[1])),
    "min-max convex, M2C2 (alpha)": ([0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9], fuse_mm),
    "theoretical min-max, TM2C2 (alpha)": ([0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9], fuse_tmm),
    "z-score convex (alpha)": ([0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9], fuse_z),
    "peakedness-weighted z (gamma, alpha)": ([(g, a) for g in (1, 2, 3) for a in (0.5, 0.6, 0.7, 0.8)],
                                             lambda v, t, p: fuse_peaked_z(v, t, p[0], p[1])),
    "DBSF mean±3sd (alpha)": ([0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9], fuse_dbsf),
    "CombMNZ min-max (alpha)": ([0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9], fuse_mnz),
}
SHORT = {"anthropic_docs": "anthropic", "xquad_ru": "xquad_ru", "multihop": "multihop",
         "beir_msmarco": "msmarco", "beir_dbpedia": "dbpedia"}


def _fusion(family: str, param) -> Fusion:
    fn = FAMILIES[family][1]
    return lambda vector, fts, row: fn(vector, fts, param)


def _cell(m: dict) -> str:
    ev = f" ev {m['evidence_recall']:.2f}" if m["evidence_recall"] is not None else ""
    return f"R {m['recall']:.3f} MRR {m['mrr']:.3f} nDCG {m['ndcg']:.3f}{ev}"


def compare(scorer: Scorer, rerank: bool) -> dict:
    names = scorer.names
    legs = {n: {"dense": scorer.run(n, DENSE), "bm25": scorer.run(n, BM25)} for n in names}
    best_leg = {n: max(legs[n]["dense"]["ndcg"], legs[n]["bm25"]["ndcg"]) for n in names}
    grid: dict[str, dict] = {}
    for family, (params, _) in FAMILIES.items():
        grid[family] = {json.dumps(p): {n: scorer.run(n, _fusion(family, p)) for n in names} for p in params}
    report: dict = {"legs": legs, "families": {}}
    print("\nGrid (mean nDCG@10 over datasets; Δ = hybrid minus the better leg, per dataset):")
    for family, by_param in grid.items():
        for p, per in by_param.items():
            deltas = [per[n]["ndcg"] - best_leg[n] for n in names]
            print(f"  {family:36} {p:10} mean nDCG {statistics.fmean(per[n]['ndcg'] for n in names):.4f} "
                  f"mean Δ {statistics.fmean(deltas):+.4f} min Δ {min(deltas):+.4f} "
                  f"beats both legs on {sum(d > 0 for d in deltas)}/{len(names)}")
    for family, by_param in grid.items():
        mean = {p: statistics.fmean(per[n]["ndcg"] for n in names) for p, per in by_param.items()}
        chosen = max(mean, key=lambda p: (round(mean[p], 6), p))
        # leave one dataset out: the parameter chosen on the other datasets, scored on the held-out one
        lodo = {}
        for held in names:
            others = [n for n in names if n != held]
            p_held = max(by_param, key=lambda p: (round(statistics.fmean(by_param[p][n]["ndcg"] for n in others), 6), p))
            lodo[held] = {"param": json.loads(p_held), "ndcg": by_param[p_held][held]["ndcg"]}
        report["families"][family] = {"param": json.loads(chosen), "mean_ndcg": mean[chosen],
                                      "metrics": by_param[chosen], "lodo": lodo}
        if rerank:
            report["families"][family]["rerank"] = {n: scorer.run(n, _fusion(family, json.loads(chosen)), True)
                                                    for n in names}
    if rerank:
        report["rrf60_rerank"] = {n: scorer.run(n, _fusion("rrf (k)", 60), True) for n in names}
    return report


def print_report(report: dict, names: list[str]) -> None:
    legs = report["legs"]
    print("\nPer dataset (document level, k=10). Parameter chosen on the mean nDCG@10 over all datasets;"
          " 'lodo' = nDCG@10 with the parameter chosen on the other datasets.")
    header = "| function (param) | " + " | ".join(SHORT[n] for n in names) + " | mean nDCG |"
    print(header + "\n|" + "---|" * (len(names) + 2))
    for label in ("dense", "bm25"):
        print(f"| {label} leg | " + " | ".join(_cell(legs[n][label]) for n in names)
              + f" | {statistics.fmean(legs[n][label]['ndcg'] for n in names):.4f} |")
    for family, r in report["families"].items():
        print(f"| {family} = {r['param']} | " + " | ".join(
            _cell(r["metrics"][n]) + f" (lodo {r['lodo'][n]['ndcg']:.3f})" for n in names)
              + f" | {r['mean_ndcg']:.4f} |")
    if "rrf60_rerank" in report:
        print("\n+ offline reranker (shipped weights; its `rrf` feature taken from the leg ranks):")
        print("| rrf k=60 + rerank | " + " | ".join(_cell(report["rrf60_rerank"][n]) for n in names) + " |")
        for family, r in report["families"].items():
            print(f"| {family} = {r['param']} + rerank | " + " | ".join(_cell(r["rerank"][n]) for n in names) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS))
    parser.add_argument("--refresh", action="store_true", help="search again, ignoring the cache")
    parser.add_argument("--rerank", action="store_true", help="also rerank each chosen fusion's candidates")
    parser.add_argument("--json", type=Path, help="write the report here")
    args = parser.parse_args()
    cache = collect(args.datasets, args.refresh)
    reranker = None
    if args.rerank:
        from vector.search.rerank.offline import OfflineReranker

        reranker = OfflineReranker()
    scorer = Scorer(cache, args.datasets, reranker)
    report = compare(scorer, args.rerank)
    print_report(report, scorer.names)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
