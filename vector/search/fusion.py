"""Fusion of the search legs' ranked lists. Pure: no I/O, tested without a database.

Two methods (`FUSIONS`):
- "zscore" (the default): each leg's scores are standardised over the list the leg returned
  (z = (score - mean) / standard deviation), and a chunk's fused score is the weighted sum of its
  z-scores, 0.6 for the vector leg and 0.4 for the full-text leg (`DENSE_WEIGHT`). A chunk a leg did
  not return gets that leg's lowest z (its score is at most the lowest the leg returned). Unlike RRF,
  a chunk far ahead of the rest of its leg stays far ahead, and a flat leg (every candidate about
  equally good) moves the order little. Chosen on the dev split by `bench/fusion_eval.py`: of RRF
  (k, weights), min-max, theoretical min-max, z-score, DBSF and CombMNZ, each with one global
  parameter chosen on the mean nDCG@10 over the five datasets, it had the best mean (0.732, RRF
  k=60 0.704); it still trails the vector leg alone on the two BEIR sets.
- "rrf": Reciprocal Rank Fusion. It uses ranks only, so the vector leg's cosine similarities and the
  full-text leg's BM25 scores never have to be put on one scale; but rank 1 counts the same whether
  it leads by a mile or by a hair.

Both sort by fused score descending, then chunk id ascending: ties happen (for RRF often) and an
unstable order makes evaluations flicker between runs. An id repeated inside one list counts only
at its first (best) position.
"""
from __future__ import annotations

import math
from typing import Sequence

FUSIONS = ("zscore", "rrf")
DEFAULT_FUSION = "zscore"
DENSE_WEIGHT = 0.6  # of the vector leg in z-score fusion; the full-text leg gets 1 - DENSE_WEIGHT


def _ordered(scores: dict[int, float]) -> list[tuple[int, float]]:
    return sorted(scores.items(), key=lambda pair: (-pair[1], pair[0]))


def rrf(rankings: Sequence[Sequence[int]], k: int = 60) -> list[tuple[int, float]]:
    """Fuse ranked id lists: score(d) = sum over lists of 1 / (k + rank), rank starting at 1.

    Sorted by score descending, then id ascending: ties are frequent (a document at rank 3 in one
    list and one at rank 3 in the other score the same) and an unstable order makes evaluations
    flicker between runs. An id repeated inside one list counts only at its first (best) rank.
    """
    if k < 0:
        raise ValueError("rrf k must be >= 0")
    scores: dict[int, float] = {}
    for ranking in rankings:
        seen: set[int] = set()
        for position, item in enumerate(ranking, start=1):
            if item in seen:
                continue
            seen.add(item)
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + position)
    return _ordered(scores)


def zscores(scored: Sequence[tuple[int, float]]) -> dict[int, float]:
    """id -> (score - mean) / population standard deviation over the list (first occurrence of an
    id only); all 0.0 when the scores do not vary (one item, or all equal)."""
    first: dict[int, float] = {}
    for item, score in scored:
        score = float(score)
        if not math.isfinite(score):
            raise ValueError(f"score {score!r} of id {item} is not finite")
        first.setdefault(item, score)
    if not first:
        return {}
    mean = math.fsum(first.values()) / len(first)
    sd = math.sqrt(math.fsum((s - mean) ** 2 for s in first.values()) / len(first))
    if sd <= 1e-12 * max(1.0, abs(mean)):
        return dict.fromkeys(first, 0.0)
    return {item: (s - mean) / sd for item, s in first.items()}


def zscore_fusion(legs: Sequence[Sequence[tuple[int, float]]], weights: Sequence[float]) -> list[tuple[int, float]]:
    """Fuse (id, score) lists: score(d) = sum over legs of weight * z(d), z standardised within the
    leg's list; an id a leg did not return counts at that leg's lowest z. An empty leg adds nothing.

    Scores only need to be higher-is-better within each leg; their scales may differ.
    """
    if len(legs) != len(weights):
        raise ValueError("one weight per leg")
    if any(not math.isfinite(w) or w < 0 for w in weights):
        raise ValueError("weights must be finite and >= 0")
    standardised = [(z, min(z.values()), w) for z, w in zip(map(zscores, legs), weights) if z]
    scores = {}
    for item in sorted({item for z, _, _ in standardised for item in z}):
        scores[item] = math.fsum(w * z.get(item, floor) for z, floor, w in standardised)
    return _ordered(scores)
