"""Offline themes of a corpus-wide question, over the documents the question is about.

The offline communities are entity-centred: one holds a vendor, its service and the incident it
caused, so the themes a reader names across a kind of document ("what recurs across the incident
reviews": alerts that stay silent, configuration drift, missing runbooks) belong to no single
community. A theme here is what several of the question's documents say, found as Suffix Tree
Clustering (Zamir & Etzioni, 1998) finds the topics of a set of search results:

1. Scope: the documents the question is about: those holding its nearest passages, and with them
   the documents filed in the folder where the documents most relevant to it concentrate (documents
   of one kind are filed together, and a question about "all incident reviews" is about every one
   of them, in whichever language; a folder holding one relevant document among unrelated ones is
   no such kind). A document's relevance is scaled among the documents of its script: a question's
   own language scores higher with the embedding model than another saying the same.
2. Candidates: the content terms of the scope's prose sentences (stems of common words and pairs of
   them written side by side, no punctuation between, a hyphenated compound one word; names, codes,
   numbers and closed-class words (numerals, conjunctions, pronouns) are no theme's name; records
   such as "Date: 9 April" and table rows are no prose), each kept when it recurs in at least two of
   the scope's documents; a term holding a word the scope's documents are called by names the scope
   ("incident review"), and one of only the question's words restates it, while a phrase joining
   what it asks about with another word is a theme of it ("alert fatigue" to a question about
   alerting). A single word stays only when no recurring phrase holds it and it is key to the scope
   against the rest of the level (Dunning's log-likelihood over documents: a theme recurs across
   documents, and one document repeating a word is one document): the common vocabulary of every
   kind of document names no theme. It names a theme as a noun does, so in most of its uses it is no
   list item's field value (a status, an owner: "— выполнено"), nor an English past form ("fired");
   one modifying the word after it in most of its uses (an adjective: "single") is shown with the
   word it modifies most ("single vendor"). A term weighs
   as in class-based TF-IDF: the scope documents saying it, each by its relevance to the question,
   times log(1 + N / df) over the level's documents written in its script (what every document
   says weighs least), times one plus the share of the question's focus (its words beyond what the
   scope's documents are called) its sentences say.
3. Themes: terms taken best first; one whose sentences lie mostly among a chosen theme's, or that
   shares a word with the theme's first name, joins that theme (STC's merge of base clusters), the
   rest start a new theme. A Russian word is compared in its Latin spelling, as the trade's
   vocabulary is borrowed ("порог алерта" joins "alert fatigue"); a theme told in native words in
   each language stays two: nothing is translated, and a document is written in one language, so
   the passages or documents two such terms share are too few to join them either. A theme
   is named by its terms, a word giving way to the recurring phrase holding it (STC labels clusters
   by phrases); its summary is its most central sentence (the most of its terms' weight per word)
   most relevant to the question among those saying its label; its documents are its sentences'.

Pure: the passages come from graph/query/runner.py, read through SQL with the level's groups. What
is read of the whole level (its sentences, terms and document frequencies) is analysed once per
version of its text and kept (`level_text`); a question then costs only its scope's sentences.
"""
from __future__ import annotations

import hashlib
import math
import re
import threading
from collections import Counter, OrderedDict, defaultdict
from dataclasses import dataclass
from typing import Iterable

from core.sentences import split_sentences
from core.text.terms import CLOSED_CLASS, normalise, stem
from core.text.script import latin_spelling, mostly_cyrillic

