"""What a graph build would cost before it runs: LLM calls, tokens and dollars per stage, each with its range.

`crossroads graph build` and `POST /v1/jobs/graph-build` print / return `estimate_build` and refuse
to start above `max_cost`. Every figure is an estimate from cached state and prompt sizes: measured on
the tenant's earlier calls (graph.indexing.calibration: characters per token by language, output tokens
per call, the instructions' size) once enough were made, else the defaults below, whose range is the
DEFAULT_BAND. A measured prompt is the stage's measured instructions plus the text it is about (chunks,
descriptions), priced at the measured characters per token of whole prompts in that language.
"""
from __future__ import annotations

import math

from core.database import Database
from core.llm.stats import CHARS_PER_TOKEN
from graph import store
from graph.indexing.assemble import assemble_with_descriptions, drop_entities
from graph.indexing.calibration import Calibration, Measured
from graph.indexing.extract_offline import prune_entities
from graph.levels import AccessLevel
from graph.prompts import chunk_message
from graph.indexing.summarize import (SUMMARY_MIN_CHARS, DescriptionSummarizer, RelationshipSummaryRequest, SummaryRequest,
                             level_summary_requests)
from graph.types import Extractor

# Rough per-call sizes for the estimate printed before any LLM work (measured prompts, see docs/benchmarks.md).
EXTRACT_PROMPT_TOKENS = 1500
EXTRACT_OUTPUT_TOKENS = 600
# Characters per token of chunk text by language (core.llm.stats.CHARS_PER_TOKEN) are replaced by what
# the API's `usage` measured once calls were recorded (graph.indexing.calibration).
# An uncalibrated figure is a point in this range: replies run shorter than their budget and prompts
# vary. A measured one gets one spread of single calls either side (calibration.Measured.band).
DEFAULT_BAND = (0.6, 1.5)


def _measured_lang(chunk_lang: str) -> str:
    """The language calls are measured under (core.llm.stats.language_of, by script) for a chunk's language."""
    return "russian" if chunk_lang == "russian" else "english"


def _scaled(tokens: float, measured: Measured | None) -> tuple[float, float, float]:
    """(point, low, high) of a token count: a measured ratio's band, else the default one."""
    low, high = measured.band() if measured else DEFAULT_BAND
    return tokens, tokens * low, tokens * high


def _per_token(chars: float, measured: Measured) -> tuple[float, float, float]:
    """(point, low, high) tokens of `chars` at a measured characters-per-token ratio and its spread."""
    low, high = measured.band()
    return chars / measured.value, chars / (measured.value * high), chars / (measured.value * low)


def tokens_stage(calls: int, inputs: list[tuple[float, float, float]], output: tuple[float, float, float],
                 measured: dict[str, int], guessed: int = 0) -> dict:
    """A stage's calls and tokens, point and [low, high], from (point, low, high) parts; `measured`: how many
    recorded calls back the input and output figures (absent: the defaults). `guessed`: how many of the calls
    are a guess (work whose size is known only once earlier stages ran): the count gets the DEFAULT_BAND too,
    and the token ranges with it."""
    low_calls, high_calls = (calls - guessed + guessed * f for f in DEFAULT_BAND)
    low, high = (low_calls / calls, high_calls / calls) if calls else (1.0, 1.0)
    return {"calls": calls, "calls_range": [math.floor(low_calls), math.ceil(high_calls)],
            "input_tokens": int(sum(p for p, _, _ in inputs)),
            "input_tokens_range": [int(sum(lo for _, lo, _ in inputs) * low), int(sum(hi for _, _, hi in inputs) * high)],
            "output_tokens": int(output[0]), "output_tokens_range": [int(output[1] * low), int(output[2] * high)],
            "measured_calls": measured}


def _output(calibration: Calibration, model: str, stage: str, thinking: int, calls: int,
            default_per_call: int, measured: dict[str, int]) -> tuple[tuple[float, float, float], int]:
    """Output tokens (point, low, high) of `calls` calls, and the thinking budget still to add: none when
    measured, since the API bills thinking as output and the calls were measured with this budget."""
    per_call = calibration.output_per_call(model, stage, thinking)
    if per_call is None:
        return _scaled(calls * default_per_call, None), thinking
    measured["output"] = per_call.calls
    return _scaled(calls * per_call.value, per_call), 0


