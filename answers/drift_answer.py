"""The offline DRIFT answer (router/drift.py gathers what it is written from): one line per community
report and one per follow-up search, each the sentence of its passage closest to the question or the
follow-up, each cited. Every [N] is a passage sent."""
from __future__ import annotations

import re
from typing import Sequence

from core.citations import cited_numbers
from core.sentences import split_sentences
from core.text.terms import normalise, stem
from core.text.tokens import WORD
from answers.question import Question
from answers.types import Passage

HEADER = {"english": "Offline answer (extractive, DRIFT: from {reports} community reports to {searches} local "
                     "searches; no LLM):",
          "russian": "Офлайн-ответ (извлечённый, DRIFT: от {reports} отчётов сообществ к {searches} локальным "
                     "поискам; без LLM):"}
MAX_SENTENCE_CHARS = 400


def _stems(text: str) -> set[str]:
    return {stem(normalise(w)) for w in WORD.findall(text.lower()) if len(w) >= 3}


def best_sentence(query: str, text: str) -> str:
    """The passage's sentence sharing most words with the query (the first on a tie)."""
    q = _stems(query)
    sentences = [s.strip() for s in split_sentences(text) if s.strip()] or [text.strip()]
    chosen = max(sentences, key=lambda s: len(q & _stems(s)))
    return chosen if len(chosen) <= MAX_SENTENCE_CHARS else chosen[:MAX_SENTENCE_CHARS].rstrip() + "…"


def drift_answer(question: Question, passages: list[Passage], follow_ups: Sequence[str],
                 best: dict[int, int]) -> tuple[str, dict[int, str]]:
    """The answer and, per cited number, the text it quotes. `passages`: reports first, then chunks,
    numbered from 1; `follow_ups`: the searches' queries in order; `best`: a follow-up's index -> the
    number of its best passage (a follow-up that found nothing has none)."""
    language = question.language
    lines = [HEADER.get(language, HEADER["english"]).format(
        reports=sum(1 for p in passages if p.kind == "report"), searches=len(follow_ups))]
    quotes: dict[int, str] = {}
    for n, p in enumerate(passages, 1):
        if p.kind == "report":
            sentence = best_sentence(question.text, p.text)
            lines.append(f"- {p.title}: {sentence} [{n}]")
            quotes[n] = sentence
    for i, query in enumerate(follow_ups):
        n = best.get(i)
        if n is None:
            continue
        sentence = best_sentence(query, passages[n - 1].text)
        lines.append(f"- {query}: {sentence} [{n}]")
        quotes[n] = f"{quotes[n]} {sentence}" if n in quotes and sentence not in quotes[n] else sentence
    text = "\n".join(lines)
    assert set(cited_numbers(text)) <= set(range(1, len(passages) + 1))
    return text, quotes
