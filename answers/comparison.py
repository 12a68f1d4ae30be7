"""The offline answer to a comparison: each side answered from the passages about it, each cited.

"How does A differ from B on X?", "Which is older, A or B?", "Are A and B both X?": the reader needs
what the corpus says of each side, side by side, and never one side's fact presented as the other's.
So each side is answered (`local_answer`, its own query: the side's name with the compared
attribute) only from the passages about that side (their title or last heading holds most words of
its name, or their document names it and no other side; when none does, those whose text holds all of
them), and a side no passage is about says so instead of borrowing the other side's passages. A side
is answered with the whole question's answer type: "how long" wants a duration on each side. A yes/no question ("Are A and B both film directors?",
"Являются ли A и B ...") is answered "Yes" when every side's answer states the compared attribute;
otherwise "No" only when a side's answer gives the asked thing another origin ("Danish heavy metal band"
for "both German bands"), else no verdict (a passage that does not state X is no evidence that A is not
X), and the sides' statements are left for the reader. A question asking which side comes first ("Who
is older, A or B?", "Which band was formed first?") has each side answered with a unit holding a date,
and the winner named first with its evidence when both sides give one (answers/comparison_verdict.py).
A question asking whether the sides share something ("Are A and B in the same province?") is answered
by the names each side's answer gives it: "Yes" when they are one, "No" when they differ (two stated
names are evidence), none when a side names none.
"""
from __future__ import annotations

import dataclasses
import math
import re
from typing import Sequence

from core.text.skeletons import same_word, skeleton, skeleton_match, skeletons
from answers.expected_type import VALUE_KINDS, holds_value
from answers.comparison_verdict import contrast, no_verdict, ordered_verdict
from answers.units import Extracted, Picked
from answers.chain.answer import clause_entity
from answers.local import local_answer
from answers.question import Question
from answers.question_text import COMPARATIVES, is_function_word, stem_of, stems_of, title_core, words_of
from answers.types import Passage
from answers.unit_similarity import UnitSimilarity

NOT_SAID = {"english": "the passages do not say.", "russian": "в найденных фрагментах об этом не сказано."}
YES = {"english": "Yes: the passages about each say so.", "russian": "Да: это сказано во фрагментах о каждом."}
SAME = {"english": "Yes: {}.", "russian": "Да: {}."}
DIFFERENT = {"english": "No: {}.", "russian": "Нет: {}."}


