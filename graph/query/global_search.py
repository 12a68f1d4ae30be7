"""Global search: corpus-wide questions answered from community reports, map-reduce style.

1. Choose the user's access level (graph/levels.py): only reports built from chunks every member
   of that level may read are ever considered.
2. Select communities dynamically, as GraphRAG's dynamic selection does: rate the root-level
   reports against the question, descend into the children of relevant ones, keep the relevant.
3. Map: each selected report becomes a theme: a label from the community's distinctive key phrases
   (class-based TF-IDF over every report of the level), the sentence of the report most central to
   those phrases and relevant to the question, and the chunks behind it.
4. Reduce: rank the themes by relevance and by how widely they recur (their chunks), drop those a
   better theme already says (the same label, or chunks mostly inside its chunks), and answer with
   the best ones, each citing its report and, through its chunks, the documents.

Offline (no LLM) the rating is lexical + vector similarity and the answer is the extractive list of
themes, labelled offline. When the caller hands over the level's passages and a `ScopeThemes`
writer (answers/themes: entity-centred communities mix an incident with its vendor and service, so
what recurs across the incidents is in none of them), the themes are that writer's, each citing the
report holding most of its passages; steps 3-4 make the themes when those documents share none. The
LLM rating / map / reduce live in graph/query/global_llm.py.
"""
from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from core.sentences import split_sentences
from core.text.terms import STOPWORDS, distinct_terms, normalise, stem
from core.text.tokens import WORD
from graph.levels import AccessLevel, choose_level
from graph.query.answer_text import say
from graph.types import ScopePassage

# Words that say "corpus-wide" rather than what about: they match every report equally.
_SCOPE_WORDS = frozenset(
    "what which main key common recurring overall across all the of in and are is were do does how "
    "themes theme topics topic risks risk issues raised mentioned discussed corpus documents "
    "какие какой основные главные общие все всех во в и по на что как темы тема риски проблемы целом".split()
)


def stems(text: str) -> list[str]:
    """Stems of the text's words, without the words that only say 'corpus-wide' (core.text.terms.stem is cached:
    every question re-stems every report of the level)."""
    words = WORD.findall(text.lower())
    return [stem(normalise(word)) for word in words if word not in _SCOPE_WORDS and len(word) >= 2]


def lexical_score(query_stems: set[str], text: str) -> float:
    """Share of the question's content words the text contains (0..1)."""
    if not query_stems:
        return 0.0
    return len(query_stems & set(stems(text))) / len(query_stems)


@dataclass
class Point:
    report_id: int
    text: str
    score: float  # 0-100
    chunk_ids: list[int]


@dataclass
class Theme:
    """One theme of a corpus-wide answer: a community's distinctive key phrases as its label, the
    sentence of its report most central to it and relevant to the question, the chunks behind it."""
    report_id: int
    label: str
    summary: str
    score: float  # 0-100: the report's relevance to the question, or a scoped theme's weight against the first's
    chunk_ids: list[int]


class ScopeThemes(Protocol):
    """Writes a corpus-wide answer's themes from the level's own passages (answers/themes/answer.py):
    `similarities` holds each passage's closeness to the question (empty without its vector), `reports`
    are the level's, each theme cites one of them; what it decided goes into `trace`."""

    def __call__(self, question: str, query_stems: set[str], passages: list[ScopePassage],
                 similarities: dict[int, float], reports: list[dict], max_themes: int,
                 trace: dict) -> list[Theme]: ...


@dataclass
class GlobalResult:
    answer: str
    level: str | None
    points: list[Point] = field(default_factory=list)
    reports: list[dict] = field(default_factory=list)  # cited: id, title, rating
    selected: list[int] = field(default_factory=list)
    offline: bool = True
    trace: dict = field(default_factory=dict)
    degraded: bool = False  # the LLM path fell back (API error, bad citations): trace["degraded"] says why
    themes: list[Theme] = field(default_factory=list)  # the offline answer's themes, best first


def relevance(query_stems: set[str], query_vec: np.ndarray | None, report: dict) -> float:
    """0..1: the report's text against the question, words and meaning, nudged by the report's rating."""
    text = report["title"] + " " + report["summary"] + " " + " ".join(f["summary"] for f in report["findings"])
    lex = lexical_score(query_stems, text)
    sem = 0.0
    if query_vec is not None and report.get("embedding") is not None:
        # e5 cosines of unrelated texts sit around 0.75: rescale the useful band to 0..1
        sem = max(0.0, (float(np.asarray(report["embedding"].to_numpy() if hasattr(report["embedding"], "to_numpy")
                                             else report["embedding"]) @ query_vec) - 0.75) / 0.2)
    return min(1.0, 0.5 * lex + 0.4 * min(sem, 1.0) + 0.1 * report["rating"] / 10)


