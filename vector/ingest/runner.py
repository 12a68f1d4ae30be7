"""Ingest runner: source documents -> chunks -> vectors -> PostgreSQL, as an index sync.

A thin runner around pure steps (`prepare`, `sync`): it reads what the index holds, embeds only
texts that have no vector yet, and writes each document in its own transaction, so a crash leaves
every document either in its old or its new version and a re-run finishes the job. Documents go in
groups; a group is embedded while the one before it is written (vector/ingest/embedding_step.py). With `--batch`
the LLM's chunk contexts of every changed document are asked first, in Message Batches (core.llm.batches):
a re-run after a crash, with `--batch` or without, collects the batches already sent.
"""
from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field
from typing import Iterable, Iterator, Protocol

import psycopg

from core.llm.batches import BatchLLM, Collector
from core.database import Database
from core.embeddings import Embedder
from core.errors import CrossroadsError
from core.settings import Settings
from vector import store
from vector import hnsw_index
from vector.ingest.context_step import Written, contexts_in_batches, written_contexts
from vector.ingest.contextualize import Contextualizer, TitleContextualizer
from vector.ingest.prepare import (PreparedDocument, chunk_document, document_hash, fallback_key, index_key,
                            prepare_document)
from vector.ingest.sources import Skipped, SourceDocument
from vector.ingest.embedding_step import GroupVectors
from vector.ingest.sync import DocumentPlan, classify, plan_document

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
    contexts_failed: int = 0  # chunks indexed with the offline context: the LLM's failed, retried next ingest
    seconds: float = 0.0
    skipped: list[dict] = field(default_factory=list)
    errors: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.skipped and not self.errors and not self.contexts_failed

    def to_dict(self) -> dict:
        return asdict(self)


class Progress(Protocol):
    """Told where an ingest stands: `parse` counts the added and changed documents chunked, the stages after
    it (`contexts`, `embed`, `write`) count their chunks done of all their chunks, and `index` (no count)
    builds the search indexes at the end. A face (the CLI's bar) passes one in; the HTTP path passes none."""

    def __call__(self, stage: str, done: int, total: int) -> None: ...


STAGE_UNITS = {"parse": "documents", "contexts": "chunks", "embed": "chunks", "write": "chunks", "index": ""}


class IngestInterrupted(KeyboardInterrupt):
    """Ctrl-C during an ingest, with what it saved: each document is written in its own transaction, so the
    ones written stay, and a re-run finds them unchanged and goes on with the rest."""

    def __init__(self, report: IngestReport, documents: int):
        super().__init__()
        self.report, self.documents = report, documents

    @property
    def saved(self) -> int:
        d = self.report.documents
        return d["added"] + d["changed"] + d["unchanged"] + d["metadata_updated"]


# The report's name of a plan's action, where they differ.
_REPORTED_AS = {"metadata": "metadata_updated"}
# Names of documents given in one note about what was read but not used.
WARNING_EXAMPLES = 5


def _groups(plans: Iterable[DocumentPlan]) -> Iterator[list[DocumentPlan]]:
    current, size = [], 0
    for plan in plans:
        current.append(plan)
        size += len(plan.write)
        if size >= CHUNKS_PER_GROUP:
            yield current
            current, size = [], 0
    if current:
        yield current


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
    contextualizer: Contextualizer | None = None,
) -> IngestReport:
    contextualizer = contextualizer or TitleContextualizer()
    started = time.perf_counter()
    report = IngestReport()
    for item in skipped:
        report.skipped.append({"where": item.where, "reason": item.reason})
        log.warning("skipped %s: %s", item.where, item.reason)
    report.documents["skipped"] = len(skipped)
    report.notes.extend(_warning_notes(documents))

    key = index_key(settings.chunk_max_chars, settings.chunk_overlap, contextualizer.mode, embedder.model_id)
    hashes = {d.doc_id: document_hash(d) for d in documents}
    with db.connection() as conn:
        stored = store.load_state(conn, tenant, list(hashes))
        conn.commit()

    try:
        _sync(db, embedder, settings, tenant, documents, skipped, prune, progress, contextualizer, key, hashes,
              stored, report)
    except KeyboardInterrupt:
        raise IngestInterrupted(report, len(documents)) from None
    report.seconds = round(time.perf_counter() - started, 3)
    return report


