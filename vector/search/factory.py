"""The configured hybrid searcher (and its query transforms), built from settings in one place."""
from __future__ import annotations

from core.settings import Settings


def make_searcher(db, settings: Settings, reranker: str | None = None, *, embedder=None, vectors: str = "served",
                  threshold: bool = True):
    """The configured searcher. `threshold=False` keeps every reranked hit (ranking evaluation);
    `embedder`/`vectors="staged"` searches another model's staged vectors (eval --embeddings)."""
    from core.embeddings import QueryEmbeddingCache, make_embedder
    from vector.search.rerank import make_reranker
    from vector.search.hybrid import HybridSearcher

    chosen = make_reranker(settings, reranker)
    embedder = embedder or make_embedder(settings)
    cutoff = settings.rerank_threshold
    calibrated_for = str(getattr(chosen, "provenance", {}).get("embedder", ""))
    if cutoff is None and embedder.model_id.startswith(calibrated_for or "\0"):
        # the calibrated cut is only meaningful for the embedding model it was fitted with
        cutoff = getattr(chosen, "suggested_threshold", None)
    timeout = settings.rerank_llm_timeout_s if (reranker or settings.reranker) == "llm" else settings.rerank_timeout_s
    if settings.query_embedding_cache:
        embedder = QueryEmbeddingCache(embedder, settings.query_embedding_cache)
    return HybridSearcher(
        db, embedder, ef_search=settings.hnsw_ef_search,
        candidates=settings.search_candidates, rrf_k=settings.rrf_k, reranker=chosen,
        rerank_threshold=cutoff if threshold else None, rerank_timeout_s=timeout, vectors=vectors,
        fusion=settings.fusion, dense_weight=settings.fusion_dense_weight, bm25_max_scored=settings.bm25_max_scored,
        statement_timeout_ms=settings.search_statement_timeout_ms,
    )


def with_transforms(searcher, settings: Settings):
    """Multi-query / HyDE when switched on and an LLM is configured; otherwise the searcher itself."""
    from core.llm.client import make_llm
    from vector.search.transforms import TransformingSearcher

    llm = make_llm(settings) if (settings.query_multi_query or settings.query_hyde) else None
    if llm is None:
        return searcher
    return TransformingSearcher(searcher, llm, multi_query=settings.query_multi_query, hyde=settings.query_hyde,
                                n_paraphrases=settings.query_paraphrases)
