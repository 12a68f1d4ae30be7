"""The sections documents of one kind share: what each of them covers.

Documents of a kind are written to a template: every service page has its error codes and its
configuration, every team page its lead, channel and on-call rotation, every incident review its
date, severity and action items. A question about what such pages say ("what does every service page
keep coming back to", "какие сведения повторяются на страницах команд") is answered first by that
template, which the phrase themes (answers/themes/scoped.py) never see: headings and a record's field
labels are no prose. Here a section is a heading under the document's title ("Carrier Connector >
Error codes": "Error codes") or a record field's label ("- **Team lead:** Marcus Oyelaran": "Team
lead") that its document writes at most twice (a transcript's "KEVIN SCOTT:" opens its turns); two
are the same section when one's content words hold the other's ("Errors", "Error codes"), a Russian
word compared in its Latin spelling as the themes compare it. Nothing is translated: "Team lead" and
"Руководитель команды" stay two sections, each counted by the documents written in its language. A
section the kind's documents share is one at least two of them have.

Pure: the passages come from graph/query/runner.py, read through SQL with the level's groups.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from core.sentences import split_sentences
from core.text.script import mostly_cyrillic
from core.text.terms import CLOSED_CLASS, normalise, shared_stem
from graph.types import ScopePassage
from answers.themes.text import field_label
from core.text.tokens import HYPHENATED

MIN_DOCUMENTS = 2  # a shared section: at least this many of the kind's documents have it
MIN_SECTIONS = 2  # one shared heading is a coincidence, not a template
OUTLINE_SECTIONS = 8  # sections shown, those most documents have first
MAX_FIELD_REPEATS = 2  # a field label written more often in one document marks a transcript's turns
HEADING_SEPARATOR = " > "  # chunks.heading: the path of headings above a chunk, the document's title first


@dataclass(frozen=True)
class Section:
    name: str  # as most often written (the fewest words on a tie), in the question's language when written so
    documents: tuple[str, ...]  # the kind's documents having it
    chunk_ids: tuple[int, ...]  # the passages under it or holding its field


def headings(passage: ScopePassage) -> list[str]:
    """The headings a passage is under, below its document's title (the path's first heading)."""
    path = [h.strip() for h in passage.heading.split(HEADING_SEPARATOR) if h.strip()] if passage.heading else []
    return path[1:]


def field_labels(passage: ScopePassage) -> list[str]:
    """The labels of the record fields a passage holds, in order, each as often as written."""
    return [label for s in split_sentences(passage.content) if (label := field_label(s))]


def section_names(passages: list[ScopePassage]) -> list[tuple[str, int]]:
    """A document's sections, (name, passage id): the headings its passages are under and the labels of
    its record fields. A label written more than MAX_FIELD_REPEATS times in the document marks turns,
    not a field ("KEVIN SCOTT: Yeah." in a transcript): a record states each of its fields once."""
    labels = {p.id: field_labels(p) for p in passages}
    written = Counter(label for its in labels.values() for label in its)
    return [(name, p.id) for p in passages
            for name in headings(p) + [label for label in labels[p.id] if written[label] <= MAX_FIELD_REPEATS]]


def _key(name: str) -> frozenset[str]:
    return frozenset(shared_stem(w) for w in HYPHENATED.findall(name)
                     if normalise(w) not in CLOSED_CLASS and not any(c.isdigit() for c in w))


def shared_sections(passages: list[ScopePassage], kind: set[str], asked_cyrillic: bool) -> list[Section]:
    """The sections at least MIN_DOCUMENTS of the `kind` documents have, those most of them have first
    (then those written in the question's language, then as first written), at most OUTLINE_SECTIONS;
    none when they share fewer than MIN_SECTIONS."""
    groups: list[dict] = []
    by_document: dict[str, list[ScopePassage]] = {}
    for p in sorted((p for p in passages if p.doc_id in kind), key=lambda p: (p.doc_id, p.id)):
        by_document.setdefault(p.doc_id, []).append(p)
    for doc, its in by_document.items():
        for name, chunk in section_names(its):
            key = _key(name)
            if not key:
                continue
            home = next((g for g in groups if key <= g["key"] or g["key"] <= key), None)
            if home is None:
                home = {"key": key, "docs": set(), "chunks": set(), "names": Counter(), "first": len(groups)}
                groups.append(home)
            home["docs"].add(doc)
            home["chunks"].add(chunk)
            home["names"][name] += 1
    shared = sorted((g for g in groups if len(g["docs"]) >= MIN_DOCUMENTS),
                    key=lambda g: (-len(g["docs"]), _written_in(g["names"]) != asked_cyrillic, g["first"]))[
        :OUTLINE_SECTIONS]
    if len(shared) < MIN_SECTIONS:
        return []
    # the general name of a section some documents narrow ("Rate limits", not "Client-side rate limits")
    return [Section(min(g["names"], key=lambda n: (mostly_cyrillic(n) != asked_cyrillic, -g["names"][n],
                                                   len(_key(n)), n)),
                    tuple(sorted(g["docs"])), tuple(sorted(g["chunks"]))) for g in shared]


def _written_in(names: Counter) -> bool:
    """Whether a section is written in Russian (its most used name)."""
    return mostly_cyrillic(min(names, key=lambda n: (-names[n], n)))