def _sync(db: Database, embedder: Embedder, settings: Settings, tenant: str, documents: list[SourceDocument],
          skipped: list[Skipped], prune: bool, progress: Progress | None, contextualizer: Contextualizer, key: str,
          hashes: dict[str, str], stored: dict, report: IngestReport) -> None:
    def tell(stage: str, done: int, total: int) -> None:
        if progress:
            progress(stage, done, total)

    changing = []
    for doc in documents:
        action = classify(doc, hashes[doc.doc_id], key, stored.get(doc.doc_id))
        if action in ("added", "changed"):
            changing.append(doc)
            continue
        if action == "metadata":
            with db.connection() as conn:
                store.update_metadata(conn, tenant, DocumentPlan(PreparedDocument(doc, hashes[doc.doc_id], key, ()), action))
            report.documents["metadata_updated"] += 1
        else:
            report.documents["unchanged"] += 1

    # Chunked up front (cheap next to embedding), so the later stages count chunks of a known total.
    tell("parse", 0, len(changing))
    drafts = []
    for doc in changing:
        drafts.append(chunk_document(doc, max_chars=settings.chunk_max_chars, overlap=settings.chunk_overlap))
        tell("parse", len(drafts), len(changing))
    total = sum(map(len, drafts))
    done = 0
    llm_contexts = not isinstance(contextualizer, TitleContextualizer)
    collector = getattr(contextualizer, "llm", None)  # Message Batches: sent now (BatchLLM) or earlier (collected)
    collector = collector if isinstance(collector, Collector) else None
    batch = collector if isinstance(collector, BatchLLM) else None
    ready: list = [None] * len(changing)  # per document, its contexts from Message Batches (`--batch`)
    if batch is not None:
        tell("contexts", 0, total)
        ready = contexts_in_batches(db, tenant, changing, drafts, contextualizer, batch)

    context_failures: dict[str, str] = {}  # doc id -> why a context of it fell back (the first reason)

    def planned():
        """Plans made lazily, so contexts an LLM wrote are saved group by group, not all at the end."""
        nonlocal done
        for doc, doc_drafts, doc_ready in zip(changing, drafts, ready):
            if llm_contexts:
                tell("contexts", done, total)
            try:
                yield _plan_changed(db, tenant, doc, doc_drafts, stored.get(doc.doc_id), key, contextualizer,
                                    embedder, context_failures, report, doc_ready)
            except CrossroadsError as exc:  # e.g. the API key or model id is wrong: this document waits for a re-run
                report.errors.append({"doc_id": doc.doc_id, "error": str(exc)})
                report.documents["failed"] += 1
                done += len(doc_drafts)

    def write(pending: GroupVectors, vectors: dict | CrossroadsError) -> None:
        """The group's documents with their vectors; a group whose embedding failed is counted."""
        nonlocal done
        if isinstance(vectors, CrossroadsError):
            for plan in pending.group:
                report.errors.append({"doc_id": plan.doc_id, "error": str(vectors)})
            report.documents["failed"] += len(pending.group)
            done += sum(len(plan.document.chunks) for plan in pending.group)
            tell("write", done, total)
            return
        report.vectors_reused += len(pending.known)
        report.embeddings_computed += len(pending.needed)
        for plan in pending.group:
            _write_one(db, embedder, tenant, plan, vectors, report)
            done += len(plan.document.chunks)
            tell("write", done, total)
        _compact_statistics(db, tenant)

    def finished(pending: GroupVectors) -> dict | CrossroadsError:
        try:
            return pending.result(embedder)
        except CrossroadsError as exc:
            return exc

    # One group is embedded (embedding_step.py) while the one before it is written; never two embedded
    # at once, which would only split the same cores.
    pending = None
    for group in _groups(planned()):
        tell("embed", done, total)
        previous = (pending, finished(pending)) if pending is not None else None
        pending = GroupVectors.start(db, embedder, tenant, group)
        if previous is not None:
            write(*previous)
    if pending is not None:
        write(pending, finished(pending))
    if collector is not None:  # the contexts it collected are written (cached with their chunks): their rows go
        collector.finish()

    if context_failures:
        report.notes.append(_context_failure_note(report.contexts_failed, context_failures))
    tell("index", 0, 0)
    if prune:
        _prune(db, tenant, {d.doc_id for d in documents}, skipped, report)
    _compact_statistics(db, tenant)
    if report.chunks["added"] + report.chunks["changed"]:
        with db.connection() as conn:
            if store.ensure_vector_index(conn, embedder.model_id, embedder.dimension):
                log.info("built the HNSW index for %s", embedder.model_id)
    _ensure_tenant_graph(db, embedder, settings, tenant, report)


def _warning_notes(documents: list[SourceDocument]) -> list[str]:
    """One note per distinct warning (an unknown front matter key), naming a few of its documents:
    a corpus whose every file has `tags:` gets one line, not thousands."""
    by_warning: dict[str, list[str]] = {}
    for doc in documents:
        for warning in doc.warnings:
            by_warning.setdefault(warning, []).append(doc.source)
    notes = []
    for warning, sources in by_warning.items():
        more = f" and {len(sources) - WARNING_EXAMPLES} more" if len(sources) > WARNING_EXAMPLES else ""
        notes.append(f"{warning}: {', '.join(sources[:WARNING_EXAMPLES])}{more}")
    return notes


def _context_failure_note(chunks: int, failures: dict[str, str]) -> str:
    docs = list(failures)
    more = f" and {len(docs) - WARNING_EXAMPLES} more" if len(docs) > WARNING_EXAMPLES else ""
    return (f"{chunks} chunk contexts of {len(docs)} documents could not be written by the LLM and were indexed "
            f"with the offline context; the next ingest asks again: {', '.join(docs[:WARNING_EXAMPLES])}{more} "
            f"(first: {next(iter(failures.values()))})")


