"""The form of a comparison question: the two compared entities and what is compared ("Which is older,
A or B?", "Compare A and B", "Are A and B both ...?"). Read once per question, as `Question.comparison`
(answers/question.py); the comparison answer (answers/comparison.py) and the offline planner use it."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

from answers.chain.question import nested_question, relative_clause
from answers.question_text import (ATTRIBUTE_NOISE, AUX_START, CONJUNCTIONS, FUNCTION_WORDS, IMPERATIVES, PAIR_CUES,
                                   WORD, content_words, fold, is_function_word, question_mentions, stem_of,
                                   stems_of, words_of)


@dataclass
class Comparison:
    a: str
    b: str
    attribute: str  # what is compared ("film directors", "older"), may be empty
    # a side described by a relative clause ("the office where the CTO works"): the clause as a question of
    # its own ("In which office the CTO works?"), which finds the entity compared; "" for a named side
    described: tuple[str, str] = ("", "")

    def queries(self) -> list[str]:
        return [f"{x} {self.attribute}".strip() for x in (self.a, self.b)]


# Templates that name both sides explicitly; the attribute is the rest of the question.
_TAIL = r"(?:\s+(?:по|в части|с точки зрения|in terms of|regarding|by|on|for)\s+(?P<attr>[^?]+?))?\s*[?.!]*\s*$"
_COMPARISON_TEMPLATES = [re.compile(p, re.IGNORECASE) for p in (
    r"\bчем\s+(?:отличает(?:ся|ь)|отличают(?:ся)?|различают(?:ся)?)\s+(?P<a>.+?)\s+от\s+(?P<b>.+?)" + _TAIL,
    r"\b(?:отличи[ея]|различи[ея]|разница)\s+между\s+(?P<a>.+?)\s+и\s+(?P<b>.+?)" + _TAIL,
    r"\b(?:отличи[ея]|различи[ея])\s+(?P<a>.+?)\s+от\s+(?P<b>.+?)" + _TAIL,
    r"\b(?:сравни(?:те|ть)?|сопоставь(?:те)?)\s+(?P<a>.+?)\s+(?:и|с|со)\s+(?P<b>.+?)" + _TAIL,
    r"\bcompare\s+(?P<a>.+?)\s+(?:and|with|to|vs\.?|versus)\s+(?P<b>.+?)" + _TAIL,
    r"\b(?:difference|differences)\s+between\s+(?P<a>.+?)\s+and\s+(?P<b>.+?)" + _TAIL,
    r"\bhow\s+(?:does|do|is|are)\s+(?P<a>.+?)\s+(?:differ|compare)\s+(?:from|to|with)\s+(?P<b>.+?)" + _TAIL,
    r"^(?:(?P<pre>[^,:]*?)[,:]\s*)?(?P<a>[^,:]+?)\s+(?:vs\.?|versus|против)\s+(?P<b>.+?)" + _TAIL,
    # "How long is data kept in the EU region compared with the US region?": the attribute comes first,
    # the first side is a short phrase (1-4 words) after a preposition
    r"^(?P<pre>.+?)\s+(?:in|for|at|on|of|в|во|на|для|у)\s+(?:the\s+)?(?P<a>[^,:\s]+(?:\s+[^,:\s]+){0,3}?),?\s+(?:compared\s+(?:with|to)"
    r"|as\s+opposed\s+to|in\s+comparison\s+(?:with|to)|по\s+сравнению\s+со?)\s+(?:the\s+)?(?P<b>.+?)\s*[?.!]*\s*$",
    r"\bbetween\s+(?P<a>.+?)\s+and\s+(?P<b>.+?)\s*,\s*(?:which|who|what)\b(?P<attr>.*)$",
    r"^(?P<pre>(?:which|who|what|where|when|что|кто|какой|какая|какое|какие|который|которая|где|когда)\b[^,:]*)[,:]\s*"
    r"(?:the\s+)?(?P<a>.+?)\s+(?:or|или)\s+(?:the\s+)?(?P<b>.+?)\s*[?.!]*\s*$",
)]
# "Which came first the forming of A or the birth of B?": no comma, so both sides must hold a name.
_WHICH_OR = re.compile(r"^(?P<pre>(?:which|who|what|что|кто|какой|какая|какое|какие|который|которая)\b)"
                       r"(?P<a>.+?)\s+(?:or|или)\s+(?P<b>.+?)\s*[?.!]*\s*$", re.IGNORECASE)


def _trim_side(span: str, *, last: bool) -> str:
    """A template side as a search name: its words when short ("тарифа Старт"), else its (last or first)
    capitalised name ("The Dandy Warhols" of "the forming of The Dandy Warhols"), else its words."""
    tokens = list(WORD.finditer(span))
    while tokens and is_function_word(tokens[0].group()):
        tokens.pop(0)
    while tokens and is_function_word(tokens[-1].group()):
        tokens.pop()
    if tokens and len(content_words(span)) <= 3:
        return span[tokens[0].start():tokens[-1].end()]
    mentions = question_mentions(span)
    if mentions:
        m = mentions[-1] if last else mentions[0]
        return m.text
    words = [w for w in words_of(span) if fold(w).casefold() not in FUNCTION_WORDS]
    return " ".join(words)


def parse_comparison(question: str) -> Comparison | None:
    """The two compared entities and the attribute, when the question's form is a comparison."""
    q = " ".join(question.split())
    for template in _COMPARISON_TEMPLATES:
        m = template.search(q)
        if not m:
            continue
        a, b = m.group("a").strip(" ,:;"), m.group("b").strip(" ,:;?.!")
        if not a or not b or not content_words(a) or not content_words(b):
            continue
        a_name, b_name = _trim_side(a, last=True), _trim_side(b, last=False)
        groups = m.groupdict()
        attr_src = " ".join(x for x in (groups.get("pre"), groups.get("attr")) if x)
        if not attr_src:
            attr_src = q[: m.start()] + " " + q[m.end():]
        # words of the spans that are not the names (e.g. "the birth of") describe the attribute too
        noun = _asked_noun(groups.get("pre") or "")
        described = (_described(a, noun), _described(b, noun))
        # a side's words not in its name describe the attribute ("the birth of"), unless they describe the
        # side itself (its clause)
        rest = attr_src if any(described) else f"{attr_src} {a.replace(a_name, ' ')} {b.replace(b_name, ' ')}"
        return Comparison(a_name, b_name, _attribute(rest, (a_name, b_name)), described)
    m = _WHICH_OR.search(q)
    if m and question_mentions(m.group("a")) and question_mentions(m.group("b")) and "," not in m.group("b"):
        a_name, b_name = _trim_side(m.group("a"), last=True), _trim_side(m.group("b"), last=False)
        rest = f"{m.group('a').replace(a_name, ' ')} {m.group('b').replace(b_name, ' ')}"
        return Comparison(a_name, b_name, _attribute(rest, (a_name, b_name)))
    return _mention_pair(q)


