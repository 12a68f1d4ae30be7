"""Features of (query, candidate) pairs for the offline learning-to-rank reranker. Pure: no I/O.

Features are computed for a whole candidate list at once, because several are relative to the
other candidates of the same query (a cosine of 0.82 means little on its own, 0.03 below the best
candidate means a lot; a term every candidate contains does not tell them apart). The absolute ones
(vec_sim, coverage) let the score say "nothing here is relevant"; vec_sim ties a fitted model to the
embedding model it was fitted with (recorded in the weights' provenance). Russian and English words
are matched by Snowball stems (each word's script picks the stemmer, so mixed-language text works);
identifiers and numbers are matched verbatim. Also tried, and dropped because leaving each out
raised the cross-validated gain over RRF: title/heading match on its own (the title still counts in
coverage), proximity of query terms, chunks per document and text length.
"""
from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

import numpy as np

from core.stemming import stem_word

# name -> what it measures (one line each); the model file names the subset it was fitted on
FEATURES: dict[str, str] = {
    "vec_sim": "cosine similarity from the vector leg; a candidate it did not return gets the lowest it did return",
    "vec_gap": "vec_sim minus the best vec_sim in the list (0 for the closest candidate, negative below it)",
    "vec_rr": "1 / rank in the vector leg, 0 when the leg did not return the candidate",
    "fts_rr": "1 / rank in the full-text leg, 0 when absent",
    "fts_rel": "full-text score / the best full-text score in the list, 0 when absent",
    "rrf": "RRF (k=60) of the two legs' ranks, scaled so that rank 1 in both legs is 1 (whatever fused the list)",
    "coverage": "share of the query's content stems found in title, heading or text, weighted by idf over the list",
    "rare": "share of the query's rare tokens (digits, underscores, CamelCase, dotted, `quoted`) found verbatim",
    "bigram": "share of the query's adjacent content-stem pairs found adjacent (stop words skipped) in the candidate",
}
FEATURE_NAMES = tuple(FEATURES)

_TOKEN = re.compile(r"\w+")
_RAW_TOKEN = re.compile(r"[\w./:-]+")
_BACKTICKED = re.compile(r"`([^`]+)`")
# identifiers and codes: ERR_2043, 1990, claude-3-5, messages.create, /v1/messages, MaxTokens
_RARE = re.compile(r"(?=.*[\d_])[\w./:-]+|\w*[a-zа-яё][A-ZА-ЯЁ]\w*|\w+(?:[./:]\w+)+")
_STOPWORDS = frozenset("""
a an the and or but if of to in on at by for with from as into about over under between through during
is are was were be been being am do does did doing have has had having can could would should will shall
may might must it its this that these those there here i you he she we they me him her us them my your his
our their what which who whom whose when where why how not no nor so than too very just also any all each
both some such only own same other more most few s t don isn aren does did vs via per
и в во не что он на я с со как а то все она так его но да ты к у же вы за бы по только ее мне было вот
от меня еще нет о из ему теперь когда даже ну вдруг ли если уже или ни быть был него до вас нибудь
опять уж вам ведь там потом себя ничего ей может они тут где есть надо ней для мы тебя их чем была сам
чтоб без будто чего раз тоже себе под будет ж тогда кто этот того потому этого какой какая какое какие
каком какую каких совсем ним здесь этом один почти мой тем чтобы нее сейчас были куда зачем всех
никогда можно при наконец два об другой хоть после над больше тот через эти нас про всего них много
разве три эту моя впрочем хорошо свою этой перед иногда лучше чуть том нельзя такой им более всегда
конечно всю между это как каков какова каково сколько который которая которое которые которого
""".split())

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


def content_stems(text: str) -> list[str]:
    return [stem(t) for t in _TOKEN.findall(normalise(text)) if t not in _STOPWORDS]


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
def _content_tokens(text: str) -> tuple[str, ...]:
    """Tokens of a `normalise`d text without stop words; cached, as the same chunks recur across queries."""
    return tuple(t for t in _TOKEN.findall(text) if t not in _STOPWORDS)


def _scan(terms: QueryTerms, text: str) -> list[tuple[int, str]]:
    """(position, query stem) of each content token of `normalise`d `text` matching a query stem.

    Positions skip stop words, so "limit of requests" is adjacent like "limit requests". Only the
    distinct tokens sharing a query stem's first letters are stemmed: stemming is the slow part, and
    most words of a chunk cannot match."""
    content = _content_tokens(text)
    match = {}
    for token in set(content):
        if token[:2] in terms.prefixes and (s := stem(token)) in terms.wanted:
            match[token] = s
    return [(pos, match[t]) for pos, t in enumerate(content) if t in match]


def _rrf60(vector_rank: int | None, fts_rank: int | None) -> float:
    """RRF with k=60 computed from the leg ranks, so the feature means the same under any fusion (the
    weights were fitted on RRF-fused lists, where this equals the fused score), times 61 / 2:
    2 / (60 + 1) is the best two legs can give."""
    return sum(1.0 / (60 + r) for r in (vector_rank, fts_rank) if r) * 61 / 2


def extract(query: str, candidates: Sequence) -> np.ndarray:
    """Feature matrix (len(candidates), len(FEATURE_NAMES)) in FEATURE_NAMES order.

    `candidates` are `vector.search.hybrid.Candidate`s (any object with the same fields will do).
    """
    n = len(candidates)
    out = np.zeros((n, len(FEATURE_NAMES)), dtype=np.float64)
    if n == 0:
        return out
    terms = QueryTerms.of(query)
    texts = [normalise(f"{c.title}\n{c.heading}\n{c.text}") for c in candidates]
    scans = [_scan(terms, text) for text in texts]
    present = [{s for _, s in matched} for matched in scans]
    # idf over this candidate list: a term every candidate shares does not tell them apart
    df = Counter(s for found in present for s in found)
    idf = {s: math.log((n + 1) / (df[s] + 0.5)) for s in terms.stems}
    idf_total = sum(idf.values()) or 1.0
    sims = [c.vector_score for c in candidates if c.vector_score is not None]
    floor_sim, best_sim = (min(sims), max(sims)) if sims else (0.0, 0.0)
    fts = [c.fts_score for c in candidates if c.fts_score is not None]
    best_fts = max(fts) if fts and max(fts) > 0 else 1.0
    col = {name: i for i, name in enumerate(FEATURE_NAMES)}
    for row, c in enumerate(candidates):
        matched, found = scans[row], present[row]
        sim = c.vector_score if c.vector_score is not None else floor_sim
        hits = {(a, b) for (i, a), (j, b) in zip(matched, matched[1:]) if j == i + 1} & terms.bigrams
        values = {
            "vec_sim": sim,
            "vec_gap": sim - best_sim,
            "vec_rr": 1.0 / c.vector_rank if c.vector_rank else 0.0,
            "fts_rr": 1.0 / c.fts_rank if c.fts_rank else 0.0,
            "fts_rel": c.fts_score / best_fts if c.fts_score is not None else 0.0,
            "rrf": _rrf60(c.vector_rank, c.fts_rank),
            "coverage": sum(idf[s] for s in found) / idf_total,
            "rare": sum(1 for p in terms.rare if p.search(texts[row])) / len(terms.rare) if terms.rare else 0.0,
            "bigram": len(hits) / len(terms.bigrams) if terms.bigrams else 0.0,
        }
        for name, value in values.items():
            out[row, col[name]] = value
    return out
