"""Per-chunk extractions -> one graph for an access level. Pure.

Entities merge on their normalised key (inflected Russian forms, quotes and case collapse); the
display name is the most frequent surface form, the type the most frequent type. Descriptions from
many chunks are reduced to the most central sentences (the ones sharing most words with the rest),
so a description stays short however often an entity is mentioned.

`assemble_with_descriptions` also returns each entity's and each relationship's distinct raw
descriptions (the input of an LLM summary, graph/indexing/summarize.py); `assemble` is the same graph without them.
"""
from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from core.text.names import display_name, entity_key
from graph.types import ChunkInput, Extraction, GraphClaim, GraphEntity, GraphRelationship

_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass
class _EntityAcc:
    names: list[str] = field(default_factory=list)
    types: Counter = field(default_factory=Counter)
    descriptions: list[str] = field(default_factory=list)
    chunk_ids: set[int] = field(default_factory=set)


@dataclass
class _RelAcc:
    weight: float = 0.0
    descriptions: list[str] = field(default_factory=list)
    chunk_ids: set[int] = field(default_factory=set)


def central_sentences(sentences: list[str], limit: int) -> list[str]:
    """The `limit` sentences with most word overlap with all the others, in their original order."""
    unique = list(dict.fromkeys(s.strip() for s in sentences if s.strip()))
    if len(unique) <= limit:
        return unique
    bags = [set(w.lower() for w in _WORD.findall(s)) for s in unique]
    totals = Counter(w for bag in bags for w in bag)
    scores = [sum(totals[w] - 1 for w in bag) / (len(bag) ** 0.5 or 1) for bag in bags]
    best = sorted(range(len(unique)), key=lambda i: (-scores[i], i))[:limit]
    return [unique[i] for i in sorted(best)]


def assemble(
    extractions: Iterable[tuple[ChunkInput, Extraction]],
    *,
    description_sentences: int = 4,
) -> tuple[list[GraphEntity], list[GraphRelationship]]:
    entities, relationships, _, _ = assemble_with_descriptions(extractions, description_sentences=description_sentences)
    return entities, relationships


PairDescriptions = dict[tuple[str, str], tuple[str, ...]]  # relationship (source key, target key) -> descriptions


def distinct_descriptions(descriptions: Iterable[str]) -> tuple[str, ...]:
    """Non-empty descriptions, whitespace collapsed, each once, in first-seen order."""
    return tuple(dict.fromkeys(d for d in (" ".join(x.split()) for x in descriptions) if d))


def assemble_with_descriptions(
    extractions: Iterable[tuple[ChunkInput, Extraction]],
    *,
    description_sentences: int = 4,
) -> tuple[list[GraphEntity], list[GraphRelationship], dict[str, tuple[str, ...]], PairDescriptions]:
    """`assemble`, plus the distinct raw descriptions each stored description was reduced from: per
    entity key, and per relationship (source key, target key)."""
    entities: dict[str, _EntityAcc] = defaultdict(_EntityAcc)
    relations: dict[tuple[str, str], _RelAcc] = defaultdict(_RelAcc)
    for chunk, extraction in extractions:
        keys = {}
        for entity in extraction.entities:
            key = entity_key(entity.name, chunk.lang)
            if not key:
                continue
            keys[entity.name] = key
            acc = entities[key]
            acc.names.append(entity.name)
            acc.types[entity.type] += 1
            if entity.description:
                acc.descriptions.append(entity.description)
            acc.chunk_ids.add(chunk.id)
        for rel in extraction.relationships:
            a = keys.get(rel.source) or entity_key(rel.source, chunk.lang)
            b = keys.get(rel.target) or entity_key(rel.target, chunk.lang)
            if not a or not b or a == b or a not in entities or b not in entities:
                continue
            acc = relations[(min(a, b), max(a, b))]
            acc.weight += rel.strength
            if rel.description:
                acc.descriptions.append(rel.description)
            acc.chunk_ids.add(chunk.id)

    degree = Counter()
    for a, b in relations:
        degree[a] += 1
        degree[b] += 1
    out_entities = [
        GraphEntity(
            key=key,
            name=display_name(acc.names),
            type=min(acc.types.items(), key=lambda kv: (-kv[1], kv[0]))[0],
            description=" ".join(central_sentences(acc.descriptions, description_sentences)),
            chunk_ids=tuple(sorted(acc.chunk_ids)),
            degree=degree[key],
        )
        for key, acc in sorted(entities.items())
    ]
    out_relations = [
        GraphRelationship(a, b, " ".join(central_sentences(acc.descriptions, 2)), round(acc.weight, 3),
                          tuple(sorted(acc.chunk_ids)))
        for (a, b), acc in sorted(relations.items())
    ]
    descriptions = {key: distinct_descriptions(acc.descriptions) for key, acc in sorted(entities.items())}
    pair_descriptions = {pair: distinct_descriptions(acc.descriptions) for pair, acc in sorted(relations.items())}
    return out_entities, out_relations, descriptions, pair_descriptions


def drop_entities(
    entities: list[GraphEntity], relationships: list[GraphRelationship], dropped: set[str]
) -> tuple[list[GraphEntity], list[GraphRelationship]]:
    """Remove entities (noise, merged duplicates) and every relationship touching them; recompute degrees."""
    kept_rel = [r for r in relationships if r.source_key not in dropped and r.target_key not in dropped]
    degree = Counter()
    for r in kept_rel:
        degree[r.source_key] += 1
        degree[r.target_key] += 1
    kept = [GraphEntity(e.key, e.name, e.type, e.description, e.chunk_ids, degree[e.key])
            for e in entities if e.key not in dropped]
    return kept, kept_rel


def gather_claims(
    extractions: Iterable[tuple[ChunkInput, Extraction]], merges: Mapping[str, str], keep: Iterable[str]
) -> dict[str, tuple[GraphClaim, ...]]:
    """Claims per final entity key: the subject normalised as `assemble` normalises entity names (with
    the chunk's language), then mapped through resolution `merges` (old key -> surviving key).

    A claim whose subject is not one of the `keep` keys (never an entity, or pruned as noise) is
    dropped: reports are written per community of entities. The same claim (same entity, type and
    description up to case and whitespace, same status) stated in several chunks is one claim citing
    all of them; it keeps the spelling first seen in chunk order. Claims of a key are sorted by type,
    description, status, then chunks, so the result depends only on the input.
    """
    kept = set(keep)
    found: dict[tuple[str, str, str, str], tuple[str, str, set[int]]] = {}
    for chunk, extraction in extractions:
        for claim in extraction.claims:
            key = entity_key(claim.subject, chunk.lang)
            key = merges.get(key, key)
            description = " ".join(claim.description.split())
            claim_type = " ".join(claim.claim_type.split())
            if not key or key not in kept or not (description or claim_type):
                continue
            dedupe = (key, claim_type.casefold(), description.casefold(), claim.status)
            found.setdefault(dedupe, (claim_type, description, set()))[2].add(chunk.id)
    out: dict[str, list[GraphClaim]] = defaultdict(list)
    for (key, _, _, status), (claim_type, description, chunks) in found.items():
        out[key].append(GraphClaim(key, claim_type, description, status, tuple(sorted(chunks))))
    return {key: tuple(sorted(claims, key=lambda c: (c.claim_type.casefold(), c.description.casefold(), c.status,
                                                     c.chunk_ids)))
            for key, claims in sorted(out.items())}
