"""A source document -> the chunks to index, each with the exact text to embed and its hash. Pure."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Sequence

from core.embeddings import passage_text
from vector.ingest.chunking import ChunkDraft, chunk_markdown
from vector.ingest.sources import SourceDocument

# Bump when chunking rules change: every document is then re-chunked on the next ingest.
CHUNKER_VERSION = 1


@dataclass(frozen=True)
class PreparedChunk:
    chunk_no: int
    heading: str
    context: str
    content: str
    embed_text: str
    content_hash: str


@dataclass(frozen=True)
class PreparedDocument:
    source: SourceDocument
    content_hash: str
    index_key: str
    chunks: tuple[PreparedChunk, ...]

    @property
    def doc_id(self) -> str:
        return self.source.doc_id


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def document_hash(doc: SourceDocument) -> str:
    """What decides whether a document's chunks must be recomputed (ACL is metadata, not text)."""
    return sha256("\x1f".join((doc.title, doc.lang, doc.text)))


def index_key(max_chars: int, overlap: float, context_mode: str, embed_model: str) -> str:
    """What shaped a document's chunks and vectors; a change means re-chunking."""
    return f"chunker=v{CHUNKER_VERSION}/{max_chars}/{overlap:g};context={context_mode};embed={embed_model}"


def fallback_key(key: str) -> str:
    """The index key of a document some of whose contexts are the offline fallback: never equal to
    `key`, so the next ingest takes the document as changed and asks for those contexts again."""
    return f"{key};contexts=offline-fallback"


def chunk_key(draft: ChunkDraft) -> str:
    """Identity of a chunk's own text, before context: the key of the context cache."""
    return sha256(f"{draft.heading}\x1f{draft.content}")


def chunk_document(doc: SourceDocument, *, max_chars: int, overlap: float) -> list[ChunkDraft]:
    return chunk_markdown(doc.text, max_chars=max_chars, overlap=overlap)


def prepare_document(
    doc: SourceDocument, drafts: Sequence[ChunkDraft], contexts: Sequence[str], key: str
) -> PreparedDocument:
    """Chunks with their contexts -> the exact texts to embed and index, with their hashes."""
    if len(contexts) != len(drafts):
        raise ValueError(f"{doc.doc_id}: {len(contexts)} contexts for {len(drafts)} chunks")
    chunks = []
    for draft, context in zip(drafts, contexts):
        text = passage_text(context, draft.heading, draft.content)
        chunks.append(PreparedChunk(draft.chunk_no, draft.heading, context, draft.content, text, sha256(text)))
    return PreparedDocument(source=doc, content_hash=document_hash(doc), index_key=key, chunks=tuple(chunks))