SCOPE_PASSAGES = 10  # the nearest passages whose documents seed the scope (a search's usual k)
MIN_DOCUMENTS = 2  # a theme recurs: at least this many of the scope's documents say it
MERGE_OVERLAP = 0.5  # STC's merge rule: a phrase whose sentences lie this much inside a theme's joins it
LABEL_TERMS = 3
LABEL_SHARE = 0.5  # a merged phrase names the theme too when it weighs at least this share of the first
# (a merged single word does not: a word inside a theme's sentences is mostly their grammar, "before", "поэтому")
# G2 at p < 0.01 (one degree of freedom): a single word's keyness, over documents, for the scope against the
# level. Documents are few: in a level of 25, a word three of the scope's eight say and no other does
# scores 6.8, so at p < 0.001 (10.83) no such word could ever be key
KEYNESS = 6.63
# a single word is used as a field value, a verb or a modifier when it is so in more than this share of
# its sentences (or of its written forms): in most of its uses
MOST_USES = 0.5
MAX_SUMMARY_CHARS = 300  # a theme's one sentence; longer ones are lists and tables run together

_WORD = re.compile(r"\w+", re.UNICODE)
# a term's word: a hyphenated compound is one word ("on-call engineer", not "call engineer")
_TERM_WORD = re.compile(r"\w+(?:-\w+)*", re.UNICODE)
_FENCE = re.compile(r"^\s*(```|~~~).*?^\s*\1\s*$", re.MULTILINE | re.DOTALL)
# closed-class words (grammar and counts: "three", "because", "которых") by their stems: a list names
# one form ("которые"), the text uses others ("которых")
_STOP_STEMS = frozenset(stem(normalise(w)) for w in CLOSED_CLASS)
_FIELD_SEPARATOR = re.compile(r":|\s[—–]\s")
_CYRILLIC_LETTER = re.compile(r"[а-яёА-ЯЁ]")
_LATIN_LETTER = re.compile(r"[a-zA-Z]")
_ASIDE = re.compile(r"\([^()]*\)")
_LIST_ITEM = re.compile(r"^(?:[-*+]|\d+[.)])\s+")
_DASH = re.compile(r"\s[—–]\s")
_CLAUSE = re.compile(r"[,;]")
_MARKUP = re.compile(r"^(?:[-*+>]|\d+[.)])\s+|\*\*|__|`")


@dataclass(frozen=True)
class ScopePassage:
    """A passage of the level, readable by every group of the level."""
    id: int
    doc_id: str
    title: str
    content: str


@dataclass(frozen=True)
class ScopedTheme:
    label: str
    summary: str
    score: float
    chunk_ids: tuple[int, ...]
    doc_ids: tuple[str, ...]


def folder(doc_id: str) -> str:
    return doc_id.rsplit("/", 1)[0] if "/" in doc_id else ""


def scope_documents(passages: list[ScopePassage], nearest: list[int], relevance: dict[str, float],
                    k: int | None = None) -> set[str]:
    """The documents of the nearest passages, and every document filed in the folder where the
    question's documents concentrate: the folder holding the most of the k (SCOPE_PASSAGES) documents
    most relevant to it, at least two of them (ties: each such folder). A folder one relevant document
    shares with unrelated ones (a handbook's incident-review process beside its customer FAQ) is no
    kind the question asks about; a document at the top of the corpus brings only itself."""
    doc_of = {p.id: p.doc_id for p in passages}
    seeds = {doc_of[c] for c in nearest if c in doc_of}
    top = sorted(relevance, key=lambda d: (-relevance[d], d))[:k or SCOPE_PASSAGES]
    held = Counter(folder(d) for d in top if folder(d))
    most = max(held.values(), default=0)
    folders = {f for f, n in held.items() if n == most and n >= MIN_DOCUMENTS}
    return seeds | {p.doc_id for p in passages if folder(p.doc_id) in folders}


def nearest(similarities: dict[int, float], k: int | None = None) -> list[int]:
    """The k (SCOPE_PASSAGES) passages most similar to the question, best first (ties by id); a
    passage with nothing in common with it (similarity 0: no word of it) is none of them."""
    return sorted((c for c in similarities if similarities[c] > 0), key=lambda c: (-similarities[c], c))[
        :k or SCOPE_PASSAGES]


