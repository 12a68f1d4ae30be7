"""Verdicts a comparison's two answered sides support (answers/comparison.py), read from their quoted units.

- **Which comes first** ("Who is older, A or B?", "Which band was formed first?"): the question's
  comparative of time (answers/words: `earlier_words`, `later_words`) says which way; each side's first date is its
  value, and the side whose date is first that way wins. A tie, or a date missing on a side, gives no
  verdict: the sides are then left side by side, as before.
- **"Are A and B both German bands?"**: a side is evidence for "no" only when its unit gives the asked
  thing ("band") another origin word of the same shape ("Danish heavy metal band") and never the asked
  one. Origin words are told by their form (capitalised, a demonym's ending: "-an", "-ish", "-ese" ...),
  so a passage silent on the origin says nothing, and "Grammy-winning actor" is no contrast.
"""
from __future__ import annotations

import re

from answers.expected_type import ENGLISH_MONTHS, FULL_DATE, RUSSIAN_MONTHS, YEAR
from answers.question_text import DEMONYM, EARLIER_WORDS, LATER_WORDS, WORD, is_function_word, stem_of, words_of
from answers.units import Picked

_MONTH_NUMBERS = {name: i % 12 + 1 for i, name in enumerate(ENGLISH_MONTHS + RUSSIAN_MONTHS)}
# how a verdict is written: the winner, its date, the relation, the other side's date
_RELATIONS = {"english": {-1: "earlier than", 1: "later than"}, "russian": {-1: "раньше, чем", 1: "позже, чем"}}
_NO = {"english": "No: {} — {}.", "russian": "Нет: {} — {}."}
CONTRAST_WINDOW = 3  # words before the asked thing where its origin word stands ("Danish heavy metal band")


def asked_order(question: str) -> int | None:
    """-1 when a comparison asks which side comes first in time, 1 which comes later, from its first
    comparative word; None when it names none."""
    for word in words_of(question):
        low = word.casefold()
        if low in EARLIER_WORDS:
            return -1
        if low in LATER_WORDS:
            return 1
    return None


def first_date(text: str) -> tuple[tuple[int, int, int], str] | None:
    """The first date the text writes, as (year, month, day) with 0 for a part it leaves out, and as
    written: "August 3, 1963", "3 июня 2025", "2026-03-31", or a bare year."""
    found = sorted([*FULL_DATE.finditer(text), *YEAR.finditer(text)], key=lambda m: (m.start(), -m.end()))
    if not found:
        return None
    m = found[0]
    written = m.group().strip()
    iso = re.fullmatch(r"(\d{4})-(\d{2})-(\d{2})", written)
    if iso:
        return (int(iso[1]), int(iso[2]), int(iso[3])), written
    tokens = [t.casefold() for t in re.findall(r"\w+", written)]
    year = next(int(t) for t in reversed(tokens) if t.isdigit() and len(t) == 4)
    month = next((_MONTH_NUMBERS[t] for t in tokens if t in _MONTH_NUMBERS), 0)
    day = next((int(d[1]) for t in tokens if (d := re.fullmatch(r"(\d{1,2})(?:st|nd|rd|th)?", t))), 0) if month else 0
    return (year, month, day), written


def ordered_verdict(way: int, sides: list[tuple[str, list[Picked]]], language: str) -> tuple[str, int] | None:
    """"<winner>: <its date> — earlier than <the other's>." and the winner's index, when both sides' units
    give a date and they differ (`way`: -1 the earlier wins, 1 the later); None otherwise. `sides`: each
    side's name and its quoted units (the winner's follow the verdict as its evidence)."""
    if len(sides) != 2 or not all(picked for _, picked in sides):
        return None
    dates = [first_date(" ".join(p.text for p in picked)) for _, picked in sides]
    if not all(dates):
        return None
    (a, a_written), (b, b_written) = dates
    if not (a[1] and b[1]):  # a year against a full date: only the years compare
        a, b = a[:1], b[:1]
    if a == b:
        return None
    winner = 0 if (a < b) == (way < 0) else 1
    written = (a_written, b_written)
    return f"{sides[winner][0]}: {written[winner]} — {_RELATIONS[language][way]} {written[1 - winner]}.", winner


def contrast(attribute: str, text: str, name: str) -> str | None:
    """The phrase of `text` that gives the attribute's thing another origin ("Danish heavy metal band" for
    "German bands"), when the attribute has an origin word and `text` never writes it; None otherwise."""
    words = words_of(attribute)
    origins = {stem_of(w) for w in words if _is_origin(w)}
    things = {stem_of(w) for w in words if not _is_origin(w) and not is_function_word(w)}
    if not origins or not things or origins & {stem_of(w) for w in words_of(text)}:
        return None
    own = {stem_of(w) for w in words_of(name)}
    for sentence in re.split(r"(?<=[.!?;])\s+", text):
        tokens = list(WORD.finditer(sentence))
        for i, token in enumerate(tokens):
            if stem_of(token.group()) not in things:
                continue
            for j in range(i - 1, max(i - 1 - CONTRAST_WINDOW, 0), -1):  # never the sentence's first word
                word = tokens[j].group()
                if _is_origin(word) and stem_of(word) not in own:
                    return sentence[tokens[j].start():token.end()]
                if word[0].isupper():  # "Brian May's band": a name stands between, not an origin
                    break
    return None


def no_verdict(name: str, phrase: str, picked: list[Picked], language: str) -> str:
    return _NO[language].format(name, f"{phrase} [{picked[0].passage}]")


def _is_origin(word: str) -> bool:
    """A capitalised word of a demonym's form ("German", "Danish", "Japanese"), not an abbreviation."""
    return len(word) > 3 and word[0].isupper() and not word.isupper() and bool(DEMONYM.search(word))