def priced(stage: dict, model: str, thinking: int = 0) -> dict:
    """`stage` (calls, input_tokens, output_tokens, optionally their ranges) with the thinking budget counted as
    output (at most what is spent), `cost_usd` (None for a model with no known price) and `cost_usd_range`
    [low, high]: low with the low token counts and no thinking spent, high with the high ones and all of it."""
    from core.llm.pricing import price_of

    stage = {"calls_range": [stage["calls"], stage["calls"]],
             "input_tokens_range": [int(stage["input_tokens"] * f) for f in DEFAULT_BAND],
             "output_tokens_range": [int(stage["output_tokens"] * f) for f in DEFAULT_BAND],
             "measured_calls": {}, **stage, "thinking_tokens": stage["calls"] * thinking}
    price = price_of(model) if model and stage["calls"] else None
    if not (model and stage["calls"]):
        return {**stage, "cost_usd": 0.0, "cost_usd_range": [0.0, 0.0]}
    if price is None:
        return {**stage, "cost_usd": None, "cost_usd_range": None}

    def cost(input_tokens: int, output_tokens: int) -> float:
        return round(price.cost(input_tokens=input_tokens, output_tokens=output_tokens), 4)

    (in_low, in_high), (out_low, out_high) = stage["input_tokens_range"], stage["output_tokens_range"]
    return {**stage, "cost_usd": cost(stage["input_tokens"], stage["output_tokens"] + stage["thinking_tokens"]),
            "cost_usd_range": [cost(in_low, out_low), cost(in_high, out_high + stage["thinking_tokens"])]}


def thinking_for(part, stage: str) -> int:
    """The thinking budget the part's LLM gives each call of `stage` (CROSSROADS_LLM_THINKING; 0 offline)."""
    llm = getattr(part, "llm", None)
    return llm.thinking_budget(stage, part.model) if llm is not None and part.model else 0


def estimate_extraction(db: Database, tenant: str, levels: list[AccessLevel], extractor: Extractor,
                        calibration: Calibration | None = None) -> dict:
    """Chunks still to extract (not in the cache) for these levels, and what the LLM calls would cost."""
    calibration = calibration or Calibration({})
    hashes: dict[str, tuple[str, int, int]] = {}  # content hash -> language, text and message characters
    with db.connection() as conn:
        for level in levels:
            for chunk in store.level_chunks(conn, tenant, level.groups):
                hashes[chunk.content_hash] = (chunk.lang, len(chunk.text), len(chunk_message(chunk)))
        cached = store.cached_extractions(conn, list(hashes), extractor.name, extractor.version, extractor.model)
    todo = {h: v for h, v in hashes.items() if h not in cached}
    model = extractor.model
    rounds = 1 + getattr(extractor, "gleanings", 0)
    calls = len(todo) * rounds if model else 0
    by_lang: dict[str, list[int]] = {}  # language -> [calls, characters of chunk text, of the messages sent]
    for lang, text_chars, message_chars in todo.values():
        sums = by_lang.setdefault(lang, [0, 0, 0])
        sums[0] += rounds
        sums[1] += text_chars * rounds
        sums[2] += message_chars * rounds
    inputs, measured = [], {}
    for lang, (lang_calls, chars, message_chars) in sorted(by_lang.items()) if calls else ():
        ratio = calibration.chars_per_token(model, "extraction", _measured_lang(lang))
        if ratio is None:
            inputs.append(_scaled(lang_calls * EXTRACT_PROMPT_TOKENS + chars / CHARS_PER_TOKEN.get(lang, 3.0), None))
        else:  # the prompt as sent: the measured instructions and each chunk's message (text, title, tags)
            measured[f"input_{_measured_lang(lang)}"] = ratio.calls
            instructions = lang_calls * calibration.instructions_chars(model, "extraction")
            inputs.append(_per_token(instructions + message_chars, ratio))
    thinking = thinking_for(extractor, "extraction")
    output, thinking = _output(calibration, model, "extraction", thinking, calls, EXTRACT_OUTPUT_TOKENS, measured)
    stage = tokens_stage(calls, inputs, output, measured)
    return {"chunks": len(hashes), "to_extract": len(todo), **priced(stage, model, thinking), "model": model}


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
    calibration: Calibration | None = None,
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
    chars = sum(len(" ".join(r.descriptions)) for r in todo) + new_calls * NEW_SUMMARY_INPUT_CHARS
    calibration, model, measured = calibration or Calibration({}), summarizer.model, {}
    # descriptions mix the chunks' languages: the ratio measured over summary calls in every language
    ratio = calibration.chars_per_token(model, "summaries") if calls else None
    if ratio is None:
        inputs = [_scaled(calls * SUMMARY_PROMPT_TOKENS + chars / 3, None)]
    else:
        measured["input"] = ratio.calls
        inputs = [_per_token(calls * calibration.instructions_chars(model, "summaries") + chars, ratio)]
    output, thinking = _output(calibration, model, "summaries", thinking_for(summarizer, "summaries"), calls,
                               SUMMARY_OUTPUT_TOKENS, measured)
    stage = priced(tokens_stage(calls, inputs, output, measured, guessed=new_calls), model, thinking)
    return {"cached": len(requests) + len(pair_requests) - len(todo), **stage, "model": model}


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
    return sum(_communities_to_report(db, tenant, levels, model, changed))


