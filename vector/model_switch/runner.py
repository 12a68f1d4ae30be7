"""Embedding model switch: stage a new model's vectors beside the served ones, switch, drop.

Vectors of different models are not comparable, so changing the model is a full re-embedding done
in steps: `stage_vectors` computes the new model's vectors into `chunk_vectors_staged`
while search keeps serving `chunks.embedding`; `eval --embeddings` compares both; `switch` swaps
them in one transaction (the old ones are parked in staging, so switching back is free); `drop`
deletes a model's parked vectors. Every batch commits on its own, so an interrupted `stage_vectors`
continues where it stopped. All SQL lives in `vector.model_switch.sql`.
"""
from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field
from typing import Callable

import numpy as np
import psycopg

from core.database import Database
from core.embeddings import Embedder
from core.errors import CrossroadsError
from vector.model_switch import sql as msql
from vector import store
from vector import hnsw_index
from core.embeddings import passage_text
from vector.ingest.prepare import sha256

log = logging.getLogger(__name__)

# Chunks per batch: one embedding request group and one transaction. Small enough that an
# interruption loses little paid work, large enough to keep an API's batches full.
BATCH_SIZE = 256
MAX_LISTED_MISMATCHES = 20

Progress = Callable[[int, int], None]  # (chunks done, chunks to do)


@dataclass
class MigrateReport:
    tenant: str
    target_model: str
    served: dict[str | None, int]
    chunks: int = 0  # chunks of the tenant
    to_do: int = 0  # chunks without a current vector of the target model when the run started
    embedded: int = 0  # texts sent to the embedder
    reused: int = 0  # vectors copied from another chunk with the same text
    written: int = 0
    batches: int = 0
    mismatches: int = 0  # chunks whose rebuilt text does not hash to their content_hash
    mismatched: list[dict] = field(default_factory=list)
    remaining: int = 0  # chunks still uncovered at the end (added meanwhile, or deleted mid-batch)
    index_built: bool = False
    seconds: float = 0.0

    @property
    def complete(self) -> bool:
        return self.remaining == 0

    def to_dict(self) -> dict:
        return asdict(self) | {"complete": self.complete}


def _check_dimension(conn: psycopg.Connection, model: str, dimension: int) -> None:
    known = msql.known_dimension(conn, model)
    if known is not None and known != dimension:
        raise CrossroadsError(
            f"model {model} is registered with dimension {known}, but the embedder returns {dimension}: "
            "fix the configured dimension (e.g. CROSSROADS_VOYAGE_DIMENSION)"
        )


def stage_vectors(db: Database, embedder: Embedder, tenant: str, *, batch_size: int = BATCH_SIZE,
            progress: Progress | None = None) -> MigrateReport:
    """Stage the embedder's vectors for every chunk of the tenant that lacks a current one."""
    started = time.perf_counter()
    target = embedder.model_id
    with db.connection() as conn:
        served = msql.served_models(conn, tenant)
        report = MigrateReport(tenant, target, served, chunks=sum(served.values()))
        if not report.chunks:
            raise CrossroadsError(f"tenant {tenant!r} has no chunks: ingest its documents first")
        _check_dimension(conn, target, embedder.dimension)
        ids = msql.missing_ids(conn, tenant, target)
        report.to_do = len(ids)
        if report.to_do == 0 and set(served) == {target}:
            report.seconds = round(time.perf_counter() - started, 3)
            return report  # already served by this model: nothing to stage, nothing to log
        with conn.transaction():
            msql.start_migration(conn, tenant, target, next(iter(served)), embedder.dimension)
    if progress:
        progress(0, report.to_do)
    try:
        _run_batches(db, embedder, tenant, ids, batch_size, report, progress)
    except Exception as exc:  # noqa: BLE001 - record why it stopped, then let the caller report it
        with db.connection() as conn:
            msql.update_migration(conn, tenant, target, counts=_counts(report), error=f"{type(exc).__name__}: {exc}")
        raise
    with db.connection() as conn:
        report.remaining = msql.count_missing(conn, tenant, target)
        status = "complete" if report.complete else "running"
        msql.update_migration(conn, tenant, target, status=status, counts=_counts(report))
        conn.commit()
        if report.complete:
            # The index serves `eval --embeddings`; built once the bulk of the vectors is in.
            report.index_built = msql.ensure_staged_index(conn, target, embedder.dimension)
        if report.written:
            conn.execute("ANALYZE chunk_vectors_staged")
    report.seconds = round(time.perf_counter() - started, 3)
    return report


