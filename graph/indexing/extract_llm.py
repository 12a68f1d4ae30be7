"""LLM extraction of entities, relationships and (optionally) claims: one forced tool call per chunk.

GraphRAG's extract_graph ideas (typed entities, relationships with a 1-10 strength, optional
"gleaning" rounds asking for what was missed) on Anthropic tool use instead of delimited text, through
the call kernel (core.llm.prompting: refusals, replies cut at max_tokens, models that reject a forced
tool call), the reply validated by `GraphRecord`, not by regexes.

Validation salvages what it can (nothing is raised, the job goes on; a chunk whose reply is unusable
twice, cut twice, refused or failed at the API is recorded as the chunk's error and never cached):
- lists of objects with non-empty names; whitespace collapsed; a list left out is empty; an invalid
  item (no name, a strength that is no number, an unknown claim status) is dropped alone, never the
  chunk's other items; a type outside the configured ones (or no type) -> "concept";
- strength: a number or numeric string ("8"), not a boolean or NaN, clamped into 1-10;
- an endpoint missing from the entities is added as a "concept" entity described by its relationship
  (GraphRAG adds such nodes too: the relationship is evidence the entity exists; entity resolution
  later merges it with any near-duplicate name);
- dedupe by casefolded name (relationships by unordered endpoint pair, self-loops dropped), first
  wins; relationship and claim names take the spelling of the entity they refer to;
- anything naming an entity of the prompt's example is dropped (defence in depth behind the
  prompt's own rule; the example's names are invented, so no real corpus contains them).
"""
from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import asdict, dataclass, field
from typing import Sequence

from core.llm.client import LLM
from core.llm.errors import LLMError, RefusedError
from core.llm.prompting import Tool, call_tool
from graph.prompts import (EXAMPLE_ORG, EXAMPLE_PERSON, EXTRACT_TOOL, GLEAN_REQUEST, GraphRecord, chunk_message,
                           extraction_schema, extraction_system)
from graph.types import ChunkInput, ExtractedClaim, ExtractedEntity, ExtractedRelationship, Extraction


log = logging.getLogger(__name__)

DEFAULT_TYPES = ("person", "organization", "team", "service", "product", "location", "event", "code", "concept")
FALLBACK_TYPE = "concept"
MAX_TOKENS = 4096  # a dense chunk yields ~1-2k tokens of JSON; a reply cut short is asked again with twice this

EXAMPLE_KEYS = frozenset(n.casefold() for n in (EXAMPLE_PERSON, EXAMPLE_ORG))


def _from_example(*names: str) -> bool:  # substring: also catches "Quillon Marchbanks (founder)"
    return any(k in n.casefold() for n in names for k in EXAMPLE_KEYS)


@dataclass
class _Found:  # what a chunk's rounds found so far, keyed for dedupe, in the replies' order
    entities: dict[str, ExtractedEntity] = field(default_factory=dict)
    relationships: dict[frozenset, ExtractedRelationship] = field(default_factory=dict)
    claims: dict[tuple, ExtractedClaim] = field(default_factory=dict)


