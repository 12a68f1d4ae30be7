"""Numbers a question states that the passage its answer is chosen from never writes (pure).

A question that states a number presupposes it: "the first tram of route 11", "appendix 3 of the price
list", "trips booked in 2024". When the passage of the answer's chosen unit writes that number nowhere
(text, title or heading; grouped in threes or not, or as a Roman numeral), the answer is about something
else (route 7's timetable, the price list as a whole) and is withheld. Numbers are rarely paraphrased,
unlike words, so the check costs right answers little (docs/reader.md, "A describing clause searched as
its own question, numbers the answering passages never write" and "Sides described by a clause, which
side has more, and the number on the answering page").
"""
from __future__ import annotations

import re

from core.text.tokens import WORD
from answers.question import Question
from answers.types import Passage
from answers.units import Picked

# A number written in groups of three ("2 000", "1,500", "12 500 000"): one value, whichever separator
_GROUPED = re.compile(r"(?<![\d.,])\d{1,3}(?:[ \u00a0\u2009\u202f,]\d{3})+(?![\d])")
_ROMAN = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}


def _roman(word: str) -> str | None:
    """The value of a Roman numeral of two letters or more ("XIX" -> "19"); None for any other word.
    Only the passages' side: "XIX век" answers "в 19 веке"."""
    if len(word) < 2 or len(word) > 15 or not set(word) <= _ROMAN.keys():
        return None
    values = [_ROMAN[c] for c in word]
    total = sum(-v if v < nxt else v for v, nxt in zip(values, values[1:] + [0]))
    return str(total) if total > 0 else None


def _value(digits: str) -> str:
    """A digit run by value: "05" and "5" are one number (no int(): a hostile run of thousands of
    digits is still a key)."""
    return digits.lstrip("0") or "0"


def _numbers(text: str) -> dict[str, tuple[str, tuple[str, ...]]]:
    """The numbers of a text by value, each as first written with its groups: a number grouped in threes
    ("2 000") is one value, its groups ("2", "000") another reading of it ("11 250" may be route 11's 250)."""
    found: dict[str, tuple[str, tuple[str, ...]]] = {}
    for run in _GROUPED.finditer(text):
        digits = WORD.findall(run.group())
        found.setdefault(_value("".join(digits)), (run.group(), tuple(_value(g) for g in digits)))
    for word in WORD.findall(_GROUPED.sub(" ", text)):
        if word.isdecimal() and word.isascii():
            found.setdefault(_value(word), (word, ()))
    return found


def _written(text: str) -> set[str]:
    """Every value a passage writes: its numbers, each group of a grouped one too (a decimal comma reads
    like a group: "3,500" may be 3.5), and its Roman numerals."""
    numbers = _numbers(text)
    values = set(numbers) | {g for _, groups in numbers.values() for g in groups}
    return values | {roman for word in WORD.findall(text) if (roman := _roman(word)) is not None}


def unstated_numbers(question: Question, passages: list[Passage], picked: list[Picked]) -> tuple[str, ...]:
    """The question's numbers that the answer's passages do not write, in the question's order; empty when
    the answer quotes nothing (`picked`: its units, the chosen one first, by 1-based passage number). A
    number the question states of what it asks ("the fund of 2026", "route 11") must be written by the
    chosen unit's passage: an extra quoted from another page ("the budget of 1 April 2026 - 31 March 2027")
    does not make a 2027 fund the 2026 one. A number inside one of its names ("Big Hero 6") identifies an
    entity, and a question may name several, each on its own page: any quoted passage may write it."""
    quoted = [p.passage for p in picked if 0 < p.passage <= len(passages)]
    if not quoted or quoted[0] != picked[0].passage:  # nothing quoted, or the chosen unit's passage is unknown
        return ()
    pages = {n: _written(f"{passages[n - 1].title}\n{passages[n - 1].heading}\n{passages[n - 1].text}")
             for n in set(quoted)}
    chosen, anywhere = pages[picked[0].passage], set().union(*pages.values())
    named = " ".join(m.text for m in question.names)
    named_values = set(_numbers(named))

    def stated(value: str, groups: tuple[str, ...]) -> bool:
        written = anywhere if value in named_values else chosen
        return value in written or bool(groups) and written.issuperset(groups)

    return tuple(text for value, (text, groups) in _numbers(question.text).items() if not stated(value, groups))
