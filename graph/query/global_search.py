"""Global search: corpus-wide questions answered from community reports, map-reduce style.

1. Choose the user's access level (graph/levels.py): only reports built from chunks every member
   of that level may read are ever considered.
2. Select communities dynamically, as GraphRAG's dynamic selection does: rate the root-level
   reports against the question, descend into the children of relevant ones, keep the relevant.
3. Map: each selected report yields points (its findings) scored 0-100 for the question.
4. Reduce: drop zero-score points, sort, pack the best within a budget into an answer that cites
   reports, and through their source chunks, documents.

Offline (no LLM) the rating and the map are lexical + vector similarity and the answer is
extractive, labelled offline. The LLM rating / map / reduce live in graph/query/global_llm.py.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from core.text.terms import normalise, stem
from graph.levels import AccessLevel, choose_level

_WORD = re.compile(r"\w+", re.UNICODE)
# Words that say "corpus-wide" rather than what about: they match every report equally.
_SCOPE_WORDS = frozenset(
    "what which main key common recurring overall across all the of in and are is were do does how "
    "themes theme topics topic risks risk issues raised mentioned discussed corpus documents "
    "какие какой основные главные общие все всех во в и по на что как темы тема риски проблемы целом".split()
)


def stems(text: str) -> list[str]:
    """Stems of the text's words, without the words that only say 'corpus-wide' (core.text.terms.stem is cached:
    every question re-stems every report of the level)."""
    words = _WORD.findall(text.lower())
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
class GlobalResult:
    answer: str
    level: str | None
    points: list[Point] = field(default_factory=list)
    reports: list[dict] = field(default_factory=list)  # cited: id, title, rating
    selected: list[int] = field(default_factory=list)
    offline: bool = True
    trace: dict = field(default_factory=dict)
    degraded: bool = False  # the LLM path fell back (API error, bad citations): trace["degraded"] says why


NO_LEVEL = "No graph is available for your access groups, so this corpus-wide question cannot be answered."
NO_ANSWER = "No community report in the corpus addresses this question."


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


def map_points(query_stems: set[str], reports: Sequence[dict], report_scores: dict[int, float]) -> list[Point]:
    points = []
    for r in reports:
        for f in r["findings"]:
            text = f"{f['summary']}: {f['explanation']}"
            score = 100 * (0.6 * lexical_score(query_stems, text) + 0.4 * report_scores[r["id"]])
            points.append(Point(r["id"], text, round(score, 2), list(f.get("chunk_ids", []))))
    return points


def reduce_points(points: list[Point], budget_chars: int, max_points: int) -> list[Point]:
    kept, used, seen = [], 0, set()
    for p in sorted((p for p in points if p.score > 0), key=lambda p: (-p.score, p.report_id, p.text)):
        if p.text in seen or used + len(p.text) > budget_chars or len(kept) >= max_points:
            continue
        kept.append(p)
        seen.add(p.text)
        used += len(p.text)
    return kept


def extractive_answer(points: list[Point], report_numbers: dict[int, int]) -> str:
    lines = ["Offline answer (extractive, no LLM): the most relevant points across the corpus's community reports."]
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
    threshold: float = 0.15,
    budget_chars: int = 4000,
    max_points: int = 12,
) -> GlobalResult:
    """`load_reports(level_name)` returns the level's reports (graph/store.list_reports rows)."""
    level = choose_level(levels, user_groups)
    if level is None:
        return GlobalResult(NO_LEVEL, None, trace={"levels": [lvl.name for lvl in levels]})
    reports = load_reports(level.name)
    q = set(stems(question))
    scores = {r["id"]: relevance(q, query_vec, r) for r in reports}
    selected_ids = select_communities(reports, scores, threshold)
    selected = [r for r in reports if r["id"] in set(selected_ids)]
    points = reduce_points(map_points(q, selected, scores), budget_chars, max_points)
    trace = {"level": level.name, "reports": len(reports), "selected": selected_ids,
             "scores": {rid: round(s, 3) for rid, s in sorted(scores.items())}}
    if not points:
        return GlobalResult(NO_ANSWER, level.name, selected=selected_ids, trace=trace)
    order = list(dict.fromkeys(p.report_id for p in points))
    numbers = {rid: n for n, rid in enumerate(order, start=1)}
    by_id = {r["id"]: r for r in reports}
    cited = [{"number": numbers[rid], "id": rid, "title": by_id[rid]["title"], "rating": by_id[rid]["rating"],
              "chunk_ids": sorted({c for p in points if p.report_id == rid for c in p.chunk_ids})} for rid in order]
    return GlobalResult(extractive_answer(points, numbers), level.name, points, cited, selected_ids, True, trace)