def document_relevance(passages: list[ScopePassage], similarities: dict[int, float]) -> dict[str, float]:
    """Each document's relevance, 0..1: its best passage's similarity to the question (MaxP), scaled
    between the least and most relevant documents written in its script (cosines of one model sit in
    a narrow band, and a question's own language sits higher in it: e5 ranks every Russian document
    above the English ones that say the same to a Russian question)."""
    best: dict[str, float] = {}
    letters: dict[str, Counter] = defaultdict(Counter)
    for p in passages:
        letters[p.doc_id].update({True: len(_CYRILLIC_LETTER.findall(p.content)),
                                  False: len(_LATIN_LETTER.findall(p.content))})
        if p.id in similarities:
            best[p.doc_id] = max(best.get(p.doc_id, -1.0), similarities[p.id])
    script = {d: letters[d][True] > letters[d][False] for d in best}
    out = {}
    for cyrillic in set(script.values()):
        mine = {d: s for d, s in best.items() if script[d] == cyrillic}
        low, high = min(mine.values()), max(mine.values())
        out.update({d: (s - low) / (high - low) if high > low else 1.0 for d, s in mine.items()})
    return out


def units(content: str) -> list[str]:
    """The sentences a person reads as prose: no code (fenced, or any sentence with braces: code
    pasted as text), headings or table rows (a table row is a record, not a statement), list markers
    and emphasis taken off."""
    return [text for text, _ in _prose(content)]


def _prose(content: str) -> list[tuple[str, bool]]:
    """`units`, each with whether it is a list item (its marker is what `units` takes off)."""
    out = []
    for sentence in split_sentences(_FENCE.sub("\n\n", content)):
        if sentence.startswith(("#", "|")) or "{" in sentence or "}" in sentence:
            continue  # headings, table rows, and code that lost its fence (prose has no braces)
        text = " ".join(_MARKUP.sub("", sentence).split())  # a hard-wrapped sentence on one line
        if len(text) > 20 and not _is_field(text):
            out.append((text, _LIST_ITEM.match(sentence) is not None))
    return out


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
        words = [normalise(w) for w in _TERM_WORD.findall(clause)]
        first = next((w for w in words if w not in CLOSED_CLASS), None)
        if first:
            out.add(stem(first))
    return out


def _is_field(text: str) -> bool:
    """A record's field ("Incident commander: Hannah Vogt", "Дата: 12 февраля 2025 г.", "Tamsin Hale —
    Head of Customer Support"): a label and a value of names and numbers, at most one common word, no
    clause. Its label is the template every such record repeats, not a statement."""
    parts = _FIELD_SEPARATOR.split(text, maxsplit=1)
    # an aside in parentheses is the value's unit or gloss ("09:42–12:52 CET (3 hours 10 minutes)")
    value = _ASIDE.sub(" ", parts[-1])
    return len(parts) == 2 and sum(w.islower() and len(w) >= 4 for w in _WORD.findall(value)) <= 1


def _common_words(sentences: list[str]) -> set[str]:
    """Words written in lower case somewhere: a capitalised one among them only starts a sentence;
    the rest are names."""
    return {w for s in sentences for w in _TERM_WORD.findall(s) if w.islower()}


def _names(sentences: list[str]) -> set[tuple[str, str]]:
    """Pairs of words written capitalised inside sentences more often than in lower case: a name of
    two common words ("Carrier Connector", "Route Optimizer") is an example of a theme, not its name."""
    titled: Counter = Counter()
    lower: Counter = Counter()
    for s in sentences:
        words = _TERM_WORD.findall(s)
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
    found = list(_TERM_WORD.finditer(sentence))
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
    terms = [frozenset(sentence_terms(s, common, names)) for s, _, _ in sentences]
    documents: dict[str, set[str]] = defaultdict(set)
    # a document counts towards a term's inverse document frequency when it is written in the term's
    # script: in a corpus of fewer Russian documents than English ones every Russian word would
    # otherwise look rare ("выполнено" as distinctive as "configuration drift")
    written: dict[bool, set[str]] = defaultdict(set)
    for (_, _, doc), ts in zip(sentences, terms):
        for t in ts:
            documents[t].add(doc)
            written[_cyrillic(t)].add(doc)
    return LevelText(sentences, terms, fields, {t: frozenset(d) for t, d in documents.items()},
                     {script: frozenset(written.get(script, ())) for script in (True, False)})


