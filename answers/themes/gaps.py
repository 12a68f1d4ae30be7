"""What a set of documents says was missing: the gaps of reviews, audits and risk registers.

A postmortem states its findings as absences: "No runbook.", "there was no secondary geocoder",
"Нет лимита на отправку SMS", "Отсутствие нагрузочного тестирования". Each missing thing is told by
one or two documents, in either language, too few for its words to recur as a phrase
(answers/themes/scoped.py), while that something was missing recurs across most of them: the theme a
reader of the reviews names first ("missing runbooks and load tests"). So a sentence stating an
absence holds one more term, `GAP_TERM`, weighed, kept key and ranked as any other term, and the theme
it starts is named by the missing things, those most documents miss first.

An absence is existence denied: "no X", "there was no X", "lack of X", "missing X", "нет X",
"не было X", "отсутствие X". A denied event is none ("No data was lost", "no approval is needed"),
nor is a manner ("without notice", "без изменений"): neither says what was missing.

Pure: no I/O.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from core.text.script import mostly_cyrillic
from core.text.terms import CLOSED_CLASS, shared_stem
from core.text.tokens import HYPHENATED

GAP_TERM = "<gap>"  # no word's stem: no \w in it
LABEL_GAPS = 4  # missing things named in a gap theme's label

_NEGATOR = re.compile(
    r"(?<!\w)(?:there\s+(?:is|was|were|are)\s+no|no|lack\s+of|lacked|missing|absence\s+of"
    r"|нет|не\s+было|отсутствие|отсутствует|отсутствуют|отсутствовал[аио]?)\s+", re.IGNORECASE)
_ASIDE = re.compile(r"\s*\(([^()]{1,60})\)")
# what follows a denied event's subject: "No data was lost", "no approval is needed"
_EVENT_VERBS = frozenset("is are was were has have had will would could can should".split())
# a verb form is no missing thing, and one ends its name: "a missing runbook slowed", "тестирование
# привело", "не было доказано"
_VERB = re.compile(r"^[a-z-]{3,}(?<!e)ed$|^[а-яё]{2,}(?:л|ла|ло|ли|лся|лась|лось|лись)$|^[а-яё]{3,}(?:ано|ено|ято|ито|уто|ыто)$")
# "no longer", "to no avail", "no doubt": adverbs and idioms, nothing missing
_IDIOMS = frozenset("longer further avail doubt matter sooner".split())
ITEM_WORDS = 3  # a missing thing is named by at most this many words


@dataclass(frozen=True)
class Gap:
    """A missing thing as written ("client-side rate limit", "описанной процедуры отката (runbook)")
    and the stems it is compared by (a Russian one in its Latin spelling: "лимита" is "limit")."""
    text: str
    stems: frozenset[str]


def gaps(sentence: str) -> list[Gap]:
    """The missing things the sentence states, in order; none when it states no absence."""
    out = []
    for negator in _NEGATOR.finditer(sentence):
        words: list[re.Match] = []
        for m in HYPHENATED.finditer(sentence, negator.end()):
            between = sentence[(words[-1].end() if words else negator.end()):m.start()]
            w = m.group()
            if between.strip() or len(words) == ITEM_WORDS or w.lower() in CLOSED_CLASS | _IDIOMS \
                    or any(c.isdigit() for c in w) or not w.islower() or _VERB.search(w):
                break
            words.append(m)
        if not words:
            continue
        after = HYPHENATED.search(sentence, words[-1].end())
        if after and not sentence[words[-1].end():after.start()].strip() and (
                after.group().lower() in _EVENT_VERBS or len(words) == 1 and after.group().lower() == "to"):
            continue  # a denied event, or an idiom of what cannot be done ("no way to", "no need to")
        text = sentence[words[0].start():words[-1].end()]
        aside = _ASIDE.match(sentence, words[-1].end())  # a gloss: "процедуры отката (runbook)"
        named = [m.group() for m in words] + (HYPHENATED.findall(aside.group(1)) if aside else [])
        if aside:
            text += f" ({aside.group(1).strip()})"
        out.append(Gap(text, frozenset(shared_stem(w) for w in named)))
    return out


@dataclass(frozen=True)
class MissingThings:
    """A gap theme's name ("no" and the missing things, those most documents miss first) and the stems
    of the first of them, the one its summary states."""
    label: str
    first: frozenset[str]


def missing_things(told: list[tuple[tuple[Gap, ...], str]], asked_cyrillic: bool) -> MissingThings:
    """What sentences say was missing, `told` as (the sentence's `gaps`, doc id), those most documents miss
    first (then as first told); two gaps sharing a stem are one thing ("client-side rate limit",
    "лимита на отправку"), shown as written in the question's language when it is so written
    somewhere, else as most often."""
    groups: list[dict] = []
    for stated, doc in told:
        for gap in stated:
            home = next((g for g in groups if g["stems"] & gap.stems), None)
            if home is None:
                home = {"stems": set(), "docs": set(), "texts": Counter(), "first": len(groups)}
                groups.append(home)
            home["stems"] |= gap.stems
            home["docs"].add(doc)
            home["texts"][gap.text] += 1
    ranked = sorted(groups, key=lambda g: (-len(g["docs"]), g["first"]))[:LABEL_GAPS]
    shown = [min(g["texts"], key=lambda t: (mostly_cyrillic(t) != asked_cyrillic, -g["texts"][t], t)) for g in ranked]
    return MissingThings(("нет " if asked_cyrillic else "no ") + ", ".join(shown),
                         frozenset(ranked[0]["stems"]) if ranked else frozenset())
