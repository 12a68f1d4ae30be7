"""The full-text leg: the question's lexemes OR-ed to find candidates, BM25 to rank them.

Why not PostgreSQL's own ranking: `ts_rank` / `ts_rank_cd` have no inverse document frequency, so
with an OR query the common words of a question decide the order. On the dev data (document-level
recall@10 / MRR of the full-text leg alone, bench/quick_search_eval.py): anthropic_docs BM25
0.800 / 0.835, ts_rank 0.697 / 0.751, ts_rank_cd 0.425 / 0.437; multihop BM25 0.747 / 0.843,
ts_rank 0.645 / 0.644; xquad_ru all about equal (1.00 / 0.94-0.95).

Statistics: N, the mean length and each lexeme's document frequency come from tables the chunk
triggers keep per (tenant, ACL array) (migration 008), summed over the ACL arrays the reader can
read: exact for every reader, never counting a row the reader cannot see, and one index lookup
instead of a pass over posting lists (which cost p50 114 ms at 1M chunks). Only phrases are counted
live, capped at `max_scored`.

Cost is bounded by `max_scored` (settings.bm25_max_scored): candidates come from the rarest terms
whose frequencies add up to at most it (rows with only common words rarely reach the top), or, when
even the rarest term is more common than that, from rows holding two of the rarest terms; no more
than `max_scored` rows are scored.

Translations (a question's word in the other language, `FullTextQuery.senses`) are scored as Pirkola's
structured query (SIGIR 1998): the translations of one word are one concept, whose term frequency in a
chunk is the sum of theirs and whose document frequency, the chunks holding any of them, is taken as the
sum of theirs (its upper bound). A word of many senses ("lead": свинец, руководство, пример ...) then weighs as little as its
translations are common, and a page holding three of them counts the word once, not three times.
"""
from __future__ import annotations

from itertools import combinations

import psycopg

from vector.search import fulltext_sql
from vector.search.fulltext import BM25_B, BM25_K1, FullTextQuery, bm25_idf

MAX_SCORED = 500  # the default of settings.bm25_max_scored; dev data: 500 to unlimited all the same
MAX_PAIRED_TERMS = 6  # pairs of at most this many terms: 15 AND-ed pairs in the candidate query
# A reader of at least this share of a tenant's chunks has its ACL checked on the selected rows, not
# in the GIN index (bench at 1M, scoring query p50 / p95: 85% reader 9.8 / 14.7 -> 5.9 / 9.2 ms, 60%
# 8.6 / 12.8 -> 5.9 / 9.8, 35% 8.3 / 13.6 -> 6.6 / 13.0, 25% even, 15% and 10% slower).
HEAP_ACL_MIN_SHARE = 0.4


def select_match_terms(lexemes: tuple[str, ...], dfs: list[int], budget: int) -> tuple[str, ...]:
    """The rarest terms whose document frequencies add up to at most `budget` (at least one).

    Terms found nowhere cannot select anything and are left out; ties by lexeme (determinism).
    """
    chosen, total = [], 0
    for df, lexeme in sorted((df, x) for x, df in zip(lexemes, dfs) if df > 0):
        if chosen and total + df > budget:
            break
        chosen.append(lexeme)
        total += df
    return tuple(sorted(chosen))


def select_match_groups(lexemes: tuple[str, ...], dfs: list[int], n: int, budget: int) -> tuple[tuple[str, ...], ...]:
    """Which rows become candidates: groups of lexemes, a row matching every lexeme of any group.

    Single terms (`select_match_terms`) while the rarest one fits the budget. In a large tenant even
    the rarest question term can be in more rows than the budget, and then the rows kept would be
    whichever come first: there, candidates are the rows holding at least two of the rarest terms,
    as many terms as keep the expected size (independent terms: sum of df_a * df_b / n) within it.
    """
    present = sorted((df, x) for x, df in zip(lexemes, dfs) if df > 0)
    if len(present) < 2 or present[0][0] <= budget:
        return tuple((x,) for x in select_match_terms(lexemes, dfs, budget))
    chosen = present[:2]
    for m in range(3, min(len(present), MAX_PAIRED_TERMS) + 1):
        if sum(a[0] * b[0] / max(n, 1) for a, b in combinations(present[:m], 2)) > budget:
            break
        chosen = present[:m]
    return tuple(combinations(sorted(x for _, x in chosen), 2))


def select_translations(terms: FullTextQuery, dfs: list[int], own_match: tuple[tuple[str, ...], ...],
                        budget: int) -> tuple[tuple[str, ...], ...]:
    """The translated lexemes (core/text/lexicon) that select candidates too: the rarest first, while their
    frequencies and those of the own single terms add up to at most `budget`. None where the own words
    are selected in pairs (a large tenant whose rarest own word already fills the budget): there the
    translations only score the rows the own words select."""
    if not terms.translated or any(len(group) > 1 for group in own_match):
        return ()
    frequency = dict(zip(terms.lexemes, dfs))
    left = budget - sum(frequency[x] for (x,) in own_match)
    chosen = []
    for df, lexeme in sorted((frequency[x], x) for x in terms.translated):
        if df <= 0:
            continue
        if df > left:
            break
        chosen.append((lexeme,))
        left -= df
    return tuple(sorted(chosen))