def _communities_to_report(db: Database, tenant: str, levels: list[AccessLevel], model: str,
                           changed: bool) -> tuple[int, int]:
    """communities_to_report as (counted, guessed): the communities of built levels, the guess for the others."""
    total = guessed = 0
    with db.connection() as conn:
        for level in levels:
            if not level.groups:
                continue
            communities = store.load_communities(conn, tenant, level.name)
            if not communities:
                chars = sum(len(c.text) for c in store.level_chunks(conn, tenant, level.groups))
                guessed += -(-chars // CHARS_PER_COMMUNITY)
            elif changed:
                total += len(communities)
            else:
                reports = store.report_input_hashes(conn, tenant, level.name)
                total += sum(1 for c in communities if reports.get(c.id, ("", ""))[1] != model)
    return total, guessed


def estimate_reports(n_communities: int, model: str, max_context_tokens: int = 8000, thinking: int = 0,
                     calibration: Calibration | None = None, guessed: int = 0) -> dict:
    """What `n_communities` LLM report calls would cost (no call for the offline reporter): prompts at most the
    reporter's budget, or as large as measured on the tenant's earlier report calls. `guessed`: how many of
    the communities are a guess (levels never built)."""
    calls = n_communities if model else 0
    calibration, measured = calibration or Calibration({}), {}
    per_call = calibration.input_per_call(model, "reports") if calls else None
    if per_call is None:
        inputs = [_scaled(calls * (REPORT_PROMPT_TOKENS + max_context_tokens), None)]
    else:
        measured["input"] = per_call.calls
        inputs = [_scaled(calls * per_call.value, per_call)]
    output, thinking = _output(calibration, model, "reports", thinking, calls, REPORT_OUTPUT_TOKENS, measured)
    stage = tokens_stage(calls, inputs, output, measured, guessed=guessed if model else 0)
    return {**priced(stage, model, thinking), "model": model}


def estimate_build(db: Database, tenant: str, levels: list[AccessLevel], extractor: Extractor, reporter,
                   summarizer: DescriptionSummarizer | None, summary_min_chars: int = SUMMARY_MIN_CHARS) -> dict:
    """Extraction, summary and report estimates and their total `cost_usd` (0 offline), each with its range."""
    with db.connection() as conn:
        calibration = Calibration.load(conn, tenant)
    extraction = estimate_extraction(db, tenant, levels, extractor, calibration)
    summaries = estimate_summaries(db, tenant, levels, extractor, summarizer, summary_min_chars, calibration)
    # Communities exist only after clustering: counted from the previous build (communities_to_report).
    # New summaries change descriptions, hence reports: counted as a change when none is cached yet
    # (summaries just switched on, or their prompt or model changed); the few left to make otherwise
    # (failed last time, or counted before resolution, see estimate_summaries) are not.
    changed = extraction["to_extract"] > 0 or (summaries["calls"] > 0 and summaries["cached"] == 0)
    counted, guessed = _communities_to_report(db, tenant, levels, reporter.model, changed) if reporter.model else (0, 0)
    reports = estimate_reports(counted + guessed, reporter.model, thinking=thinking_for(reporter, "reports"),
                               calibration=calibration, guessed=guessed)
    parts = (extraction, summaries, reports)
    unknown = any(p["cost_usd"] is None for p in parts)  # a partial sum would read as the whole cost
    # the extraction's figures at the top level (as before summaries and reports), its cost renamed: the top
    # level's cost is the whole build's
    return {**extraction, "extraction_cost_usd": extraction["cost_usd"],
            "extraction_cost_usd_range": extraction["cost_usd_range"], "summaries": summaries, "reports": reports,
            "cost_usd": None if unknown else round(sum(p["cost_usd"] for p in parts), 4),
            "cost_usd_range": None if unknown else [round(sum(p["cost_usd_range"][i] for p in parts), 4)
                                                    for i in (0, 1)]}
