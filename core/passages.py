"""The one identity of a chunk as every stage names it: its id, its document, where it sits, its text.

Search candidates (vector), graph hits and extractor inputs (graph) and the router's passages all
carry these five fields; they extend this class instead of repeating them, so a chunk means the
same thing on every side of a package border and one conversion serves them all.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from core.text.markdown import ReadingBlock, reading_blocks


@dataclass
class ChunkText:
    id: int  # chunks.id
    doc_id: str  # documents.doc_id
    title: str  # the document's title
    heading: str  # the heading path above the chunk ("Guide > Install"), "" at the top
    text: str  # the chunk's content as indexed
    # its paragraphs, list items and table rows as ingest read them (chunks.blocks); None: read them from `text`
    blocks: tuple[ReadingBlock, ...] | None = field(default=None, kw_only=True)

    @staticmethod
    def stored_blocks(value: list | None) -> tuple[ReadingBlock, ...] | None:
        """chunks.blocks as read from the database (NULL: written before blocks were stored)."""
        return None if value is None else tuple(ReadingBlock.from_json(b) for b in value)

    def reading_blocks(self) -> tuple[ReadingBlock, ...]:
        return self.blocks if self.blocks is not None else reading_blocks(self.text or "")
