"""What a chain's last hop takes from its unit (answers/chain/answer.py): the value of the asked type
("€90", "8 June 1951", the number counting what "how many" counts), whether a name is of the asked
type (as typed, as placed, or holding the noun "what X" asks for), and a town as its sentence places
it ("Canton, Massachusetts"). Pure.
"""
from __future__ import annotations

import re

from core.text.terms import content_stems, normalise, stem
from answers.expected_type import FORMS, FULL_DATE, MONEY, NAME_TYPE, NUMBER, YEAR, counting, quantities
from answers.units import Unit, display
from core.text.markdown import LIST_MARK
from core.text.tokens import WORD
from answers.chain.names import placed
from answers.question_text import is_function_word
from answers.unit_scoring import Scorer


def with_region(place: tuple[str, str, str], text: str) -> tuple[str, str, str]:
    """A town as the text places it, with the region written after it ("Canton, Massachusetts"), where
    that region ends the phrase (not a list's next item: "Berlin, Moscow and Austin")."""
    m = re.search(rf"(?<!\w){re.escape(place[1])},\s+((?:[A-ZА-ЯЁ][\w-]*\s?){{1,3}}?)(?=\s*(?:[.;:)]|$|,\s+United\b|"
                  rf"\s(?:in|on|at|near|по|в)\b))", text)
    if not m:
        return place
    return place[0], f"{place[1]}, {m.group(1).strip()}", place[2]


def order_in(text: str, name: str) -> int:
    """Where the unit names `name`, for sorting; one not found goes last."""
    at = position(normalise(text), name)
    return len(text) + 1 if at < 0 else at


def position(folded: str, name: str) -> int:
    """Where the unit names `name` (by its first word's stem when inflected), -1 if it does not."""
    at = folded.find(normalise(name))
    if at < 0 and WORD.findall(name):
        word = content_stems(WORD.findall(name)[0])
        at = folded.find(word[0]) if word else -1
    return at


def value_in(u: Unit, scorer: Scorer) -> str:
    """The first value of the asked type in the unit that the question does not hold: for money the
    amount ("€90", not the "24" of "(24 hours): €90 per day"); for a date the whole date where the unit
    writes one ("8 June 1951"), else the year; else a number, the one counting what a "how many"
    question counts when the unit has one, shown with the words it counts ("20 рабочих дней")."""
    text = LIST_MARK.sub("", u.text)  # a numbered list's marker is no value
    # a "how many X" question is answered by the number counting X ("4" of "12 people, 4 of them SRE")
    counting_it = counting(text, scorer.focus.counted, scorer.focus.question_tokens)
    if counting_it:
        return _with_unit(counting_it, text)
    patterns = (FULL_DATE, YEAR) if scorer.focus.kind == "date" else (
        (FORMS[scorer.focus.kind],) if scorer.focus.kind in FORMS else None)
    found = ([m for pattern in patterns for m in pattern.finditer(text)] if patterns
             else [m for m in quantities(text) if m.re is NUMBER])  # a count is no date's day, no "№3"
    for m in found:
        if normalise(m.group()).strip(".,") not in scorer.focus.question_tokens:
            if patterns:
                return m.group().strip(".,")
            # "how much" asks a number, and a sum is one: shown with its currency ("€48,300", not "48,300")
            amount = next((a for a in MONEY.finditer(text) if a.start() <= m.start() and m.end() <= a.end()), None)
            return amount.group().strip(".,") if amount else _with_unit(m, text)
    return display(u)


UNIT_WORDS = 3


def _with_unit(number: re.Match, text: str) -> str:
    """A number with the words it counts, as written after it up to a punctuation mark or a function
    word (at most UNIT_WORDS): "20" of "20 рабочих дней PTO." is shown "20 рабочих дней PTO"; a number
    that ends its sentence ("6,960.") stands alone."""
    value = number.group().strip(".,")
    return value + _unit_after(text[number.end():]) if value == number.group() else value


def _unit_after(rest: str) -> str:
    """The words after a number that `_with_unit` shows with it."""
    words = []
    for m in WORD.finditer(rest):
        gap = rest[words[-1].end() if words else 0:m.start()]
        if gap.strip() or len(words) == UNIT_WORDS or is_function_word(m.group()) or not m.group().isalpha():
            break
        words.append(m)
    return f" {rest[words[0].start():words[-1].end()]}" if words else ""


def is_wanted(entity: tuple[str, str, str], kind: str | None, text: str, typed: frozenset[str] = frozenset()) -> bool:
    """Whether the entity is of the asked type: as the mention finder typed it, or, for a place, as
    the sentence uses it (`placed`); for a "what X" question (`typed`: the stems of X,
    answer_types.asked_kind_words), a name holding X ("Sangre de Cristo Range" for "what mountain range")."""
    if kind not in NAME_TYPE:
        words = WORD.findall(entity[1])  # the kind word alone ("Range") is no name of that kind
        # a capitalised word of the name, or its last, the head noun a name may write in lower case
        # ("Platform team" for "which team")
        return bool(typed) and entity[2] != "value" and len(words) >= 2 and any(
            (w[:1].isupper() or i == len(words) - 1) and stem(normalise(w)) in typed for i, w in enumerate(words))
    return entity[2] in NAME_TYPE[kind] or (kind == "place" and placed(entity, text))
