"""Shared types of the entity graph: what extractors return, what communities and reports are."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from core.passages import ChunkText


@dataclass(unsafe_hash=True)  # hashable by value: extraction results are keyed by chunk; never mutated
class ChunkInput(ChunkText):
    """A chunk as extractors see it (extraction never depends on ACLs: one result serves every level)."""

    lang: str  # russian | english | simple
    content_hash: str


@dataclass(frozen=True)
class ExtractedEntity:
    name: str  # as written in the source language
    type: str  # e.g. person, organization, team, service, product, location, event, code, concept
    description: str


@dataclass(frozen=True)
class ExtractedRelationship:
    source: str  # entity names as in `ExtractedEntity.name`
    target: str
    description: str
    strength: float  # 1-10


@dataclass(frozen=True)
class ExtractedClaim:
    subject: str
    claim_type: str
    description: str
    status: str = "SUSPECTED"  # TRUE | FALSE | SUSPECTED


@dataclass(frozen=True)
class Extraction:
    entities: tuple[ExtractedEntity, ...] = ()
    relationships: tuple[ExtractedRelationship, ...] = ()
    claims: tuple[ExtractedClaim, ...] = ()
    errors: tuple[str, ...] = field(default=())  # recorded, never raised: the job continues
    refused: bool = False  # the model declined the chunk (stop_reason "refusal"): an error too, counted apart

    @property
    def failed(self) -> bool:
        """Not a result: never cached, so the next build extracts the chunk again."""
        return bool(self.errors)


class Extractor(Protocol):
    """Entities and relationships of one chunk. The cache key is (content hash, name, version, model)."""

    name: str
    version: str
    model: str  # "" for offline extractors

    def extract(self, chunk: ChunkInput) -> Extraction:
        ...


@dataclass(frozen=True)
class GraphEntity:
    key: str  # merge key (graph/normalize.entity_key), unique within a level
    name: str
    type: str
    description: str
    chunk_ids: tuple[int, ...]
    degree: int = 0


@dataclass(frozen=True)
class GraphRelationship:
    source_key: str  # source_key < target_key: the graph is undirected
    target_key: str
    description: str
    weight: float
    chunk_ids: tuple[int, ...]


@dataclass(frozen=True)
class GraphClaim:
    """A claim about one entity of a level's graph, deduplicated over the chunks that state it."""

    subject_key: str  # the final (post-resolution) key of the entity the claim is about
    claim_type: str
    description: str
    status: str  # TRUE | FALSE | SUSPECTED
    chunk_ids: tuple[int, ...]


@dataclass(frozen=True)
class Community:
    id: int
    level: int  # 0 = root level (the coarsest clustering)
    parent: int | None  # id of the level-1 community that contains this one; None at level 0
    members: tuple[str, ...]  # node keys, sorted
    children: tuple[int, ...]  # ids at level + 1, sorted; empty = final (not split further)


@dataclass(frozen=True)
class ScopePassage:
    """A passage of the level, readable by every group of the level."""
    id: int
    doc_id: str
    title: str
    content: str
    heading: str = ""  # the path of headings above it, the document's title first ("Guide > Install")
