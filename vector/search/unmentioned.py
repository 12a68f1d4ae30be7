"""What a reader's documents never mention: codes (ERR_9999, INC-2023-005: core.text.terms.codes) and
a question's content words (core.text.terms.content_words: "wifi", "password", "Lisbon").

A question about such a code cannot be answered by any passage the reader may read: the passages
found are about other codes. Words are weaker evidence (a question may paraphrase, or misspell, what
the documents say), so the answer writer needs several of them (the setting
`answer_unmentioned_words`, off by default) before it says the documents do not answer
(answers/writer.py). `lookup` asks the database (full-text GIN index, ACL in SQL, the statements below);
`check_codes` / `check_words` are what the answer writer and the search use case call: a failed lookup
never fails their answer, it comes back as an error for them to report.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Mapping, Sequence

import psycopg

from core.text.script import mostly_cyrillic
from core.text_safety import storable_text
from vector.search import fulltext_sql, sql as search_sql

log = logging.getLogger(__name__)

MAX_CHECKED_CODES = 32  # a pasted log must not become thousands of lookups; later codes are not claimed
# A word this long that one edit turns into a readable word is taken as a misspelling of it; shorter
# words are too close to each other ("cat", "car") for an edit to say anything.
MISSPELT_MIN_LETTERS = 5


def lookup(db, tx_settings: Mapping[str, str], tenant: str, groups: Sequence[str],
           codes: Sequence[str], *, misspellings: bool = False) -> tuple[str, ...]:
    """Which of the first MAX_CHECKED_CODES `codes` no chunk the reader may read holds; every code when
    the reader has no group (nothing is readable). `misspellings`: a word one edit away from a readable
    word (its stem, as the index stems it) counts as mentioned; never for codes (ERR_2043 is not
    ERR_2044)."""
    groups = sorted({g for g in groups if g})
    codes = [code for code in dict.fromkeys(storable_text(c) for c in codes) if code.strip()][:MAX_CHECKED_CODES]
    if not codes or not groups:
        return tuple(codes)
    with db.connection() as conn, search_sql.read_only(conn, tx_settings):
        missing = _unheld(conn, tenant=tenant, groups=groups, codes=codes)
        long_words = [w for w in missing if len(w) >= MISSPELT_MIN_LETTERS]
        if not misspellings or not long_words:
            return tuple(missing)
        analysed = fulltext_sql.analyse_pieces(
            conn, [(w, "russian" if mostly_cyrillic(w) else "english") for w in long_words])
        stems = {w: lexemes for w, (_, lexemes) in zip(long_words, analysed)}
        near = _readable_lexemes_like(conn, tenant=tenant, groups=groups,
                                      lexemes=sorted({x for xs in stems.values() for x in xs}))
    return tuple(w for w in missing if not any(one_edit_apart(x, y) for x in stems.get(w, ()) for y in near))


def one_edit_apart(a: str, b: str) -> bool:
    """One letter inserted, deleted or replaced turns `a` into `b` (not equal: equal is mentioned)."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) > len(b):
        a, b = b, a
    i = 0
    while i < len(a) and a[i] == b[i]:
        i += 1
    return a[i + (len(a) == len(b)):] == b[i + 1:]


@dataclass(frozen=True)
class CodeCheck:
    unmentioned: tuple[str, ...] = ()
    error: str | None = None  # the lookup failed: nothing is claimed, and the caller says so


def check_codes(searcher, tenant: str, groups: Sequence[str], codes: Sequence[str]) -> CodeCheck:
    """`searcher.unmentioned` (HybridSearcher or a wrapper of it) for `codes`, no lookup when there are none."""
    return _check(searcher, tenant, groups, codes, misspellings=False)


def check_words(searcher, tenant: str, groups: Sequence[str], words: Sequence[str], *, least: int) -> CodeCheck:
    """The same for a question's content words, a misspelt word counting as mentioned, and only when at
    least `least` are missing (0: no check). One missing word is often a paraphrase or the question's own
    verb ("what does X mean"); two are a topic the documents lack ("the wifi password of the Berlin
    office" answered by a sentence about the Berlin office)."""
    if not least or len(words) < least:
        return CodeCheck()
    check = _check(searcher, tenant, groups, words, misspellings=True)
    return check if len(check.unmentioned) >= least else CodeCheck(error=check.error)


def _check(searcher, tenant: str, groups: Sequence[str], items: Sequence[str], *, misspellings: bool) -> CodeCheck:
    if not items:
        return CodeCheck()
    what = "words" if misspellings else "codes"
    try:
        return CodeCheck(tuple(searcher.unmentioned(tenant, list(groups), items, misspellings=misspellings)))
    except Exception as exc:  # noqa: BLE001 - a failed side check must not fail the answer or the search
        log.warning("the check for unmentioned %s failed: %s", what, exc)
        return CodeCheck(error=f"the check for {what} no readable document mentions failed: {type(exc).__name__}: {exc}")


# --- the statements (ACL in SQL: only chunks and lexeme statistics the reader's groups may read) -------

def _unheld(conn: psycopg.Connection, *, tenant: str, groups: Sequence[str], codes: Sequence[str]) -> list[str]:
    """The `codes` (core.text.terms.codes) no readable chunk holds. A chunk's text was parsed in its own
    language's configuration, so a code is looked for as each configuration parses it (phrases OR-ed);
    one that parses to no lexeme at all counts as held: nothing can be said of it. Index lookups on
    the full-text GIN index, one EXISTS per code."""
    if not codes:
        return []
    rows = conn.execute(
        "SELECT u.code, x.q IS NULL OR numnode(x.q) = 0 OR EXISTS (SELECT 1 FROM chunks WHERE tenant_id = %(tenant)s"
        " AND acl && %(groups)s AND tsv @@ x.q)"
        " FROM unnest(%(codes)s::text[]) WITH ORDINALITY AS u(code, ord),"
        " LATERAL (SELECT phraseto_tsquery('simple', u.code) || phraseto_tsquery('english', u.code)"
        " || phraseto_tsquery('russian', u.code) AS q) x ORDER BY u.ord",
        {"tenant": tenant, "groups": list(groups), "codes": list(codes)},
    ).fetchall()
    return [code for code, held in rows if not held]


def _readable_lexemes_like(
    conn: psycopg.Connection, *, tenant: str, groups: Sequence[str], lexemes: Sequence[str]
) -> list[str]:
    """The readable lexemes one edit could turn one of `lexemes` into, as a superset: those of the
    same first letter and a length within one (the caller checks the edit). From the statistics kept
    at write time, so a misspelt word of a question ("Brittish") is not taken for one the corpus lacks."""
    if not lexemes:
        return []
    rows = conn.execute(
        "SELECT DISTINCT s.lexeme FROM fulltext_lexeme_stats s, unnest(%(lexemes)s::text[]) AS u(x)"
        " WHERE s.tenant_id = %(tenant)s AND s.acl && %(groups)s AND s.df > 0"
        " AND left(s.lexeme, 1) = left(u.x, 1) AND abs(length(s.lexeme) - length(u.x)) <= 1 ORDER BY 1",
        {"tenant": tenant, "groups": list(groups), "lexemes": list(lexemes)},
    ).fetchall()
    return [r[0] for r in rows]
