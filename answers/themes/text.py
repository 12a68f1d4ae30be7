"""The level's text as the themes read it (answers/themes/scoped.py): prose sentences, each one's
terms (stems and adjacent pairs, common words and names set apart), a list item's field values, and
the documents saying each term, analysed once per version of the level's text and kept in memory.

Pure: the passages come from graph/query/runner.py, read through SQL with the level's groups.
"""
from __future__ import annotations

import hashlib
import re
import threading
from collections import Counter, OrderedDict, defaultdict
from dataclasses import dataclass

from core.sentences import split_sentences
from core.text.markdown import LIST_MARK, without_fenced_code
from core.text.terms import CLOSED_CLASS, normalise, stem
from core.text.tokens import HYPHENATED, WORD
from graph.types import ScopePassage
from answers.themes.gaps import GAP_TERM, Gap, gaps

# closed-class words (grammar and counts: "three", "because", "которых") by their stems: a list names
# one form ("которые"), the text uses others ("которых")
_STOP_STEMS = frozenset(stem(normalise(w)) for w in CLOSED_CLASS)
_MARKUP = re.compile(r"^(?:[-*+>]|\d+[.)])\s+|\*\*|__|`")


def units(content: str) -> list[str]:
    """The sentences a person reads as prose: no code (fenced, or any sentence with braces: code
    pasted as text), headings or table rows (a table row is a record, not a statement), list markers
    and emphasis taken off."""
    return [text for text, _ in _prose(content)]


def _prose(content: str) -> list[tuple[str, bool]]:
    """`units`, each with whether it is a list item (its marker is what `units` takes off)."""
    out = []
    for sentence in split_sentences(without_fenced_code(content)):
        if sentence.startswith(("#", "|")) or "{" in sentence or "}" in sentence:
            continue  # headings, table rows, and code that lost its fence (prose has no braces)
        text = " ".join(_MARKUP.sub("", sentence).split())  # a hard-wrapped sentence on one line
        if len(text) > 20 and not _is_field(text):
            out.append((text, LIST_MARK.match(sentence) is not None))
    return out


_DASH = re.compile(r"\s[—–]\s")
_CLAUSE = re.compile(r"[,;]")


def field_values(item: str) -> set[str]:
    """The stems a list item holds as the values of its fields: an action item or a task is written
    "<what> — <owner>, <status>" ("Таймаут снижен до 10 с — выполнено", "Write the runbook — Platform
    team, done"), and the first word of each clause after its last dash is such a value. A word that
    stands there in most of its sentences is a status or an owner every item repeats, not a theme."""
    parts = _DASH.split(item)
    if len(parts) < 2:
        return set()
    out = set()
    for clause in _CLAUSE.split(parts[-1]):
        words = [normalise(w) for w in HYPHENATED.findall(clause)]
        first = next((w for w in words if w not in CLOSED_CLASS), None)
        if first:
            out.add(stem(first))
    return out


_FIELD_SEPARATOR = re.compile(r":|\s[—–]\s")
_ASIDE = re.compile(r"\([^()]*\)")


def _is_field(text: str) -> bool:
    """A record's field ("Incident commander: Hannah Vogt", "Дата: 12 февраля 2025 г.", "Tamsin Hale —
    Head of Customer Support"): a label and a value of names and numbers, at most one common word, no
    clause. Its label is the template every such record repeats, not a statement."""
    parts = _FIELD_SEPARATOR.split(text, maxsplit=1)
    # an aside in parentheses is the value's unit or gloss ("09:42–12:52 CET (3 hours 10 minutes)")
    value = _ASIDE.sub(" ", parts[-1])
    return len(parts) == 2 and sum(w.islower() and len(w) >= 4 for w in WORD.findall(value)) <= 1


def field_label(sentence: str) -> str:
    """A record field's label ("Team lead" of "- **Team lead:** Marcus Oyelaran"): the words before
    its colon, at most four, no number; "" for any other sentence (a dash joins a name to its gloss,
    "Tamsin Hale — Head of Customer Support", and names no field)."""
    text = " ".join(_MARKUP.sub("", sentence).split())
    if ":" not in text or not _is_field(text):
        return ""
    label = text.split(":", 1)[0].strip()
    return label if 0 < len(WORD.findall(label)) <= 4 and not any(c.isdigit() for c in label) else ""


def _common_words(sentences: list[str]) -> set[str]:
    """Words written in lower case somewhere: a capitalised one among them only starts a sentence;
    the rest are names."""
    return {w for s in sentences for w in HYPHENATED.findall(s) if w.islower()}


def _names(sentences: list[str]) -> set[tuple[str, str]]:
    """Pairs of words written capitalised inside sentences more often than in lower case: a name of
    two common words ("Carrier Connector", "Route Optimizer") is an example of a theme, not its name."""
    titled: Counter = Counter()
    lower: Counter = Counter()
    for s in sentences:
        words = HYPHENATED.findall(s)
        for i, (a, b) in enumerate(zip(words, words[1:])):
            if a.islower() and b.islower():
                lower[(a, b.lower())] += 1
            elif i > 0 and a.istitle() and b.istitle():  # the first word of a sentence is capitalised anyway
                titled[(a.lower(), b.lower())] += 1
    return {pair for pair, n in titled.items() if n > lower[pair]}


