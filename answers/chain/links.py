"""Which entity a hop of the offline multi-hop chain (answers/chain/answer.py) leads to, and what a unit
says of it: the relation words it states (`related`), the name a hop goes on to (`bridge`), and names
that lead nowhere new (another name of the same thing, a lone type word). Pure.
"""
from __future__ import annotations

import re

from core.text.lexicon import search_translations
from core.text.names import HEAD_WORDS
from core.text.script import CYRILLIC
from core.text.skeletons import same_word
from core.text.terms import content_stems, normalise
from core.text.tokens import WORD
from answers.chain.targets import position


BRIDGE_TYPES = ("person", "team", "organization", "service", "location")  # what a chain goes through


def related(relation: list[str], stems: frozenset[str]) -> set[str]:
    """The relation stems a text holds: the same stem, two stems of one word (core/text/skeletons.same_word:
    director / directed, founder / founded), or an agent noun in the text that Snowball left longer than
    the question's stem by at most two letters (four in Russian, whose agent suffixes are longer): own /
    owner, руковод / руководител; or the word in the other language in any of its plain senses
    (core/text/lexicon `search_translations`: "lead" is "руковод" as well as "свинец"), as the search reads
    it: a wrong sense only offers one more hop, which the beam weighs against the others. Only the same
    stem counts across languages: a short sense taken as an agent noun's start ("груз" of "lead", the
    weight) would find "грузов" (cargo) on every page of a logistics company."""
    def agent(r: str, s: str) -> bool:
        return len(r) >= 3 and s.startswith(r) and len(s) - len(r) <= (4 if CYRILLIC.match(r) else 2)

    return {r for r in relation if r in stems or not search_translations(r).isdisjoint(stems)
            or any(agent(r, s) or same_word(r, s) for s in stems)}


def bridge(fresh: list, subject, link: tuple[str, str], text: str,
            own: set[str] = frozenset(), described: frozenset[str] = frozenset()) -> tuple[str, str, str]:
    """The entity a hop leads to: the passage's subject when the unit names the current entity (the
    Billing team's page listing the Payments Gateway leads to the Billing team) unless the subject is
    a mere topic and the unit names a team, person, service or place; else the unit's typed name
    nearest to the relation word (of `own`) the unit states, or, when it states none, to the current
    entity ("команда Маршрутизации для Оптимизатора маршрутов или команда
    Billing для Платёжного шлюза": the first), else its nearest name that is not a code."""
    typed = [e for e in fresh if e[2] in BRIDGE_TYPES and e is not subject]
    if link[0] == "text" and subject in fresh and (subject[2] in BRIDGE_TYPES or not typed):
        return subject
    # a name holding a noun the question describes its bridge by: "a network founded by whom" and
    # "aired on Cartoon Network in the United States" lead to Cartoon Network
    typed = [e for e in fresh if e is not subject and holds_word(e[1], described)] or typed
    folded = normalise(text)
    anchor = position(folded, link[1])
    anchor_end = anchor + len(link[1])
    # the name a relation word the unit states is said of ("a story written by Dale Brown" for "the
    # author of the story"), before the one nearest the current entity
    said = [m for m in WORD.finditer(folded) if related(sorted(own), frozenset(content_stems(m.group())))]
    if said:
        nearest = min(said, key=lambda m: abs(m.start() - anchor)) if anchor >= 0 else said[0]
        anchor, anchor_end = nearest.span()

    def distance(e) -> int:  # the gap between the two names, whichever comes first
        at = folded.find(normalise(e[1]))
        if at < 0 or anchor < 0:
            return len(folded)
        return max(0, anchor - (at + len(e[1])), at - anchor_end)

    others = [e for e in fresh if e[2] != "code" and e is not subject]
    return min(typed or others or fresh, key=lambda e: (distance(e), e[0]))


def holds_word(name: str, words: frozenset[str]) -> bool:
    """Whether a name of two words or more holds one of `words` as a capitalised word of its own."""
    held = WORD.findall(name)
    return len(held) >= 2 and any(w[:1].isupper() and w.casefold() in words for w in held)


def is_alias(text: str, name: str) -> bool:
    """A name in brackets right after another one, or after "also known as", is that one's other name:
    "Команда Маршрутизации (Routing team)" and "Harbour Lights, also known as "Night Ferry"" each
    name one thing, so the other name leads nowhere new."""
    return bool(re.search(r"(?:[\w*»\"'`]\s*\(|\b(?:also|otherwise|formerly|better)\s+(?:known|called|named)\s+"
                          r"(?:as\s+)?|\b(?:a\.k\.a\.|aka|также известн\w*\s+как|он же|она же)\s*)"
                          r"\s*[\"'“«`]?\s*" + re.escape(name) + r"\b", text, re.IGNORECASE))


def is_type_word(name: str) -> bool:
    """A lone word that names a kind of thing ("Inc" of "Brands, Inc.", "Group", "Bay") is no entity:
    a chain through it would link every passage about a company."""
    words = WORD.findall(name)
    return len(words) == 1 and any(p.fullmatch(words[0].casefold()) for p in HEAD_WORDS.values())
