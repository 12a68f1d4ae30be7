"""The offline no-answer over passages that do not answer: the fixed no-answer sentence, why when it is
known (a code no readable document mentions), and where the search looked (the closest passages,
cited), so a reader can check for themselves."""
from __future__ import annotations

from typing import Sequence

from answers.generate import citations_for, no_answer_sentence
from answers.question import Question
from answers.types import Answer, Passage, RouteDecision

CLOSEST_PASSAGES = 3
CLOSEST_LABEL = {"english": "The closest passages", "russian": "Ближайшие фрагменты"}
UNMENTIONED_LABEL = {"english": "No document you can read mentions", "russian": "Ни в одном доступном вам документе нет"}
UNSTATED_LABEL = {"english": "The passages that would answer never mention",
                  "russian": "Фрагменты, которые могли бы ответить, нигде не упоминают"}

JUDGED_LABEL = {"english": "The closest sentence does not state what is asked",
                "russian": "Ближайшее предложение не говорит о том, что спрошено"}


def _note(labels: dict[str, str], language: str, items: Sequence[str]) -> str:
    return f"{labels.get(language, labels['english'])}: {', '.join(items)}."


def unmentioned_note(language: str, codes: Sequence[str]) -> str:
    """What no readable document mentions (codes, names)."""
    return _note(UNMENTIONED_LABEL, language, codes)


def unstated_note(language: str, said: Sequence[str]) -> str:
    """What of the question the page the answer would come from never writes: its numbers (answers/premise.py),
    or every word it asks besides its names (`Extracted.unsaid`)."""
    return _note(UNSTATED_LABEL, language, said)


def judged_note(language: str, sentence: str) -> str:
    """The sentence the answer would have quoted, which the relation judge reads as not stating the answer."""
    return _note(JUDGED_LABEL, language, [f'"{sentence}"'])


def closest_no_answer(question: Question, passages: list[Passage], decision: RouteDecision, *, note: str = "",
                      reasons: list[str], errors: list[str], trace: dict) -> Answer:
    language = question.language
    closest = passages[:CLOSEST_PASSAGES]
    listed = "; ".join(f"[{n}] {p.title}" for n, p in enumerate(closest, 1))
    said = " ".join(x for x in (no_answer_sentence(language), note) if x)
    text = f"{said} {CLOSEST_LABEL.get(language, CLOSEST_LABEL['english'])}: {listed}."
    return Answer(question.text, text, citations_for(list(range(1, len(closest) + 1)), passages), decision,
                  offline=True, degraded=bool(reasons), degraded_reasons=reasons, no_answer=True, errors=errors,
                  trace=trace)
