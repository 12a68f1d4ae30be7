"""The one identity of a chunk as every stage names it: its id, its document, where it sits, its text.

Search candidates (vector), graph hits and extractor inputs (graph) and the router's passages all
carry these five fields; they extend this class instead of repeating them, so a chunk means the
same thing on every side of a package border and one conversion serves them all.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ChunkText:
    id: int  # chunks.id
    doc_id: str  # documents.doc_id
    title: str  # the document's title
    heading: str  # the heading path above the chunk ("Guide > Install"), "" at the top
    text: str  # the chunk's content as indexed
