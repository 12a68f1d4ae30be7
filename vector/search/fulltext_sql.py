"""The SQL of the full-text leg: the server's parse of a question, the statistics kept at write time
(migrations 008 and 024), and the BM25 and ts_rank statements (vector/search/bm25.py, hybrid.py).

As in vector/search/sql.py, every statement that reads chunk rows or their statistics carries
`tenant_id = ... AND acl && groups` itself: access control lives in the WHERE clause, never in Python.
"""
from __future__ import annotations

from typing import Sequence

import psycopg
from psycopg import sql

from vector.search.sql import READER_AND_TENANT_CHUNKS

# Built-in ranking expressions, compared against BM25 in bench/quick_search_eval.py (never free
# text in SQL). `q` is the tsquery; normalisation 1 divides by 1 + log(length).
FTS_RANKS = {
    "ts_rank_cd": "ts_rank_cd(tsv, q)",
    "ts_rank_cd_log": "ts_rank_cd(tsv, q, 1)",
    "ts_rank": "ts_rank(tsv, q)",
    "ts_rank_log": "ts_rank(tsv, q, 1)",
}



def analyse_pieces(conn: psycopg.Connection, pieces: Sequence[tuple[str, str]]) -> list[tuple[str, list[str]]]:
    """(phraseto_tsquery text, lexemes) per (text, config); both empty for stop words.

    The server's own parser and stemmers turn the question into lexemes, so the query side
    normalises exactly as the generated `tsv` column did.
    """
    if not pieces:
        return []
    rows = conn.execute(
        "SELECT phraseto_tsquery(cfg::regconfig, piece)::text, tsvector_to_array(to_tsvector(cfg::regconfig, piece))"
        " FROM unnest(%s::text[], %s::text[]) WITH ORDINALITY AS u(piece, cfg, ord) ORDER BY ord",
        ([p for p, _ in pieces], [c for _, c in pieces]),
    ).fetchall()
    return [(q, list(lexemes)) for q, lexemes in rows]


def corpus_stats(conn: psycopg.Connection, *, tenant: str, groups: Sequence[str]) -> tuple[int, float, int]:
    """(readable chunks, their mean number of distinct lexemes, the tenant's chunks): BM25's N and
    average length, and how much of the tenant the reader sees, from the per-ACL statistics kept at
    write time (migration 008)."""
    n, tenant_chunks, lexemes = conn.execute(
        "SELECT " + READER_AND_TENANT_CHUNKS + ", coalesce(sum(lexemes) FILTER (WHERE acl && %(groups)s), 0)"
        " FROM fulltext_acl_stats WHERE tenant_id = %(tenant)s",
        {"tenant": tenant, "groups": list(groups)},
    ).fetchone()
    return int(n), (float(lexemes) / int(n) if n else 0.0), int(tenant_chunks)


def lexeme_frequencies(
    conn: psycopg.Connection, *, tenant: str, groups: Sequence[str], lexemes: Sequence[str]
) -> list[int]:
    """Readable chunks containing each lexeme, exact, from the statistics kept at write time."""
    if not lexemes:
        return []
    rows = conn.execute(
        "SELECT lexeme, sum(df) FROM fulltext_lexeme_stats"
        " WHERE tenant_id = %s AND lexeme = ANY(%s) AND acl && %s GROUP BY lexeme",
        (tenant, list(lexemes), list(groups)),
    ).fetchall()
    found = {lexeme: int(df) for lexeme, df in rows}
    return [max(0, found.get(x, 0)) for x in lexemes]


def spelled_alike(
    conn: psycopg.Connection, *, tenant: str, groups: Sequence[str], skeletons: Sequence[str]
) -> dict[str, list[str]]:
    """Per consonant skeleton (core/text/skeletons.py), the lexemes of readable chunks that have it, by
    the kept statistics and the `lexeme_skeleton` index (migration 024): a name's spellings in the
    corpus, whatever the script. Only lexemes a reader's chunk holds: the others are not named back."""
    if not skeletons:
        return {}
    rows = conn.execute(
        "SELECT lexeme_skeleton(lexeme), lexeme FROM fulltext_lexeme_stats"
        " WHERE tenant_id = %s AND lexeme_skeleton(lexeme) = ANY(%s) AND acl && %s"
        " GROUP BY lexeme HAVING sum(df) > 0 ORDER BY lexeme",
        (tenant, list(skeletons), list(groups)),
    ).fetchall()
    found: dict[str, list[str]] = {}
    for skeleton, lexeme in rows:
        found.setdefault(skeleton, []).append(lexeme)
    return found


def phrase_frequencies(
    conn: psycopg.Connection, *, tenant: str, groups: Sequence[str], tsqueries: Sequence[str], cap: int
) -> list[int]:
    """Readable chunks matching each phrase tsquery, counted up to `cap`. Phrases (identifiers,
    quoted text) have no kept statistics; they are rare, so their counts stop early."""
    if not tsqueries:
        return []
    rows = conn.execute(
        "SELECT (SELECT count(*) FROM (SELECT 1 FROM chunks WHERE tenant_id = %(tenant)s"
        " AND acl && %(groups)s AND tsv @@ x.q LIMIT %(cap)s) s)"
        " FROM unnest(%(qs)s::tsquery[]) WITH ORDINALITY AS x(q, ord) ORDER BY ord",
        {"tenant": tenant, "groups": list(groups), "qs": list(tsqueries), "cap": cap},
    ).fetchall()
    return [int(r[0]) for r in rows]