def _ensure_tenant_graph(db: Database, embedder: Embedder, settings: Settings, tenant: str, report: IngestReport) -> None:
    """The tenant's own HNSW graph once it is big enough (vector/hnsw_index.py); checked on every
    run, so a no-op re-ingest builds one an earlier run could not. The documents have landed either
    way: a failed build is a note, and search keeps the shared graph meanwhile."""
    if report.chunks["deleted"]:
        report.notes.extend(drop_emptied_indexes(db, tenant))
    try:
        built = hnsw_index.ensure(db, tenant, embedder.model_id, embedder.dimension,
                                    settings.tenant_vector_index_min_rows)
    except psycopg.Error as exc:
        log.warning("could not build the HNSW graph of tenant %s: %s", tenant, exc)
        report.notes.append(f"the tenant's own HNSW graph could not be built ({exc}); search uses the shared "
                            f"graph meanwhile: run `crossroads embeddings index --tenant {tenant}` to retry")
        return
    if built:
        report.notes.append(f"built the tenant's own HNSW graph {built['index']} over {built['rows']} chunks")


def drop_emptied_indexes(db: Database, tenant: str) -> list[str]:
    """After deletes (a pruning ingest, the CLI, the API): drop the tenant's own HNSW graph of each
    model none of its chunks use any more. Notes for the operator; a drop that fails is logged and
    retried by the next delete, the deletes themselves have landed."""
    try:
        return [f"dropped the tenant's own HNSW graph {name}: none of its chunks of that model are left"
                for name in hnsw_index.drop_unserved(db, tenant)]
    except psycopg.Error as exc:
        log.warning("could not drop an emptied HNSW graph of tenant %s: %s", tenant, exc)
        return [f"an emptied HNSW graph of the tenant could not be dropped ({exc}); the next delete retries"]


def _compact_statistics(db: Database, tenant: str) -> None:
    """Searches sum the statistics deltas each write adds: fold them whenever enough have piled up,
    during a long ingest too (a check is one capped index count)."""
    with db.connection() as conn:
        if store.compact_fulltext_stats(conn, tenant):
            conn.commit()
            log.info("compacted the full-text statistics of tenant %s", tenant)


def _plan_changed(db, tenant, doc, drafts, stored, key, contextualizer, embedder,
                  context_failures: dict[str, str], report: IngestReport,
                  ready: Written | CrossroadsError | None = None) -> DocumentPlan:
    """Give each chunk (`drafts`) of an added or changed document its context (cached ones reused), plan the rows.
    `ready`: its contexts as collected from Message Batches (`ingest --batch`), else they are written here.

    A context the LLM failed to write is the offline one, left out of the cache, and the document is
    stored under a key marking the fallback: the next ingest sees it as changed, asks again for
    exactly those chunks, and re-embeds the ones whose context then changes."""
    if isinstance(contextualizer, TitleContextualizer):
        contexts, cache = [c.text for c in contextualizer.contexts(doc, drafts)], None
    else:
        if isinstance(ready, CrossroadsError):
            raise ready
        keys, cached, written = ready or written_contexts(db, tenant, doc, drafts, contextualizer)
        failed = [c.failed for c in written.values() if c.failed]
        if failed:
            context_failures.setdefault(doc.doc_id, failed[0])
            report.contexts_failed += len(failed)
            key = fallback_key(key)
        cache = {k: cached[k] for k in keys if k in cached} | {k: c.text for k, c in written.items() if not c.failed}
        contexts = [cache[k] if k in cache else written[k].text for k in keys]
    plan = plan_document(prepare_document(doc, drafts, contexts, key), stored, embedder.model_id)
    if cache is not None:
        plan.contexts, plan.context_mode = cache, contextualizer.mode
    return plan


def _write_one(db: Database, embedder: Embedder, tenant: str, plan: DocumentPlan, vectors, report: IngestReport) -> None:
    try:
        with db.connection() as conn:
            plan = store.write_document(conn, tenant, plan, vectors, embedder.model_id)
    except psycopg.OperationalError as exc:
        if not isinstance(exc, psycopg.errors.QueryCanceled):
            raise  # the database is gone, not this document: every later write would wait and fail too
        _record_failure(plan, exc, report)
        return
    except Exception as exc:  # one bad document must not stop the batch; the rest still lands
        _record_failure(plan, exc, report)
        return
    report.documents[_REPORTED_AS.get(plan.action, plan.action)] += 1
    report.chunks["added"] += plan.chunks_added
    report.chunks["changed"] += plan.chunks_changed
    report.chunks["deleted"] += plan.chunks_deleted


def _record_failure(plan: DocumentPlan, exc: Exception, report: IngestReport) -> None:
    log.error("failed to write %s", plan.doc_id, exc_info=exc)
    report.errors.append({"doc_id": plan.doc_id, "error": f"{type(exc).__name__}: {exc}"})
    report.documents["failed"] += 1


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
