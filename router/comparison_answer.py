"""The offline answer to a comparison: each side answered from the passages about it, each cited.

"How does A differ from B on X?", "Which is older, A or B?", "Are A and B both X?": the reader needs
what the corpus says of each side, side by side, and never one side's fact presented as the other's.
So each side is answered (`local_answer`, its own query: the side's name with the compared
attribute) only from the passages about that side (their title or last heading holds most words of
its name; when none does, those whose text holds all of them), and a side no passage is about says so instead of
borrowing the other side's passages. A yes/no question ("Are A and B both film directors?",
"Являются ли A и B ...") is answered "Yes" when every side's answer states the compared attribute;
otherwise no verdict is given (a passage that does not state X is no evidence that A is not X), and
the sides' statements are left for the reader.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Sequence

from router.answer_units import CYRILLIC, Extracted, same_word
from router.local_answer import local_answer
from router.question_text import AUX_START, fold, is_function_word, stem_of, stems_of, title_core, words_of
from router.types import Passage

NOT_SAID = {"en": "the passages do not say.", "ru": "в найденных фрагментах об этом не сказано."}
YES = {"en": "Yes: the passages about each say so.", "ru": "Да: это сказано во фрагментах о каждом."}


def comparison_answer(question: str, passages: list[Passage], sides: Sequence[tuple[str, str]],
                      attribute: str = "") -> Extracted:
    """`sides`: (name, query) per compared entity; `attribute`: what is compared ("film directors")."""
    language = "ru" if CYRILLIC.search(question) else "en"
    lines, picked, confidences, stated = [], [], [], []
    seen: set[tuple[int, int]] = set()
    for name, query in sides:
        answer = local_answer(query, about(passages, name), max_units=2)
        if not answer.text:
            lines.append(f"{name}: {NOT_SAID[language]}")
            confidences.append(0.0)
            stated.append(False)
            continue
        lines.append(f"{name}: {answer.text}")
        confidences.append(answer.confidence)
        stated.append(states(answer.text, attribute))
        for p in answer.picked:
            if (p.passage, p.position) not in seen:
                seen.add((p.passage, p.position))
                picked.append(p)
    if is_yes_no(question) and sides and all(stated):
        lines.insert(0, YES[language])
    return Extracted(" ".join(lines), picked, min(confidences, default=0.0))


def about(passages: list[Passage], name: str) -> list[Passage]:
    """The passages with only those about `name` readable (the others blanked, so citation numbers stay
    the positions in `passages`): those whose title or last heading holds most of the name's words (as
    `question_text.covers`, but "US" is no pronoun); when none does, those whose text holds all of them (a passage about the other side that mentions this one is about the
    other side, so it counts only then)."""
    want = name_words(name)

    def names_it(label: str) -> bool:  # most of the side's words: "birth of Robert Young" / "Robert Young (musician)"
        return bool(want) and len(want & name_words(label)) >= math.ceil(0.6 * len(want))

    chosen = {i for i, p in enumerate(passages)
              if names_it(title_core(p.title)) or names_it(p.heading.split(">")[-1] if p.heading else "")} or {
        i for i, p in enumerate(passages) if want and want <= name_words(f"{p.title} {p.heading} {p.text}")}
    return [p if i in chosen else dataclasses.replace(p, title="", heading="", text="")
            for i, p in enumerate(passages)]


def name_words(text: str) -> set[str]:
    """The stems of a name's words: function words left out, abbreviations kept ("US region" is not
    "us region")."""
    return {stem_of(w) for w in words_of(text) if not is_function_word(w)}


def is_yes_no(question: str) -> bool:
    """A question answered yes or no: it opens with an auxiliary ("Are ...", "Является ли ...") or asks
    with the Russian particle "ли"."""
    words = [fold(w).casefold() for w in words_of(question)]
    return bool(words) and (words[0] in AUX_START or "ли" in words)


def states(text: str, attribute: str) -> bool:
    """Whether `text` says every content word of `attribute` (two stems of one word count as one)."""
    want = stems_of(attribute)
    have = stems_of(text)
    return bool(want) and all(any(w == h or same_word(w, h) for h in have) for w in want)
