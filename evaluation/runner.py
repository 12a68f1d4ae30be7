"""`crossroads eval`: retrieval quality of each search configuration on one dataset, in one run.

The corpus is indexed once into its own tenant (`eval_<dataset>`, group `public`); later runs only
query, since the sync makes re-ingesting an unchanged corpus free. Metrics are at document level:
hits are mapped to their documents and the first k distinct documents are scored, so several chunks
of one document neither fill the top k nor count twice.
"""
from __future__ import annotations

import time
from typing import Callable, Mapping, Sequence

from core.database import Database
from core.embeddings import Embedder
from core.settings import Settings
from evaluation.datasets import Dataset
from evaluation.metrics import score_query, summarise
from vector.ingest.runner import ingest_documents
from vector.search.hybrid import HybridSearcher
from vector.ingest.sources import load_source

CONFIGS = ("dense", "bm25", "hybrid", "hybrid+rerank")
# Configs built above this package (the graph leg and the multi-hop route live in graph/ and router/,
# which vector/ must not import): the caller passes their search functions to `evaluate`.
GRAPH_CONFIGS = ("graph", "hybrid+graph", "agentic")
EVAL_GROUP = "public"
CHUNKS_PER_DOC_SLACK = 3  # chunk hits fetched per document slot, so k distinct documents survive dedupe


def evaluation_settings(settings: Settings) -> Settings:
    """The settings an evaluation searches with: each config asks the same questions, so with the
    query-vector cache every config after the first would report latencies without the embedding
    step; an evaluation measures questions asked afresh."""
    return settings.model_copy(update={"query_embedding_cache": 0})


def eval_tenant(dataset: Dataset) -> str:
    return f"eval_{dataset.name}"


def index_dataset(db: Database, embedder: Embedder, settings: Settings, dataset: Dataset, progress=None) -> dict:
    docs, skipped = load_source(dataset.corpus_path, [EVAL_GROUP], settings.max_document_bytes)
    report = ingest_documents(db, embedder, settings, eval_tenant(dataset), docs, skipped, progress=progress)
    return report.to_dict()


def evaluate(
    searcher: HybridSearcher,
    dataset: Dataset,
    configs: Sequence[str],
    k: int,
    progress: Callable[[int, int], None] | None = None,
    extra: Mapping[str, Callable[[str, int], list[str]]] | None = None,
    per_query: bool = False,
) -> dict[str, dict]:
    """config -> summary (means, latency percentiles, misses with what was found instead).
    `extra`: config -> search(question, n) returning the doc ids of its ranked chunks, for configs
    not in CONFIGS (GRAPH_CONFIGS, made by the caller for the dataset's tenant and group).
    `per_query`: each summary also holds "per_query", qid -> {recall, mrr, ndcg}, for paired
    comparisons of two runs (evaluation/paired.py)."""
    extra = extra or {}
    results = {}
    queries = dataset.scored_queries
    total, done = len(queries) * len(configs), 0
    for config in configs:
        scored = []
        for query in queries:
            started = time.perf_counter()
            if config in extra:
                doc_ids = extra[config](query.question, k * CHUNKS_PER_DOC_SLACK)
            else:
                result = searcher.search(eval_tenant(dataset), [EVAL_GROUP], query.question,
                                         k=k * CHUNKS_PER_DOC_SLACK, mode=config)
                doc_ids = [h.doc_id for h in result.hits]
            latency = (time.perf_counter() - started) * 1000
            scored.append(score_query(query.qid, doc_ids, query.grades, k,
                                         multi_gold=query.multi_gold, latency_ms=latency))
            done += 1
            if progress:
                progress(done, total)
        summary = summarise(scored)
        summary["miss_details"] = [
            {"qid": q.qid, "missing": list(q.missing), "found": list(q.found[:3])}
            for q in scored if q.recall < 1.0
        ][:20]
        if per_query:
            summary["per_query"] = {q.qid: {"recall": q.recall, "mrr": q.rr, "ndcg": q.ndcg} for q in scored}
        results[config] = summary
    return results