def comparison_answer(question: Question, passages: list[Passage], sides: Sequence[tuple[str, str]],
                      attribute: str = "", similarity: UnitSimilarity | None = None,
                      described: Sequence[str] = ()) -> Extracted:
    """`sides`: (name, query) per compared entity; `attribute`: what is compared ("film directors");
    `similarity`: for a side whose passages are in the other language (answers/local.py); `described`: per
    side, the question of the clause that describes it ("In which office the CTO works?"), or "" for a
    side that names its entity. A described side is the entity its clause's answer finds, cited, and then
    answered as a named side is."""
    language = "russian" if question.language == "russian" else "english"
    lines, picked, confidences, stated = [], [], [], []
    seen: set[tuple[int, int]] = set()
    # the side's query ("<side> <attribute>") has lost "how long", "when"; a yes/no question wants no value
    kind = None if question.yes_no else question.expected_type
    order = None if question.yes_no else question.order
    if order is not None and kind not in VALUE_KINDS:
        kind = "date"  # "Who is older?" wants each side's date, not a person
    resolved = [resolve_side(name, query, clause, attribute, passages, similarity)
                for (name, query), clause in zip(sides, [*described, *[""] * len(sides)])]
    if any(found for _, _, _, found in resolved):
        # the question asks which of the entities ("Which office is larger"): each side's answer is its value,
        # not an entity of the asked kind
        kind = None if kind not in VALUE_KINDS else kind
    # "Which office is larger", "Где больше ...": which side has more of something; each side's answer is a
    # number where its passages give one on the topic, as a "how many" question's is (not required: a
    # size may be told in words)
    measured = "number" if kind not in VALUE_KINDS and order is None and not question.yes_no and any(
        w.casefold() in COMPARATIVES for w in words_of(question.text)) else kind
    names = [name for name, _, _, _ in resolved]
    answered: list[tuple[str, list[Picked]]] = []
    contrasts: list[str] = []
    for name, query, label, found in resolved:
        for p in found:  # how the clause found the side's entity, cited first
            if (p.passage, p.position) not in seen:
                seen.add((p.passage, p.position))
                picked.append(p)
        answer = local_answer(Question(query), about(passages, name, [n for n in names if n != name]), max_units=2, kind=measured,
                              similarity=similarity)
        if not answer.text or (kind in VALUE_KINDS and not holds_value(kind, " ".join(p.text for p in answer.picked))):
            lines.append(f"{label}: {NOT_SAID[language]}")
            confidences.append(0.0)
            stated.append(False)
            continue
        lines.append(f"{label}: {answer.text}")
        confidences.append(answer.confidence)
        stated.append(states(answer.text, attribute))
        answered.append((name, answer.picked))
        if question.yes_no and not stated[-1] and (phrase := contrast(attribute, answer.text, name)):
            contrasts.append(no_verdict(name, phrase, answer.picked, language))
        for p in answer.picked:
            if (p.passage, p.position) not in seen:
                seen.add((p.passage, p.position))
                picked.append(p)
    shared = question.shared if question.yes_no else None
    values = [named_value(line, shared) for line in lines] if shared else []
    if values and all(values):
        # "the same province": each side names its own, so differing names answer "no" on evidence
        same = len({v.casefold() for v in values}) == 1
        told = "; ".join(f"{name} — {value} {shared}" for name, value in zip(names, values))
        lines.insert(0, (SAME if same else DIFFERENT)[language].format(told))
    elif question.yes_no and sides and all(stated):
        lines.insert(0, YES[language])
    elif contrasts:
        # one side gives the asked thing another origin: evidence for "no", unlike a side that is silent
        lines.insert(0, contrasts[0])
    elif order is not None and (verdict := ordered_verdict(order, answered, language)):
        text, winner = verdict
        if winner:  # the winner's evidence right after the verdict
            lines[0], lines[1] = lines[1], lines[0]
        lines.insert(0, text)
    # a side the passages do not state leaves half an answer, still worth reading: the mean, not the least
    return Extracted(" ".join(lines), picked, sum(confidences) / len(confidences) if confidences else 0.0)


def resolve_side(name: str, query: str, clause: str, attribute: str, passages: list[Passage],
                 similarity: UnitSimilarity | None) -> tuple[str, str, str, list[Picked]]:
    """A side as it is answered, and searched for (router/planner_offline.py): (name, query, label, the units
    that found it). A side described by a clause is the entity the clause's question finds ("Berlin office"
    for "Где работает Hannah Vogt?"), labelled with how ("Hannah Vogt -> Berlin office"); a named side, or one
    whose clause finds nothing, stays as it is."""
    if not clause:
        return name, query, name, []
    entity, found = clause_entity(Question(clause), passages, similarity)
    if entity is None or not found.picked:
        return name, query, name, []
    return entity, f"{entity} {attribute}".strip(), f"{name} -> {entity}", found.picked[:1]


def about(passages: list[Passage], name: str, others: Sequence[str] = ()) -> list[Passage]:
    """The passages with only those about `name` readable (the others blanked, so citation numbers stay
    the positions in `passages`); see `about_indices`."""
    chosen, _ = about_indices(passages, name, others)
    return [p if i in chosen else dataclasses.replace(p, title="", heading="", text="")
            for i, p in enumerate(passages)]


