"""Description summaries: the descriptions many chunks give of one entity, or of one relationship
between two entities -> one description.

Assembly (graph/indexing/assemble.py) and resolution (graph/indexing/resolve.py) reduce an entity's descriptions to
their most central sentences: short, but a list of overlapping fragments. With an LLM, GraphRAG's
summarize_descriptions step writes one description from all of them instead; this module is that
step's pure part (what to summarise, the cache key) and its LLM implementation. The runner (with
its cache in `extraction_cache`) is `graph.indexing.runner.summarize_descriptions`.

What is summarised: an entity or relationship whose stored description would come from at least two
distinct source descriptions that, joined, are longer than `min_chars`. A single description, or a few
short ones, already read well as central sentences; a summary call there costs and adds nothing.

The cache key is the sha256 of the display name, the type and the sorted distinct descriptions (for
a relationship: its two entities' display names and its sorted distinct descriptions): the exact request sent (the prompt lists the descriptions in that sorted order), so the same input
never costs a second call, and a new mention that adds a description computes a new summary.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Mapping, Protocol, Sequence

from core.llm.client import LLM
from core.llm.prompting import MalformedReply, complete_text
from graph.prompts import (RELATIONSHIP_REQUEST, RELATIONSHIP_SYSTEM, SUMMARY_REQUEST, SUMMARY_SYSTEM,
                           relationship_message, summary_message)
from graph.types import GraphEntity, GraphRelationship


SUMMARY_MIN_CHARS = 200
MAX_TOKENS = 800  # 150 Russian words are ~450 tokens; a reply cut off at max_tokens is asked again with 2x


class DescriptionSummarizer(Protocol):
    """One description of an entity, or of a relationship, from its distinct source descriptions. The
    cache key is (summary_hash, name, version, model) for entities and (relationship_summary_hash,
    name, relationship_version, model) for relationships: each version must change with anything
    that changes that output. Raises `core.llm.errors.LLMError` (RefusedError, MalformedReply) when it cannot; the runner
    then keeps the central-sentences description and retries on the next build."""

    name: str
    version: str
    relationship_version: str
    model: str

    def summarize(self, name: str, type: str, descriptions: list[str]) -> str:
        ...

    def summarize_relationship(self, source: str, target: str, descriptions: list[str]) -> str:
        ...


@dataclass(frozen=True)
class SummaryRequest:
    key: str  # the entity's final key
    name: str
    type: str
    descriptions: tuple[str, ...]  # distinct and sorted: the prompt's order and the cache key's
    content_hash: str


@dataclass(frozen=True)
class RelationshipSummaryRequest:
    pair: tuple[str, str]  # the relationship's (source, target) entity keys
    source: str  # the entities' display names
    target: str
    descriptions: tuple[str, ...]  # distinct and sorted: the prompt's order and the cache key's
    content_hash: str


def _distinct(descriptions: Sequence[str]) -> list[str]:
    return sorted({" ".join(d.split()) for d in descriptions} - {""})


def needs_summary(descriptions: Sequence[str], min_chars: int = SUMMARY_MIN_CHARS) -> bool:
    distinct = _distinct(descriptions)
    return len(distinct) >= 2 and len(" ".join(distinct)) > min_chars


def summary_hash(name: str, type: str, descriptions: Sequence[str]) -> str:
    return hashlib.sha256(json.dumps([name, type, _distinct(descriptions)], ensure_ascii=False).encode()).hexdigest()


def relationship_summary_hash(source: str, target: str, descriptions: Sequence[str]) -> str:
    # the leading marker keeps a relationship's key apart from an entity's with the same strings
    payload = ["relationship", source, target, _distinct(descriptions)]
    return hashlib.sha256(json.dumps(payload, ensure_ascii=False).encode()).hexdigest()


def summary_requests(
    entities: Sequence[GraphEntity], descriptions: Mapping[str, Sequence[str]], min_chars: int = SUMMARY_MIN_CHARS
) -> list[SummaryRequest]:
    """The entities that need a summary, in key order, each with what its summary is written from."""
    out = []
    for e in sorted(entities, key=lambda e: e.key):
        found = descriptions.get(e.key, ())
        if needs_summary(found, min_chars):
            distinct = tuple(_distinct(found))
            out.append(SummaryRequest(e.key, e.name, e.type, distinct, summary_hash(e.name, e.type, distinct)))
    return out


def relationship_summary_requests(
    relationships: Sequence[GraphRelationship], descriptions: Mapping[tuple[str, str], Sequence[str]],
    names: Mapping[str, str], min_chars: int = SUMMARY_MIN_CHARS,
) -> list[RelationshipSummaryRequest]:
    """The relationships that need a summary, in key order; `names`: entity key -> display name."""
    out = []
    for r in sorted(relationships, key=lambda r: (r.source_key, r.target_key)):
        found = descriptions.get((r.source_key, r.target_key), ())
        if needs_summary(found, min_chars):
            distinct = tuple(_distinct(found))
            source, target = names.get(r.source_key, r.source_key), names.get(r.target_key, r.target_key)
            out.append(RelationshipSummaryRequest((r.source_key, r.target_key), source, target, distinct,
                                                  relationship_summary_hash(source, target, distinct)))
    return out


def level_summary_requests(
    entities: Sequence[GraphEntity], relationships: Sequence[GraphRelationship],
    descriptions: Mapping[str, Sequence[str]], relationship_descriptions: Mapping[tuple[str, str], Sequence[str]],
    min_chars: int = SUMMARY_MIN_CHARS,
) -> tuple[list[SummaryRequest], list[RelationshipSummaryRequest]]:
    """A level's entities and relationships that need a summary: what a build makes, and an estimate counts."""
    names = {e.key: e.name for e in entities}
    return (summary_requests(entities, descriptions, min_chars),
            relationship_summary_requests(relationships, relationship_descriptions, names, min_chars))


def _fingerprint(*parts) -> str:
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:10]


class LLMDescriptionSummarizer:
    """`DescriptionSummarizer` over an `LLM` (the `fast` task); `model` is the id that task uses (cache key)."""

    name = "llm-summary"

    def __init__(self, llm: LLM, model: str):
        self.llm, self.model = llm, model
        self.version = f"1-{_fingerprint(SUMMARY_SYSTEM, SUMMARY_REQUEST, MAX_TOKENS)}"
        self.relationship_version = f"1-{_fingerprint(RELATIONSHIP_SYSTEM, RELATIONSHIP_REQUEST, MAX_TOKENS)}"

    def summarize(self, name: str, type: str, descriptions: list[str]) -> str:
        return self._complete(SUMMARY_SYSTEM, summary_message(name, type, descriptions))

    def summarize_relationship(self, source: str, target: str, descriptions: list[str]) -> str:
        return self._complete(RELATIONSHIP_SYSTEM, relationship_message(source, target, descriptions))

    def _complete(self, system: str, message: str) -> str:
        """The reply (refusals and cut replies as core.llm.prompting handles them); an empty one is asked
        once more, then MalformedReply."""
        messages = [{"role": "user", "content": message}]
        for _ in range(2):
            text = " ".join(complete_text(self.llm, task="fast", system=system, messages=messages,
                                          max_tokens=MAX_TOKENS).text.split())
            if text:
                return text
        raise MalformedReply("empty summary twice")
