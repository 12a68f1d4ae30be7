"""How a multi-hop question reads, for the chain that answers it (router/chain_answer.py): its two
parts when it asks two things, the fewest hops its form allows, its names as the passages' titles
extend them, and the relation words only its start's clause states."""
from __future__ import annotations

import re

from core.text.terms import content_stems
from router.answer_types import question_kind
from router.answer_units import WORD, entity_key
from router.question_text import title_core
from router.types import Passage

# "..., and in which office does he work?": a second question about what the first one asks for.
_SECOND_PART = re.compile(r",\s*(?:and|и)\s+(?=(?:in |at |from |в |из )?(?:which|what|where|when|who|how|"
                          r"каком|какой|какая|где|когда|кто|сколько)\b)", re.IGNORECASE)


def question_parts(question: str) -> tuple[str, str] | None:
    """The two questions of a question that asks two things about one chain, the second asking its own
    type ("Кто руководит командой X, и в каком офисе он работает?": a person, then a place); None
    for a question asking one thing."""
    m = _SECOND_PART.search(question)
    if not m:
        return None
    first, second = question[:m.start()].strip(), question[m.end():].strip()
    if not question_kind(second) or not content_stems(first) or not content_stems(second):
        return None
    return first + "?", second


def extended_names(question: str, names: list[str], passages: list[Passage]) -> list[str]:
    """A question's names, each extended by the words after it while a passage title still names the
    longer phrase: Russian names go on in lower case ("Сервис уведомлений"), which capitals miss."""
    titles = [frozenset(content_stems(title_core(p.title))) for p in passages if p.title]
    out = []
    for name in names:
        at = question.find(name)
        rest = WORD.findall(question[at + len(name):]) if at >= 0 else []
        longest = name
        for extra in range(1, 3):
            longer = " ".join([name, *rest[:extra]])
            want = set(content_stems(longer))
            if len(rest) < extra or len(want) <= len(set(content_stems(longest))) or not any(want <= t for t in titles):
                break
            longest = longer
        out.append(longest)
    # a name that a longer one extended over is that one's part: "West Virginia" of "Johnnycake,
    # West Virginia" would start a chain at every passage about the state
    keys = [entity_key(n) for n in out]
    return [n for n, k in zip(out, keys)
            if not any(o != k and re.search(rf"(?<!\w){re.escape(k)}(?!\w)", o) for o in keys)]


# Each relative clause or possessive links one more entity: "the lead of the team that owns X" is
# X -> team -> lead -> the asked office, at least three hops.
_RELATIVE = re.compile(r"(?<=\w)\s*,?\s+(that|which|who|whom|whose|where)\b|'s\b|’s\b|\bof the\b|"
                       r"\b(котор\w+|чей|чья|чьё|чьи|где)\b", re.IGNORECASE)


def _clause_starts(question: str) -> list[int]:
    """Where each relative clause or possessive starts, past the question's own word ("In which
    office ...")."""
    words = list(WORD.finditer(question))
    opening = words[1].end() if len(words) > 1 else 0
    return [m.start() for m in _RELATIVE.finditer(question) if m.start() >= opening]


def least_hops(question: str) -> int:
    """The fewest hops the question's form allows: one, plus one per relative clause or possessive."""
    return 1 + len(_clause_starts(question))


def other_name_stems(names: list[str], start: str) -> list[str]:
    """The stems of the question's names other than the chain's start."""
    own = set(content_stems(start))
    return sorted({s for n in names if n != start for s in content_stems(n)} - own)


def start_clause(question: str, start: str, relation: list[str]) -> set[str]:
    """The relation words only the clause or phrase holding the chain's start states: they are the
    first hop's, whether or not that hop says them in the question's words. In "Who is the sibling
    of the performer of Decade?" a later hop stating "performed by" goes back to the first relation,
    not on to the sibling; once the first hop is made, those words count no more."""
    at = question.find(start)
    cuts = _clause_starts(question)
    if at < 0 or not cuts:
        return set()
    bounds = [0, *cuts, len(question)]
    i = max(k for k in range(len(bounds) - 1) if bounds[k] <= at)
    inside = set(content_stems(question[bounds[i]:bounds[i + 1]]))
    outside = set(content_stems(question[:bounds[i]] + " " + question[bounds[i + 1]:]))
    return {r for r in relation if r in inside and r not in outside}
