"""What a graph build would cost before it runs: LLM calls, tokens and dollars per stage.

`crossroads graph build` and `POST /v1/jobs/graph-build` print / return `estimate_build` and refuse
to start above `max_cost`. Every figure is an estimate from cached state and measured prompt sizes.
"""
from __future__ import annotations

import math

from core.database import Database
from graph import store
from graph.build.assemble import assemble_with_descriptions, drop_entities
from graph.build.extract_offline import prune_entities
from graph.levels import AccessLevel
from graph.build.summarize import (SUMMARY_MIN_CHARS, DescriptionSummarizer, RelationshipSummaryRequest, SummaryRequest,
                             level_summary_requests)
from graph.types import Extractor

# Rough per-call sizes for the estimate printed before any LLM work (measured prompts, see docs/benchmarks.md).
EXTRACT_PROMPT_TOKENS = 1500
EXTRACT_OUTPUT_TOKENS = 600
# Characters per token of chunk text by language: Cyrillic text takes more tokens per character.
# Replaced by what the API's `usage` measured (measured_chars_per_token) once calls were recorded.
CHARS_PER_TOKEN = {"english": 4.0, "russian": 3.0, "simple": 3.5}
# Each figure is a point in a range: replies run shorter than their budget and prompts vary; printed with it.
RANGE = (0.6, 1.5)


def _text_tokens(chars_by_lang: dict[str, int], chars_per_token: dict[str, float] | None = None) -> int:
    table = {**CHARS_PER_TOKEN, **(chars_per_token or {})}
    return int(sum(chars / table.get(lang, 3.0) for lang, chars in chars_by_lang.items()))


def measured_chars_per_token(calls) -> dict[str, float]:
    """Characters per prompt token by language (by script: mostly Cyrillic = russian), from calls recorded by
    `AnthropicLLM(record_calls=True)`: what the API's `usage` says, for the next estimate."""
    chars: dict[str, int] = {}
    tokens: dict[str, int] = {}
    for call in calls:
        cyrillic = sum(1 for ch in call.prompt if "\u0400" <= ch <= "\u04ff")
        latin = sum(1 for ch in call.prompt if ch.isascii() and ch.isalpha())
        lang = "russian" if cyrillic > latin else "english"
        chars[lang] = chars.get(lang, 0) + len(call.prompt)
        tokens[lang] = tokens.get(lang, 0) + call.usage.prompt_tokens
    return {lang: round(chars[lang] / tokens[lang], 2) for lang in chars if tokens[lang]}


def priced(stage: dict, model: str, thinking: int = 0) -> dict:
    """`stage` (calls, input_tokens, output_tokens) with its thinking budget counted as output (at most what
    is spent), `cost_usd` (None for a model with no known price) and `cost_usd_range` [low, high]."""
    from core.pricing import price_of

    stage = {**stage, "thinking_tokens": stage["calls"] * thinking}
    price = price_of(model) if model and stage["calls"] else None
    if not (model and stage["calls"]):
        return {**stage, "cost_usd": 0.0, "cost_usd_range": [0.0, 0.0]}
    if price is None:
        return {**stage, "cost_usd": None, "cost_usd_range": None}

    def cost(factor: float) -> float:
        return round(price.cost(input_tokens=int(stage["input_tokens"] * factor),
                                output_tokens=int(stage["output_tokens"] * factor) + stage["thinking_tokens"]), 4)

    # low: shorter prompts and replies, no thinking spent; high: longer ones, the whole thinking budget
    low = round(price.cost(input_tokens=int(stage["input_tokens"] * RANGE[0]),
                           output_tokens=int(stage["output_tokens"] * RANGE[0])), 4)
    return {**stage, "cost_usd": cost(1.0), "cost_usd_range": [low, cost(RANGE[1])]}


def thinking_of(part, task: str) -> int:
    """The thinking budget the part's LLM spends per call of `task` (AnthropicLLM.thinking; else none)."""
    return getattr(getattr(part, "llm", None), "thinking", {}).get(task, 0)


