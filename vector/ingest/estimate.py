"""What the LLM's chunk contexts of an ingest would cost before it runs (`crossroads ingest --dry-run`): calls,
tokens and dollars, each with its range.

A context call (vector.ingest.contextualize.LLMContextualizer) sends the whole document as a cacheable prefix,
then the instructions and one chunk; it answers in 1-2 sentences, at most `max_tokens`. The prefix is cached
only when it is at least the model's documented minimum (core.llm.pricing.CACHE_MIN_TOKENS): then a document's
first call writes it (1.25x the input price) and the others read it (0.1x); below the minimum, or for a model
whose minimum is unknown, every call pays the whole prefix at the input price, and no saving is counted. With
Message Batches (`--batch`, half the price) cache hits are best-effort: the high end of the range counts every
request as a cache write, the point and the low end as the interactive order would (one write, then reads).

Tokens are estimated from characters (CHARS_PER_TOKEN by script, as core.llm.stats tells the language), each
figure a point in BAND: the ingest records no calibration (graph.indexing.calibration is the graph build's).
A document over the model's context window is asked again as excerpts (uncached): not counted here.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from core.llm.stats import estimated_tokens
from core.llm.pricing import cache_min_tokens, price_of
from vector.ingest.chunking import ChunkDraft
from vector.ingest.sources import SourceDocument
from vector.prompts import CONTEXT_INSTRUCTIONS, chunk_message, document_prefix

BAND = (0.6, 1.5)  # low and high factors of an uncalibrated figure
CONTEXT_OUTPUT_TOKENS = 60  # a reply of 1-2 sentences; its high end is the call's max_tokens
OTHER_END = {"low": "high", "point": "point", "high": "low"}


@dataclass(frozen=True)
class ContextRequests:
    """One document's context calls: the cached prefix and, per chunk, the text sent after it."""
    prefix: str
    messages: tuple[str, ...]


def context_requests(doc: SourceDocument, drafts: Sequence[ChunkDraft]) -> ContextRequests:
    """The texts LLMContextualizer sends for these chunks of `doc` (the whole document as the prefix)."""
    return ContextRequests(document_prefix(doc), tuple(f"{CONTEXT_INSTRUCTIONS}\n{chunk_message(d)}" for d in drafts))


def estimate_contexts(documents: Sequence[ContextRequests], model: str, *, batch: bool = False,
                      max_tokens: int = 150) -> dict:
    """Calls, tokens (uncached input, cache writes and reads, output) and `cost_usd` of the context calls of
    `documents`, at the point and at the low and high ends (`*_range`: [low, high]); `cost_usd` None for a
    model without a price. `documents_cached`: those whose prefix counts as cached (point figure)."""
    minimum = cache_min_tokens(model)
    price = price_of(model)
    calls = sum(len(d.messages) for d in documents)
    bounds = {"low": BAND[0], "point": 1.0, "high": BAND[1]}
    output_per_call = {"low": CONTEXT_OUTPUT_TOKENS * BAND[0], "point": CONTEXT_OUTPUT_TOKENS, "high": max_tokens}
    sums = {}
    cached_docs = 0
    for bound, factor in bounds.items():
        fresh = write = read = 0.0
        for doc in documents:
            n = len(doc.messages)
            if not n:
                continue
            prefix = estimated_tokens(doc.prefix) * factor
            fresh += sum(estimated_tokens(m) for m in doc.messages) * factor
            # whether the prefix reaches the minimum, judged at the other end of the range, so that the low end
            # is the cheapest case and the high end the dearest (a longer prefix alone must not turn caching on)
            judged = estimated_tokens(doc.prefix) * bounds[OTHER_END[bound]]
            if minimum is None or judged < minimum:  # sent uncached: every call pays the whole document
                fresh += n * prefix
                continue
            cached_docs += bound == "point"
            writes = n if batch and bound == "high" else 1  # a batch's cache hits are best-effort
            write += writes * prefix
            read += (n - writes) * prefix
        out = calls * output_per_call[bound]
        cost = None if price is None else price.cost(input_tokens=round(fresh), output_tokens=round(out),
                                                     cache_write_tokens=round(write), cache_read_tokens=round(read),
                                                     batch=batch)
        sums[bound] = {"input": round(fresh), "write": round(write), "read": round(read), "output": round(out),
                       "cost": cost}
    point, low, high = sums["point"], sums["low"], sums["high"]
    return {
        "model": model, "batch": batch, "documents": sum(1 for d in documents if d.messages), "calls": calls,
        "input_tokens": point["input"], "input_tokens_range": [low["input"], high["input"]],
        "cache_write_tokens": point["write"], "cache_read_tokens": point["read"],
        "output_tokens": point["output"], "output_tokens_range": [low["output"], high["output"]],
        "cache_min_tokens": minimum, "documents_cached": cached_docs,
        "cost_usd": None if price is None else round(point["cost"], 4),
        "cost_usd_range": None if price is None else [round(low["cost"], 4), round(high["cost"], 4)],
    }
