"""Ingest runner: source documents -> chunks -> vectors -> PostgreSQL, as an index sync.

A thin runner around pure steps (`prepare`, `sync`): it reads what the index holds, embeds only
texts that have no vector yet, and writes each document in its own transaction, so a crash leaves
every document either in its old or its new version and a re-run finishes the job.
"""
from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field
from typing import Callable

from core.database import Database
from core.embeddings import Embedder
from core.errors import CrossroadsError
from core.settings import Settings
from vector import store
from vector.prepare import prepare_document
from vector.sources import Skipped, SourceDocument
from vector.sync import DocumentPlan, hashes_to_embed, plan_document

log = logging.getLogger(__name__)

# Documents are written in groups whose vectors are embedded together: big enough to batch the
# model well, small enough that a crash loses little work and progress moves.
CHUNKS_PER_GROUP = 256


@dataclass
class IngestReport:
    documents: dict[str, int] = field(
        default_factory=lambda: dict(added=0, changed=0, unchanged=0, deleted=0, skipped=0, metadata_updated=0, failed=0)
    )
    chunks: dict[str, int] = field(default_factory=lambda: dict(added=0, changed=0, deleted=0))
    embeddings_computed: int = 0
    vectors_reused: int = 0
    seconds: float = 0.0
    skipped: list[dict] = field(default_factory=list)
    errors: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.skipped and not self.errors

    def to_dict(self) -> dict:
        return asdict(self)


Progress = Callable[[int, int], None]  # (documents done, documents total)


def _groups(plans: list[DocumentPlan]) -> list[list[DocumentPlan]]:
    groups, current, size = [], [], 0
    for plan in plans:
        current.append(plan)
        size += len(plan.write)
        if size >= CHUNKS_PER_GROUP:
            groups.append(current)
            current, size = [], 0
    if current:
        groups.append(current)
    return groups


def ingest_documents(
    db: Database,
    embedder: Embedder,
    settings: Settings,
    tenant: str,
    documents: list[SourceDocument],
    skipped: list[Skipped] = (),
    *,
    prune: bool = False,
    progress: Progress | None = None,
) -> IngestReport:
    started = time.perf_counter()
    report = IngestReport()
    for item in skipped:
        report.skipped.append({"where": item.where, "reason": item.reason})
        log.warning("skipped %s: %s", item.where, item.reason)
    report.documents["skipped"] = len(skipped)

    prepared = [
        prepare_document(d, max_chars=settings.chunk_max_chars, overlap=settings.chunk_overlap, embed_model=embedder.model_id)
        for d in documents
    ]
    with db.connection() as conn:
        stored = store.load_state(conn, tenant, [p.doc_id for p in prepared])
        conn.commit()
    plans = [plan_document(p, stored.get(p.doc_id), embedder.model_id) for p in prepared]

    done = 0
    for plan in plans:
        if plan.action in ("unchanged", "metadata"):
            if plan.action == "metadata":
                with db.connection() as conn:
                    store.update_metadata(conn, tenant, plan)
                report.documents["metadata_updated"] += 1
            else:
                report.documents["unchanged"] += 1
            done += 1
    if progress:
        progress(done, len(plans))

    for group in _groups([p for p in plans if p.action in ("added", "changed")]):
        try:
            vectors = _vectors_for(db, embedder, tenant, group, report)
        except CrossroadsError as exc:
            for plan in group:
                report.errors.append({"doc_id": plan.doc_id, "error": str(exc)})
            report.documents["failed"] += len(group)
            done += len(group)
            if progress:
                progress(done, len(plans))
            continue
        for plan in group:
            _write_one(db, embedder, tenant, plan, vectors, report)
            done += 1
            if progress:
                progress(done, len(plans))

    if prune:
        _prune(db, tenant, {d.doc_id for d in documents}, skipped, report)
    if report.chunks["added"] + report.chunks["changed"]:
        with db.connection() as conn:
            if store.ensure_vector_index(conn, embedder.model_id, embedder.dimension):
                log.info("built the HNSW index for %s", embedder.model_id)
    report.seconds = round(time.perf_counter() - started, 3)
    return report


def _vectors_for(db: Database, embedder: Embedder, tenant: str, group: list[DocumentPlan], report: IngestReport):
    wanted = {c.content_hash for plan in group for c in plan.write}
    with db.connection() as conn:
        vectors = store.fetch_vectors(conn, tenant, embedder.model_id, wanted)
        conn.commit()
    report.vectors_reused += len(vectors)
    needed = hashes_to_embed(group, set(vectors))
    if needed:
        hashes = list(needed)
        computed = embedder.embed_documents([needed[h] for h in hashes])
        if computed.shape != (len(hashes), embedder.dimension):
            raise CrossroadsError(
                f"embedder {embedder.model_id} returned shape {computed.shape} for {len(hashes)} texts"
            )
        vectors.update(zip(hashes, computed))
        report.embeddings_computed += len(hashes)
    return vectors


def _write_one(db: Database, embedder: Embedder, tenant: str, plan: DocumentPlan, vectors, report: IngestReport) -> None:
    try:
        with db.connection() as conn:
            store.write_document(conn, tenant, plan, vectors, embedder.model_id)
    except Exception as exc:  # one bad document must not stop the batch; the rest still lands
        log.exception("failed to write %s", plan.doc_id)
        report.errors.append({"doc_id": plan.doc_id, "error": f"{type(exc).__name__}: {exc}"})
        report.documents["failed"] += 1
        return
    report.documents[plan.action] += 1
    report.chunks["added"] += plan.chunks_added
    report.chunks["changed"] += plan.chunks_changed
    report.chunks["deleted"] += plan.chunks_deleted


def _prune(db: Database, tenant: str, present: set[str], skipped: list[Skipped], report: IngestReport) -> None:
    """Delete documents the source no longer has; never those that were merely unreadable this time."""
    if any(s.doc_id is None for s in skipped):
        report.notes.append(
            "prune not done: some skipped entries have no readable id, so their documents cannot be told apart "
            "from deleted ones; fix them and run again"
        )
        return
    keep = present | {s.doc_id for s in skipped}
    with db.connection() as conn:
        gone = [doc_id for doc_id in store.document_ids(conn, tenant) if doc_id not in keep]
        if gone:
            docs, chunks = store.delete_documents(conn, tenant, gone)
            report.documents["deleted"] += docs
            report.chunks["deleted"] += chunks
            log.info("pruned %d documents (%d chunks) from tenant %s", docs, chunks, tenant)
