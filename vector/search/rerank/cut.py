"""Which reranked passages pass the calibrated threshold. Pure: no I/O.

The threshold answers "does this corpus hold anything relevant to the question?" and was calibrated on
lists of one language. A page in the other script than the question scores lower for the same relevance:
its words reach the reranker only through the dictionary, so its coverage and word-pair features are
weaker. Held to the same bar, about a quarter of the answering pages of questions asked in the other
language than their page were cut from `POST /v1/search` (docs/reader.md). So once the list's best
passage has passed the threshold (the corpus is about the question), a page in the other script passes
too when the reranker holds it at least `OTHER_SCRIPT_SHARE` as likely relevant as that best one. A list
whose best passage fails the threshold stays empty: questions the corpus knows nothing about come back
with nothing, as before, in either script.
"""
from __future__ import annotations

from typing import Sequence

# a tenth as likely relevant as the list's best passage: a page the reranker itself ranks as a plausible
# second answer, not the tail of the candidate list
OTHER_SCRIPT_SHARE = 0.1


def passing(scores: Sequence[float], other_script: Sequence[bool], threshold: float | None) -> list[bool]:
    """For each reranked passage (best first, `scores` the reranker's probabilities), whether it passes:
    at or above `threshold`, or (written in the other script than the question) within
    `OTHER_SCRIPT_SHARE` of the best when the best passed. No threshold: everything passes."""
    if threshold is None:
        return [True] * len(scores)
    best = max(scores, default=float("-inf"))
    answered = best >= threshold
    return [score >= threshold or (answered and other and score >= OTHER_SCRIPT_SHARE * best)
            for score, other in zip(scores, other_script)]