def estimate_extraction(db: Database, tenant: str, levels: list[AccessLevel], extractor: Extractor) -> dict:
    """Chunks still to extract (not in the cache) for these levels, and what the LLM calls would cost."""
    hashes: dict[str, tuple[str, int]] = {}
    with db.connection() as conn:
        for level in levels:
            for chunk in store.level_chunks(conn, tenant, level.groups):
                hashes[chunk.content_hash] = (chunk.lang, len(chunk.text))
        cached = store.cached_extractions(conn, list(hashes), extractor.name, extractor.version, extractor.model)
    todo = {h: v for h, v in hashes.items() if h not in cached}
    rounds = 1 + getattr(extractor, "gleanings", 0)
    chars: dict[str, int] = {}
    for lang, n in todo.values():
        chars[lang] = chars.get(lang, 0) + n * rounds
    calls = len(todo) * rounds if extractor.model else 0
    stage = {"calls": calls, "input_tokens": calls * EXTRACT_PROMPT_TOKENS + _text_tokens(chars) if calls else 0,
             "output_tokens": calls * EXTRACT_OUTPUT_TOKENS}
    return {"chunks": len(hashes), "to_extract": len(todo), **priced(stage, extractor.model, thinking_of(extractor, "fast")),
            "model": extractor.model}


# Summary calls: the system prompt and wrapper (~1,100 characters / 4), the descriptions (chars / 3
# as for chunks), and out a description of at most 150 words (~200 tokens in English, more in Russian).
SUMMARY_PROMPT_TOKENS = 300
SUMMARY_OUTPUT_TOKENS = 250
# Entities needing a summary per chunk still to extract, when the tenant has too few extracted chunks
# to measure it (MIN_CHUNKS_TO_MEASURE): a guess, one recurring long-described entity per chunk.
SUMMARIES_PER_NEW_CHUNK = 1.0
NEW_SUMMARY_INPUT_CHARS = 600
MIN_CHUNKS_TO_MEASURE = 20