def about_indices(passages: list[Passage], name: str, others: Sequence[str] = ()) -> tuple[set[int], bool]:
    """Which passages are about `name`, one of the compared sides (`others`: the other sides), and
    whether that is known from the passages' documents (True) or only guessed from their words (False):
    - those whose title or last heading holds most of the name's words ("birth of Robert Young" /
      "Robert Young (musician)");
    - every passage of a document that mentions `name` and no other side: a Russian page on "офисы в
      Москве и Екатеринбурге" is about Moscow in a Berlin-Moscow comparison, its pay section too, though
      that section never repeats the city (an overview naming both sides is about neither);
    - when neither finds one, those whose text holds all of the name's words (a passage about the
      other side that mentions this one is about the other side, so it counts only then).
    A name's word matches across scripts and case endings by its consonant skeleton ("Moscow", "Москве")."""
    want = name_marks(name)
    if not want:
        return set(), False
    rivals = [marks for other in others if (marks := name_marks(other))]

    def names_it(label: str, marks: list[tuple[str, str]]) -> bool:
        return held(marks, label) >= math.ceil(0.6 * len(marks))

    def labels(p: Passage) -> tuple[str, str]:
        return title_core(p.title), p.heading.split(">")[-1] if p.heading else ""

    chosen = {i for i, p in enumerate(passages) if any(names_it(label, want) for label in labels(p))}
    documents: dict[str, str] = {}
    for p in passages:
        documents[p.doc_id] = f"{documents.get(p.doc_id, '')} {p.title} {p.heading} {p.text}"
    exclusive = {doc for doc, text in documents.items() if held(want, text) == len(want)
                 and not any(held(marks, text) == len(marks) for marks in rivals)}
    chosen |= {i for i, p in enumerate(passages) if p.doc_id in exclusive
               and not any(names_it(label, marks) for label in labels(p) for marks in rivals)}
    if chosen:
        return chosen, True
    return {i for i, p in enumerate(passages) if held(want, f"{p.title} {p.heading} {p.text}") == len(want)}, False


def name_marks(name: str) -> list[tuple[str, str]]:
    """Each content word of a name as (stem, consonant skeleton or "" when too short to trust)."""
    return [(stem_of(w), sk if len(sk := skeleton(w)) >= 3 else "") for w in words_of(name) if not is_function_word(w)]


def held(marks: list[tuple[str, str]], text: str) -> int:
    """How many of a name's words `text` holds: the same stem, or a capitalised word of the same skeleton."""
    stems = name_words(text)
    found = skeletons(text)
    return sum(1 for stem, sk in marks if stem in stems or (sk and any(skeleton_match(sk, f) for f in found)))


def name_words(text: str) -> set[str]:
    """The stems of a name's words: function words left out, abbreviations kept ("US region" is not
    "us region")."""
    return {stem_of(w) for w in words_of(text) if not is_function_word(w)}


# a kind a text may name by another word: "the same band" is answered by "the group Alphaville"
_KIND_SYNONYMS = {"band": ("band", "group"), "group": ("group", "band"), "company": ("company", "firm"),
                  "firm": ("firm", "company")}


def named_value(text: str, kind: str) -> str | None:
    """The name a side's answer gives its `kind` (or a word for the same kind): the capitalised words
    written before it ("Jiangsu province"), after "<kind> of" ("the province of Jiangsu") or right
    after it ("the synthpop group Alphaville"); the first such, None when none."""
    word = "|".join(re.escape(k) for k in _KIND_SYNONYMS.get(kind.casefold(), (kind,)))
    name = r"((?:[A-ZА-ЯЁ][\w'-]*\s?){1,3})"
    m = re.search(rf"((?:[A-ZА-ЯЁ][\w'-]*\s){{1,3}})(?:{word})\b|\b(?:{word}) of {name}|\b(?:{word})\s+{name}", text)
    if not m:
        return None
    return " ".join(next(g for g in m.groups() if g).split()).rstrip(".,;")


def states(text: str, attribute: str) -> bool:
    """Whether `text` says every content word of `attribute` (two stems of one word count as one)."""
    want = stems_of(attribute)
    have = stems_of(text)
    return bool(want) and all(any(w == h or same_word(w, h) for h in have) for w in want)
