"""What every reranker shares: the protocol the searcher calls, the error it raises, its default time
limit, and the check of an untrusted ranking (an API's or a model's) before the searcher uses it."""
from __future__ import annotations

import math
import numbers
from typing import Any, Iterable, Protocol

from core.errors import CrossroadsError
from core.passages import ChunkText

DEFAULT_TIMEOUT_S = 0.8  # a reranker slower than this costs more latency than it buys precision


class Reranker(Protocol):
    """May also declare `other_script_share` (vector/search/rerank/cut.py): it scores a page in the other
    script than the query lower for the same relevance, and the calibrated threshold makes up for that."""

    name: str

    def rerank(self, query: str, candidates: list[ChunkText], top_k: int) -> list[tuple[int, float]]:
        """(index into candidates, score) best first, at most top_k. May raise or be slow."""
        ...


class RerankError(CrossroadsError):
    """A reranker failed or answered something we cannot trust; the searcher falls back to RRF."""


def checked_ranking(pairs: Iterable[tuple[Any, Any]], n: int, top_k: int, who: str) -> list[tuple[int, float]]:
    """Validate (index, score) pairs from an API or a model and return them best first, at most top_k."""
    out = validated_ranking(pairs, n, who)
    # our own sort, not the answer's order: ties by index keep equal scores in fused (RRF) order
    out.sort(key=lambda pair: (-pair[1], pair[0]))
    return out[:top_k]


def validated_ranking(pairs: Iterable[tuple[Any, Any]], n: int, who: str) -> list[tuple[int, float]]:
    """(index, score) pairs from an API or a model, in their own order, all of them checked.

    Raises on a non-integer or out-of-range index, a repeated index or a missing / non-finite score:
    a silently misaligned ranking would show the user the wrong passages.
    """
    out: list[tuple[int, float]] = []
    seen: set[int] = set()
    for index, score in pairs:
        if isinstance(index, bool) or not isinstance(index, numbers.Integral) or not 0 <= index < n:
            raise RerankError(f"{who} returned index {index!r}, outside 0..{n - 1}")
        if index in seen:
            raise RerankError(f"{who} returned index {index} twice")
        if isinstance(score, bool) or not isinstance(score, numbers.Real) or not math.isfinite(score):
            raise RerankError(f"{who} returned score {score!r} for index {index}; expected a finite number")
        seen.add(int(index))
        out.append((int(index), float(score)))
    if n and not out:
        raise RerankError(f"{who} ranked none of the {n} candidates")
    return out