def select_communities(reports: list[dict], scores: dict[int, float], threshold: float) -> list[int]:
    """Root-down: every root report is mapped (a corpus-wide question may hinge on any of them);
    only a relevant report's children are rated and descended into, irrelevant branches are pruned."""
    by_parent: dict[int | None, list[dict]] = {}
    for r in reports:
        by_parent.setdefault(r["parent"], []).append(r)
    selected, frontier = [], [r for r in reports if r["parent"] is None]
    while frontier:
        next_frontier = []
        for r in sorted(frontier, key=lambda r: r["id"]):
            relevant = scores[r["id"]] >= threshold
            if relevant or r["parent"] is None:
                selected.append(r["id"])
            if relevant:
                next_frontier.extend(by_parent.get(r["id"], []))
        frontier = next_frontier
    return selected


def extractive_answer(points: list[Point], report_numbers: dict[int, int], question: str) -> str:
    lines = [say("points_header", question)]
    for p in points:
        lines.append(f"- {p.text} [{report_numbers[p.report_id]}]")
    return "\n".join(lines)


def global_search(
    levels: list[AccessLevel],
    user_groups: set[str],
    load_reports,
    question: str,
    query_vec: np.ndarray | None,
    *,
    load_scope=None,
    scope_themes: ScopeThemes | None = None,
    threshold: float = 0.15,
    max_themes: int = 6,
) -> GlobalResult:
    """`load_reports(level_name)` returns the level's reports (graph/store.list_reports rows);
    `load_scope(level)` the level's passages and their similarities to the question, when the caller
    can read them, and `scope_themes` writes the themes from them. The offline answer is a list of
    themes (`themes`), each citing the community report that holds most of its passages; the points
    are the themes as text, for callers that read points. Without passages or a scope writer, or when
    the documents the question is about share no theme, each relevant community is a theme."""
    level = choose_level(levels, user_groups)
    if level is None:
        return GlobalResult(say("no_level", question), None, trace={"levels": [lvl.name for lvl in levels]})
    reports = load_reports(level.name)
    q = set(stems(question))
    scores = {r["id"]: relevance(q, query_vec, r) for r in reports}
    selected_ids = select_communities(reports, scores, threshold)
    chosen = set(selected_ids)
    trace = {"level": level.name, "reports": len(reports), "selected": selected_ids,
             "scores": {rid: round(s, 3) for rid, s in sorted(scores.items())}}
    themes, header = [], "scope_header"
    if load_scope is not None and scope_themes is not None:
        passages, similarities = load_scope(level)
        trace["scope_passages"] = len(passages)  # 0: none handed over (a level too large to read per question)
        if passages:
            themes = scope_themes(question, q, passages, similarities, reports, max_themes, trace)
    if not themes:
        themes, header = rank_themes(q, [r for r in reports if r["id"] in chosen], reports, scores, max_themes), \
            "community_header"
    trace["themes_from"] = "scope" if header == "scope_header" else "communities"
    if not themes:
        return GlobalResult(say("no_answer", question), level.name, selected=selected_ids, trace=trace)
    numbers: dict[int, int] = {}
    for t in themes:  # themes held by one report cite it once
        numbers.setdefault(t.report_id, len(numbers) + 1)
    chunks_of: dict[int, set[int]] = defaultdict(set)
    for t in themes:
        chunks_of[t.report_id].update(t.chunk_ids)
    by_id = {r["id"]: r for r in reports}
    points = [Point(t.report_id, f"{t.label}: {t.summary}", t.score, t.chunk_ids) for t in themes]
    cited = [{"number": n, "id": rid, "title": by_id[rid]["title"], "rating": by_id[rid]["rating"],
              "chunk_ids": sorted(chunks_of[rid])} for rid, n in numbers.items()]
    return GlobalResult(themes_answer(themes, numbers, say(header, question)), level.name, points, cited, selected_ids,
                        True, trace, themes=themes)


# --- themes -------------------------------------------------------------------------------------------

THEME_OVERLAP = 0.6  # a theme whose chunks lie this much inside a better one's says the same again
LABEL_TERMS = 3
MAX_SUMMARY_CHARS = 300  # a theme's one sentence; longer ones are headings and lists run together


def _sentences(report: dict) -> list[str]:
    """What a person reads in a report: its summary and its findings' explanations, sentence by sentence."""
    texts = [report["summary"], *(f.get("explanation", "") for f in report["findings"])]
    return list(dict.fromkeys(s.strip() for t in texts for s in split_sentences(t or "") if len(s.strip()) > 20))


