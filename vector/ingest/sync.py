"""Index sync, decided without I/O: what must change in the index for one document.

Compares a prepared document with what the index holds for it. Unchanged text costs nothing;
an ACL or language change is a metadata update; changed text rewrites only the chunk positions
whose text changed, and a chunk whose exact text already has a vector (moved within the document,
or elsewhere in the tenant) reuses it instead of being embedded again.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from vector.ingest.prepare import PreparedChunk, PreparedDocument
from vector.ingest.sources import SourceDocument


@dataclass(frozen=True)
class StoredChunk:
    chunk_no: int
    content_hash: str
    embed_model: str | None


@dataclass(frozen=True)
class StoredDocument:
    doc_id: str
    title: str
    lang: str
    acl: tuple[str, ...]
    source: str
    content_hash: str
    index_key: str
    chunks: tuple[StoredChunk, ...] = ()


Action = Literal["added", "changed", "unchanged", "metadata"]


@dataclass
class DocumentPlan:
    document: PreparedDocument
    action: Action
    write: list[PreparedChunk] = field(default_factory=list)
    delete_chunk_nos: list[int] = field(default_factory=list)
    chunks_added: int = 0
    chunks_changed: int = 0
    chunks_deleted: int = 0
    # LLM-written contexts of the document's current chunks (chunk key -> context), saved with it
    contexts: dict[str, str] | None = None
    context_mode: str = ""

    @property
    def doc_id(self) -> str:
        return self.document.doc_id


def classify(doc: SourceDocument, content_hash: str, key: str, stored: StoredDocument | None) -> Action:
    """Decided before chunking, so unchanged documents cost one hash and nothing else."""
    if stored is None:
        return "added"
    if stored.content_hash != content_hash or stored.index_key != key:
        return "changed"
    same_meta = stored.acl == doc.acl and stored.lang == doc.lang and stored.source == doc.source
    return "unchanged" if same_meta else "metadata"


def plan_document(doc: PreparedDocument, stored: StoredDocument | None, embed_model: str) -> DocumentPlan:
    """Which chunk rows of an added or changed document to write and to delete."""
    if stored is None:
        return DocumentPlan(doc, "added", write=list(doc.chunks), chunks_added=len(doc.chunks))
    old = {c.chunk_no: c for c in stored.chunks}
    plan = DocumentPlan(doc, "changed")
    for chunk in doc.chunks:
        previous = old.get(chunk.chunk_no)
        if previous is None:
            plan.write.append(chunk)
            plan.chunks_added += 1
        elif previous.content_hash != chunk.content_hash or previous.embed_model != embed_model:
            plan.write.append(chunk)
            plan.delete_chunk_nos.append(chunk.chunk_no)
            plan.chunks_changed += 1
    new_numbers = {c.chunk_no for c in doc.chunks}
    gone = sorted(n for n in old if n not in new_numbers)
    plan.delete_chunk_nos.extend(gone)
    plan.chunks_deleted = len(gone)
    return plan


def hashes_to_embed(plans: list[DocumentPlan], reusable: set[str]) -> dict[str, str]:
    """content hash -> text for every chunk to write whose vector is not already known; one per hash."""
    needed: dict[str, str] = {}
    for plan in plans:
        for chunk in plan.write:
            if chunk.content_hash not in reusable:
                needed.setdefault(chunk.content_hash, chunk.embed_text)
    return needed