def _counts(report: MigrateReport) -> dict:
    return {k: getattr(report, k) for k in ("chunks", "to_do", "embedded", "reused", "written", "mismatches")}


def _run_batches(db: Database, embedder: Embedder, tenant: str, ids: list[int], batch_size: int,
                 report: MigrateReport, progress: Progress | None) -> None:
    target = embedder.model_id
    for start in range(0, len(ids), batch_size):
        # Reads and writes each take a pooled connection only briefly: none is held while embedding.
        with db.connection() as conn:
            rows = msql.batch_rows(conn, tenant, target, ids[start:start + batch_size])
        if not rows:  # deleted, or covered by a concurrent run, since the list was made
            continue
        texts: dict[str, str] = {}
        for chunk_id, doc_id, context, heading, content, content_hash in rows:
            text = passage_text(context, heading, content)
            if sha256(text) != content_hash:
                # Not what the served vector was computed from (e.g. passage_text changed since the
                # ingest): embedded anyway, as the chunk's own text, and reported.
                report.mismatches += 1
                if len(report.mismatched) < MAX_LISTED_MISMATCHES:
                    report.mismatched.append({"chunk_id": chunk_id, "doc_id": doc_id})
            texts.setdefault(content_hash, text)
        with db.connection() as conn:
            vectors = msql.reusable_vectors(conn, tenant, target, texts)
        report.reused += sum(1 for r in rows if r[5] in vectors)
        needed = [h for h in texts if h not in vectors]
        if needed:
            vectors.update(zip(needed, _embed(embedder, [texts[h] for h in needed])))
            report.embedded += len(needed)
        _write(db, tenant, target, [(r[0], r[5], vectors[r[5]]) for r in rows], report)
        report.batches += 1
        if progress:
            progress(min(start + batch_size, len(ids)), len(ids))


def _embed(embedder: Embedder, texts: list[str]) -> np.ndarray:
    vectors = np.asarray(embedder.embed_documents(texts), dtype=np.float32)
    if vectors.shape != (len(texts), embedder.dimension) or not np.all(np.isfinite(vectors)):
        raise CrossroadsError(
            f"embedder {embedder.model_id} returned shape {vectors.shape} (or non-finite values) for {len(texts)} texts"
        )
    return vectors


def _write(db: Database, tenant: str, target: str, rows: list, report: MigrateReport) -> None:
    """One batch, one transaction. A chunk deleted between the read and this write is skipped by the
    INSERT ... SELECT; one deleted in the instant before the foreign-key check fails the statement,
    so the batch is tried once more, when the chunk is visibly gone."""
    for attempt in (1, 2):
        try:
            with db.connection() as conn, conn.transaction():
                msql.lock_tenant(conn, tenant)
                written = msql.write_staged(conn, tenant, target, rows)
                msql.update_migration(conn, tenant, target, counts=_counts(report) | {"written": report.written + written})
        except psycopg.errors.ForeignKeyViolation:
            if attempt == 2:
                raise
        else:
            report.written += written
            return


