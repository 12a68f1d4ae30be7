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
   against the rest of the level (Dunning's log-likelihood over documents, p < 0.01: a theme recurs
   across documents, and one document repeating a word is one document): the common vocabulary of
   every kind of document names no theme. A word key only at p < 0.05 (two reviews of a handful, a
   test with little power) is weaker evidence: it starts a theme only in a slot the others left,
   after them, and joins none. It names a theme as a noun does, so in most of its uses it is no
   list item's field value (a status, an owner: "— выполнено"), nor an English past form ("fired");
   one modifying the word after it in most of its uses (an adjective: "single") is shown with the
   word it modifies most ("single vendor"). A term weighs
   as in class-based TF-IDF: the scope documents saying it, each by its relevance to the question,
   times log(1 + N / df) over the level's documents written in its script (what every document
   says weighs least), times one plus the share of the question's focus (its words beyond what the
   scope's documents are called) its sentences say.
   A sentence stating that something was missing ("No runbook.", "Нет лимита на отправку SMS") also
   holds the gap term (answers/themes/gaps.py), weighed and kept key as any other: each missing thing
   is told by a review or two, that something was missing by most of them.
3. Themes: terms taken best first; the gaps start a theme of their own, named by the missing things
   most of the kind's documents miss, and a term mostly told as a missing thing joins it; any other
   term whose sentences lie mostly among a chosen theme's, or that shares a word with the theme's
   first name, joins that theme (STC's merge of base clusters), the rest start a new theme. A Russian word is compared in its Latin spelling, as the trade's
   vocabulary is borrowed ("порог алерта" joins "alert fatigue"); a theme told in native words in
   each language stays two: nothing is translated, and a document is written in one language, so
   the passages or documents two such terms share are too few to join them either. A theme
   is named by its terms, a word giving way to the recurring phrase holding it (STC labels clusters
   by phrases); its summary is its most central sentence (the most of its terms' weight per word)
   most relevant to the question among those saying its label, told by a document of the kind asked
   about when one says it (a theme of the incident reviews quoted from a review, not from the
   handbook page a nearest passage brought); its documents are its sentences'.

Pure: the passages come from graph/query/runner.py, read through SQL with the level's groups. What
is read of the whole level (its sentences, terms and document frequencies) is analysed once per
version of its text and kept (answers/themes/text.py); a question then costs only its scope's
sentences.
"""
from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from dataclasses import dataclass

from core.text.terms import distinct_terms, loanword, normalise, shared_stem, stem
from core.text.script import mostly_cyrillic
from core.text.tokens import HYPHENATED, WORD
from graph.types import ScopePassage
from answers.themes.gaps import GAP_TERM, missing_things
from answers.themes.text import LevelText, is_cyrillic, level_text

_CYRILLIC_LETTER = re.compile(r"[а-яёА-ЯЁ]")
_LATIN_LETTER = re.compile(r"[a-zA-Z]")

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
WEAKER_KEYNESS = 3.84  # p < 0.05
# a single word is used as a field value, a verb or a modifier when it is so in more than this share of
# its sentences (or of its written forms): in most of its uses
MOST_USES = 0.5
MAX_SUMMARY_CHARS = 300  # a theme's one sentence; longer ones are lists and tables run together

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
    """The documents of the nearest passages, and every document filed in the folders where the
    question's documents concentrate (`concentrated_folders`)."""
    doc_of = {p.id: p.doc_id for p in passages}
    seeds = {doc_of[c] for c in nearest if c in doc_of}
    folders = concentrated_folders(relevance, k)
    return seeds | {p.doc_id for p in passages if folder(p.doc_id) in folders}


def concentrated_folders(relevance: dict[str, float], k: int | None = None) -> set[str]:
    """The folder holding the most of the k (SCOPE_PASSAGES) documents most relevant to the question,
    at least two of them (ties: each such folder). A folder one relevant document shares with
    unrelated ones (a handbook's incident-review process beside its customer FAQ) is no kind the
    question asks about; a document at the top of the corpus brings only itself."""
    top = sorted(relevance, key=lambda d: (-relevance[d], d))[:k or SCOPE_PASSAGES]
    held = Counter(folder(d) for d in top if folder(d))
    most = max(held.values(), default=0)
    return {f for f, n in held.items() if n == most and n >= MIN_DOCUMENTS}


def kind_documents(scope: set[str], relevance: dict[str, float]) -> set[str]:
    """The scope's documents of the kind the question asks about: those filed where the question's
    documents concentrate, else in the folder holding the most of the scope (each such folder on a
    tie); a document beside them only held a nearest passage (the handbook's paging rules beside the
    incident reviews)."""
    folders = concentrated_folders(relevance) & {folder(d) for d in scope}
    if not folders:
        held = Counter(folder(d) for d in scope)
        folders = {f for f, n in held.items() if n == max(held.values())}
    return {d for d in scope if folder(d) in folders}


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


def scoped_themes(question_stems: set[str], passages: list[ScopePassage], scope: set[str],
                  relevance: dict[str, float], max_themes: int, kind: set[str] | None = None) -> list[ScopedTheme]:
    """The scope's recurring themes, best first, deduplicated (see the module's docstring).
    `relevance`: each scope document's relevance to the question, 0..1 (a document missing counts 1);
    `kind`: the scope's documents of the kind asked about, when the caller has read them (`kind_documents`)."""
    level = level_text(passages)
    asked_cyrillic = any(is_cyrillic(s) for s in question_stems)
    sentences, terms, level_docs, written = level.sentences, level.terms, level.documents, level.written
    mine = [i for i, (_, _, doc) in enumerate(sentences) if doc in scope]
    kind = kind if kind is not None else kind_documents(scope, relevance)
    # every word of a scope sentence, for what the question asks (only the scope's: stemming every
    # word of a large level per question would cost seconds), a Russian one in its Latin spelling as
    # the question's are: a sentence saying "алерт" says what a question about alerting asks
    said = {i: {shared_stem(w) for w in WORD.findall(sentences[i][0])} for i in mine}
    surfaces = _surfaces([sentences[i][0] for i in mine])
    scope_sentences: dict[str, list[int]] = defaultdict(list)
    for i in mine:
        for t in terms[i]:
            scope_sentences[t].append(i)
    # what the scope's documents are called ("incident review") names the scope; the rest of the
    # question is what it asks about them ("alerting")
    titles = {stem(normalise(w)) for p in passages if p.doc_id in scope for w in WORD.findall(p.title or "")}
    focus = {loanword(w) for w in question_stems - titles}
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
        idf = math.log(1 + len(written[is_cyrillic(t)]) / len(level_docs[t]))
        # summed exactly over the set, whose order follows the hash seed: equal weights stay equal in every run
        weight[t] = math.fsum(relevance.get(d, 1.0) for d in in_scope) * idf * (1 + asked)
    # a single word names a theme only when no recurring phrase holds it (it is then named by the
    # phrase) and the scope says it more than the rest of the level does: a word every kind of
    # document uses ("production", "новой") is their common vocabulary, not what the scope is about
    phrase_of = _best_phrases(weight)
    singles = [t for t in weight if " " not in t and t not in phrase_of]
    key = _key_words(singles, level, scope)
    weaker = _key_words(singles, level, scope, WEAKER_KEYNESS) - key
    weight = {t: w for t, w in weight.items() if " " in t or t in phrase_of or t in key or t in weaker}
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
    gap_stems = {i: {w for gap in level.gaps[i] for w in gap.stems} for i in mine if level.gaps[i]}
    groups: list[dict] = []
    for t in sorted((t for t in weight if weight[t] > 0), key=lambda t: (t in weaker, -weight[t], t)):
        members = set(scope_sentences[t])
        name = _named(t, phrase_of)
        words = {loanword(w) for w in set(t.split()) | set(name.split())}
        # the same theme: its sentences lie mostly among the theme's first term's (compared with the
        # first term's, not the grown theme's, so a theme does not swallow everything near it), it
        # shares a word with that term, or it would be named as one of the theme's terms is
        # the gaps are a theme of their own, named by what was missing, and join none; a term mostly
        # told as a missing thing ("runbook" of "No runbook.") is one of them, while a phrase a gap's
        # sentence tells beside it ("single vendor" of "Single vendor dependency. There is no
        # secondary geocoder") stays its own theme
        gapped = [i for i in members if words & gap_stems.get(i, set())]
        home = None if t == GAP_TERM else next(
            (g for g in groups if g["terms"][0] == GAP_TERM and len(gapped) >= MERGE_OVERLAP * len(members)),
            None) or next((g for g in groups if name in g["names"]), None) or next(
            (g for g in groups if g["terms"][0] != GAP_TERM and (
                len(members & g["core"]) >= MERGE_OVERLAP * len(members) or words & g["words"])), None)
        if t in weaker and home is not None:
            continue  # weaker evidence only fills a slot no stronger theme took
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
        # languages tell), then by a document of the kind asked about (`kind_documents`)
        label = _label(g["terms"], phrase_of)
        readable = [i for i in readable if terms[i] & set(label)] or readable
        if g["terms"][0] == GAP_TERM:
            # what the documents of the kind asked about say was missing (a handbook's "no deploys on
            # Fridays" is a rule, not a finding), told by a sentence missing the thing most of them miss
            stating = [i for i in members if GAP_TERM in terms[i]]
            told = [i for i in stating if sentences[i][2] in kind] or stating
            missing = missing_things([(level.gaps[i], sentences[i][2]) for i in told], asked_cyrillic)
            readable = [i for i in readable if any(gap.stems & missing.first for gap in level.gaps[i])] \
                or readable
        best = max(readable, key=lambda i: (mostly_cyrillic(sentences[i][0]) == asked_cyrillic,
                                            sentences[i][2] in kind, label[0] in terms[i], central(i), -i))
        if g["terms"][0] == GAP_TERM:  # "no runbook, load testing, ...": what was missing
            shown = [missing.label]
        else:
            shown = [min(surfaces[t].items(), key=lambda kv: (-kv[1], kv[0]))[0] for t in label]
        themes.append(ScopedTheme(", ".join(shown), sentences[best][0],
                                  round(g["score"], 3), tuple(sorted({sentences[i][1] for i in members})),
                                  tuple(sorted({sentences[i][2] for i in members}))))
    return themes


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


def _surfaces(sentences: list[str]) -> dict[str, Counter]:
    """Each stem and pair of stems with the forms it is written in, to show the most used one."""
    surfaces: dict[str, Counter] = defaultdict(Counter)
    for s in sentences:
        words = [w.lower() for w in HYPHENATED.findall(s)]
        keys = [stem(normalise(w)) for w in words]
        for w, k in zip(words, keys):
            surfaces[k][w] += 1
        for (w1, w2), (k1, k2) in zip(zip(words, words[1:]), zip(keys, keys[1:])):
            surfaces[f"{k1} {k2}"][f"{w1} {w2}"] += 1
    return surfaces


def _key_words(words: list[str], level: LevelText, scope: set[str], keyness: float = KEYNESS) -> set[str]:
    """The words more of the scope's documents say than of the rest of the level's, by Dunning's
    log-likelihood (G2, the corpus linguists' keyness) at KEYNESS, counted in documents (a theme
    recurs across documents: one review saying "timeout" ten times is one review) against the
    documents written in the word's script (all of them when the rest of the level has none in it).
    A level that is all scope has nothing to contrast: every word is key."""
    every = level.written[True] | level.written[False]
    key = set()
    for w in words:
        docs = level.written[is_cyrillic(w)]
        if not docs - scope:  # the rest of the level is written in another script: contrast with all of it
            docs = every
        c, d = len(docs & scope), len(docs - scope)
        holding = level.documents[w]
        a, b = len(holding & scope), len(holding - scope)
        if d == 0 or (a / c > b / d and _log_likelihood(a, b, c, d) >= keyness):
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