# BM25 over the chunks that match any selected term. tf of a lexeme is its number of positions in
# `tsv` (the translations of one question word sum theirs: one concept, bm25.py); a phrase (identifier,
# quoted text) counts once when present; length is the number of
# distinct lexemes, normalised by the readable corpus's mean. `ts_filter(setweight(tsv, 'D', L),
# '{D}')` keeps only the query's lexemes before unnesting (chunk_tsv writes weights A and B only,
# so D marks exactly L): 2-4x faster than unnesting every lexeme of every candidate.
# `matched` is capped so that a question made only of very common words cannot make the leg read
# and score a whole large tenant. The cap takes the first rows in scan order, with no ORDER BY: a
# sort would read (and decompress the tsv of) every matching row before the LIMIT, which at 1M
# chunks was most of the leg's time (`bench/search.py`: p95 61 -> 15 ms for the broadest reader).
# Scan order is block order, the same for the same table; `STABLE_SCAN_ORDER` rules out the two
# things that would change it between runs (parallel workers, synchronised sequential scans).
# READABLE is where the reader's ACL is checked (`bm25_leg`'s `acl_on_heap`).
_BM25 = """
WITH terms AS (SELECT * FROM unnest(%(lexemes)s::text[], %(lexeme_idf)s::float8[], %(lexeme_script)s::bool[],
                                    %(lexeme_concept)s::int[])
                AS t(lexeme, idf, cyrillic, concept)),
phrases AS (SELECT * FROM unnest(%(phrases)s::tsquery[], %(phrase_idf)s::float8[]) AS p(q, idf)),
matched AS (
    SELECT id, tsv, lang = 'russian' AS cyrillic, %(k1)s * (1 - %(b)s + %(b)s * length(tsv) / %(avg_len)s) AS norm
    FROM chunks
    WHERE tenant_id = %(tenant)s AND READABLE AND tsv @@ CAST(%(match)s AS tsquery)
    LIMIT %(max_scored)s
)
SELECT m.id,
       (SELECT coalesce(sum(c.idf * c.tf * (%(k1)s + 1) / (c.tf + m.norm)), 0)
          FROM (SELECT max(t.idf) AS idf, sum(u.tf) AS tf
                  FROM (SELECT lexeme, cardinality(positions) AS tf
                          FROM unnest(ts_filter(setweight(m.tsv, 'D', %(lexemes)s::text[]), '{D}'))) u
                  JOIN terms t USING (lexeme) WHERE t.cyrillic IS NULL OR t.cyrillic = m.cyrillic
                 GROUP BY t.concept) c)
     + (SELECT coalesce(sum(p.idf * (%(k1)s + 1) / (1 + m.norm)), 0) FROM phrases p WHERE m.tsv @@ p.q)
       AS score
FROM matched m
ORDER BY score DESC, m.id
LIMIT %(limit)s
"""
# In the GIN index, `acl && groups` costs reading the posting lists of the reader's groups, which
# for a reader of most of a large tenant hold most of its rows; wrapped in coalesce the planner
# cannot use it as an index condition and checks it on the rows the terms selected instead.
_BM25_ACL_IN_INDEX = _BM25.replace("READABLE", "acl && %(groups)s")
_BM25_ACL_ON_HEAP = _BM25.replace("READABLE", "coalesce(acl && %(groups)s, false)")


def bm25_leg(
    conn: psycopg.Connection,
    *,
    tenant: str,
    groups: Sequence[str],
    match: str,
    lexemes: Sequence[str],
    lexeme_idf: Sequence[float],
    phrases: Sequence[str],
    phrase_idf: Sequence[float],
    avg_len: float,
    lexeme_script: Sequence[bool | None],
    lexeme_concept: Sequence[int],
    k1: float,
    b: float,
    limit: int,
    max_scored: int,
    acl_on_heap: bool = False,
) -> list[tuple[int, float]]:
    """(chunk id, BM25 score) best first; `match` is the OR tsquery that selects candidates;
    `acl_on_heap` checks the reader's ACL on the selected rows instead of in the index; `lexeme_script`
    (per lexeme, None: any chunk) counts a lexeme only in chunks written in Russian (True) or not (False);
    `lexeme_concept` (per lexeme) sums the tf of a concept's lexemes before BM25 saturates it (bm25.py
    `translation_concepts`)."""
    rows = conn.execute(_BM25_ACL_ON_HEAP if acl_on_heap else _BM25_ACL_IN_INDEX, {
        "tenant": tenant, "groups": list(groups), "match": match, "lexemes": list(lexemes),
        "lexeme_idf": list(lexeme_idf), "lexeme_script": list(lexeme_script), "lexeme_concept": list(lexeme_concept),
        "phrases": list(phrases), "phrase_idf": list(phrase_idf),
        "avg_len": max(avg_len, 1.0), "k1": k1, "b": b, "limit": limit, "max_scored": max_scored,
    }).fetchall()
    return [(int(i), float(s)) for i, s in rows]


def rank_leg(
    conn: psycopg.Connection, *, tenant: str, groups: Sequence[str], tsquery: str, limit: int, rank: str
) -> list[tuple[int, float]]:
    """(chunk id, ts_rank-family score) best first: the built-in rankings, kept for comparison."""
    statement = sql.SQL(
        "SELECT id, {rank} AS score FROM chunks, CAST(%(q)s AS tsquery) AS q"
        " WHERE tenant_id = %(tenant)s AND acl && %(groups)s AND tsv @@ q"
        " ORDER BY score DESC, id LIMIT %(limit)s"
    ).format(rank=sql.SQL(FTS_RANKS[rank]))
    rows = conn.execute(statement, {"q": tsquery, "tenant": tenant, "groups": list(groups), "limit": limit}).fetchall()
    return [(int(i), float(s)) for i, s in rows]
