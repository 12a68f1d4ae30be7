"""How the offline multi-hop answer (answers/chain/answer.py) reads a name in a text: whether a unit
names an entity (`names_in`), and whether it uses a name as a place (`placed`). Pure.
"""
from __future__ import annotations

import re
from functools import lru_cache

from core.text.terms import content_stems, normalise
from core.text.skeletons import skeleton, skeleton_match
from core.text.script import CYRILLIC
from core.text.tokens import WORD
from answers.units import entity_key
from answers.question_text import DEMONYM

# how far before a name its locative preposition or "City, " can stand: the preposition, "the", and
# up to four words of a city's name
PLACE_WINDOW = 120


def without_demonym(name: str) -> str:
    """The name without a leading demonym ("English Lake District" -> "Lake District"), whose page is
    the same thing's; the name itself when it has none or keeps fewer than two words."""
    words = name.split()
    if len(words) > 2 and DEMONYM.search(words[0].casefold()) and words[0][:1].isupper():
        return " ".join(words[1:])
    return name


def names_in(name: str, text: str, stems: frozenset[str]) -> bool:
    """Whether `text` names `name`: the same merge key inside as whole words, all its content stems, or
    (across scripts) the skeletons of its capitalised words. A Latin-script name is named only where
    the text capitalises it too (`capitalised_in`): "two decades" is no mention of the album "Decade".
    Every word of the name counts: "Iron Maiden" shares "Maiden" with "Maiden Japan", not "Japan"."""
    key = entity_key(name)
    if key and capitalised_in(name, text) and re.search(rf"(?<!\w){re.escape(key)}(?!\w)", entity_key(text)):
        return True
    want = set(content_stems(name))
    if want and want <= stems and capitalised_in(name, text):
        return True
    capitalised = [w for w in WORD.findall(name) if w[:1].isupper()]
    if not capitalised or all(len(skeleton(w)) < 3 for w in capitalised):
        return False
    words = {normalise(w) for w in WORD.findall(text)}
    other = cross_script_skeletons(text)
    # a word too short to have a skeleton ("Japan": "pn") must stand in the text as it is; skeletons
    # compare only across scripts, where nothing else can: within one, "Knott" and "County" share "knt"
    return all(any(skeleton_match(skeleton(w), b) for b in other[not CYRILLIC.match(w)])
               if len(skeleton(w)) >= 3 else normalise(w) in words for w in capitalised)


@lru_cache(maxsize=8192)
def cross_script_skeletons(text: str) -> tuple[frozenset[str], frozenset[str]]:
    """The skeletons of the text's capitalised words: (Latin ones, Cyrillic ones); a Cyrillic name
    word is compared with the first, a Latin one with the second."""
    found: tuple[set[str], set[str]] = (set(), set())
    for w in WORD.findall(text):
        if w[:1].isupper() and len(sk := skeleton(w)) >= 3:
            found[bool(CYRILLIC.match(w))].add(sk)
    return frozenset(found[0]), frozenset(found[1])


def capitalised_in(name: str, text: str) -> bool:
    """Whether a capitalised word of a Latin-script name stands capitalised in the text too (by its
    stem: "Maiden" / "Maidens"); one is enough, since a question may capitalise a common noun of a
    name the text writes in lower case ("the Billing Team" / "the Billing team"). A Cyrillic name
    passes: Russian writes its names' later words, and often the first, in lower case."""
    wanted = [w for w in WORD.findall(name) if w[:1].isupper() and not CYRILLIC.match(w) and content_stems(w)]
    return not wanted or any(set(content_stems(w)) <= capital_stems(text) for w in wanted)


@lru_cache(maxsize=8192)
def capital_stems(text: str) -> frozenset[str]:
    return frozenset(s for w in WORD.findall(text) if w[:1].isupper() for s in content_stems(w))


# A name right after a locative preposition is a place: "formed in Leyton", "a singer from Portland,
# Oregon" (and the name after the comma: "City, State"), "в Екатеринбурге"; so is one after a place's
# kind word ("the county of Cumbria"). The mention finder
# types names by their own words and cue words next to them, which a town name lacks: it leaves
# them untyped, or calls two capitalised words a person ("East London"). A person is never re-typed:
# "a letter from Ann Lee" is from a person.
_LOCATIVE = (r"(?:\b(?:[Ii]n|[Aa]t|[Ff]rom|[Nn]ear|[Oo]utside|[Ii]nside|[Ww]ithin)\s+(?:the\s+)?"
             r"|(?<!\w)(?:[Вв]|[Вв]о|[Ии]з|[Пп]од)\s+)")
_CITY_OF = r"(?:[A-ZА-ЯЁ][\w.'’-]*\s+){0,3}[A-ZА-ЯЁ][\w.'’-]*,\s*"  # "Portland, " before "Oregon"
# the kinds of place: "the county of Cumbria" names a place, and a question may name one by what it
# holds ("the city where X is", "the country X is in": answers/chain/question.py)
PLACE_KINDS = frozenset("city town village state country nation province county region district island continent "
                        "kingdom republic".split())
_PLACE_OF = rf"\b(?i:{'|'.join(sorted(PLACE_KINDS))})\s+of\s+"
_PLACED_BEFORE = re.compile(rf"(?:{_LOCATIVE}(?:{_CITY_OF})?|{_PLACE_OF})$")


def placed(entity: tuple[str, str, str], text: str) -> bool:
    """Whether the text uses the untyped name as a place."""
    if entity[2] != "concept":
        return False
    return any(_PLACED_BEFORE.search(text[max(0, m.start() - PLACE_WINDOW):m.start()])
               for m in re.finditer(rf"(?<!\w){re.escape(entity[1])}(?!\w)", text))


def place_in_name(name: str, start: str) -> tuple[str, str, str] | None:
    """The place a longer name of `start` ends with: "Philbrook Museum of Tulsa" for the Philbrook
    Museum holds Tulsa, where it stands ("the city where the Philbrook Museum is located")."""
    head, of, tail = name.rpartition(" of ")
    if not of or entity_key(head) != entity_key(start) or not tail[:1].isupper():
        return None
    return entity_key(tail), tail, "location"
