"""A source document -> the chunks to index, each with the exact text to embed and its hash. Pure."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

from vector.chunking import chunk_markdown
from vector.sources import SourceDocument

# Bump when chunking or context rules change: every document is then re-chunked on the next ingest.
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


def index_key(max_chars: int, overlap: float, embed_model: str) -> str:
    """What shaped a document's chunks and vectors; a change means re-chunking."""
    return f"chunker=v{CHUNKER_VERSION}/{max_chars}/{overlap:g};context=title;embed={embed_model}"


def embed_text(context: str, heading: str, content: str) -> str:
    """Context and heading path first: cheap disambiguation for the vector ("which function?")."""
    header = heading if heading.startswith(context) else " > ".join(p for p in (context, heading) if p)
    return f"{header}\n{content}" if header else content


def prepare_document(doc: SourceDocument, *, max_chars: int, overlap: float, embed_model: str) -> PreparedDocument:
    """Chunk a document; without an LLM the context of every chunk is the document title."""
    context = doc.title
    chunks = []
    for draft in chunk_markdown(doc.text, max_chars=max_chars, overlap=overlap):
        text = embed_text(context, draft.heading, draft.content)
        chunks.append(PreparedChunk(draft.chunk_no, draft.heading, context, draft.content, text, sha256(text)))
    return PreparedDocument(
        source=doc,
        content_hash=sha256("\x1f".join((doc.title, doc.lang, doc.text))),
        index_key=index_key(max_chars, overlap, embed_model),
        chunks=tuple(chunks),
    )
