"""Which reranked passages pass the calibrated threshold. Pure: no I/O.

The threshold answers "does this corpus hold anything relevant to the question?" and was calibrated on
lists of one language. To the offline reranker a page in the other script than the question scores lower
for the same relevance: its words reach the reranker only through the dictionary, so its coverage and
word-pair features are weaker. Held to the same bar, about a quarter of the answering pages of questions
asked in the other language than their page were cut from `POST /v1/search` (docs/reader.md). So a
reranker that scores that way declares a share (`other_script_share`, the offline one
`OTHER_SCRIPT_SHARE`): once the list's best passage has passed the threshold (the corpus is about the
question), a page in the other script passes too when the reranker holds it at least that share as likely
relevant as the best one. A list whose best passage fails the threshold stays empty: questions the corpus
knows nothing about come back with nothing, as before, in either script. A reranker that reads both
languages itself (an API's cross-encoder) declares none and holds every page to the threshold.
"""
from __future__ import annotations

from typing import Sequence

# a tenth as likely relevant as the list's best passage: a page the reranker itself ranks as a plausible
# second answer, not the tail of the candidate list
OTHER_SCRIPT_SHARE = 0.1


def passing(scores: Sequence[float], other_script: Sequence[bool], threshold: float | None,
            other_script_share: float | None = None) -> list[bool]:
    """For each reranked passage (`scores` the reranker's probabilities), whether it passes: at or above
    `threshold`, or (written in the other script than the question) at least `other_script_share` of the
    best score when the best passed. No threshold: everything passes; no share: the threshold alone."""
    if threshold is None:
        return [True] * len(scores)
    best = max(scores, default=float("-inf"))
    answered = best >= threshold and other_script_share is not None
    return [score >= threshold or (answered and other and score >= other_script_share * best)
            for score, other in zip(scores, other_script)]
