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

A name the question writes in the other script ("Liber servitoris" in a Russian question) is read by no
dictionary either: a page that quotes it word for word passes whatever the reranker says of it.
"""
from __future__ import annotations

from typing import Sequence

from core.text.language import detect_language
from core.text.script import script_name
from core.text.terms import normalise
from core.text.tokens import WORD

# a tenth as likely relevant as the list's best passage: a page the reranker itself ranks as a plausible
# second answer, not the tail of the candidate list
OTHER_SCRIPT_SHARE = 0.1


def passing(scores: Sequence[float], other_script: Sequence[bool], threshold: float | None,
            other_script_share: float | None = None, quoted: Sequence[bool] = ()) -> list[bool]:
    """For each reranked passage (`scores` the reranker's probabilities), whether it passes: at or above
    `threshold`, or (written in the other script than the question) at least `other_script_share` of the
    best score when the best passed, or (`quoted`) it holds a name of the question written in the other
    script word for word (`foreign_phrases`). No threshold: everything passes; no share: the threshold and
    the quoted names alone."""
    if threshold is None:
        return [True] * len(scores)
    best = max(scores, default=float("-inf"))
    answered = best >= threshold and other_script_share is not None
    quoted = list(quoted) or [False] * len(scores)
    return [score >= threshold or (answered and other and score >= other_script_share * best) or named
            for score, other, named in zip(scores, other_script, quoted)]


def foreign_phrases(question: str) -> list[str]:
    """The runs of two or more words the question writes in the other script than its own, lower-cased:
    "Liber servitoris" of "Кто написал Liber servitoris?". Such a run is a name the dictionary cannot
    read, and the offline reranker, which reads a page's words through it, scores a page quoting it no
    better than one that does not; a page that quotes it word for word is about it."""
    own = "cyrillic" if detect_language(question) == "russian" else "latin"
    runs: list[list[str]] = [[]]
    previous_end = None
    for m in WORD.finditer(question):
        word = m.group()
        foreign = word.isalpha() and script_name(word) != own
        adjacent = previous_end is not None and not question[previous_end:m.start()].strip()
        if not (foreign and adjacent and runs[-1]):
            runs.append([])
        # a name opens capitalised, and not as the question's first word
        if foreign and (runs[-1] or word[0].isupper() and previous_end is not None):
            runs[-1].append(word)
        previous_end = m.end()
    return [normalise(" ".join(run)) for run in runs if len(run) >= 2]


def quotes_any(text: str, phrases: Sequence[str]) -> bool:
    """Whether the text holds one of the phrases word for word (spacing aside)."""
    folded = " ".join(normalise(text).split())
    return any(phrase in folded for phrase in phrases)
