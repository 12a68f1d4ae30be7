"""Document-level retrieval metrics, as defined by the seed's `eval_retrieval.py`.

Every function takes a ranked list of *document* ids, best first. Search returns chunks, so the
harness first maps hits to their doc ids and calls `dedupe_docs`: a document counts as found at the
rank of its best chunk, and a second chunk of the same document neither adds recall nor takes a
second place in DCG (the seed ranks opaque ids and does no such step; see `dedupe_docs`).

Definitions (seed formulas; the seed's search already cut the list to k, here `k` does it):
- recall@k      = |top-k ∩ relevant| / |relevant|; undefined without relevant documents, so it raises;
- precision@k   = |top-k ∩ relevant| / k (the seed has none; fixed denominator as in trec_eval, so
                  returning fewer than k hits is not rewarded);
- reciprocal rank = 1 / rank of the first relevant document within the top k, else 0; MRR is its mean;
- nDCG@k        = DCG / IDCG with gain 2^grade - 1 and discount 1 / log2(rank + 1); IDCG is the DCG of
                  the k best grades among ALL known relevant documents, retrieved or not, so a missed
                  relevant document lowers the score; 0.0 when there is nothing relevant (as the seed);
- evidence recall@k = 1.0 when every gold document is in the top k, else 0.0 (multi-hop questions
                  need all their evidence; one of two paragraphs is not half an answer);
- recall@5 as HippoRAG reports it (Gutiérrez et al. 2024, and HippoRAG 2): per question the share of its
                  gold passages among the top 5, averaged over the questions; always at 5 whatever the run's
                  k, so the number compares with published tables (their passages are this harness's
                  documents: one corpus line each).
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence


def dedupe_docs(ranked_chunk_doc_ids: Iterable[str]) -> list[str]:
    """Doc ids of ranked chunks, each kept at its first (best) position."""
    seen: set[str] = set()
    out: list[str] = []
    for doc_id in ranked_chunk_doc_ids:
        if doc_id not in seen:
            seen.add(doc_id)
            out.append(doc_id)
    return out


def _check_k(k: int) -> None:
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")


def recall_at_k(ranked_doc_ids: Sequence[str], relevant: set[str], k: int) -> float:
    _check_k(k)
    if not relevant:
        # The seed divides by zero here; a question with no judged-relevant document must be
        # skipped by the caller, not silently scored 0 (that would drag the mean down).
        raise ValueError("recall is undefined for a question with no relevant documents")
    return len(set(ranked_doc_ids[:k]) & set(relevant)) / len(relevant)


def precision_at_k(ranked_doc_ids: Sequence[str], relevant: set[str], k: int) -> float:
    _check_k(k)
    return len(set(ranked_doc_ids[:k]) & set(relevant)) / k


def reciprocal_rank(ranked_doc_ids: Sequence[str], relevant: set[str], k: int) -> float:
    _check_k(k)
    for rank, doc_id in enumerate(ranked_doc_ids[:k], start=1):
        if doc_id in relevant:
            return 1.0 / rank
    return 0.0


def _gain(grade: int) -> float:
    # Grades <= 0 are judged irrelevant (some qrels use -1/-2 for spam): no gain, never negative.
    return float(2 ** grade - 1) if grade > 0 else 0.0


def ndcg_at_k(ranked_doc_ids: Sequence[str], grades: Mapping[str, int], k: int) -> float:
    _check_k(k)
    dcg = sum(_gain(grades.get(d, 0)) / math.log2(i + 2) for i, d in enumerate(ranked_doc_ids[:k]))
    # Ideal ordering over every known relevant document, not only the retrieved ones.
    ideal = sorted((g for g in grades.values() if g > 0), reverse=True)[:k]
    idcg = sum(_gain(g) / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def evidence_recall_at_k(ranked_doc_ids: Sequence[str], gold: set[str], k: int) -> float:
    _check_k(k)
    if not gold:
        raise ValueError("evidence recall is undefined for a question with no gold documents")
    return 1.0 if set(gold) <= set(ranked_doc_ids[:k]) else 0.0


HIPPORAG_K = 5


def hipporag_recall_at_k(ranked_doc_ids: Sequence[str], gold: set[str], k: int = HIPPORAG_K) -> float:
    """HippoRAG's recall@k: the share of the question's gold passages in the top k (partial credit, unlike
    evidence recall's all-or-nothing)."""
    _check_k(k)
    if not gold:
        raise ValueError("recall@k is undefined for a question with no gold passages")
    return len(set(ranked_doc_ids[:k]) & set(gold)) / len(gold)


def percentile(values: Iterable[float], p: float) -> float:
    """The p-th percentile (0-100), linear interpolation between closest ranks (numpy's default)."""
    data = sorted(values)
    if not data:
        raise ValueError("percentile of no values")
    if not 0 <= p <= 100:
        raise ValueError(f"percentile must be within 0..100, got {p!r}")
    pos = (len(data) - 1) * p / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(data) - 1)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


