"""Entity resolution beyond exact keys: merge near-duplicate entities of the same type.

Stage one (in assemble) merges names with the same normalised key. Here, pairs whose keys share
most character trigrams ("payments gateway" / "payment gateway service") are candidates, and a
candidate pair merges when the embeddings of "name: description" agree above a threshold and the
types agree. Codes (ERR_2043 vs ERR_2044) never merge: one character is a different thing.

A corpus in two languages names one person, town or company in both scripts ("Anna Kirillova" on an
English page, "Анна Кириллова" on a Russian one): no trigram is shared, and e5 places a Russian
description below an English one's threshold. Such a pair merges when the types agree and the names
are spelt alike word by word, by their consonants (core/text/skeletons.py, as the offline answers match
names across scripts), with enough consonants to name one thing (`MIN_NAME_CONSONANTS` there): without it a
bilingual corpus's graph holds each of them twice, one community per language.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np

from core.text.skeletons import spelling_index, spelt_in_other_script
from graph.indexing.assemble import central_sentences, distinct_descriptions, drop_entities
from graph.types import GraphEntity, GraphRelationship

Embed = Callable[[Sequence[str]], np.ndarray]
NEVER_MERGED_TYPES = {"code"}
_COMMON_TRIGRAM = 200  # trigrams shared by more keys than this carry no signal and blow up blocks


def _trigrams(key: str) -> set[str]:
    padded = f"  {key} "
    return {padded[i : i + 3] for i in range(len(padded) - 2)}


def candidate_pairs(entities: Sequence[GraphEntity], min_jaccard: float = 0.5) -> list[tuple[str, str]]:
    grams = {e.key: _trigrams(e.key) for e in entities if e.type not in NEVER_MERGED_TYPES}
    types = {e.key: e.type for e in entities}
    index: dict[str, list[str]] = defaultdict(list)
    for key, gs in grams.items():
        for g in gs:
            index[g].append(key)
    shared: Counter = Counter()
    for keys in index.values():
        if len(keys) > _COMMON_TRIGRAM:
            continue
        for i, a in enumerate(keys):
            for b in keys[i + 1 :]:
                shared[(min(a, b), max(a, b))] += 1
    pairs = []
    for (a, b), n in shared.items():
        if types[a] == types[b] and n / len(grams[a] | grams[b]) >= min_jaccard:
            pairs.append((a, b))
    return sorted(pairs)


def cross_script_pairs(entities: Sequence[GraphEntity]) -> list[tuple[str, str]]:
    """Pairs of one type, one named in Russian letters and one in others, whose names are spelt alike
    (core/text/skeletons.py `spelt_in_other_script`: word by word by their consonants, a case ending
    allowed: "Москве")."""
    by_type: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for e in entities:
        if e.type not in NEVER_MERGED_TYPES:
            by_type[e.type].append((e.key, e.name))
    pairs = set()
    for named in by_type.values():
        index = spelling_index(named)
        for key, name in named:
            pairs.update((min(key, other), max(key, other)) for other in spelt_in_other_script(name, index))
    return sorted(pairs)


def _find(parent: dict[str, str], key: str) -> str:
    while parent[key] != key:
        parent[key] = parent[parent[key]]
        key = parent[key]
    return key


def resolve(
    entities: list[GraphEntity],
    relationships: list[GraphRelationship],
    embed: Embed | None,
    threshold: float = 0.93,
) -> tuple[list[GraphEntity], list[GraphRelationship], dict[str, str]]:
    """Returns the merged graph and the merges (old key -> surviving key)."""
    pairs = candidate_pairs(entities) if embed is not None else []
    spelled_alike = cross_script_pairs(entities)
    if not pairs and not spelled_alike:
        return entities, relationships, {}
    by_key = {e.key: e for e in entities}
    parent = {e.key: e.key for e in entities}
    agreeing = spelled_alike
    if pairs:
        involved = sorted({k for pair in pairs for k in pair})
        vectors = embed([f"{by_key[k].name}: {by_key[k].description[:300]}" for k in involved])
        row = {k: i for i, k in enumerate(involved)}
        agreeing = sorted(set(spelled_alike) | {(a, b) for a, b in pairs
                                                if float(vectors[row[a]] @ vectors[row[b]]) >= threshold})
    for a, b in agreeing:
        ra, rb = _find(parent, a), _find(parent, b)
        if ra != rb:
            # the better-attested entity survives: more chunks, then the shorter key, then alphabetical
            keep, drop = sorted((ra, rb), key=lambda k: (-len(by_key[k].chunk_ids), len(k), k))
            parent[drop] = keep
    merges = {k: _find(parent, k) for k in parent if _find(parent, k) != k}
    if not merges:
        return entities, relationships, {}
    return (*_apply(entities, relationships, merges), merges)


def merge_descriptions(
    descriptions: Mapping[str, Sequence[str]], merges: Mapping[str, str], keep: Iterable[str]
) -> dict[str, tuple[str, ...]]:
    """The raw descriptions behind each final entity (`keep`): its own, then those of the keys merged
    into it (alphabetically), each once. What `resolve` reduced to central sentences, kept for a summary."""
    groups: dict[str, list[str]] = defaultdict(list)
    for key in descriptions:
        groups[merges.get(key, key)].append(key)
    out = {}
    for key in sorted(set(keep)):
        members = sorted(groups.get(key, ()), key=lambda k: (k != key, k))  # the survivor's own first
        out[key] = distinct_descriptions(d for k in members for d in descriptions[k])
    return out


def merge_relationship_descriptions(
    descriptions: Mapping[tuple[str, str], Sequence[str]], merges: Mapping[str, str], keep: Iterable[tuple[str, str]]
) -> dict[tuple[str, str], tuple[str, ...]]:
    """The raw descriptions behind each final relationship (`keep`: (source, target) keys after
    resolution): its own pair's, then those of the pairs that resolution re-keyed onto it (in key
    order), each once. A pair whose two entities merged into one is gone, as in `resolve`."""
    groups: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
    for a, b in descriptions:
        x, y = merges.get(a, a), merges.get(b, b)
        if x != y:
            groups[(min(x, y), max(x, y))].append((a, b))
    out = {}
    for pair in sorted(set(keep)):
        members = sorted(groups.get(pair, ()), key=lambda old: (old != pair, old))
        out[pair] = distinct_descriptions(d for old in members for d in descriptions[old])
    return out


def _apply(entities, relationships, merges):
    by_key = {e.key: e for e in entities}
    groups: dict[str, list[GraphEntity]] = defaultdict(list)
    for e in entities:
        groups[merges.get(e.key, e.key)].append(e)
    merged = []
    for key, members in sorted(groups.items()):
        head = by_key[key]
        sentences = [s for m in members for s in m.description.split(". ") if s]
        merged.append(GraphEntity(
            key, head.name, head.type, ". ".join(central_sentences(sentences, 4)),
            tuple(sorted({c for m in members for c in m.chunk_ids})),
        ))
    combined: dict[tuple[str, str], list[GraphRelationship]] = defaultdict(list)
    for r in relationships:
        a, b = merges.get(r.source_key, r.source_key), merges.get(r.target_key, r.target_key)
        if a != b:
            combined[(min(a, b), max(a, b))].append(r)
    rels = [
        GraphRelationship(a, b, " ".join(central_sentences([r.description for r in rs], 2)),
                          round(sum(r.weight for r in rs), 3), tuple(sorted({c for r in rs for c in r.chunk_ids})))
        for (a, b), rs in sorted(combined.items())
    ]
    return drop_entities(merged, rels, set())