def scoped_themes(question_stems: set[str], passages: list[ScopePassage], scope: set[str],
                  relevance: dict[str, float], max_themes: int) -> list[ScopedTheme]:
    """The scope's recurring themes, best first, deduplicated (see the module's docstring).
    `relevance`: each scope document's relevance to the question, 0..1 (a document missing counts 1)."""
    level = level_text(passages)
    asked_cyrillic = any(_cyrillic(s) for s in question_stems)
    sentences, terms, level_docs, written = level.sentences, level.terms, level.documents, level.written
    mine = [i for i, (_, _, doc) in enumerate(sentences) if doc in scope]
    # every word of a scope sentence, for what the question asks (only the scope's: stemming every
    # word of a large level per question would cost seconds), a Russian one in its Latin spelling as
    # the question's are: a sentence saying "алерт" says what a question about alerting asks
    said = {i: {_loanword(stem(normalise(w))) for w in _WORD.findall(sentences[i][0])} for i in mine}
    surfaces = _surfaces([sentences[i][0] for i in mine])
    scope_sentences: dict[str, list[int]] = defaultdict(list)
    for i in mine:
        for t in terms[i]:
            scope_sentences[t].append(i)
    # what the scope's documents are called ("incident review") names the scope; the rest of the
    # question is what it asks about them ("alerting")
    titles = {stem(normalise(w)) for p in passages if p.doc_id in scope for w in _WORD.findall(p.title or "")}
    focus = {_loanword(w) for w in question_stems - titles}
    named_scope = question_stems & titles
    need = min(MIN_DOCUMENTS, len(scope))
    weight: dict[str, float] = {}
    for t, idx in scope_sentences.items():
        in_scope = {sentences[i][2] for i in idx}
        # a term holding a word the scope is called by names the scope ("incident review"); one of only
        # the question's own words restates it ("alerting"); a phrase joining what the question asks
        # about with another word is a theme of it ("alert fatigue" for a question about alerting)
        words = set(t.split())
        if len(in_scope) < need or words & named_scope or words <= question_stems:
            continue
        # how much the phrase's sentences say of what the question asks (its words beyond the scope)
        asked = sum(len(focus & said[i]) for i in idx) / (len(idx) * len(focus)) if focus else 0.0
        idf = math.log(1 + len(written[_cyrillic(t)]) / len(level_docs[t]))
        weight[t] = sum(relevance.get(d, 1.0) for d in in_scope) * idf * (1 + asked)
    # a single word names a theme only when no recurring phrase holds it (it is then named by the
    # phrase) and the scope says it more than the rest of the level does: a word every kind of
    # document uses ("production", "новой") is their common vocabulary, not what the scope is about
    phrase_of = _best_phrases(weight)
    key = _key_words([t for t in weight if " " not in t and t not in phrase_of], level, scope)
    weight = {t: w for t, w in weight.items() if " " in t or t in phrase_of or t in key}
    # a single word left names a theme as a noun does: one standing as a list item's field value in
    # most of its sentences is a status or an owner every item repeats ("выполнено"), one written in
    # its past form in most of its uses tells an event ("fired"); one standing before another content
    # word in most of its sentences modifies that word ("single") and is shown with it ("single vendor")
    for t in [t for t in weight if " " not in t and t not in phrase_of]:
        idx = scope_sentences[t]
        if sum(t in level.fields[i] for i in idx) > MOST_USES * len(idx) or _past_form(surfaces[t]):
            del weight[t]
            continue
        modified = Counter(p for i in idx for p in terms[i] if " " in p and p.split(" ", 1)[0] == t
                           and not set(p.split()) & named_scope and _attributive(surfaces[p]))
        if len({i for i in idx if any(p in terms[i] for p in modified)}) > MOST_USES * len(idx):
            # the word it modifies most often, the most widespread one on a tie ("vendor", not "acquirer")
            spread = {p: len({sentences[i][2] for i in scope_sentences[p.split()[1]]}) for p in modified}
            phrase_of[t] = min(modified, key=lambda p: (-modified[p], -spread[p], p))
    groups: list[dict] = []
    for t in sorted((t for t in weight if weight[t] > 0), key=lambda t: (-weight[t], t)):
        members = set(scope_sentences[t])
        name = _named(t, phrase_of)
        words = {_loanword(w) for w in set(t.split()) | set(name.split())}
        # the same theme: its sentences lie mostly among the theme's first term's (compared with the
        # first term's, not the grown theme's, so a theme does not swallow everything near it), it
        # shares a word with that term, or it would be named as one of the theme's terms is
        home = next((g for g in groups if name in g["names"]), None) or next(
            (g for g in groups if len(members & g["core"]) >= MERGE_OVERLAP * len(members) or words & g["words"]),
            None)
        if home is None:
            if len(groups) >= max_themes:
                continue
            groups.append({"terms": [t], "core": members, "sentences": set(members), "score": weight[t],
                           "words": words, "names": {name}})
        else:
            home["sentences"] |= members
            if " " in t and weight[t] >= LABEL_SHARE * home["score"]:  # a phrase, not one more word
                home["terms"].append(t)
                home["names"].add(t)
    themes = []
    for g in groups:
        # its sentences are told by its terms and the phrases naming them ("status page", not any "page")
        w = {t: weight[t] for t in g["terms"]}
        for n in g["names"]:  # a modifier's phrase weighs as the word it names (its pair need not recur)
            w.setdefault(n, weight.get(n, g["score"]))

        def central(i: int) -> float:
            ts = terms[i]
            lexical = len(focus & said[i]) / len(focus) if focus else 0.0
            return sum(w.get(t, 0.0) for t in ts) / math.sqrt(1 + len(ts)) * (1 + lexical)

        members = sorted(g["sentences"])
        readable = [i for i in members if len(sentences[i][0]) <= MAX_SUMMARY_CHARS] or members
        # the sentence says what the label says when one can: its first term ("configuration drift"),
        # else another ("status page", not any "page"); in the question's language when the theme has
        # such a sentence (a reader of an English question gets an English summary of a theme both
        # languages tell)
        label = _label(g["terms"], phrase_of)
        readable = [i for i in readable if terms[i] & set(label)] or readable
        best = max(readable, key=lambda i: (mostly_cyrillic(sentences[i][0]) == asked_cyrillic,
                                            label[0] in terms[i], central(i), -i))
        shown = [min(surfaces[t].items(), key=lambda kv: (-kv[1], kv[0]))[0] for t in label]
        themes.append(ScopedTheme(", ".join(shown), sentences[best][0],
                                  round(g["score"], 3), tuple(sorted({sentences[i][1] for i in members})),
                                  tuple(sorted({sentences[i][2] for i in members}))))
    return themes


