"""How close in meaning a passage's units are to the question, across languages: the search's own
multilingual embedding model, question as a query and units as passages (e5's two sides).

The extractive scorer matches words (answers/unit_scoring.py), and no word of a Russian sentence is
a word of an English question: when the search's best passages are written in the other language,
only meaning can say which of their sentences answers (answers/local.py). Embedding a few
sentences costs tens of milliseconds each on the offline model, so only those passages' units are
embedded, only then.
"""
from __future__ import annotations

from typing import Protocol, Sequence

import numpy as np

from core.embeddings import Embedder, passage_text
from answers.types import Passage
from answers.units import Unit, display


class UnitSimilarity(Protocol):
    def __call__(self, question: str, texts: Sequence[str]) -> list[float]:
        """The cosine of each text to the question, in order."""
        ...


def in_its_page(unit: Unit, passage: Passage) -> str:
    """A unit as the model should read it: after its page's heading path, the way the index embeds a
    chunk (vector/ingest/prepare.py). Alone, "**Date:** 9 April 2025" does not say whose date it is,
    and a table row does not say what it lists."""
    return passage_text(passage.title or "", passage.heading or "", display(unit))


class EmbeddingSimilarity:
    """`UnitSimilarity` through an `Embedder` (L2-normalised vectors: a dot product is the cosine)."""

    def __init__(self, embedder: Embedder):
        self.embedder = embedder

    def __call__(self, question: str, texts: Sequence[str]) -> list[float]:
        if not texts:
            return []
        asked = np.asarray(self.embedder.embed_query(question), dtype=np.float32)
        said = np.asarray(self.embedder.embed_documents(list(texts)), dtype=np.float32)
        return [float(v) for v in said @ asked]
