"""Where a chain starts when the question names nothing but a date ("the service whose card payments failed
in January 2025"): a year links every page that mentions it, so the page is the one whose unit holding the
date is closest in meaning to the question, in either language (answers/chain/answer.py starts there).
"""
from __future__ import annotations

import re

from answers.expected_type import YEAR
from answers.question import Question
from answers.question_text import title_core
from answers.types import Passage
from answers.unit_similarity import UnitSimilarity, in_its_page
from answers.units import Unit

DESCRIBED_CANDIDATES = 16  # units holding the question's date embedded at most (tens of milliseconds each)


def dated_only(names: list[str]) -> bool:
    """Whether the question names nothing but dates ("2025", "14 марта 2026", "April 2025"): what it asks
    about is described, not named."""
    return bool(names) and all(n[:1].isdigit() and YEAR.search(n) for n in names)


def described_start(question: Question, names: list[str], passages: list[Passage], every: list[Unit],
                    similarity: UnitSimilarity) -> list[str]:
    """The title of the page whose unit holding each number of the date `names` is closest in meaning to the
    question, read in its page (at most DESCRIBED_CANDIDATES units, in the search's order); empty when no
    unit holds it."""
    values = [re.compile(rf"(?<!\d){v}(?!\d)") for n in names for v in re.findall(r"\d+", n)]
    held = [u for u in every if title_core(passages[u.passage - 1].title)
            and all(v.search(u.text) for v in values)][:DESCRIBED_CANDIDATES]
    if not held:
        return []
    closeness = similarity(question.text, [in_its_page(u, passages[u.passage - 1]) for u in held])
    best = max(zip(closeness, range(len(held)), held), key=lambda x: (x[0], -x[1]))[2]
    return [title_core(passages[best.passage - 1].title)]
