"""The full-text leg's query: from a natural-language question to BM25 terms. Pure.

PostgreSQL's `websearch_to_tsquery` ANDs every word, which finds nothing for most questions
(anthropic_docs dev: recall@10 0.03 for the full-text leg alone), and `ts_rank` / `ts_rank_cd` have
no inverse document frequency, so with an OR query common words decide the order. The leg
therefore ORs the question's lexemes to find candidates and scores them with BM25 (`vector.search.bm25`).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import cached_property

from core.text.lexicon import search_translations
from core.text.script import CYRILLIC
from core.text.skeletons import skeleton
from core.text.terms import content_stems

MAX_QUERY_TOKENS = 64  # a pasted page must not become a 1,000-term OR query
# The textbook defaults. Also tried k1/b = 0.9/0.4 and 1.5/0.75 on the dev data: neither was better
# on both anthropic_docs and xquad_ru, so nothing is tuned here.
BM25_K1 = 1.2
BM25_B = 0.75

# A name's skeleton needs this many consonants to find its spellings, as the answers match names
# (core/text/skeletons.py `skeletons`): "Oyelaran" (lrn) finds "ойеларан"; "Bereg" (brg) finds "берег",
# and "бург" too, which costs little in one concept (vector/search/bm25.py)
MIN_NAME_SKELETON = 3
# a word that is no name but that the dictionary lacks needs more: lower-case words are most of a question
MIN_UNKNOWN_SKELETON = 4
MAX_SPELLINGS = 8  # lexemes one name may bring from the other script
_NAME_WORD = re.compile(r"(?<!\w)[^\W\d_]+(?!\w)")  # a word of letters only: a code is no name

_QUOTED = re.compile(r'"([^"]+)"')
# identifiers and codes: ERR_2043, retry_max_attempts, v1.2, claude-3-5-sonnet, api.example.org
_IDENTIFIER = re.compile(r"\w*[_\d]\w*|\w+(?:[.:/-]\w+)+")
# stripped from both ends of a word; a leading '-' (websearch negation) is dropped too: an OR
# query ranks, it does not exclude
_STRIP = "\"'`«»“”‘’()[]{}<>,;!?.:-"


def text_configs(lang: str) -> list[str]:
    # A Latin-script query without English function words ("rate limit headers") is most likely
    # still English: search it stemmed (english) and as written (simple) rather than unstemmed only
    # (beir_msmarco dev, 6 of 25 such queries: full-text nDCG@10 0.526 vs 0.463 with simple only).
    return ["english", "simple"] if lang == "simple" else [lang]


def query_pieces(query: str, lang: str) -> list[tuple[str, str]]:
    """(text, text-search config) pairs: one per word, quoted phrase and identifier.

    The server turns each piece into lexemes with the same parser and stemmer that built `tsv`.
    Quoted phrases and identifiers also become phrase terms (the parser splits ERR_2043 into 'err'
    and '2043'; the phrase 'err' <-> '2043' rewards the exact sequence). Identifiers are also taken
    unstemmed (`simple`) so a code finds a chunk indexed in another language's configuration.
    """
    configs = text_configs(lang)
    pieces: list[tuple[str, str]] = []
    for phrase in _QUOTED.findall(query):
        pieces += [(phrase, cfg) for cfg in configs]
    for token in _QUOTED.sub(" ", query).split()[:MAX_QUERY_TOKENS]:
        token = token.strip(_STRIP)
        if not token:
            continue
        pieces += [(token, cfg) for cfg in configs]
        if _IDENTIFIER.fullmatch(token) and "simple" not in configs:
            pieces.append((token, "simple"))
    return pieces


def quote_lexeme(lexeme: str) -> str:
    """A lexeme as a tsquery operand, taken literally (no parsing, no stemming, no operators)."""
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


@dataclass(frozen=True)
class FullTextQuery:
    lexemes: tuple[str, ...]  # single terms, sorted (determinism)
    phrases: tuple[str, ...]  # tsquery texts with <-> operators, in query order
    # per translated word of the question, the lexemes that translate it (core/text/lexicon): one concept
    # for BM25 (bm25.py)
    senses: tuple[tuple[str, ...], ...] = ()

    @cached_property
    def translated(self) -> frozenset[str]:
        """The lexemes only a translation brought."""
        return frozenset(t for group in self.senses for t in group)

    def script_of(self, lexeme: str) -> bool | None:
        """Which chunks a lexeme counts in: None for the question's own (every chunk); for a translation,
        True: only chunks written in Russian, False: only the others. A translation is there to find a
        page in the other language, not an English name inside a Russian page."""
        return (CYRILLIC.search(lexeme) is not None) if lexeme in self.translated else None

    @property
    def empty(self) -> bool:
        return not self.lexemes

    def match(self, groups: tuple[tuple[str, ...], ...] | None = None) -> str:
        """OR over groups of AND-ed lexemes (default: every lexeme alone): a chunk is a candidate when
        it contains every lexeme of some group (phrases imply their lexemes)."""
        groups = tuple((x,) for x in self.lexemes) if groups is None else groups
        parts = [" & ".join(map(quote_lexeme, g)) for g in groups]
        return " | ".join(p if len(g) == 1 else f"( {p} )" for p, g in zip(parts, groups))

    def text(self) -> str:
        """The whole query in tsquery syntax, for traces and the ts_rank comparison."""
        return " | ".join([self.match()] + [f"( {p} )" for p in self.phrases]) if self.lexemes else ""


def build_query(analysed: list[tuple[str, list[str]]], lang: str = "simple") -> FullTextQuery:
    """From the server's (phraseto_tsquery text, lexemes) per piece to terms; stop words drop out.
    Each lexeme brings its translations into the other language (core/text/lexicon `search_translations`:
    Snowball stems, which are the server's english and russian lexemes too, in every plain sense): a chunk
    in the other language than the question is found by its words, not only by the vector leg. Only the
    words written in the question's own script (`lang`, as `query_pieces` got it: Latin for `simple`, whose
    words are also read as English) are translated: an English title inside a Russian question is a name.
    A translation counts only in chunks of its own language (`script_of`) and selects candidates apart
    from the question's own words (vector/search/bm25.py), so a corpus in one language is searched as
    before."""
    own = {x for _, found in analysed for x in found}
    cyrillic = lang == "russian"
    senses = tuple(group for x in sorted(own) if (CYRILLIC.search(x) is not None) == cyrillic
                   if (group := tuple(sorted(search_translations(x) - own))))
    translated = {t for group in senses for t in group}
    phrases = list(dict.fromkeys(q for q, found in analysed if "<" in q))  # <-> or <N>: a phrase
    return FullTextQuery(tuple(sorted(own | translated)), tuple(phrases), senses)


def name_skeletons(query: str) -> dict[str, bool]:
    """The consonant skeletons (core/text/skeletons.py) of the question's names, each with whether the name
    is written in Russian: its capitalised words after the first, and any word the dictionary lacks whose
    stem has four consonants or more ("петрозаводском", an adjective of a town no dictionary holds), of
    letters only (codes are found as written) and not stop words. Both the word and its stem are read
    ("Маркусом": "mrks" as the index's stem "маркус" has it; "Hastings", which the English stemmer cuts to
    "hast": "stngs", as "хастингс" has it)."""
    found: dict[str, bool] = {}
    for i, word in enumerate(_NAME_WORD.findall(query)[:MAX_QUERY_TOKENS]):
        if not (stems := content_stems(word)):
            continue
        named = i > 0 and word[:1].isupper()  # a question's first word is capitalised whatever it is
        if not named and (search_translations(stems[0]) or len(skeleton(stems[0])) < MIN_UNKNOWN_SKELETON):
            continue
        for form in (stems[0], word):
            if len(sk := skeleton(form)) >= MIN_NAME_SKELETON:
                found.setdefault(sk, CYRILLIC.search(word) is not None)
    return found


def with_spellings(terms: FullTextQuery, names: dict[str, bool], spelled: dict[str, list[str]]) -> FullTextQuery:
    """`terms` with each name's lexemes in the other script (`spelled`: skeleton -> the corpus's lexemes of
    that skeleton, vector/search/fulltext_sql.py `spelled_alike`) as one more concept, as a word's translations are:
    "Petrozavodsk" finds "петрозаводск", which no dictionary holds. Counted only in chunks of their script."""
    own = set(terms.lexemes) - terms.translated
    groups = []
    for sk, cyrillic in names.items():
        other = [x for x in spelled.get(sk, ()) if (CYRILLIC.search(x) is not None) != cyrillic and x not in own]
        if other:
            groups.append(tuple(other[:MAX_SPELLINGS]))
    groups = [g for g in dict.fromkeys(groups) if g not in terms.senses]
    if not groups:
        return terms
    added = {x for g in groups for x in g}
    return FullTextQuery(tuple(sorted(set(terms.lexemes) | added)), terms.phrases, terms.senses + tuple(groups))


def bm25_idf(n: int, df: int) -> float:
    """Robertson-Sparck Jones IDF as in Lucene: always positive, so a very common term still adds."""
    n = max(n, df)  # n may come from a cache a little older than the live document frequency
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))
