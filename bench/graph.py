"""`make bench-graph`: the offline graph build over ../shared/data/podcast, stage by stage.

Indexes the podcast transcripts into tenant `eval_podcast` if needed (embedding is the slow part,
once), then times each stage of the offline build of level `all` with its peak Python memory
(tracemalloc; the Leiden step's native memory is outside it, so the process's peak RSS is printed
too): extraction (pure, every chunk, cache ignored), assembly + pruning + resolution, Leiden,
reports, report vectors. Ends with counts per hierarchy level and what the LLM extractor would cost.
"""
from __future__ import annotations

import json
import resource
import time
import tracemalloc

from bench.common import SHARED_DATA
from core.database import open_database
from core.embeddings import make_embedder
from core.llm.usage import model_prices
from core.settings import Settings
from graph import store
from graph.indexing.contracts import BuildSettings, LevelReport, OfflineReporter
from graph.indexing.runner import build_level_graph, cluster, embed_reports, report_communities
from graph.indexing.estimate import EXTRACT_OUTPUT_TOKENS, EXTRACT_PROMPT_TOKENS
from graph.indexing.communities import membership_hash
from graph.indexing.extract_offline import OfflineExtractor
from vector.ingest.runner import ingest_documents
from vector.ingest.sources import load_source

TENANT = "eval_podcast"


def stage(name: str, results: dict):
    class _Stage:
        def __enter__(self):
            tracemalloc.start()
            self.started = time.perf_counter()

        def __exit__(self, *exc):
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            results[name] = {"seconds": round(time.perf_counter() - self.started, 2), "peak_mb": round(peak / 2**20, 1)}
            print(f"{name:>12}: {results[name]['seconds']:8.2f} s, peak {results[name]['peak_mb']:7.1f} MB", flush=True)
    return _Stage()


def main() -> None:
    corpus = SHARED_DATA / "podcast" / "corpus.jsonl"
    if not corpus.exists():
        print(f"{corpus} is absent: nothing to benchmark")
        return
    settings = Settings()
    db = open_database(settings)
    embedder = make_embedder(settings)
    results: dict = {}
    docs, skipped = load_source(corpus, ["public"], settings.max_document_bytes)
    with stage("ingest", results):
        report = ingest_documents(db, embedder, settings, TENANT, docs, skipped)
    print(f"  ({report.embeddings_computed} embeddings computed; 0 when already indexed)")

    with db.connection() as conn:
        level = next(lvl for lvl in store.list_levels(conn, TENANT) if lvl.name == "all")
        chunks = store.level_chunks(conn, TENANT, level.groups)
    extractor = OfflineExtractor()
    with stage("extract", results):
        extractions = {c.content_hash: extractor.extract(c) for c in chunks}
    level_report = LevelReport(level.name, list(level.groups), chunks=len(chunks))
    with stage("graph", results):
        entities, relationships = build_level_graph(chunks, extractions, embedder.embed_documents, 0.93, level_report)
    with db.connection() as conn:
        store.replace_graph(conn, TENANT, level.name, entities, relationships)
        old = store.load_communities(conn, TENANT, level.name)
    build = BuildSettings()
    with stage("communities", results):
        communities = cluster(old, relationships, build)
    with db.connection() as conn:
        store.replace_communities(conn, TENANT, level.name, communities, {c.id: membership_hash(c) for c in communities})
    with stage("reports", results):
        report_communities(db, TENANT, level.name, communities, entities, relationships, OfflineReporter(),
                           level_report, None)
    with stage("report vectors", results):
        embed_reports(db, TENANT, level.name, embedder)

    per_level: dict[int, int] = {}
    for c in communities:
        per_level[c.level] = per_level.get(c.level, 0) + 1
    text_tokens = sum(len(c.text) for c in chunks) // 4
    calls = len(chunks)
    prices = model_prices(settings.llm_model_fast)
    input_tokens = calls * EXTRACT_PROMPT_TOKENS + text_tokens
    cost = (input_tokens * prices[0] + calls * EXTRACT_OUTPUT_TOKENS * prices[1]) / 1e6 if prices else None
    summary = {
        "documents": len(docs), "chunks": len(chunks), "entities": len(entities),
        "relationships": len(relationships), "merged_by_resolution": level_report.merged_entities,
        "communities": len(communities), "communities_per_level": per_level, "stages": results,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "llm_extraction_estimate": {"model": settings.llm_model_fast, "calls": calls, "input_tokens": input_tokens,
                                    "output_tokens": calls * EXTRACT_OUTPUT_TOKENS, "cost_usd": round(cost, 2) if cost else None},
        "build_seconds_without_ingest": round(sum(v["seconds"] for k, v in results.items() if k != "ingest"), 1),
    }
    print(json.dumps(summary, default=str))
    db.close()


if __name__ == "__main__":
    main()
