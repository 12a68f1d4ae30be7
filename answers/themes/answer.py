"""The offline themes of a corpus-wide answer, written from the level's own passages: the recurring
themes of the documents the question is about (answers/themes/scoped.py), then the sections the
documents of the kind asked about share (answers/themes/outline.py), each citing a community report.

The global search (graph/query/global_search.py) selects the level and its reports and calls
`themes_in_scope` as its `ScopeThemes` writer; without it, each relevant community is a theme.
"""
from __future__ import annotations

from core.text.language import detect_language
from graph.query.answer_text import say
from graph.query.global_search import Theme, lexical_score
from graph.types import ScopePassage
from answers.themes.outline import shared_sections
from answers.themes.scoped import (ScopedTheme, document_relevance, folder, kind_documents, nearest, scope_documents,
                                   scoped_themes)


def themes_in_scope(question: str, query_stems: set[str], passages: list[ScopePassage],
                    similarities: dict[int, float], reports: list[dict], max_themes: int, trace: dict) -> list[Theme]:
    """The recurring themes of the documents the question is about (answers/themes/scoped.py), and after
    them the sections the documents of the kind asked about share (answers/themes/outline.py), each
    tied to the report holding most of its passages (the smaller one on a tie: it says more about
    them). Without the question's vector the passages are ranked by its words."""
    if not similarities:
        similarities = {p.id: lexical_score(query_stems, f"{p.title or ''} {p.content}") for p in passages}
    relevance = document_relevance(passages, similarities)
    scope = scope_documents(passages, nearest(similarities), relevance)
    kind = kind_documents(scope, relevance)
    found = scoped_themes(query_stems, passages, scope, relevance, max_themes, kind)
    sections = shared_sections(passages, kind, detect_language(question) == "russian")
    if found and sections:  # a template is what the kind's documents share beside their themes, not instead
        of = say("outline_count", question)
        # counted among the documents of the folders the sections are found in (of two kinds tied, the
        # one with a template)
        total = len({d for d in kind if folder(d) in {folder(x) for s in sections for x in s.documents}})
        found.append(ScopedTheme(say("outline_label", question), "; ".join(
            f"{s.name} ({of.format(n=len(s.documents), total=total)})" for s in sections),
            0.0, tuple(sorted({c for s in sections for c in s.chunk_ids})),
            tuple(sorted({d for s in sections for d in s.documents}))))
    trace["scope"] = sorted(scope)
    themes = []
    top = (found[0].score or 1.0) if found else 1.0
    for f in found:
        held = set(f.chunk_ids)
        report = max(reports, key=lambda r: (len(held & set(r["source_chunk_ids"])), -len(r["source_chunk_ids"]),
                                             -r["id"]), default=None)
        if report is None or not held & set(report["source_chunk_ids"]):
            # no community holds these passages (a report withdrawn since): nothing to cite it by
            trace.setdefault("uncited_themes", []).append(f.label)
            continue
        themes.append(Theme(report["id"], f.label, f.summary, round(100 * f.score / top, 2), list(f.chunk_ids)))
    return themes