def sentence_terms(sentence: str, common: set[str], names: set[tuple[str, str]] = frozenset()) -> list[str]:
    """The sentence's content stems and adjacent pairs of them (nothing but space between them): common
    words of four letters or more, no identifiers or numbers, no words of a name where they are
    written as one."""
    found = list(HYPHENATED.finditer(sentence))
    raw = [m.group() for m in found]
    # a phrase is words written side by side: a comma, a colon or a parenthesis between two words ends
    # one ("Команда Платформы (Platform team) отвечает": no "team отвечает")
    joined = [sentence[a.end():b.start()].isspace() for a, b in zip(found, found[1:])]
    words = [w.lower() for w in raw]
    keep = [len(w) >= 4 and w in common and "_" not in w and not any(c.isdigit() for c in w) for w in words]
    for i, pair in enumerate(zip(words, words[1:])):  # where written as a name, its words are part of it
        if pair in names and raw[i].istitle() and raw[i + 1].istitle():
            keep[i] = keep[i + 1] = False
    stems = [stem(normalise(w)) if k else None for w, k in zip(words, keep)]
    stems = [s if s not in _STOP_STEMS else None for s in stems]
    singles = [s for s in stems if s]
    # a word twice is no phrase ("Python Python": a page's tabs run together)
    pairs = [f"{a} {b}" for a, b, side_by_side in zip(stems, stems[1:], joined)
             if a and b and a != b and side_by_side]
    return singles + pairs


@dataclass(frozen=True)
class LevelText:
    """What the themes read of the whole level, the same for every question: its prose sentences
    (text, chunk id, doc id), each one's terms and the stems it holds as a list item's field values
    (`field_values`), the documents saying each term, and the documents written in each script
    (True: Cyrillic)."""
    sentences: list[tuple[str, int, str]]
    terms: list[frozenset[str]]
    fields: list[frozenset[str]]
    gaps: list[tuple[Gap, ...]]  # what each sentence says was missing (answers/themes/gaps.py)
    documents: dict[str, frozenset[str]]
    written: dict[bool, frozenset[str]]


# passages whose level stays analysed, all levels together (the least recently asked level goes first):
# about 12 MB per 1,500 passages, so two levels of the largest size the runner hands over (20,000)
CACHED_PASSAGES = 40_000
_level_cache: OrderedDict[str, tuple[int, LevelText]] = OrderedDict()
_level_lock = threading.Lock()


def level_text(passages: list[ScopePassage]) -> LevelText:
    """The level's sentences and document frequencies, analysed once per version of its text: keyed
    by a digest of every passage as read now (the reader's SQL read decides what is in it, so an
    ingest, a deletion or an ACL change is a new key, never a stale answer). Splitting and stemming
    every sentence of a level costs about a second at 1,500 passages; the digest, milliseconds."""
    digest = hashlib.blake2b(digest_size=16)
    for p in sorted(passages, key=lambda p: p.id):
        for part in (str(p.id), p.doc_id, p.content):
            digest.update(part.encode("utf-8", "surrogatepass"))
            digest.update(b"\0")
    key = digest.hexdigest()
    with _level_lock:
        if key in _level_cache:
            _level_cache.move_to_end(key)
            return _level_cache[key][1]
    level = _analyse_level(passages)
    with _level_lock:
        _level_cache[key] = (len(passages), level)
        while len(_level_cache) > 1 and sum(n for n, _ in _level_cache.values()) > CACHED_PASSAGES:
            _level_cache.popitem(last=False)
    return level


def _analyse_level(passages: list[ScopePassage]) -> LevelText:
    sentences: list[tuple[str, int, str]] = []
    fields: list[frozenset[str]] = []
    for p in sorted(passages, key=lambda p: p.id):
        for text, item in _prose(p.content):
            sentences.append((text, p.id, p.doc_id))
            fields.append(frozenset(field_values(text)) if item else frozenset())
    common = _common_words([s for s, _, _ in sentences])
    names = _names([s for s, _, _ in sentences])
    # a sentence stating that something was missing holds the gap term too (answers/themes/gaps.py)
    missing = [tuple(gaps(s)) for s, _, _ in sentences]
    terms = [frozenset(sentence_terms(s, common, names)) | ({GAP_TERM} if g else frozenset())
             for (s, _, _), g in zip(sentences, missing)]
    documents: dict[str, set[str]] = defaultdict(set)
    # a document counts towards a term's inverse document frequency when it is written in the term's
    # script: in a corpus of fewer Russian documents than English ones every Russian word would
    # otherwise look rare ("выполнено" as distinctive as "configuration drift")
    written: dict[bool, set[str]] = defaultdict(set)
    for (_, _, doc), ts in zip(sentences, terms):
        for t in ts:
            documents[t].add(doc)
            written[is_cyrillic(t)].add(doc)
    return LevelText(sentences, terms, fields, missing, {t: frozenset(d) for t, d in documents.items()},
                     {script: frozenset(written.get(script, ())) for script in (True, False)})



def is_cyrillic(term: str) -> bool:
    """A stem or term written in Russian (stems are lower case)."""
    return any("а" <= ch <= "я" for ch in term)
