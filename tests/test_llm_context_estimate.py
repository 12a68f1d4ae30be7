"""The cost estimate of an ingest's chunk contexts (vector/ingest/estimate.py): pure functions, no database.
Prompt caching is counted only for a document above the model's documented minimum cacheable prefix."""
from __future__ import annotations

import pytest

from core.llm.pricing import CACHE_MIN_TOKENS, PRICES
from vector.ingest.estimate import ContextRequests, estimate_contexts

MODEL = "claude-haiku-4-5"  # minimum cacheable prefix: 4096 tokens
CHUNK = "c" * 400  # 100 tokens of chunk and instructions per call (4 characters a token)


def document(prefix_tokens: int, chunks: int) -> ContextRequests:
    return ContextRequests("w" * (prefix_tokens * 4), (CHUNK,) * chunks)


def test_a_short_document_below_the_minimum_gets_no_cache_savings():
    short = estimate_contexts([document(1000, 5)], MODEL)
    assert CACHE_MIN_TOKENS[MODEL] == 4096
    assert (short["calls"], short["documents_cached"]) == (5, 0)
    assert (short["cache_write_tokens"], short["cache_read_tokens"]) == (0, 0)
    assert short["input_tokens"] == 5 * (1000 + 100)  # the whole document on every call, at the input price
    price = PRICES[MODEL]
    assert short["cost_usd"] == pytest.approx(round((5500 * price.input + 5 * 60 * price.output) / 1e6, 4))
    low, high = short["cost_usd_range"]
    assert low < short["cost_usd"] < high


def test_a_long_document_is_written_once_and_read_by_its_other_chunks():
    long = estimate_contexts([document(8000, 5)], MODEL)
    assert long["documents_cached"] == 1 and long["input_tokens"] == 500
    assert (long["cache_write_tokens"], long["cache_read_tokens"]) == (8000, 4 * 8000)
    uncached = 5 * 8100 * PRICES[MODEL].input / 1e6
    assert long["cost_usd"] < uncached / 2  # 1.25x once and 0.1x four times instead of 5x


def test_batches_halve_the_price_and_count_a_cache_miss_per_request_at_the_high_end():
    docs = [document(8000, 5), document(1000, 3)]
    now, batch = estimate_contexts(docs, MODEL), estimate_contexts(docs, MODEL, batch=True)
    assert batch["cost_usd"] == pytest.approx(now["cost_usd"] / 2, abs=1e-4)
    assert batch["cost_usd_range"][1] > now["cost_usd_range"][1] / 2  # every request a cache write, in the worst case
    assert batch["calls"] == 8 and batch["documents"] == 2


def test_near_the_minimum_the_range_stays_ordered_and_unknown_models_have_no_cost():
    edge = estimate_contexts([document(4000, 20)], MODEL)  # cached only if it is in fact 1.5x longer
    low, high = edge["cost_usd_range"]
    assert low <= edge["cost_usd"] <= high and edge["documents_cached"] == 0
    unknown = estimate_contexts([document(8000, 2)], "mystery-model")
    assert unknown["cost_usd"] is None and unknown["cost_usd_range"] is None and unknown["documents_cached"] == 0
