"""A Russian name in its dictionary (nominative) form: "Москве" -> "Москва", "Платёжного шлюза" ->
"Платёжный шлюз", "Анне Кирилловой" -> "Анна Кириллова", "команды Платформы" -> "команда Платформы".

A graph names an entity by the surface form its text uses most, and Russian text mostly names a city
inside a phrase ("в Москве", "офисы в России"), so the most frequent form is often not the one a reader
looks up. The leading noun group (adjectives, then the head noun; a first name with its surname and
patronymic) is put into the nominative with the morphological dictionary of pymorphy3 (OpenCorpora,
shipped inside its PyPI package); what follows the head is its complement and keeps its case
("команды Маршрутизации" -> "команда Маршрутизации"). A name the dictionary cannot put into one case
is left as written; `core.text.names.display_name` also keeps a form whose nominative would not
merge with it: a wrong title is worse than an inflected one.
"""
from __future__ import annotations

import re
from functools import lru_cache

_CYRILLIC_WORD = re.compile(r"[а-яёА-ЯЁ]+(?:-[а-яёА-ЯЁ]+)?")
_ADJECTIVE = {"ADJF", "PRTF"}
_PERSON = {"Name", "Surn", "Patr"}


@lru_cache(maxsize=1)
def _analyzer():
    import pymorphy3  # loads its dictionary (~0.1 s) on first use only

    return pymorphy3.MorphAnalyzer()


@lru_cache(maxsize=100_000)
def nominative(name: str) -> str:
    """`name` with its leading Russian noun group in the nominative; anything else unchanged."""
    words = name.split()
    group = _noun_group(words)
    if not group:
        return name
    options = [_singular_first(_parses(w)) for w in words[:group]]
    cases = set.intersection(*({p.tag.case for p in parses} for parses in options)) - {None}
    # the most probable case every word can be in; the nominative when that is the likelier reading
    # ("Дмитрия Соколова" can be a woman's name in the nominative, but is far likelier a genitive)
    case = max(sorted(cases), key=lambda c: sum(max((p.score for p in ps if p.tag.case == c), default=0.0)
                                                 for ps in options), default="nomn")
    if case == "nomn":
        return name
    head = max((p for p in options[-1] if p.tag.case == case), key=lambda p: p.score)
    forms = []
    for word, parses in zip(words, options):
        # the words before the head agree with it: "Московского офиса" is masculine, not neuter
        agreeing = [p for p in parses if p.tag.case == case and p.tag.gender in (head.tag.gender, None)]
        parse = head if parses is options[-1] else max(agreeing or [p for p in parses if p.tag.case == case],
                                                       key=lambda p: p.score)
        inflected = parse.inflect({"nomn"})
        if inflected is None:
            return name
        forms.append(_like(word, inflected.word))
    return " ".join(forms + words[group:])


def _noun_group(words: list[str]) -> int:
    """How many leading words form the noun group: adjectives, the head noun, and after a person's
    name its surname and patronymic. 0 when the name does not start with a Russian noun group."""
    n, person = 0, False
    for word in words:
        if not _CYRILLIC_WORD.fullmatch(word):
            break
        tag = _parses(word)[0].tag
        if person:  # "Анне Кирилловой": the surname and patronymic belong to the name
            if tag.POS != "NOUN" or not _PERSON & tag.grammemes:
                break
            n += 1
        elif tag.POS in _ADJECTIVE:
            n += 1
        elif tag.POS == "NOUN":
            n += 1
            person = bool(_PERSON & tag.grammemes)
            if not person:
                break
        else:
            break
    return n if n and _parses(words[n - 1])[0].tag.POS == "NOUN" else 0


def _parses(word: str) -> list:
    """The word's analyses, the dictionary's own before the indeclinable guesses ("Анне" as a foreign
    name that never changes) when it has both."""
    parses = _analyzer().parse(word)
    declined = [p for p in parses if "Fixd" not in p.tag.grammemes]
    return declined or parses


def _singular_first(parses: list) -> list:
    """A name is singular unless the word has no singular reading ("команды" is "команда" in the
    genitive before it is a plural; "Альпы" has only plurals)."""
    singular = [p for p in parses if p.tag.number != "plur"]
    return singular or parses


def _like(original: str, form: str) -> str:
    """`form` written with `original`'s capitalisation."""
    if original.isupper():
        return form.upper()
    if original[:1].isupper():
        return "-".join(part[:1].upper() + part[1:] for part in form.split("-"))
    return form
