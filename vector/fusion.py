"""Reciprocal Rank Fusion. Pure: no I/O, tested without a database.

RRF uses ranks only, so the vector leg's cosine similarities and the full-text leg's ts_rank
scores, which live on unrelated scales, never have to be normalised against each other.
"""
from __future__ import annotations

from typing import Sequence


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
    return sorted(scores.items(), key=lambda pair: (-pair[1], pair[0]))
