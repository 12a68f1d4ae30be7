"""Names across scripts and case endings by their consonants, and two stems of one word: how the
offline answers match "Yekaterinburg" with "Екатеринбурге" and "directed" with "director" without a
dictionary (answers/units.py, answers/comparison.py, answers/chain/names.py), and how the graph finds one
name in both scripts (`spelling_index`: graph/indexing/resolve.py merges, graph/query/entity_link.py links)."""
from __future__ import annotations

import re
from typing import Iterable

from core.text.script import CYRILLIC, LATIN_SPELLING
from core.text.terms import normalise
from core.text.tokens import LETTERS, WORD

_SKELETON_DROP = re.compile(r"[aeiouyjh]")


def skeleton(word: str) -> str:
    """A name's consonants after transliteration, with the letters scripts render differently merged:
    Yekaterinburg, Екатеринбург and Екатеринбурге share "ktrnbrg"; Moscow and Москве "mskv". Russian "х"
    is "h" (Ханна, Хастингс) and a Latin "kh" is the "х" it spells in Russian names (Arkhangelsk,
    Kazakhstan), so both drop as an "h" does: Arkhangelsk and Архангельск share "rnglsk"."""
    w = normalise(word).replace("kh", "h").translate(LATIN_SPELLING).replace("ph", "f").replace("w", "v")
    w = w.replace("c", "k").replace("q", "k").replace("x", "ks")
    w = _SKELETON_DROP.sub("", w)
    return re.sub(r"(.)\1+", r"\1", w)


def skeletons(text: str) -> frozenset[str]:
    return frozenset(s for w in WORD.findall(text) if w[:1].isupper() and len(s := skeleton(w)) >= 3)


def skeleton_match(a: str, b: str) -> bool:
    """Same name across scripts or cases: equal skeletons, or one the other plus an inflection's consonant."""
    if a == b:
        return True
    short, long_ = sorted((a, b), key=len)
    return len(short) >= 4 and long_.startswith(short) and len(long_) - len(short) <= 1


# consonants a name needs, all its words together, before its spelling in the other script identifies it:
# "Anna" (n) is many people, "Anna Kirillova" (n krlv) one; "Moscow" / "Москва" (mskv) one town
MIN_NAME_CONSONANTS = 4


def spelling(name: str) -> tuple[str, ...] | None:
    """A name's words by their consonants, for matching it in the other script (`spelt_alike`); None for a
    name too short to identify one thing, or with a word of no consonant."""
    spelled = tuple(skeleton(w) for w in LETTERS.findall(name))
    return spelled if spelled and all(spelled) and sum(map(len, spelled)) >= MIN_NAME_CONSONANTS else None


def _bucket(spelled: tuple[str, ...]) -> tuple[str, ...]:
    """What two names `spelt_alike` share for sure: each word's first three consonants (to index by)."""
    return tuple(s[:3] for s in spelled)


def spelt_alike(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    """Two `spelling`s of one name: as many words, each pair alike (`skeleton_match`: a case ending allowed)."""
    return len(a) == len(b) and all(skeleton_match(x, y) for x, y in zip(a, b))


# names by their `spelling`, bucketed to be found fast: bucket -> [(id, spelling, written in Russian)]
SpellingIndex = dict[tuple[str, ...], list[tuple[str, tuple[str, ...], bool]]]


def spelling_index(named: Iterable[tuple[str, str]]) -> SpellingIndex:
    """(id, name) pairs by their names' spelling, in the order given; a name too short to identify one thing
    is left out. Linear in the names (about 0.6 s for 50,000): a caller asking many times builds it once."""
    found: SpellingIndex = {}
    for ident, name in named:
        if (spelled := spelling(name)) is not None:
            found.setdefault(_bucket(spelled), []).append((ident, spelled, CYRILLIC.search(name) is not None))
    return found


def spelt_in_other_script(name: str, index: SpellingIndex) -> list[str]:
    """The ids, in the index's order, whose names are written in the other script than `name` and spelt
    alike: "Anna Kirillova" finds "Анна Кириллова", "Москве" finds "Moscow"."""
    if (mine := spelling(name)) is None:
        return []
    cyrillic = CYRILLIC.search(name) is not None
    return [ident for ident, theirs, script in index.get(_bucket(mine), ())
            if script != cyrillic and spelt_alike(mine, theirs)]


def same_word(a: str, b: str) -> bool:
    """Two stems of one word that Snowball cut at different places: the shorter (at least five letters)
    begins the longer, which adds at most two letters (three in Russian): directed / director,
    объединилось / объединению ("объедин" / "объединен"). Short stems never match this way."""
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    return (len(short) >= 5 and long_.startswith(short)
            and len(long_) - len(short) <= (3 if CYRILLIC.match(short) else 2))