def _loanword(word: str) -> str:
    """A Russian stem as the English stem of its Latin spelling: Russian borrows the vocabulary of its
    trade from English ("алерт", "лимит", "инцидент"), so one theme told in both languages shares its
    borrowed word (a transliteration, letter by letter: no translation, no word list). Any other
    word is itself."""
    if not _cyrillic(word):
        return word
    return stem(latin_spelling(word))


def _past_form(forms: Counter) -> bool:
    """Whether an English word is written in its regular past form ("fired", "published") in most of
    its uses: a verb's, telling what happened, not what it is about ("need", "speed" are no such form)."""
    past = sum(n for f, n in forms.items()
               if f.isascii() and len(f) > 4 and f.endswith("ed") and not f.endswith("eed"))
    return past > MOST_USES * sum(forms.values())


def _attributive(forms: Counter) -> bool:
    """Whether a pair's first word is written as a modifier of the second somewhere: an English modifier
    takes no plural or verb -s ("periodicals usually", "customers opened": a noun and what it does)
    and is no adverb ("periodically give"); a Russian word is taken as written."""
    def modifier(word: str) -> bool:
        inflected = word.endswith("ly") or word.endswith("s") and not word.endswith(("ss", "us", "is"))
        return not (word.isascii() and inflected)
    return any(modifier(f.split(" ", 1)[0]) for f in forms)