def translation_concepts(terms: FullTextQuery, dfs: list[int], n: int) -> tuple[list[float], list[int]]:
    """Per lexeme of `terms`, its idf and the concept it counts in (its tf is summed with the others' of its
    concept before BM25 saturates it): each own word and phrase alone; the translations of one question
    word together, with the idf of their summed frequency. A translation of two words counts in the more
    specific one's concept (the higher idf; ties to the first word)."""
    idf = [bm25_idf(n, df) for df in dfs]
    concept = list(range(len(terms.lexemes)))
    position = {x: i for i, x in enumerate(terms.lexemes)}
    best: dict[str, float] = {}
    for k, group in enumerate(terms.senses):
        shared = bm25_idf(n, min(n, sum(dfs[position[t]] for t in group)))
        for t in group:
            if shared > best.get(t, -1.0):
                best[t] = shared
                idf[position[t]], concept[position[t]] = shared, len(terms.lexemes) + k
    return idf, concept


def acl_on_heap(readable: int, tenant_chunks: int) -> bool:
    """Whether to check the reader's ACL on the rows the terms select rather than in the index:
    the index's cost grows with the rows the reader's groups hold, the heap's with the unreadable
    rows the terms select, so a reader of most of the tenant is cheaper on the heap."""
    return tenant_chunks > 0 and readable >= HEAP_ACL_MIN_SHARE * tenant_chunks


class Bm25Leg:
    def __init__(self, limit: int, max_scored: int = MAX_SCORED):
        self.limit, self.max_scored = limit, max_scored

    def search(self, conn: psycopg.Connection, tenant: str, groups: list[str], terms: FullTextQuery, trace: dict):
        """(chunk id, BM25 score) best first, inside the caller's read-only transaction."""
        n, avg_len, tenant_chunks = fulltext_sql.corpus_stats(conn, tenant=tenant, groups=groups)
        lexeme_df = fulltext_sql.lexeme_frequencies(conn, tenant=tenant, groups=groups, lexemes=terms.lexemes)
        phrase_df = fulltext_sql.phrase_frequencies(conn, tenant=tenant, groups=groups, tsqueries=terms.phrases,
                                                  cap=self.max_scored)
        # the question's own words select as they always did; its translations add the rows of the other
        # language that hold them within what the budget leaves (so the cap never cuts an own word's row)
        own = [(x, df) for x, df in zip(terms.lexemes, lexeme_df) if x not in terms.translated]
        own_lexemes, own_df = tuple(x for x, _ in own), [df for _, df in own]
        match = select_match_groups(own_lexemes, own_df, n, self.max_scored)
        match += select_translations(terms, lexeme_df, match, self.max_scored)
        on_heap = acl_on_heap(n, tenant_chunks)
        trace["bm25"] = {"n": n, "avg_len": round(avg_len, 2), "df": dict(zip(terms.lexemes, lexeme_df)),
                         "phrase_df": dict(zip(terms.phrases, phrase_df)), "match": [" & ".join(g) for g in match],
                         "acl_check": "heap" if on_heap else "index"}
        if not match:
            return []
        # a lexeme no readable chunk holds scores nothing: only the others are sent (a word of many senses
        # brings dozens of translations, most of them absent from a corpus)
        present = [i for i, df in enumerate(lexeme_df) if df > 0]
        lexeme_idf, lexeme_concept = translation_concepts(terms, lexeme_df, n)
        scored = [terms.lexemes[i] for i in present]
        score = dict(
            conn=conn, tenant=tenant, groups=groups,
            lexemes=scored, lexeme_idf=[lexeme_idf[i] for i in present],
            lexeme_concept=[lexeme_concept[i] for i in present], lexeme_script=list(map(terms.script_of, scored)),
            phrases=terms.phrases, phrase_idf=[bm25_idf(n, df) for df in phrase_df],
            avg_len=avg_len, k1=BM25_K1, b=BM25_B, limit=self.limit, max_scored=self.max_scored,
            acl_on_heap=on_heap,
        )
        found = fulltext_sql.bm25_leg(match=terms.match(match), **score)
        if len(found) < self.limit and len(match[0]) > 1:
            # too few rows hold two of the rare terms: the rarest term's rows fill the list
            rarest = select_match_terms(own_lexemes, own_df, self.max_scored)
            trace["bm25"]["match_fallback"] = list(rarest)
            merged = dict(fulltext_sql.bm25_leg(match=terms.match(tuple((x,) for x in rarest)), **score))
            merged.update(found)
            found = sorted(merged.items(), key=lambda p: (-p[1], p[0]))[: self.limit]
        return found
