"""The offline answer: the sentences of the passages that best support the question, each cited.

No LLM writes anything: every sentence is copied from a passage. The first sentence is the one
sharing most of the question's content stems (weighted by rarity among the candidates, plus
adjacent stem pairs and a small prior for the passage's rank). Each next one must add something:
question stems not covered yet, or words the chosen sentences introduced (a multi-hop answer's
second hop talks about the first hop's answer, not about the question's words), within a sentence
and character budget.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from core.sentences import split_sentences
from router.types import Passage
from core.text.terms import QueryTerms, content_stems

MIN_SENTENCE_CHARS = 12


@dataclass(frozen=True)
class Picked:
    passage: int  # 1-based number of the passage in the prompt order
    position: int  # sentence index within the passage
    text: str
    score: float


def _candidates(passages: list[Passage]) -> list[tuple[int, int, str, frozenset[str], tuple[str, ...]]]:
    out = []
    for n, p in enumerate(passages, start=1):
        for i, sentence in enumerate(split_sentences(p.text)):
            sentence = sentence.strip()
            if len(sentence) < MIN_SENTENCE_CHARS:
                continue
            sequence = tuple(content_stems(sentence))
            out.append((n, i, sentence, frozenset(sequence), sequence))
    return out


def pick_sentences(question: str, passages: list[Passage], *, max_sentences: int = 3,
                   max_chars: int = 700, min_gain: float = 0.15) -> list[Picked]:
    terms = QueryTerms.of(question)
    if not terms.stems or not passages:
        return []
    candidates = [c for c in _candidates(passages) if c[3] & terms.wanted]
    if not candidates:
        return []
    every = {s for c in candidates for s in c[3]}
    df = {s: sum(1 for c in candidates if s in c[3]) for s in every}
    idf = {s: math.log(1 + len(candidates) / (1 + df[s])) for s in every}
    total = sum(idf[s] for s in terms.stems if s in idf) or 1.0

    def support(c) -> float:
        coverage = sum(idf[s] for s in terms.wanted & c[3]) / total
        pairs = set(zip(c[4], c[4][1:]))
        bigram = len(terms.bigrams & pairs) / len(terms.bigrams) if terms.bigrams else 0.0
        return coverage + 0.2 * bigram + 0.1 / c[0]

    first = min(candidates, key=lambda c: (-support(c), c[0], c[1]))
    chosen = [Picked(first[0], first[1], first[2], round(support(first), 4))]
    covered = set(first[3] & terms.wanted)
    bridge = set(first[3] - terms.wanted)  # words the answer so far introduced: the next hop's subject
    used = len(first[2])
    remaining = [c for c in candidates if c is not first]
    while remaining and len(chosen) < max_sentences:
        def gain(c) -> float:
            new = sum(idf[s] for s in (c[3] & terms.wanted) - covered) / total
            linked = sum(idf[s] for s in c[3] & bridge) / (sum(idf[s] for s in bridge) or 1.0)
            return new + 0.5 * linked + 0.05 / c[0]

        best = min((c for c in remaining if used + len(c[2]) <= max_chars), key=lambda c: (-gain(c), c[0], c[1]),
                   default=None)
        if best is None or gain(best) < min_gain:
            break
        chosen.append(Picked(best[0], best[1], best[2], round(gain(best), 4)))
        covered |= best[3] & terms.wanted
        bridge |= best[3] - terms.wanted
        used += len(best[2])
        remaining.remove(best)
    return sorted(chosen, key=lambda p: (p.passage, p.position))


def extractive_answer(question: str, passages: list[Passage], follow_ups: list[str] = (), *,
                      max_follow_ups: int = 2, **budget) -> tuple[str, list[Picked]]:
    """("sentence [n] sentence [m]", the sentences), or ("", []) when no sentence shares a content word.

    `follow_ups`: the multi-hop loop's later queries ("Billing team lead"): the best sentence for
    each of the first `max_follow_ups` is added when new, since a later hop's fact rarely shares
    the question's words."""
    picked = pick_sentences(question, passages, **budget)
    if picked:
        seen = {(p.passage, p.position) for p in picked}
        for query in follow_ups:
            if max_follow_ups <= 0:
                break
            best = pick_sentences(query, passages, max_sentences=1)
            if best and (best[0].passage, best[0].position) not in seen:
                seen.add((best[0].passage, best[0].position))
                picked.append(best[0])
                max_follow_ups -= 1
        picked.sort(key=lambda p: (p.passage, p.position))
    return " ".join(f"{p.text} [{p.passage}]" for p in picked), picked