def _cyrillic(term: str) -> bool:
    return any("а" <= ch <= "я" for ch in term)


def _surfaces(sentences: list[str]) -> dict[str, Counter]:
    """Each stem and pair of stems with the forms it is written in, to show the most used one."""
    surfaces: dict[str, Counter] = defaultdict(Counter)
    for s in sentences:
        words = [w.lower() for w in _TERM_WORD.findall(s)]
        keys = [stem(normalise(w)) for w in words]
        for w, k in zip(words, keys):
            surfaces[k][w] += 1
        for (w1, w2), (k1, k2) in zip(zip(words, words[1:]), zip(keys, keys[1:])):
            surfaces[f"{k1} {k2}"][f"{w1} {w2}"] += 1
    return surfaces


def _key_words(words: list[str], level: LevelText, scope: set[str]) -> set[str]:
    """The words more of the scope's documents say than of the rest of the level's, by Dunning's
    log-likelihood (G2, the corpus linguists' keyness) at KEYNESS, counted in documents (a theme
    recurs across documents: one review saying "timeout" ten times is one review) against the
    documents written in the word's script (all of them when the rest of the level has none in it).
    A level that is all scope has nothing to contrast: every word is key."""
    every = level.written[True] | level.written[False]
    key = set()
    for w in words:
        docs = level.written[_cyrillic(w)]
        if not docs - scope:  # the rest of the level is written in another script: contrast with all of it
            docs = every
        c, d = len(docs & scope), len(docs - scope)
        holding = level.documents[w]
        a, b = len(holding & scope), len(holding - scope)
        if d == 0 or (a / c > b / d and _log_likelihood(a, b, c, d) >= KEYNESS):
            key.add(w)
    return key


def _log_likelihood(a: int, b: int, c: int, d: int) -> float:
    """Dunning's G2 of a word seen a times in c units of one corpus and b times in d units of another."""
    e1, e2 = c * (a + b) / (c + d), d * (a + b) / (c + d)
    return 2 * ((a * math.log(a / e1) if a else 0.0) + (b * math.log(b / e2) if b else 0.0))


def _best_phrases(weight: dict[str, float]) -> dict[str, str]:
    """Each word's heaviest recurring phrase holding it (ties by the phrase)."""
    best: dict[str, str] = {}
    for p in sorted((p for p in weight if " " in p), key=lambda p: (-weight[p], p)):
        for word in p.split():
            best.setdefault(word, p)
    return best


def _named(term: str, phrase_of: dict[str, str]) -> str:
    """A word gives way to the recurring phrase holding it that weighs most ("drift" -> "configuration
    drift"): a phrase names a theme better than its words, as STC labels clusters by phrases."""
    return phrase_of.get(term, term) if " " not in term else term


def _label(terms: list[str], phrase_of: dict[str, str]) -> list[str]:
    """The theme's best terms: a word gives way to the recurring phrase holding it (`_named`), and a
    term another chosen one holds is left out."""
    return distinct_terms((_named(t, phrase_of) for t in terms), LABEL_TERMS)


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
