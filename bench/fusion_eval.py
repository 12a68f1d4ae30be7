"""Fusion functions for hybrid search, compared offline on cached legs (document level, k=10).

    .venv/bin/python -m bench.fusion_eval [--refresh] [--datasets ...] [--rerank]

Step 1 (needs the database; cached): every labelled dataset's questions are searched once on its
tenant `eval_<name>` (never ingested here) with the configured searcher; both legs' top-N lists
(N = settings.search_candidates) with their scores, the full-text leg's term statistics and the
details of every chunk either leg returned go to .crossroads/fusion_cache.json.

Step 2 (pure Python): each candidate fusion function fuses the two cached lists exactly as
`HybridSearcher.search` would (top-N fused candidates, the first k * CHUNKS_PER_DOC_SLACK chunks
as hits), hits are mapped to documents and scored with `vector.evaluation.metrics.score_query`,
the metrics of `crossroads eval`. Free parameters (1 per function) are chosen on the mean over
datasets and checked leave-one-dataset-out, never per dataset. With --rerank each fusion's top-N
is also reranked by the shipped offline reranker (its weights unchanged).
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from pathlib import Path
from typing import Callable, Sequence

from bench.common import ROOT, SHARED_DATA
from vector.evaluation.datasets import load_dataset
from vector.evaluation.metrics import score_query, summarise
from vector.evaluation.runner import CHUNKS_PER_DOC_SLACK, EVAL_GROUP

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
    from vector import search_sql
    from vector.factory import make_searcher

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


def _zscore(leg: Leg) -> dict[int, float]:
    if not leg:
        return {}
    values = [s for _, s in leg]
    mu, sd = statistics.fmean(values), statistics.pstdev(values)
    return {i: (s - mu) / sd if sd > 0 else 0.0 for i, s in leg}


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


def fuse_z(vector, fts, alpha=0.5):  # z-scores; a missing chunk gets its leg's lowest z
    zd, zt = _zscore(vector), _zscore(fts)
    return convex((zd, zt), alpha, missing=(min(zd.values(), default=0.0), min(zt.values(), default=0.0)))


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
        from vector.search import Candidate

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
