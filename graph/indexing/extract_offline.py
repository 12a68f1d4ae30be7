"""Offline entity extraction for Russian and English: named-entity candidates plus co-occurrence.

GraphRAG's "fast" method in spirit: surface patterns, no model; quick and deterministic. The mentions
and their type votes come from core/text/mentions.py; here they become entities (the most voted type,
the sentences mentioning them as descriptions) and relationships, which join the entities of one
sentence (strong) and the most mentioned entities of one chunk (weak).
"""
from __future__ import annotations

from collections import Counter, defaultdict
from typing import Iterable

from core.text.mentions import Mention, find_mentions
from core.text.names import display_name
from graph.types import ChunkInput, ExtractedEntity, ExtractedRelationship, Extraction, GraphEntity

MAX_DESCRIPTION_SENTENCES = 3
MAX_SENTENCE_CHARS = 240
MAX_PAIRED = 8  # pairs only among a sentence's first / a chunk's most mentioned entities, not all n^2
SENTENCE_WEIGHT = 3  # strength = 1 (same chunk) + 3 per shared sentence, capped at 10

_PRECEDENCE = ("code", "person", "team", "service", "organization", "location", "concept")  # breaks vote ties


class OfflineExtractor:
    """Named-entity candidates and co-occurrence edges, no model (see the module docstring)."""

    name = "offline-ner"
    version = "1"
    model = ""

    def extract(self, chunk: ChunkInput) -> Extraction:
        sentences, found = find_mentions(chunk.text, chunk.title, chunk.heading)
        return _assemble(chunk, sentences, found)


def _assemble(chunk: ChunkInput, sentences: list[str], found: list[list[Mention]]) -> Extraction:
    surfaces, votes, where = defaultdict(list), defaultdict(Counter), defaultdict(dict)
    for index, mentions in enumerate(found):
        for key, surface, mention_votes in mentions:
            surfaces[key].append(surface)
            votes[key].update(mention_votes)
            where[key][index] = None  # the sentences mentioning it, in order
    names = {key: display_name(variants) for key, variants in surfaces.items()}
    entities = []
    for key in sorted(names):
        kind = max(_PRECEDENCE, key=lambda k: (votes[key][k], -_PRECEDENCE.index(k)))
        description = " ".join(_trim(sentences[i]) for i in list(where[key])[:MAX_DESCRIPTION_SENTENCES])
        entities.append(ExtractedEntity(names[key], kind, description))
    return Extraction(tuple(entities), _relationships(chunk, sentences, found, names, surfaces))


def _relationships(chunk, sentences, found, names, surfaces) -> tuple[ExtractedRelationship, ...]:
    """Pairs sharing a sentence (described by the shortest such sentence) or, among the chunk's most
    mentioned entities, sharing the chunk; strength 1 + 3 per shared sentence, at most 10."""
    shared, evidence = Counter(), {}
    for index, mentions in enumerate(found):
        keys = list(dict.fromkeys(key for key, _, _ in mentions))[:MAX_PAIRED]
        for position, a in enumerate(keys):
            for b in keys[position + 1 :]:
                pair = (a, b) if a < b else (b, a)
                shared[pair] += 1
                if pair not in evidence or len(sentences[index]) < len(evidence[pair]):
                    evidence[pair] = sentences[index]
    top = sorted(surfaces, key=lambda k: (-len(surfaces[k]), k))[:MAX_PAIRED]
    place = chunk.heading or chunk.title or chunk.doc_id
    relationships = []
    for a, b in sorted(set(shared) | {(a, b) for a in top for b in top if a < b}):
        strength = min(10.0, 1.0 + SENTENCE_WEIGHT * shared[(a, b)])
        description = _trim(evidence[(a, b)]) if (a, b) in evidence else (
            f"{names[a]} and {names[b]} co-occur in {place}")
        relationships.append(ExtractedRelationship(names[a], names[b], description, strength))
    return tuple(relationships)


def _trim(sentence: str) -> str:
    text = " ".join(sentence.split())
    return text if len(text) <= MAX_SENTENCE_CHARS else text[: MAX_SENTENCE_CHARS - 1].rstrip() + "…"


def prune_entities(entities: Iterable[GraphEntity], total_chunks: int, *, min_chunks: int = 1,
                   max_share: float = 0.5, min_corpus_chunks: int = 20) -> set[str]:
    """The keys of corpus-level noise, to drop from a level's graph (pure; the graph build calls it).

    An entity's chunk count is `len(entity.chunk_ids)`. Noise: entities in fewer than `min_chunks` chunks;
    "concept" entities in a single chunk (the bulk of capitalised-word noise); and, once the corpus has at
    least `min_corpus_chunks` chunks, entities in more than `max_share` of them, too common to tell
    communities apart (a podcast host named in most chunks is one).
    """
    noise = set()
    for entity in entities:
        count = len(entity.chunk_ids)
        rare = count < min_chunks or (entity.type == "concept" and count < 2)
        if rare or (total_chunks >= min_corpus_chunks and count > max_share * total_chunks):
            noise.add(entity.key)
    return noise