def _asked_noun(pre: str) -> str:
    """The noun a comparison asks which of ("office" of "Which office is larger"), "" when none."""
    words = words_of(pre)
    if len(words) >= 2 and fold(words[0]).casefold() in ("which", "what") and not is_function_word(words[1]):
        return words[1]
    return ""


def _described(side: str, noun: str) -> str:
    """The clause question of a side described by a relative clause ("the one where the CTO works" of
    "Which office ...?" -> "In which office the CTO works?"; "в офисе, где работает X" -> "Где работает X?"),
    "" for a side that names its entity."""
    side = side.strip(" ,:;?.!")
    form = relative_clause(side)
    if form == "russian":
        nested = nested_question(side)
    elif form == "english":
        words = side.split()
        # "the one", "one": the side stands for the asked noun ("Which office ...: the one where ...")
        folded = [w.casefold() for w in words[:2]]
        lead = 2 if folded == ["the", "one"] else 1 if folded[:1] in (["one"], ["ones"]) else 0
        phrase = " ".join([f"the {noun}", *words[lead:]]) if noun and lead else side
        nested = nested_question(f"What about {phrase}?")
    else:
        return ""
    return nested.inner if nested is not None else ""


def _attribute(text: str, names: Iterable[str]) -> str:
    drop = set().union(*(stems_of(n) for n in names)) if names else set()
    words = [w for w in content_words(text) if stem_of(w) not in drop
             and fold(w).casefold() not in ATTRIBUTE_NOISE | IMPERATIVES]
    return " ".join(words[:6])


def _mention_pair(q: str) -> Comparison | None:
    """Two names joined by and/or/и/или in a question with a comparison cue ("both", "same", "which ...
    or", a yes/no question): "Are A and B both directors?", "Both A and B films were released by ...?"."""
    mentions = question_mentions(q)
    words = {fold(w).casefold() for w in words_of(q)}
    first = fold(words_of(q)[0]).casefold() if words_of(q) else ""
    cued = bool(words & PAIR_CUES) or first in AUX_START
    if not cued:
        return None
    for x, y in zip(mentions, mentions[1:]):
        between = [w.casefold() for w in words_of(q[x.end:y.start])]
        if between and between[0] in CONJUNCTIONS and all(w in CONJUNCTIONS or w in ("the", "a", "an") for w in between) \
                and "," not in q[x.end:y.start].replace(", and", " and").replace(", or", " or"):
            rest = q[: x.start] + " " + q[y.end:]
            return Comparison(x.text, y.text, _attribute(rest, (x.text, y.text)))
    return None


# "Are A and B in the same province?": what both are asked to share
_SAME = re.compile(r"\bthe same (\w+)|\bв (?:одном и том же|одной и той же|одном|одной) (\w+)", re.IGNORECASE)


def same_what(question: str) -> str | None:
    """What a yes/no question asks both sides to share: "province" of "in the same province"."""
    m = _SAME.search(question)
    return (m.group(1) or m.group(2)) if m else None


def is_yes_no(question: str) -> bool:
    """A question answered yes or no: it opens with an auxiliary ("Are ...", "Является ли ...") or asks
    with the Russian particle "ли"."""
    words = [fold(w).casefold() for w in words_of(question)]
    return bool(words) and (words[0] in AUX_START or "ли" in words)
