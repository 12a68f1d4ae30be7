"""What a reader's documents never mention: codes (ERR_9999, INC-2023-005: core.text.terms.codes), the
names a question spells (`check_names`: "Elena Smirnova", looked for as written, misspelt, translated and
in the other script) and a question's content words (core.text.terms.content_words: "wifi", "password").

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
import re
from dataclasses import dataclass
from typing import Mapping, Sequence

import psycopg

from core.text.script import CYRILLIC, mostly_cyrillic
from core.text.lexicon import search_translations
from core.text.skeletons import skeleton
from core.text.terms import content_stems
from core.text_safety import storable_text
from vector.search import fulltext_sql, sql as search_sql

log = logging.getLogger(__name__)

MAX_CHECKED_CODES = 32  # a pasted log must not become thousands of lookups; later codes are not claimed
# A word this long that one edit turns into a readable word is taken as a misspelling of it; shorter
# words are too close to each other ("cat", "car") for an edit to say anything.
MISSPELT_MIN_LETTERS = 5
# A skeleton this long names one word across scripts; shorter ones ("sl" of "Oslo") match too much.
MIN_SPELT_CONSONANTS = 3


def lookup(db, tx_settings: Mapping[str, str], tenant: str, groups: Sequence[str],
           codes: Sequence[str], *, misspellings: bool = False, spellings: bool = False) -> tuple[str, ...]:
    """Which of the first MAX_CHECKED_CODES `codes` no chunk the reader may read holds; every code when
    the reader has no group (nothing is readable). `misspellings`: a word one edit away from a readable
    word (its stem, as the index stems it) counts as mentioned; never for codes (ERR_2043 is not
    ERR_2044). `spellings`: a word a readable lexeme spells another way counts as mentioned (`_unspelt`: a
    translation, a stem cut shorter, a name in the other script: "Smirnova", "Смирновой")."""
    groups = sorted({g for g in groups if g})
    codes = [code for code in dict.fromkeys(storable_text(c) for c in codes) if code.strip()][:MAX_CHECKED_CODES]
    if not codes or not groups:
        return tuple(codes)
    with db.connection() as conn, search_sql.read_only(conn, tx_settings):
        missing = _unheld(conn, tenant=tenant, groups=groups, codes=codes)
        if not missing or not (misspellings or spellings):
            return tuple(missing)
        analysed = fulltext_sql.analyse_pieces(
            conn, [(w, "russian" if mostly_cyrillic(w) else "english") for w in missing])
        stems = {w: lexemes for w, (_, lexemes) in zip(missing, analysed)}
        if misspellings:
            long_words = [w for w in missing if len(w) >= MISSPELT_MIN_LETTERS]
            near = _readable_lexemes_like(conn, tenant=tenant, groups=groups,
                                          lexemes=sorted({x for w in long_words for x in stems[w]}))
            missing = [w for w in missing if not (len(w) >= MISSPELT_MIN_LETTERS
                                                  and any(one_edit_apart(x, y) for x in stems[w] for y in near))]
        if spellings and missing:
            missing = _unspelt(conn, tenant=tenant, groups=groups, words=missing, stems=stems)
    return tuple(missing)


def _unspelt(conn: psycopg.Connection, *, tenant: str, groups: Sequence[str], words: Sequence[str],
             stems: Mapping[str, Sequence[str]]) -> list[str]:
    """The `words` no readable lexeme spells in another way: a translation of the word (its stems in the
    dictionary, core/text/lexicon: "North" and "Севера"); a lexeme the word opens, all of it but a case
    ending (`_stem_prefixes`: the stemmer cuts "МедАрхив" to "медарх" and "МедАрхива" to "медархив"); a
    lexeme of the same consonant skeleton (core/text/skeletons.py) as the word or its stem ("Грэхэм",
    "Грэм"); or a lexeme of the other script whose skeleton is one consonant away (`_near_skeletons`:
    "Marlow" and "Марлоу", "Smirnova" and "Смирновой"; in the word's own script one consonant apart is
    another word: "sender" is no "Sandpiper"). A word whose skeleton is too short to name one word
    ("Tokyo": "tk") and no translation cannot be looked for across scripts and counts as spelt: nothing is
    claimed of it."""
    same, near, translated, lexemes = {}, {}, {}, {}
    for word in words:
        same[word] = {sk for form in _spellings(word, stems[word]) if len(sk := skeleton(form)) >= MIN_SPELT_CONSONANTS}
        near[word] = {n for sk in same[word] for n in _near_skeletons(sk)}
        translated[word] = {t for stem in stems[word] for t in search_translations(stem)}
        lexemes[word] = translated[word] | _stem_prefixes(word)
    found = fulltext_sql.spelled_alike(conn, tenant=tenant, groups=groups,
                                       skeletons=sorted({sk for n in near.values() for sk in n}))
    asked = sorted({x for xs in lexemes.values() for x in xs})
    readable = {x for x, df in zip(asked, fulltext_sql.lexeme_frequencies(
        conn, tenant=tenant, groups=groups, lexemes=asked)) if df > 0}

    def spelt(word: str) -> bool:
        cyrillic = CYRILLIC.search(word) is not None
        return (any(found.get(sk) for sk in same[word])
                or any((CYRILLIC.search(x) is not None) != cyrillic for sk in near[word] for x in found.get(sk, ())))
    return [w for w in words if (same[w] or translated[w]) and not spelt(w) and not lexemes[w] & readable]


# a case ending is at most this many letters ("-ами", "-ого"); a lexeme this short names too little
MAX_ENDING_LETTERS, MIN_PREFIX_LETTERS = 3, 5


def _stem_prefixes(word: str) -> set[str]:
    """The lexemes `word` may be the inflected form of when the stemmer cut its forms apart: its own
    beginnings, lower-cased, a case ending shorter and no shorter than MIN_PREFIX_LETTERS."""
    low = word.casefold()
    return {low[:n] for n in range(max(MIN_PREFIX_LETTERS, len(low) - MAX_ENDING_LETTERS), len(low))}


def _spellings(word: str, stems: Sequence[str]) -> list[str]:
    """The forms of `word` whose skeletons another script's spelling may have: the word and its stems; "ц"
    also as "тс" and a Latin "ts" / "tz" also as "c" (`skeleton` reads "ц" as "c": Кольцевая, Koltsevaya);
    and a Russian adjective made of a name without its "-ск-" (Заандамском of Zaandam, Нордхавнского of
    Nordhavn)."""
    forms = [word, *stems]
    forms += [f.replace("ц", "тс").replace("Ц", "Тс") if CYRILLIC.search(f) else re.sub("t[sz]", "c", f, flags=re.I)
              for f in forms]
    forms += [re.sub("(?i)ск$", "", f) for f in stems if CYRILLIC.search(f)]
    return forms


_CONSONANTS = "bdfgklmnprstvz"  # the letters `skeleton` keeps


def _near_skeletons(sk: str) -> set[str]:
    """`sk` and the skeletons one consonant more (a letter one script writes and the other does not: "mrl" of
    "Марлоу", "mrlv" of "Marlow"); from four consonants also one replaced (scripts render a sound
    differently), from five one less. Nearer than that, a name meets the other script's common words
    ("lsbn" of "Lisbon" less one is "lsn" of "лишний"). Each widening can only make a word count as spelt,
    never withhold an answer."""
    near = {sk} | {sk[:i] + c + sk[i:] for i in range(len(sk) + 1) for c in _CONSONANTS}
    if len(sk) > MIN_SPELT_CONSONANTS:
        near |= {sk[:i] + c + sk[i + 1:] for i in range(len(sk)) for c in _CONSONANTS}
    if len(sk) > MIN_SPELT_CONSONANTS + 1:
        near |= {sk[:i] + sk[i + 1:] for i in range(len(sk))}
    return near


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


def check_question(searcher, tenant: str, groups: Sequence[str], codes: Sequence[str],
                   names: Mapping[str, Sequence[str]]) -> CodeCheck:
    """What of a question (or a search query) no readable document holds: its codes (`check_codes`), then its
    names (`check_names`; an empty mapping checks none). A failed lookup claims nothing and says why."""
    checks = (check_codes(searcher, tenant, groups, codes), check_names(searcher, tenant, groups, names))
    return CodeCheck(tuple(x for c in checks for x in c.unmentioned),
                     "; ".join(c.error for c in checks if c.error) or None)


def check_names(searcher, tenant: str, groups: Sequence[str], names: Mapping[str, Sequence[str]]) -> CodeCheck:
    """The names (name -> the words a document must use to mention it) no readable document spells (`lookup`
    with misspellings and spellings): one whose every word is unspelt, or one word outside the dictionary
    (`_in_dictionary`): "Elena Smirnova" where no page names a Smirnova. The passages found for such a
    question are about someone or something else. At most MAX_CHECKED_CODES names are claimed."""
    words = list(dict.fromkeys(w for ws in names.values() for w in ws))
    check = _check(searcher, tenant, groups, words, misspellings=True, spellings=True)
    if not check.unmentioned:
        return check
    missing = set(check.unmentioned)
    unknown = tuple(name for name, ws in names.items()
                    if all(w in missing for w in ws) or any(w in missing and not _in_dictionary(w) for w in ws))
    return CodeCheck(unknown[:MAX_CHECKED_CODES], check.error)


def _in_dictionary(word: str) -> bool:
    """A word the dictionary translates ("North", "Лена"): a name built of such words is often translated
    word by word ("Far North", "Крайний Север"), so one of them missing alone says nothing."""
    return any(search_translations(stem) for stem in content_stems(word))


def _check(searcher, tenant: str, groups: Sequence[str], items: Sequence[str], *, misspellings: bool,
           spellings: bool = False) -> CodeCheck:
    if not items:
        return CodeCheck()
    what = "names" if spellings else "words" if misspellings else "codes"
    try:
        return CodeCheck(tuple(searcher.unmentioned(tenant, list(groups), items, misspellings=misspellings,
                                                    spellings=spellings)))
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