def switch(db: Database, tenant: str, model: str, *, spec: str | None = None,
           tenant_graph_min_rows: int | None = None) -> dict:
    """Serve `model` for the tenant: one transaction swaps every chunk's vector, or nothing changes.

    With `tenant_graph_min_rows`, the tenant's own HNSW graph of the new model is built in the same
    transaction when it needs one (vector/hnsw_index.py), and its graphs of models that no longer
    serve it are dropped afterwards."""
    again = f"run `crossroads embeddings stage --tenant {tenant} --to {spec or model}` again, then switch"
    with db.connection() as conn:
        served = msql.served_models(conn, tenant)
        if not served:
            raise CrossroadsError(f"tenant {tenant!r} has no chunks: nothing to switch")
        if set(served) == {model}:
            return {"tenant": tenant, "model": model, "previous": [model], "already_served": True}
        dimension = msql.known_dimension(conn, model)
        if dimension is None:
            raise CrossroadsError(f"tenant {tenant!r} has no vectors of {model}: {again}")
    with db.connection() as conn, conn.transaction():
        msql.lock_tenant(conn, tenant)
        msql.lock_chunk_writes(conn)
        missing = msql.count_missing(conn, tenant, model)
        if missing:  # raising rolls the transaction back: search keeps the old model
            raise CrossroadsError(
                f"{missing} of {sum(served.values())} chunks of tenant {tenant!r} have no current {model} vector: {again}"
            )
        counts = msql.swap_served(conn, tenant, model)
        # Built (if this is the model's first tenant) inside the same transaction, after the rows:
        # one bulk HNSW build instead of row-by-row inserts, committed together with the vectors it
        # indexes, so no search ever sees the new model's rows without their index.
        index_built = store.ensure_vector_index(conn, model, dimension)
        own = None
        if tenant_graph_min_rows is not None:
            own = hnsw_index.ensure_in_transaction(conn, tenant, model, dimension, tenant_graph_min_rows)
    with db.connection() as conn:
        conn.execute("ANALYZE chunks")  # the embed_model distribution just changed for the planner
    dropped = hnsw_index.drop_unserved(db, tenant)
    previous = sorted(m for m in served if m != model and m is not None)
    return {"tenant": tenant, "model": model, "previous": previous, "already_served": False,
            "index_built": index_built, "tenant_graph_built": own["index"] if own else None,
            "tenant_graphs_dropped": dropped, **counts}


def drop(db: Database, tenant: str, model: str) -> dict:
    """Delete the tenant's staged vectors of `model`; never the model that serves the tenant."""
    with db.connection() as conn, conn.transaction():
        msql.lock_tenant(conn, tenant)
        served = msql.served_models(conn, tenant)
        if model in served:
            raise CrossroadsError(
                f"{model} serves {served[model]} chunks of tenant {tenant!r}: it cannot be dropped. "
                "Switch the tenant to another model first (`crossroads embeddings switch`)."
            )
        deleted = msql.delete_staged(conn, tenant, model)
    with db.connection() as conn, conn.transaction():
        index_dropped = msql.drop_staged_index_if_unused(conn, model)
    return {"tenant": tenant, "model": model, "vectors_deleted": deleted, "index_dropped": index_dropped}


def status(db: Database, tenant: str) -> dict:
    """Served model(s) and, per staged model, how many of the tenant's chunks it covers."""
    with db.connection() as conn:
        served = msql.served_models(conn, tenant)
        total = sum(served.values())
        staged = []
        for model, current, stale in msql.staged_coverage(conn, tenant):
            covered = current + served.get(model, 0)
            staged.append({"model": model, "current": current, "stale": stale,
                           "coverage": round(covered / total, 4) if total else 0.0, "complete": covered == total,
                           "indexed": msql.staged_dimension(conn, model) is not None})
        log_rows = msql.migration_log(conn, tenant)
        graphs = hnsw_index.registered_indexes(conn, tenant)
    return {"tenant": tenant, "chunks": total, "served": [{"model": m, "chunks": n} for m, n in served.items()],
            "staged": staged, "migrations": log_rows, "tenant_graphs": graphs}
