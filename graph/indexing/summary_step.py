"""The build's description-summary step: a thin runner around graph.indexing.summarize.

Entities, then relationships, whose descriptions need a summary (graph.indexing.summarize) get the LLM's,
cached in `extraction_cache` keyed by their inputs like extractions; the rest, and any whose
summary fails, keep their central sentences. Keys, names, weights, chunk ids and degrees never
change. A failure is counted, logged and not cached: the next build retries it.
"""
from __future__ import annotations

import logging
from dataclasses import replace
from typing import Callable

from core.database import Database
from core.llm.errors import LLMError, RefusedError
from graph import store
from graph.indexing.contracts import LevelGraph, LevelReport
from graph.indexing.job_progress import Progress, not_cached
from graph.indexing.parts import step_pool
from graph.indexing.summarize import DescriptionSummarizer, level_summary_requests
from graph.types import GraphEntity, GraphRelationship


log = logging.getLogger(__name__)


def summarize_descriptions(
    db: Database, graph: LevelGraph, summarizer: DescriptionSummarizer, concurrency: int, min_chars: int,
    report: LevelReport, progress: Progress | None,
) -> tuple[list[GraphEntity], list[GraphRelationship]]:
    """The level's entities and relationships, each with the LLM's summary where one is needed."""
    entity_requests, pair_requests = level_summary_requests(graph.entities, graph.relationships, graph.descriptions,
                                                            graph.relationship_descriptions, min_chars)
    jobs = [
        (entity_requests, summarizer.version, lambda r: summarizer.summarize(r.name, r.type, list(r.descriptions)),
         lambda r: f"entity {r.key!r}"),
        (pair_requests, summarizer.relationship_version,
         lambda r: summarizer.summarize_relationship(r.source, r.target, list(r.descriptions)),
         lambda r: f"relationship {r.source!r} - {r.target!r}"),
    ]
    with db.connection() as conn:
        found = [store.cached_summaries(conn, sorted({r.content_hash for r in requests}), summarizer.name, version,
                                        summarizer.model) if requests else {}
                 for requests, version, _, _ in jobs]
    todo = [list(not_cached(requests, cached).values()) for (requests, _, _, _), cached in zip(jobs, found)]
    report.summaries_cached = sum(1 for (requests, *_), cached in zip(jobs, found)
                                  for r in requests if r.content_hash in cached)
    total, done = sum(map(len, todo)), 0
    if progress and total:
        progress("summaries", 0, total)
    for (_, version, call, what), pending, cached in zip(jobs, todo, found):
        for request, summary, failure in _run(db, pending, summarizer, version, call, what, concurrency):
            done += 1
            if summary is None:
                report.summary_errors += 1
                report.record_failure("summaries", f"{what(request)}: summary failed: {failure}",
                                      refused=isinstance(failure, RefusedError))
            else:
                cached[request.content_hash] = summary
                report.summaries_computed += 1
            if progress:
                progress("summaries", done, total)
    entity_summaries = {r.key: found[0][r.content_hash] for r in entity_requests if r.content_hash in found[0]}
    pair_summaries = {r.pair: found[1][r.content_hash] for r in pair_requests if r.content_hash in found[1]}
    entities = [replace(e, description=entity_summaries[e.key]) if e.key in entity_summaries else e
                for e in graph.entities]
    relationships = [replace(r, description=pair_summaries[(r.source_key, r.target_key)])
                     if (r.source_key, r.target_key) in pair_summaries else r for r in graph.relationships]
    return entities, relationships


def _run(db: Database, pending: list, summarizer: DescriptionSummarizer, version: str, call: Callable,
         what: Callable, concurrency: int):
    """(request, summary, None) per request, each saved as soon as it is made, or (request, None, the
    error) when it failed: not saved, so the next build asks again."""

    def one(request) -> tuple[object, str | None, Exception | None]:
        try:
            summary = call(request)
        except LLMError as err:  # refused, malformed, cut twice or the API failed: central sentences are kept
            log.warning("%s: description summary failed (%s); kept the central sentences", what(request), err)
            return request, None, err
        with db.connection() as conn:  # saved one by one: an interrupted build resumes where it stopped
            store.save_summary(conn, request.content_hash, summarizer.name, version, summarizer.model, summary)
        return request, summary, None

    with step_pool(summarizer, max(1, concurrency), "summaries") as pool:
        yield from pool.map(one, pending)
