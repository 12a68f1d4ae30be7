"""The chunk-context step of an ingest, with its I/O: a document's contexts, cached or written now
(`written_contexts`); with `--batch`, every changed document's contexts asked first in Message Batches
(`contexts_in_batches`); and what an ingest would still ask the LLM (`contexts_to_write`, the dry run's input).
The contexts themselves are vector.ingest.contextualize's; the runner (vector/ingest/runner.py) calls these.
"""
from __future__ import annotations

from core.llm.batches import BatchLLM
from core.database import Database
from core.errors import CrossroadsError
from core.llm.errors import LLMError
from core.settings import Settings
from vector import store
from vector.ingest.contextualize import ChunkContext, Contextualizer, TitleContextualizer
from vector.ingest.prepare import chunk_document, chunk_key, document_hash, index_key
from vector.ingest.sources import SourceDocument
from vector.ingest.sync import classify


Written = tuple[list[str], dict[str, str], dict[str, ChunkContext]]  # chunk keys, cached contexts, new ones


def written_contexts(db, tenant, doc, drafts, contextualizer) -> Written:
    """The contexts of a document's chunks: those cached, and the others written now (by chunk key)."""
    keys = [chunk_key(d) for d in drafts]
    with db.connection() as conn:
        cached = store.load_contexts(conn, tenant, doc.doc_id, contextualizer.mode)
    missing = [i for i, k in enumerate(keys) if k not in cached]
    try:
        written = dict(zip((keys[i] for i in missing), contextualizer.contexts(doc, [drafts[i] for i in missing])))
    except LLMError as exc:
        raise CrossroadsError(f"could not write chunk contexts: {exc}") from exc
    return keys, cached, written


def contexts_in_batches(db, tenant, changing, drafts, contextualizer, batch: BatchLLM) -> list:
    """`ingest --batch`: the contexts of every changed document, asked in Message Batches before any document
    is indexed (one batch per pass of `BatchLLM.map`, usually one in all; core.llm.batches), per document its
    `Written`, or the CrossroadsError it fails with, recorded as the interactive path records it. A batch that
    cannot be sent or collected fails the documents it was for: what was sent is recorded, and the next
    ingest collects it rather than pay again."""
    def written(pair) -> Written | CrossroadsError:
        try:
            return written_contexts(db, tenant, *pair, contextualizer)
        except CrossroadsError as exc:  # the key or model is wrong: this document waits for a re-run
            return exc

    try:
        return list(batch.map(written, list(zip(changing, drafts))))
    except CrossroadsError as exc:
        return [exc] * len(changing)


def contexts_to_write(db: Database, settings: Settings, tenant: str, documents: list[SourceDocument],
                      contextualizer: Contextualizer, embed_model: str) -> list[tuple[SourceDocument, list]]:
    """What an ingest of `documents` would ask the LLM (`crossroads ingest --dry-run`): per added or changed
    document, its chunks without a cached context; nothing is written. Offline contexts ask nothing."""
    if isinstance(contextualizer, TitleContextualizer):
        return []
    key = index_key(settings.chunk_max_chars, settings.chunk_overlap, contextualizer.mode, embed_model)
    hashes = {d.doc_id: document_hash(d) for d in documents}
    work = []
    with db.connection() as conn:
        stored = store.load_state(conn, tenant, list(hashes))
        for doc in documents:
            if classify(doc, hashes[doc.doc_id], key, stored.get(doc.doc_id)) not in ("added", "changed"):
                continue
            drafts = chunk_document(doc, max_chars=settings.chunk_max_chars, overlap=settings.chunk_overlap)
            cached = store.load_contexts(conn, tenant, doc.doc_id, contextualizer.mode)
            missing = [d for d in drafts if chunk_key(d) not in cached]
            if missing:
                work.append((doc, missing))
    return work