def estimate_summaries(
    db: Database, tenant: str, levels: list[AccessLevel], extractor: Extractor,
    summarizer: DescriptionSummarizer | None, min_chars: int = SUMMARY_MIN_CHARS,
) -> dict:
    """Summary calls the next build may make: an estimate, not a bound.

    Exact for chunks already extracted, but before resolution (an entity that resolution merges is
    counted as its unmerged parts, whose summaries may be cached under the merged name: counted, not
    made). For chunks still to extract, the rate of summaries per extracted chunk measured on this
    tenant, or SUMMARIES_PER_NEW_CHUNK before there is enough to measure."""
    if summarizer is None:
        return {"cached": 0, **priced({"calls": 0, "input_tokens": 0, "output_tokens": 0}, ""), "model": ""}

    with db.connection() as conn:
        per_level = [store.level_chunks(conn, tenant, lvl.groups) for lvl in levels if lvl.groups]
        hashes = sorted({c.content_hash for chunks in per_level for c in chunks})
        extractions = store.cached_extractions(conn, hashes, extractor.name, extractor.version, extractor.model)
    requests: dict[str, SummaryRequest] = {}
    pair_requests: dict[str, RelationshipSummaryRequest] = {}
    measured = new_chunks = 0
    extracted_chunks = 0
    for chunks in per_level:
        done = [c for c in chunks if c.content_hash in extractions]
        new_chunks += len(chunks) - len(done)
        entities, relationships, descriptions, pair_descriptions = assemble_with_descriptions(
            (c, extractions[c.content_hash]) for c in done)
        entities, relationships = drop_entities(entities, relationships,
                                                prune_entities(entities, total_chunks=len(chunks)))
        found, found_pairs = level_summary_requests(entities, relationships, descriptions, pair_descriptions,
                                                    min_chars)
        measured += len(found) + len(found_pairs)
        extracted_chunks += len(done)
        requests.update((r.content_hash, r) for r in found)
        pair_requests.update((r.content_hash, r) for r in found_pairs)
    with db.connection() as conn:
        cached = store.cached_summaries(conn, sorted(requests), summarizer.name, summarizer.version, summarizer.model)
        cached_pairs = store.cached_summaries(conn, sorted(pair_requests), summarizer.name,
                                              summarizer.relationship_version, summarizer.model)
    todo = [r for h, r in requests.items() if h not in cached]
    todo += [r for h, r in pair_requests.items() if h not in cached_pairs]
    rate = measured / extracted_chunks if extracted_chunks >= MIN_CHUNKS_TO_MEASURE else SUMMARIES_PER_NEW_CHUNK
    new_calls = math.ceil(new_chunks * rate)
    calls = len(todo) + new_calls
    input_tokens = (calls * SUMMARY_PROMPT_TOKENS + sum(len(" ".join(r.descriptions)) for r in todo) // 3
                    + new_calls * NEW_SUMMARY_INPUT_CHARS // 3)
    output_tokens = calls * SUMMARY_OUTPUT_TOKENS
    stage = priced({"calls": calls, "input_tokens": input_tokens, "output_tokens": output_tokens}, summarizer.model,
                   thinking_of(summarizer, "fast"))
    return {"cached": len(requests) + len(pair_requests) - len(todo), **stage, "model": summarizer.model}


# Report calls. A call sends the system prompt and tool schema plus a context of at most the
# reporter's budget, so the input estimate is an upper bound (leaf communities of a few entities use
# far less); out comes a 5-10 finding report.
REPORT_PROMPT_TOKENS = 900  # system prompt + tool schema ~530 by chars/4, plus the API's tool-use preamble
REPORT_OUTPUT_TOKENS = 1500
# Before the first build there are no communities to count. GraphRAG's paper built ~2,700 communities
# (all levels, max cluster size 10) from its podcast corpus of 1,669 chunks of 600 tokens: about one
# per 375 tokens of text, i.e. per ~1,500 characters.
CHARS_PER_COMMUNITY = 1500


def communities_to_report(db: Database, tenant: str, levels: list[AccessLevel], model: str, changed: bool) -> int:
    """Reports the next build may (re)write: every previous community when chunks changed (which ones a
    change reaches is known only after clustering), else those without a report by `model`; for a level
    never built, a guess from its text size. A change by deletion alone is not seen here (no extraction
    is pending), so that rebuild's report calls are underestimated."""
    total = 0
    with db.connection() as conn:
        for level in levels:
            if not level.groups:
                continue
            communities = store.load_communities(conn, tenant, level.name)
            if not communities:
                chars = sum(len(c.text) for c in store.level_chunks(conn, tenant, level.groups))
                total += -(-chars // CHARS_PER_COMMUNITY)
            elif changed:
                total += len(communities)
            else:
                reports = store.report_input_hashes(conn, tenant, level.name)
                total += sum(1 for c in communities if reports.get(c.id, ("", ""))[1] != model)
    return total


def estimate_reports(n_communities: int, model: str, max_context_tokens: int = 8000, thinking: int = 0) -> dict:
    """What `n_communities` LLM report calls would cost at most (no call for the offline reporter)."""
    calls = n_communities if model else 0
    stage = {"calls": calls, "input_tokens": calls * (REPORT_PROMPT_TOKENS + max_context_tokens),
             "output_tokens": calls * REPORT_OUTPUT_TOKENS}
    return {**priced(stage, model, thinking), "model": model}


def estimate_build(db: Database, tenant: str, levels: list[AccessLevel], extractor: Extractor, reporter,
                   summarizer: DescriptionSummarizer | None, summary_min_chars: int = SUMMARY_MIN_CHARS) -> dict:
    """Extraction, summary and report estimates and their total `cost_usd` (0 offline)."""
    extraction = estimate_extraction(db, tenant, levels, extractor)
    summaries = estimate_summaries(db, tenant, levels, extractor, summarizer, summary_min_chars)
    # Communities exist only after clustering: counted from the previous build (communities_to_report).
    # New summaries change descriptions, hence reports: counted as a change when none is cached yet
    # (summaries just switched on, or their prompt or model changed); the few left to make otherwise
    # (failed last time, or counted before resolution, see estimate_summaries) are not.
    changed = extraction["to_extract"] > 0 or (summaries["calls"] > 0 and summaries["cached"] == 0)
    to_report = communities_to_report(db, tenant, levels, reporter.model, changed) if reporter.model else 0
    reports = estimate_reports(to_report, reporter.model, thinking=thinking_of(reporter, "answer"))
    parts = (extraction, summaries, reports)
    unknown = any(p["cost_usd"] is None for p in parts)  # a partial sum would read as the whole cost
    return {**extraction, "extraction_cost_usd": extraction["cost_usd"], "summaries": summaries, "reports": reports,
            "cost_usd": None if unknown else round(sum(p["cost_usd"] for p in parts), 4),
            "cost_usd_range": None if unknown else [round(sum(p["cost_usd_range"][i] for p in parts), 4)
                                                    for i in (0, 1)]}