class LLMExtractor:
    """`Extractor` over an `LLM` (the `fast` task); `model` is the id that task uses (cache key)."""

    name = "llm-tooluse"
    version = "1"

    def __init__(self, llm: LLM, model: str, entity_types: Sequence[str] = DEFAULT_TYPES,
                 gleanings: int = 0, with_claims: bool = False):
        types = [" ".join(t.split()).lower() for t in entity_types]
        if not types or not all(types):
            raise ValueError("entity_types must be a non-empty list of non-empty type names")
        if gleanings < 0:
            raise ValueError(f"gleanings must be >= 0, got {gleanings}")
        self.llm, self.model = llm, model
        self.entity_types = tuple(dict.fromkeys(types))
        self.gleanings, self.with_claims = gleanings, with_claims
        self.tool = Tool(EXTRACT_TOOL, "Record the entities and relationships found in the chunk.",
                         extraction_schema(self.entity_types, with_claims), GraphRecord)
        self.system = extraction_system(self.entity_types, with_claims)
        # the cache key must change with anything that changes the output: prompt, types, rounds
        fingerprint = hashlib.sha256(json.dumps([self.system, self.tool.definition, gleanings]).encode()).hexdigest()[:10]
        self.version = f"1-{fingerprint}"

    def extract(self, chunk: ChunkInput) -> Extraction:
        found, errors, refused = _Found(), [], False
        messages: list[dict] = [{"role": "user", "content": chunk_message(chunk)}]
        for round_no in range(1 + self.gleanings):
            if round_no:
                # The model sees the merged result so far (not its raw reply: the tool_use id is not
                # exposed by `LLM`, and the merged result is already cleaned of example names).
                messages = messages[:1] + [{"role": "assistant", "content": self._as_json(found)},
                                           {"role": "user", "content": GLEAN_REQUEST}]
            try:
                entities, relationships, claims = self._ask(chunk, messages)
            except LLMError as err:  # refused, malformed or cut twice, or the API failed after the SDK's retries
                refused = isinstance(err, RefusedError)
                stage = f"gleaning round {round_no}" if round_no else "extraction"
                kept = "; kept what earlier rounds found" if round_no else ""
                errors.append(f"chunk {chunk.id}: {stage} failed: {err}{kept}")
                break  # a failed round says nothing about later ones being useful
            _merge(found, entities, relationships, claims)
        return Extraction(tuple(found.entities.values()), tuple(found.relationships.values()),
                          tuple(found.claims.values()), tuple(errors), refused)

    def _ask(self, chunk: ChunkInput, messages: list[dict]) -> tuple[list, list, list]:
        reply = call_tool(self.llm, self.tool, task="fast", system=self.system, messages=messages,
                          max_tokens=MAX_TOKENS)
        if reply.dropped:  # salvaged: the rest of the reply stands
            log.info("chunk %s: dropped invalid items of the extraction: %s", chunk.id, "; ".join(reply.dropped))
        types = {t: t for t in self.entity_types}
        record = reply.value
        entities = [ExtractedEntity(e.name, types.get(e.type.lower(), FALLBACK_TYPE), e.description)
                    for e in record.entities]
        relationships = [ExtractedRelationship(r.source, r.target, r.description, r.strength)
                         for r in record.relationships]
        claims = [ExtractedClaim(c.subject, c.claim_type, c.description, c.status)
                  for c in record.claims] if self.with_claims else []
        return entities, relationships, claims

    def _as_json(self, found: _Found) -> str:
        data = {"entities": [asdict(e) for e in found.entities.values()],
                "relationships": [asdict(r) for r in found.relationships.values()]}
        claims = {"claims": [asdict(c) for c in found.claims.values()]} if self.with_claims else {}
        return json.dumps(data | claims, ensure_ascii=False)


def _merge(found: _Found, entities: list, relationships: list, claims: list) -> None:
    for e in entities:
        if not _from_example(e.name):
            found.entities.setdefault(e.name.casefold(), e)
    for r in relationships:
        ends = (r.source.casefold(), r.target.casefold())
        pair = frozenset(ends)
        if len(pair) < 2 or pair in found.relationships or _from_example(r.source, r.target):
            continue
        source, target = (found.entities.setdefault(k, ExtractedEntity(n, FALLBACK_TYPE, r.description)).name
                          for k, n in zip(ends, (r.source, r.target)))
        found.relationships[pair] = ExtractedRelationship(source, target, r.description, r.strength)
    for c in claims:
        if _from_example(c.subject):
            continue
        subject = c.subject.casefold()
        known = found.entities.get(subject)
        claim = ExtractedClaim(known.name if known else c.subject, c.claim_type, c.description, c.status)
        found.claims.setdefault((subject, c.claim_type.casefold(), c.description.casefold()), claim)


