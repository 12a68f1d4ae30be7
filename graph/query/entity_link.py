"""Entity linking: which entities of a level's graph a question names (pure: no database).

Two signals, as GraphRAG's local search and HippoRAG link a query:
- names: every run of up to MAX_NAME_WORDS question words is normalised with the graph's own merge
  key (core/text/names.entity_key: case, quotes, Russian inflection, English plurals), so "команды
  Маршрутизации" in a question finds the entity a chunk wrote as "команда Маршрутизации". Longer runs
  win over the runs inside them ("New York Times" over "York"); a run of stop words names nothing. A run
  no key equals finds a key in the other script spelt alike (core/text/skeletons.py `spelt_alike`):
  "Anna Kirillova" the entity "анна кириллова" of a Russian page, or of a merge that kept that name.
- meaning: the entities whose embedded "name (type): description start" is nearest to the question vector
  (graph/retrieval_store.nearest_entities), for questions that paraphrase a name or name none.

Scores: a name in the question is the strongest evidence (1.0; 0.5 for an all-lowercase run, which
is as often a common word as a name); a nearest entity adds at most DENSE_WEIGHT, scaled by how far
its similarity stands above the weakest of the nearest (embedding similarities of one model sit in
a narrow band, so the raw cosine says little on its own).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Collection, Sequence

from core.text.names import STOP_WORDS, entity_key
from core.text.skeletons import SpellingIndex, spelling_index, spelt_in_other_script

MAX_NAME_WORDS = 6  # as the offline extractor's longest name (core/text/mentions.MAX_NAME_WORDS)
DENSE_WEIGHT = 0.5  # a nearest entity counts at most half of a named one
DENSE_LINKS = 5  # nearest entities considered per question (HippoRAG 2 links the top-5 facts)
_WORD = re.compile(r"[^\W_][\w'’\-.]*[^\W_]|[^\W_]", re.UNICODE)


@dataclass(frozen=True)
class Link:
    key: str
    score: float
    how: str  # "name" | "meaning"
    surface: str = ""  # the question's words that named it (names only)


def _name_score(words: Sequence[str]) -> float:
    if all(w.casefold() in STOP_WORDS for w in words):
        return 0.0
    capitalised = any(w[:1].isupper() or any(ch.isdigit() for ch in w) for w in words)
    return 1.0 if capitalised else 0.5


def name_links(question: str, keys: Collection[str], spelled: SpellingIndex | None = None) -> list[Link]:
    """Entities whose merge key equals the key of a run of question words, longest runs first; a
    word belongs to one name at most. `spelled`: `key_spellings(keys)`, which a caller holding the
    keys for many questions builds once (graph/query/ppr.py `GraphMatrix.entity_spellings`)."""
    words = [(m.group().strip(".'’-"), m.start(), m.end()) for m in _WORD.finditer(question)]
    words = [w for w in words if w[0]]
    taken = [False] * len(words)
    found: dict[str, Link] = {}
    spelled = key_spellings(keys) if spelled is None else spelled
    for size in range(min(MAX_NAME_WORDS, len(words)), 0, -1):
        for start in range(0, len(words) - size + 1):
            if any(taken[start:start + size]):
                continue
            run = [w[0] for w in words[start:start + size]]
            score = _name_score(run)
            if not score:
                continue
            key = entity_key(" ".join(run))
            if key not in keys:
                # a capitalised run no key equals: the first key (alphabetically) spelt alike in the other script
                key = next(iter(spelt_in_other_script(" ".join(run), spelled)), None) if score == 1.0 else None
            if key is not None:
                for i in range(start, start + size):
                    taken[i] = True
                surface = question[words[start][1]:words[start + size - 1][2]]
                if key not in found or found[key].score < score:
                    found[key] = Link(key, score, "name", surface)
    return sorted(found.values(), key=lambda link: (-link.score, link.key))


def key_spellings(keys: Collection[str]) -> SpellingIndex:
    """The keys a name in the other script may link, by spelling (core/text/skeletons.py `spelling_index`),
    alphabetically: built once per graph, not per question."""
    return spelling_index((key, key) for key in sorted(keys))


def meaning_links(nearest: Sequence[tuple[str, float]], named: Collection[str] = ()) -> list[Link]:
    """Links from (key, similarity) nearest first: the nearest counts DENSE_WEIGHT, the weakest of
    them nothing, linearly between; an entity already named keeps its name link."""
    if not nearest:
        return []
    high, low = nearest[0][1], nearest[-1][1]
    links = []
    for key, similarity in nearest:
        scale = 1.0 if high == low else (similarity - low) / (high - low)
        if key not in named and scale > 0:
            links.append(Link(key, DENSE_WEIGHT * scale, "meaning"))
    return links


def link_scores(links: Sequence[Link]) -> dict[str, float]:
    """key -> the best score any link gave it (the PPR reset weights)."""
    scores: dict[str, float] = {}
    for link in links:
        scores[link.key] = max(scores.get(link.key, 0.0), link.score)
    return scores
