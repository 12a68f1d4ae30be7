"""Numbers a question states that the passages its answer quotes never write (pure).

A question that states a number presupposes it: "the first tram of route 11", "appendix 3 of the price
list", "trips booked in 2024". When no passage the answer quotes writes that number anywhere (text,
title or heading), the answer is about something else (route 7's timetable, the price list as a whole)
and is withheld. Numbers are rarely paraphrased, unlike words, so the check costs right answers little
(docs/reader.md, "A describing clause searched as its own question, numbers the answering passages never
write").
"""
from __future__ import annotations

from core.text.tokens import WORD
from answers.types import Passage
from answers.units import Picked

def _numbers(text: str) -> dict[str, str]:
    """The digit runs of a text by value ("05" and "5" are one number; no int(): a hostile run of
    thousands of digits is still a key), each as first written."""
    found: dict[str, str] = {}
    for word in WORD.findall(text):
        if word.isdecimal() and word.isascii():
            found.setdefault(word.lstrip("0") or "0", word)
    return found


def unstated_numbers(question: str, passages: list[Passage], picked: list[Picked]) -> tuple[str, ...]:
    """The question's numbers that none of the quoted passages (`picked`: 1-based passage numbers) writes,
    in the question's order; empty when the answer quotes nothing."""
    quoted = {p.passage for p in picked if 0 < p.passage <= len(passages)}
    if not quoted:
        return ()
    written: set[str] = set()
    for n in quoted:
        page = passages[n - 1]
        written |= set(_numbers(f"{page.title}\n{page.heading}\n{page.text}"))
    return tuple(text for value, text in _numbers(question).items() if value not in written)