@dataclass(frozen=True)
class QueryScores:
    """One question's scores at one k. `found` is the deduplicated top-k doc ids, in rank order;
    `missing` the relevant ids not among them (highest grade first), for reading misses by eye."""

    qid: str
    recall: float
    precision: float
    rr: float
    ndcg: float
    evidence_recall: float | None = None  # only for multi-gold questions
    recall_at_5: float | None = None  # HippoRAG's recall@5, at 5 whatever k
    latency_ms: float | None = None
    found: tuple[str, ...] = field(default=())
    missing: tuple[str, ...] = field(default=())


def score_query(
    qid: str,
    ranked_chunk_doc_ids: Iterable[str],
    grades: Mapping[str, int],
    k: int,
    *,
    multi_gold: bool = False,
    latency_ms: float | None = None,
) -> QueryScores:
    """All metrics for one question from the doc ids of its ranked chunks (deduplicated here)."""
    ranked = dedupe_docs(ranked_chunk_doc_ids)
    relevant = {d for d, g in grades.items() if g > 0}
    top = ranked[:k]
    missing = sorted(relevant - set(top), key=lambda d: (-grades[d], d))
    return QueryScores(
        qid=qid,
        recall=recall_at_k(ranked, relevant, k),
        precision=precision_at_k(ranked, relevant, k),
        rr=reciprocal_rank(ranked, relevant, k),
        ndcg=ndcg_at_k(ranked, grades, k),
        evidence_recall=evidence_recall_at_k(ranked, relevant, k) if multi_gold else None,
        recall_at_5=hipporag_recall_at_k(ranked, relevant, HIPPORAG_K),
        latency_ms=latency_ms,
        found=tuple(top),
        missing=tuple(missing),
    )


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def summarise(per_query: Sequence[QueryScores]) -> dict:
    """Means over the questions (None where nothing was measured) and latency percentiles.

    `mrr` is the mean reciprocal rank; `evidence_recall` averages multi-gold questions only
    (`n_multi_gold` of them), `recall_at_5` (HippoRAG's) every question; `misses` lists the questions with nothing relevant in the top k
    (the seed's MISS lines)."""
    multi = [q.evidence_recall for q in per_query if q.evidence_recall is not None]
    latencies = [q.latency_ms for q in per_query if q.latency_ms is not None]
    return {
        "n": len(per_query),
        "recall": _mean([q.recall for q in per_query]),
        "precision": _mean([q.precision for q in per_query]),
        "mrr": _mean([q.rr for q in per_query]),
        "ndcg": _mean([q.ndcg for q in per_query]),
        "evidence_recall": _mean(multi),
        "recall_at_5": _mean([q.recall_at_5 for q in per_query if q.recall_at_5 is not None]),
        "n_multi_gold": len(multi),
        "p50_ms": percentile(latencies, 50) if latencies else None,
        "p95_ms": percentile(latencies, 95) if latencies else None,
        "misses": [q.qid for q in per_query if q.recall == 0],
    }
