"""The full-text leg: the question's lexemes OR-ed to find candidates, BM25 to rank them.

Why not PostgreSQL's own ranking: `ts_rank` / `ts_rank_cd` have no inverse document frequency, so
with an OR query the common words of a question decide the order. On the dev data (document-level
recall@10 / MRR of the full-text leg alone, bench/quick_search_eval.py): anthropic_docs BM25
0.800 / 0.835, ts_rank 0.697 / 0.751, ts_rank_cd 0.425 / 0.437; multihop BM25 0.747 / 0.843,
ts_rank 0.645 / 0.644; xquad_ru all about equal (1.00 / 0.94-0.95).

Cost is bounded by MAX_SCORED: document frequencies are counted up to it, candidates come from the
rarest terms whose frequencies add up to at most it (rows with only common words rarely reach
the top), and no more than it rows are scored. N, the mean length and each term's capped count
are cached per (tenant, groups) for STATS_TTL_S; frequencies are counted over the rows the user
may read, so ranking never depends on documents the user cannot see.
"""
from __future__ import annotations

import threading
import time

import psycopg

from vector import search_sql
from vector.fulltext import BM25_B, BM25_K1, FullTextQuery, bm25_idf, quote_lexeme

MAX_SCORED = 2000  # dev data: 1,000, 5,000 and unlimited all gave identical full-text numbers
STATS_TTL_S = 60.0  # N, the mean length and term frequencies drift slowly; recounting them costs passes
DF_CACHE_MAX = 50_000  # cached (tenant, groups, term) counts before the cache starts over


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


def estimate_df(counted: int, global_freq: float | None, n: int, cap: int) -> int:
    """A count that hit the cap is a lower bound: use the table-wide frequency from ANALYZE's
    statistics (pg_stats.most_common_elems) when the lexeme is there, else the cap.

    Without this every common word would get the IDF of a word in `cap` rows, which on a large
    corpus is almost the IDF of a rare word.
    """
    if counted < cap or global_freq is None:
        return counted
    return max(cap, min(n, round(global_freq * n)))


class Bm25Leg:
    def __init__(self, limit: int):
        self.limit = limit
        self._lock = threading.Lock()
        self._stats: dict[tuple, tuple[float, int, float]] = {}  # (tenant, groups) -> (when, N, mean length)
        self._common: tuple[float, dict[str, float]] | None = None  # (when, lexeme -> share of rows)
        # (tenant, groups, tsquery) -> (when, capped count): counting a common word's readable rows is
        # most of the leg's time on a large corpus (1M chunks: p50 114 ms), and questions share words
        self._df: dict[tuple, tuple[float, int]] = {}

    def _corpus_stats(self, conn: psycopg.Connection, tenant: str, groups: list[str]) -> tuple[int, float]:
        key = (tenant, tuple(groups))
        with self._lock:
            cached = self._stats.get(key)
        if cached is None or time.monotonic() - cached[0] > STATS_TTL_S:
            cached = (time.monotonic(), *search_sql.corpus_stats(conn, tenant=tenant, groups=groups))
            with self._lock:
                self._stats[key] = cached
        return cached[1], cached[2]

    def _common_lexemes(self, conn: psycopg.Connection) -> dict[str, float]:
        cached = self._common
        if cached is None or time.monotonic() - cached[0] > STATS_TTL_S:
            cached = (time.monotonic(), search_sql.common_lexemes(conn))
            self._common = cached
        return cached[1]

    def _document_frequencies(self, conn: psycopg.Connection, tenant: str, groups: list[str],
                              tsqueries: list[str]) -> tuple[list[int], int]:
        """Capped readable-row counts per tsquery (from the cache when counted in the last STATS_TTL_S,
        per tenant and groups: a reader's counts never include rows it cannot read), and how many
        came from the cache."""
        now = time.monotonic()
        keys = [(tenant, tuple(groups), q) for q in tsqueries]
        with self._lock:
            known = {k: v[1] for k in keys if (v := self._df.get(k)) is not None and now - v[0] <= STATS_TTL_S}
        missing = list(dict.fromkeys(k for k in keys if k not in known))
        if missing:
            counts = search_sql.document_frequencies(conn, tenant=tenant, groups=groups, cap=MAX_SCORED,
                                                     tsqueries=[k[2] for k in missing])
            with self._lock:
                if len(self._df) + len(missing) > DF_CACHE_MAX:
                    self._df.clear()
                for k, count in zip(missing, counts):
                    self._df[k] = (now, count)
                    known[k] = count
        return [known[k] for k in keys], len(keys) - len(missing)

    def search(self, conn: psycopg.Connection, tenant: str, groups: list[str], terms: FullTextQuery, trace: dict):
        """(chunk id, BM25 score) best first, inside the caller's read-only transaction."""
        n, avg_len = self._corpus_stats(conn, tenant, groups)
        counted, cached = self._document_frequencies(
            conn, tenant, groups, [quote_lexeme(x) for x in terms.lexemes] + list(terms.phrases))
        lexeme_df, phrase_df = counted[: len(terms.lexemes)], counted[len(terms.lexemes):]
        if any(df >= MAX_SCORED for df in lexeme_df):
            common = self._common_lexemes(conn)
            lexeme_df = [estimate_df(df, common.get(x), n, MAX_SCORED) for x, df in zip(terms.lexemes, lexeme_df)]
        match = select_match_terms(terms.lexemes, lexeme_df, MAX_SCORED)
        trace["bm25"] = {"n": n, "avg_len": round(avg_len, 2), "df": dict(zip(terms.lexemes, lexeme_df)),
                         "phrase_df": dict(zip(terms.phrases, phrase_df)), "match": list(match),
                         "df_cached": cached}
        if not match:
            return []
        return search_sql.bm25_leg(
            conn, tenant=tenant, groups=groups, match=terms.match(match),
            lexemes=terms.lexemes, lexeme_idf=[bm25_idf(n, df) for df in lexeme_df],
            phrases=terms.phrases, phrase_idf=[bm25_idf(n, df) for df in phrase_df],
            avg_len=avg_len, k1=BM25_K1, b=BM25_B, limit=self.limit, max_scored=MAX_SCORED,
        )
