"""The offline answer to a comparison: each side answered from the passages about it, each cited.

"How does A differ from B on X?", "Which is older, A or B?", "Are A and B both X?": the reader needs
what the corpus says of each side, side by side, and never one side's fact presented as the other's.
So each side is answered (`local_answer`, its own query: the side's name with the compared
attribute) only from the passages about that side (their title or heading names it; when none does,
those whose text holds every word of its name), and a side no passage is about says so instead of
borrowing the other side's passages. A yes/no question ("Are A and B both film directors?",
"Являются ли A и B ...") is answered "Yes" when every side's answer states the compared attribute;
otherwise no verdict is given (a passage that does not state X is no evidence that A is not X), and
the sides' statements are left for the reader.
"""
from __future__ import annotations

import dataclasses
from typing import Sequence

from router.answer_units import CYRILLIC, Extracted, same_word
from router.local_answer import local_answer
from router.question_text import AUX_START, covers, fold, stems_of, words_of
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
    the positions in `passages`): those whose title or heading names it; when none does, those whose
    text has every word of the name (a passage about the other side that mentions this one is about the
    other side, so it counts only then)."""
    want = stems_of(name)
    chosen = {i for i, p in enumerate(passages) if covers(dataclasses.replace(p, text=""), name)} or {
        i for i, p in enumerate(passages) if want and want <= stems_of(f"{p.title} {p.heading} {p.text}")}
    return [p if i in chosen else dataclasses.replace(p, title="", heading="", text="")
            for i, p in enumerate(passages)]


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