def _terms(sentence: str, surfaces: dict[str, Counter] | None = None) -> list[str]:
    """Content terms of a sentence: stems of its common words and adjacent pairs of them, the phrases
    a theme is named by ("rate limit"). Names, codes and numbers are left out: a theme is what its
    incidents share, its entities are only examples of it."""
    words = [w.lower() for w in WORD.findall(sentence) if len(w) >= 4 and w.islower() and "_" not in w
             and not any(c.isdigit() for c in w) and w not in _SCOPE_WORDS and w not in STOPWORDS]
    keys = [stem(normalise(w)) for w in words]
    if surfaces is not None:
        for w, k in zip(words, keys):
            surfaces[k][w] += 1
        for (w1, w2), (k1, k2) in zip(zip(words, words[1:]), zip(keys, keys[1:])):
            surfaces[f"{k1} {k2}"][f"{w1} {w2}"] += 1
    return keys + [f"{a} {b}" for a, b in zip(keys, keys[1:])]


def class_tfidf(classes: dict[int, list[str]]) -> dict[int, dict[str, float]]:
    """Class-based TF-IDF (BERTopic's c-TF-IDF): a term weighs by its frequency in the class times
    log(1 + A / f), A the average number of terms per class and f the term's frequency in all classes."""
    counts = {c: Counter(terms) for c, terms in classes.items()}
    total = Counter()
    for cnt in counts.values():
        total.update(cnt)
    average = sum(len(t) for t in classes.values()) / max(1, len(classes))
    return {c: {t: (n / max(1, len(classes[c]))) * math.log(1 + average / total[t]) for t, n in cnt.items()}
            for c, cnt in counts.items()}


def rank_themes(query_stems: set[str], selected: list[dict], every: list[dict], scores: dict[int, float],
                max_themes: int) -> list[Theme]:
    """The selected reports as themes, ranked by relevance to the question and how widely they recur
    (their chunks), deduplicated: a theme whose chunks lie mostly inside a better theme's, or whose
    label repeats one, is left out. Ties are broken by report id."""
    surfaces: dict[str, Counter] = defaultdict(Counter)
    sentences = {r["id"]: _sentences(r) for r in every}
    weights = class_tfidf({rid: [t for s in ss for t in _terms(s, surfaces)] for rid, ss in sentences.items()})
    ranked = sorted((r for r in selected if sentences[r["id"]]),
                    key=lambda r: (-scores[r["id"]] * math.log2(2 + len(r["source_chunk_ids"])), r["id"]))
    themes: list[Theme] = []
    for r in ranked:
        # a label term recurs: it is in two sentences of the report at least, not one sentence's word
        # (a report of one sentence is labelled by its own terms)
        spread = Counter(t for sentence in sentences[r["id"]] for t in set(_terms(sentence)))
        w = {t: v for t, v in weights[r["id"]].items() if spread[t] >= 2} or weights[r["id"]]
        label_terms = _label(w, surfaces)
        if not label_terms:
            continue
        chunks = set(r["source_chunk_ids"])
        label = ", ".join(label_terms)
        if any(label == t.label or (chunks and len(chunks & set(t.chunk_ids)) >= THEME_OVERLAP * len(chunks))
               for t in themes):
            continue

        def central(sentence: str) -> float:
            terms = set(_terms(sentence))
            return sum(w.get(t, 0.0) for t in terms) / math.sqrt(1 + len(terms)) * (
                1 + lexical_score(query_stems, sentence))

        readable = [x for x in sentences[r["id"]] if len(x) <= MAX_SUMMARY_CHARS] or sentences[r["id"]]
        summary = max(readable, key=lambda x: (central(x), -readable.index(x)))
        themes.append(Theme(r["id"], label, summary, round(100 * scores[r["id"]], 2), sorted(chunks)))
        if len(themes) >= max_themes:
            break
    return themes


def _label(weights: dict[str, float], surfaces: dict[str, Counter]) -> list[str]:
    """The class's top terms, a phrase taking the place of its words, each in its most used form."""
    def named(term: str) -> str:
        if " " not in term:  # a phrase holding the word, used at least half as much, says more ("config drift")
            phrases = [t for t in weights if " " in t and term in t.split() and weights[t] >= 0.5 * weights[term]]
            term = min(phrases, key=lambda t: (-weights[t], t), default=term)
        return term

    chosen = distinct_terms((named(t) for t in sorted(weights, key=lambda t: (-weights[t], t))), LABEL_TERMS)
    return [min(surfaces[t].items(), key=lambda kv: (-kv[1], kv[0]))[0] for t in chosen]


def themes_answer(themes: list[Theme], numbers: dict[int, int], header: str) -> str:
    lines = [header]
    for t in themes:
        lines.append(f"- {t.label}: {t.summary} [{numbers[t.report_id]}]")
    return "\n".join(lines)
