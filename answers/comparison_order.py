"""Which side of a comparison the question asks for, decided by the values the sides' answers state.

"Who is older, A or B?", "Which band was formed first?", "Which office is larger?" ask for one side:
the one whose date is earlier (or later), or whose number is larger (or smaller). The comparison
answer (answers/comparison.py) quotes each side; when the question says which way it orders (the word
classes `earlier_words`, `later_words`, `larger_words`, `smaller_words` of answers/words/*.toml) and
each side's first quoted unit states a value of that kind, the side that wins leads the answer with
both values: "Ora Venn (August 3, 1963; Tam Holt: December 26, 1963)". Values that cannot be
told apart (the same year, one date without its day against one with it in the same month) give no
verdict, and neither does a side without a value: the quotes are left for the reader. Pure.
"""
from __future__ import annotations

import re
from typing import Sequence

from answers.expected_type import FULL_DATE, NUMBER, YEAR
from answers.words import word_class

EARLIER = word_class("earlier_words")
LATER = word_class("later_words")
LARGER = word_class("larger_words")
SMALLER = word_class("smaller_words")

_MONTHS = {name: n for n, names in enumerate((
    ("january", "январ"), ("february", "феврал"), ("march", "март"), ("april", "апрел"), ("may", "ма"),
    ("june", "июн"), ("july", "июл"), ("august", "август"), ("september", "сентябр"), ("october", "октябр"),
    ("november", "ноябр"), ("december", "декабр")), start=1) for name in names}
_WORD = re.compile(r"[^\W\d_]+")
_DAY = re.compile(r"(?<!\d)([0-3]?\d)(?!\d)")
_NEXT_WORD = re.compile(r"\s?([^\W\d_]+)")
_SCALES = (("thousand", 1e3), ("million", 1e6), ("billion", 1e9), ("тыс", 1e3), ("млн", 1e6), ("млрд", 1e9))


def asked_order(words: Sequence[str]) -> tuple[str, bool] | None:
    """("date" or "number", whether the largest wins) from the question's words; None when it names no
    order, or names both ways ("older or younger")."""
    folded = {w.casefold() for w in words}
    found = {(kind, largest) for kind, largest, cues in (("date", False, EARLIER), ("date", True, LATER),
                                                         ("number", True, LARGER), ("number", False, SMALLER))
             if folded & cues}
    return found.pop() if len(found) == 1 else None


def date_value(text: str) -> tuple[tuple[int, int, int], str] | None:
    """The first date the text writes, as (year, month, day) with 0 for what it leaves out, and as written."""
    full = FULL_DATE.search(text)
    if full:
        written = full.group()
        if re.fullmatch(r"\d{4}-\d\d-\d\d", written):
            year, month, day = map(int, written.split("-"))
            return (year, month, day), written
        year = int(YEAR.search(written).group())
        month = next((n for w in _WORD.findall(written.casefold()) for prefix, n in _MONTHS.items()
                      if w.startswith(prefix) and (prefix != "ма" or w in ("may", "мая", "май"))), 0)
        day = next((int(m.group(1)) for m in _DAY.finditer(written) if 1 <= int(m.group(1)) <= 31), 0)
        return (year, month, day), written
    year = YEAR.search(text)
    return ((int(year.group()), 0, 0), year.group()) if year else None


def number_value(text: str) -> tuple[float, str] | None:
    """The first number the text writes that is not a year, with the word after it, and as written
    ("1,100" is 1100; "4.1 million" is 4,100,000, written "4.1 million"; "about 170 people": 170, "170 people")."""
    for m in NUMBER.finditer(text):
        written = m.group().rstrip(".,")
        if YEAR.fullmatch(written):
            continue
        digits = written.replace(",", "") if re.fullmatch(r"\d{1,3}(?:,\d{3})+", written) else written.replace(",", ".")
        try:
            value = float(digits)
        except ValueError:
            continue
        after = _NEXT_WORD.match(text, m.start() + len(written))
        if after and len(after.group(1)) >= 3:  # what it counts ("people", "человек"), not "a" of "a year"
            word = after.group(1)
            value *= next((scale for prefix, scale in _SCALES if word.casefold().startswith(prefix)), 1)
            written += after.group()
        return value, written
    return None


def order_verdict(order: tuple[str, bool] | None, sides: Sequence[tuple[str, str]]) -> str | None:
    """The leading line of a comparison answer naming the side the question asks for (`order`:
    `asked_order` of its words), with every side's value (`sides`: each side's name and the text of its
    first quoted unit); None when the question names no order or the values do not decide it."""
    if order is None or len(sides) < 2:
        return None
    kind, largest = order
    read = date_value if kind == "date" else number_value
    values = [read(text) for _, text in sides]
    if any(v is None for v in values):
        return None
    keys = [v[0] for v in values]
    best = max(keys) if largest else min(keys)
    if keys.count(best) > 1 or (kind == "date" and not _decided(best, [k for k in keys if k != best])):
        return None
    winner = keys.index(best)
    others = "; ".join(f"{name}: {values[i][1]}" for i, (name, _) in enumerate(sides) if i != winner)
    return f"{sides[winner][0]} ({values[winner][1]}; {others})."


def _decided(best: tuple[int, int, int], rest: list[tuple[int, int, int]]) -> bool:
    """Whether `best` differs from every other date in a part both write: a year alone against a date of
    the same year does not say which came first."""
    def differ(a, b) -> bool:
        for x, y in zip(a, b):
            if not x or not y:
                return False
            if x != y:
                return True
        return False
    return all(differ(best, other) for other in rest)
