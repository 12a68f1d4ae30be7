"""Query terms for lexical matching in Russian and English: Snowball stems by script, stop words, rare tokens.

Russian and English words are matched by Snowball stems (each word's script picks the stemmer, so
mixed-language text works); identifiers and numbers are matched verbatim. Used by the offline
reranker's features, extractive answers and global search's lexical relevance.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable, Mapping

from core.text.script import latin_spelling
from core.text.stemming import stem_word
from core.text.tokens import WORD
from core.text.words import word_class

_RAW_TOKEN = re.compile(r"[\w./:-]+")
_BACKTICKED = re.compile(r"`([^`]+)`")
# identifiers and codes: ERR_2043, 1990, claude-3-5, messages.create, /v1/messages, MaxTokens
_RARE = re.compile(r"(?=.*[\d_])[\w./:-]+|\w*[a-zа-яё][A-ZА-ЯЁ]\w*|\w+(?:[./:]\w+)+")
# A code as programming languages write an identifier: it begins with a letter or an underscore and
# holds a digit or an underscore (ERR_2043, INC-2023-005, SEV1, v4.3, notify_batch_size). A number with
# a suffix ("1950s", "19th") begins with a digit: a way of writing a number, not a code.
_CODE = re.compile(r"[^\W\d][\w.:/-]*")
_CODE_EDGES = "\"'`«»“”‘’()[]{}<>*,;!?.:-"
# never a query's content (core/text/words: `stopwords`)
STOPWORDS = word_class("stopwords")
# The rest of the closed word classes (numerals, conjunctions, prepositions, pronouns and quantifiers
# STOPWORDS leaves out): words that carry grammar or a count, never what a text is about, so they
# never name a theme (answers/themes/scoped.py). STOPWORDS stays as it is: lexical matching uses it.
CLOSED_CLASS = STOPWORDS | word_class("closed_class")

@lru_cache(maxsize=200_000)
def stem(token: str) -> str:
    """Snowball stem of a `normalise`d token: Russian for Cyrillic words, English for Latin ones."""
    if any("а" <= ch <= "я" for ch in token):
        return stem_word(token, "russian")
    if token.isascii() and token.isalpha():
        return stem_word(token, "english")
    return token  # numbers, identifiers, other scripts: matched as written


def normalise(text: str) -> str:
    """Lower case with ё written as е, as Russian text mostly is (and as the stemmer expects)."""
    return text.lower().replace("ё", "е")


def codes(text: str) -> tuple[str, ...]:
    """The codes and identifiers `text` spells (`_CODE`), as written, each once, in text order."""
    found = []
    for token in text.split():
        token = token.strip(_CODE_EDGES)
        if _CODE.fullmatch(token) and any(ch.isdigit() or ch == "_" for ch in token):
            found.append(token)
    return tuple(dict.fromkeys(found))


_ROMAN = re.compile(r"[IVXLCDM]+")


def content_words(text: str) -> tuple[str, ...]:
    """The words of `text` that say what it is about, as written, each once, in text order: words of
    letters only ("whom's" is "whom" and "s", "on-call" is "on" and "call"; SEV1 and ERR_2043 are codes,
    core.text.terms.codes) of three letters or more, neither a closed-class word nor a Roman numeral
    (a number, not a topic)."""
    found = [w for w in WORD.findall(text) if len(w) >= 3 and w.isalpha()
             and normalise(w) not in CLOSED_CLASS and not _ROMAN.fullmatch(w)]
    return tuple(dict.fromkeys(found))


def content_stems(text: str) -> list[str]:
    return [stem(t) for t in WORD.findall(normalise(text)) if t not in STOPWORDS]


@dataclass(frozen=True)
class QueryTerms:
    stems: tuple[str, ...]  # distinct content stems, in query order
    bigrams: frozenset[tuple[str, str]]
    rare: tuple[re.Pattern, ...]
    prefixes: frozenset[str]  # first two letters of each stem: most text tokens never need stemming
    wanted: frozenset[str]  # the stems as a set

    @classmethod
    def of(cls, query: str) -> "QueryTerms":
        sequence = content_stems(query)
        rare_tokens = {normalise(t.strip(".:/-")) for t in _BACKTICKED.findall(query)}
        for token in _RAW_TOKEN.findall(_BACKTICKED.sub(" ", query)):
            token = token.strip(".:/-")
            if token and _RARE.fullmatch(token):
                rare_tokens.add(normalise(token))
        rare = tuple(re.compile(r"(?<!\w)" + re.escape(t) + r"(?!\w)") for t in sorted(rare_tokens) if t)
        stems = tuple(dict.fromkeys(sequence))
        return cls(stems, frozenset(zip(sequence, sequence[1:])), rare, frozenset(s[:2] for s in stems),
                   frozenset(stems))


@lru_cache(maxsize=2048)  # chunks of ~1k chars: some MB at most
def content_tokens(text: str) -> tuple[str, ...]:
    """Tokens of a `normalise`d text without stop words; cached, as the same chunks recur across queries."""
    return tuple(t for t in WORD.findall(text) if t not in STOPWORDS)


def match_positions(terms: QueryTerms, text: str, translated: Mapping[str, str] | None = None,
                    translated_prefixes: frozenset[str] = frozenset()) -> list[tuple[int, str]]:
    """(position, query stem) of each content token of `normalise`d `text` matching a query stem, or
    (`translated`: another stem -> the query stem it translates, core/text/lexicon) one of its translations;
    `translated_prefixes` are those stems' first two letters.

    Positions skip stop words, so "limit of requests" is adjacent like "limit requests". Only the
    distinct tokens sharing a wanted stem's first letters are stemmed: stemming is the slow part, and
    most words of a chunk cannot match."""
    content = content_tokens(text)
    translated = translated or {}
    match = {}
    for token in set(content):
        if token[:2] in terms.prefixes or token[:2] in translated_prefixes:
            s = stem(token)
            if s in terms.wanted:
                match[token] = s
            elif s in translated:
                match[token] = translated[s]
    return [(pos, match[t]) for pos, t in enumerate(content) if t in match]


def shared_stem(word: str) -> str:
    """A word's stem as both languages share it: a Russian stem in its Latin spelling (`loanword`)."""
    return loanword(stem(normalise(word)))


def loanword(word: str) -> str:
    """A Russian stem as the English stem of its Latin spelling: Russian borrows the vocabulary of its
    trade from English ("алерт", "лимит", "инцидент"), so one thing told in both languages shares its
    borrowed word (a transliteration, letter by letter: no translation, no word list). Any other
    word is itself."""
    if not any("а" <= ch <= "я" for ch in word):
        return word
    return stem(latin_spelling(word))


def distinct_terms(terms: Iterable[str], limit: int) -> list[str]:
    """The first `limit` terms, each left out when a chosen one holds its words or it holds a chosen
    one's ("drift" after "configuration drift")."""
    chosen: list[str] = []
    for t in terms:
        parts = set(t.split())
        if any(parts <= set(c.split()) or set(c.split()) <= parts for c in chosen):
            continue
        chosen.append(t)
        if len(chosen) >= limit:
            break
    return chosen
