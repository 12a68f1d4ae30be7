"""`crossroads graph build`: extraction -> graph -> resolution -> (description summaries) -> communities
-> reports, per access level.

A thin runner around pure steps, tracked as a job. Every expensive result is kept where a re-run
finds it: extractions in a cache keyed by chunk text (shared by all levels), entity and relationship
description summaries in the same cache keyed by their inputs, reports keyed by a hash of their inputs. So a
second run after no change makes no LLM call, a changed document re-extracts only its changed
chunks, and only the entities and communities whose inputs changed are re-summarised / re-reported.

Claims extracted with the entities (LLMExtractor(with_claims=True)) reach the community reports:
each community's members' claims go to the reporter and into the report's input hash.
"""
from __future__ import annotations

import logging
import time
from dataclasses import asdict
from itertools import groupby
from typing import Callable, Mapping, Sequence

from core import jobs
from core.llm.batches import BatchLLM, Collector
from core.database import Database
from core.embeddings import Embedder
from core.errors import JobStoppedError
from core.llm.limiter import concurrency_of
from graph import retrieval_store, store
from graph.indexing.assemble import assemble_with_descriptions, drop_entities, gather_claims
from graph.types import Community
from graph.indexing.communities import detect_communities, match_communities, membership_hash, relabel
from graph.indexing.extract_offline import prune_entities
from graph.indexing.contracts import BuildSettings, LevelGraph, LevelReport, Reporter
from graph.indexing.job_progress import JobProgress, Progress, not_cached
from graph.indexing.calibration import save_call_stats
from graph.indexing.parts import step_pool
from graph.levels import AccessLevel, levels_to_build
from graph.status import BUILD_KIND
from graph.indexing.reports import community_claims, community_inputs, input_chunk_ids, input_hash
from graph.indexing.resolve import merge_descriptions, merge_relationship_descriptions, resolve
from graph.indexing.summarize import DescriptionSummarizer
from graph.indexing.summary_step import summarize_descriptions
from graph.types import ChunkInput, Extraction, Extractor, GraphClaim, GraphEntity, GraphRelationship

log = logging.getLogger(__name__)


def _timed(report: LevelReport, stage: str, started: float) -> float:
    now = time.perf_counter()
    report.seconds[stage] = round(now - started, 3)
    return now


def extract_missing(
    db: Database, chunks: list[ChunkInput], extractor: Extractor, concurrency: int, report: LevelReport,
    progress: Progress | None,
) -> dict[str, Extraction]:
    """Extractions for every distinct chunk text, computing (and caching) only those not cached yet."""
    hashes = sorted({c.content_hash for c in chunks})
    with db.connection() as conn:
        found = store.cached_extractions(conn, hashes, extractor.name, extractor.version, extractor.model)
    report.extraction_cached = len(found)
    todo = not_cached(chunks, found)
    if progress:
        progress("extract", 0, len(todo))

    def run(chunk: ChunkInput) -> tuple[str, Extraction]:
        extraction = extractor.extract(chunk)
        if not extraction.failed:  # a failure is no result: the next build extracts the chunk again
            with db.connection() as conn:  # saved one by one: an interrupted build resumes where it stopped
                store.save_extraction(conn, chunk.content_hash, extractor.name, extractor.version, extractor.model,
                                      extraction)
        return chunk.content_hash, extraction

    workers = concurrency if extractor.model else 1  # offline extraction is CPU-bound: threads do not help
    with step_pool(extractor, workers, "extraction") as pool:
        for n, (content_hash, extraction) in enumerate(pool.map(run, todo.values()), start=1):
            found[content_hash] = extraction  # a failed one still gives this build what it kept
            if extraction.failed:
                report.extraction_errors += 1
                report.record_failure("extract", "; ".join(extraction.errors), refused=extraction.refused)
            if progress:
                progress("extract", n, len(todo))
    report.extracted = len(todo)
    return found


def _workers(settings: BuildSettings, part: object) -> int:
    """Threads for a step's calls: the build's setting, else what the part's LLM takes at once."""
    return settings.concurrency or concurrency_of(getattr(part, "llm", None))


def assemble_level(
    chunks: list[ChunkInput], extractions: dict[str, Extraction], embed, threshold: float, report: LevelReport
) -> LevelGraph:
    pairs = [(c, extractions[c.content_hash]) for c in chunks]
    entities, relationships, descriptions, pair_descriptions = assemble_with_descriptions(pairs)
    noise = prune_entities(entities, total_chunks=len(chunks))
    entities, relationships = drop_entities(entities, relationships, noise)
    entities, relationships, merges = resolve(entities, relationships, embed, threshold)
    keys = [e.key for e in entities]
    claims = gather_claims(pairs, merges, keys)
    report.merged_entities = len(merges)
    report.entities, report.relationships = len(entities), len(relationships)
    report.claims = sum(map(len, claims.values()))
    return LevelGraph(entities, relationships, merge_descriptions(descriptions, merges, keys), claims, merges,
                      merge_relationship_descriptions(pair_descriptions, merges,
                                                      [(r.source_key, r.target_key) for r in relationships]))


def build_level_graph(
    chunks: list[ChunkInput], extractions: dict[str, Extraction], embed, threshold: float, report: LevelReport
) -> tuple[list[GraphEntity], list[GraphRelationship]]:
    graph = assemble_level(chunks, extractions, embed, threshold, report)
    return graph.entities, graph.relationships


def cluster(
    old: list[Community], relationships: list[GraphRelationship], settings: BuildSettings
) -> list[Community]:
    edges = [(r.source_key, r.target_key, float(r.weight)) for r in relationships]
    fresh = detect_communities(edges, max_cluster_size=settings.max_cluster_size, seed=settings.seed,
                               iterations=settings.iterations)
    return relabel(fresh, match_communities(old, fresh))


def report_communities(
    db: Database, tenant: str, level: str, communities: list[Community], entities: list[GraphEntity],
    relationships: list[GraphRelationship], reporter: Reporter, report: LevelReport, progress: Progress | None,
    claims: Mapping[str, Sequence[GraphClaim]] | None = None, concurrency: int = 1,
) -> None:
    """Bottom-up, so a parent's report can lean on its children's; unchanged inputs keep their report
    (a withdrawn one is not kept: graph.store.report_input_hashes leaves it out).
    `claims`: entity key -> its claims (LevelGraph.claims); each report gets its members' claims."""
    by_key = {e.key: e for e in entities}
    with db.connection() as conn:
        stored = store.report_input_hashes(conn, tenant, level)
        # Kept reports of children are passed too, not only re-written ones: a parent re-reported
        # because one child changed still leans on all its children (each with "id" and "members").
        written: dict[int, dict] = {r["id"]: r for r in store.list_reports(conn, tenant, level)}
    ordered = sorted(communities, key=lambda c: (-c.level, c.id))
    n = 0
    # One hierarchy level at a time, deepest first: a report leans only on its children's, one level
    # deeper, so the reports of one level are written concurrently and stored in id order.
    for _, tier in groupby(ordered, key=lambda c: c.level):
        plans = []
        for community in tier:
            ents, rels = community_inputs(community, by_key, relationships)
            members_claims = community_claims(community, claims or {})
            digest = input_hash(ents, rels, members_claims, reporter.recipe)
            sources = input_chunk_ids(ents, rels, members_claims)
            kept = stored.get(community.id)
            fresh = not (kept and (kept.input_hash, kept.model) == (digest, reporter.model)
                         and sources <= set(kept.input_chunk_ids))
            plans.append((community, ents, rels, members_claims, digest, sources, fresh))

        def write(plan) -> dict:
            community, ents, rels, members_claims = plan[:4]
            subs = [written[c] for c in community.children if c in written]
            return reporter.report(community, ents, rels, subs, members_claims)

        with step_pool(reporter, concurrency, "reports") as pool:  # with batches: one per hierarchy level
            results = pool.map(write, [p for p in plans if p[-1]])
            for community, ents, rels, members_claims, digest, sources, fresh in plans:
                n += 1
                _store_report(db, tenant, level, community, next(results) if fresh else None, digest, sources,
                              reporter, written, report)
                if progress:
                    progress("reports", n, len(ordered))


def _store_report(db: Database, tenant: str, level: str, community: Community, result: dict | None, digest: str,
                  sources: set[int], reporter: Reporter, written: dict[int, dict], report: LevelReport) -> None:
    """Record one community's report: `result` None when the stored one is kept."""
    if result is None:
        report.reports_kept += 1
        return
    written[community.id] = {**result, "id": community.id, "members": list(community.members)}
    # A fallback (offline) report is stored as offline (model ""), so the next build retries the LLM.
    model = "" if result.get("fallback") else reporter.model
    if result.get("fallback"):
        report.report_fallbacks += 1
        report.record_failure("reports", f"community {community.id}: {result.get('error', 'LLM report failed')}",
                              refused=bool(result.get("refused")))
    with db.connection() as conn:
        store.upsert_report(conn, tenant, level, community.id, result, digest, model,
                            sorted(sources | set(result["source_chunk_ids"])))
    report.reports_generated += 1


def embed_reports(db: Database, tenant: str, level: str, embedder: Embedder) -> int:
    """Vectors for reports written (or re-written) since the last build; global search ranks with them."""
    with db.connection() as conn:
        missing = store.reports_missing_embedding(conn, tenant, level, embedder.model_id)
    if missing:
        vectors = embedder.embed_documents([text for _, text in missing])
        with db.connection() as conn:
            store.save_report_embeddings(conn, tenant, level, embedder.model_id,
                                         {cid: v for (cid, _), v in zip(missing, vectors)})
    return len(missing)


def embed_entities(db: Database, tenant: str, level: str, embedder: Embedder) -> int:
    """Vectors of the level's entities whose text is new or changed since their last vector; the
    graph retrieval (graph/query/graph_search.py) links a question to entities by meaning with them."""
    with db.connection() as conn:
        retrieval_store.reuse_entity_vectors(conn, tenant, level, embedder.model_id)
        missing = retrieval_store.entities_missing_vectors(conn, tenant, level, embedder.model_id)
    vectors = embedder.embed_documents([text for _, text, _ in missing]) if missing else []
    with db.connection() as conn:  # also run with nothing missing: it drops vectors of entities gone
        retrieval_store.save_entity_vectors(conn, tenant, level, embedder.model_id,
                                  [(key, digest, v) for (key, _, digest), v in zip(missing, vectors)])
    return len(missing)


def build_level(
    db: Database, tenant: str, level: AccessLevel, extractor: Extractor, reporter: Reporter,
    embedder: Embedder | None, settings: BuildSettings, progress: Progress | None = None,
    summarizer: DescriptionSummarizer | None = None,
) -> LevelReport:
    """`summarizer`: None keeps every entity's central-sentences description (no LLM). A level with no
    chunk to read (all deleted, or `all` of a tenant without documents) has its graph cleared."""
    report = LevelReport(level.name, list(level.groups))
    started = time.perf_counter()
    with db.connection() as conn:
        chunks = store.level_chunks(conn, tenant, level.groups)
        if not chunks:
            store.clear_level_graph(conn, tenant, level.name)
            _timed(report, "graph", started)
            return report
    report.chunks = len(chunks)
    extractions = extract_missing(db, chunks, extractor, _workers(settings, extractor), report, progress)
    started = _timed(report, "extract", started)

    embed = embedder.embed_documents if embedder else None
    if progress:  # the stages without a count are named as they start: a bar never sits on the last one's total
        progress("resolve", 0, 0)
    graph = assemble_level(chunks, extractions, embed, settings.resolution_threshold, report)
    entities, relationships = graph.entities, graph.relationships
    stage = "graph"
    if summarizer is not None:
        started, stage = _timed(report, "graph", started), "summaries"
        entities, relationships = summarize_descriptions(db, graph, summarizer, _workers(settings, summarizer),
                                                         settings.summary_min_chars, report, progress)
    with db.connection() as conn:
        store.replace_graph(conn, tenant, level.name, entities, relationships)
    started = _timed(report, stage, started)

    if progress:
        progress("communities", 0, 0)
    with db.connection() as conn:
        old = store.load_communities(conn, tenant, level.name)
    communities = cluster(old, relationships, settings)
    with db.connection() as conn:
        store.replace_communities(conn, tenant, level.name, communities, {c.id: membership_hash(c) for c in communities})
    report.communities = len(communities)
    for c in communities:
        report.communities_per_level[c.level] = report.communities_per_level.get(c.level, 0) + 1
    started = _timed(report, "communities", started)

    report_communities(db, tenant, level.name, communities, entities, relationships, reporter, report, progress,
                       graph.claims, _workers(settings, reporter))
    if embedder is not None:
        if progress:
            progress("embed", 0, 0)
        embed_reports(db, tenant, level.name, embedder)
        if settings.entity_vectors:
            embed_entities(db, tenant, level.name, embedder)
    _timed(report, "reports", started)
    return report


def create_build_job(db: Database, tenant: str, level_name: str | None, extractor: Extractor, reporter: Reporter,
                     summarizer: DescriptionSummarizer | None = None) -> int:
    """The job row of a build about to run (checked first: an unknown level raises, leaving no row).
    Raises `JobRunningError` while another build of the tenant is alive, in any process."""
    with db.connection() as conn:
        levels_to_build(store.list_levels(conn, tenant), level_name, tenant)
        params = {"level": level_name, "extractor": extractor.name, "model": extractor.model or reporter.model}
        if summarizer is not None:
            params["summarizer"] = summarizer.name
        if isinstance(getattr(extractor, "llm", None), BatchLLM):
            params["batch"] = True
        return jobs.create_job(conn, BUILD_KIND, tenant, params, db.job_lease_s)


def build_graph(
    db: Database, tenant: str, level_name: str | None, extractor: Extractor, reporter: Reporter,
    embedder: Embedder | None, settings: BuildSettings, progress: Progress | None = None,
    usage: Callable[[], dict] | None = None, summarizer: DescriptionSummarizer | None = None,
    job_id: int | None = None,
) -> dict:
    """Build one level (or all of them) as a job; returns the job's final record. `job_id`: a row made
    by `create_build_job` (the API hands its id out before the build starts); else one is made here.
    A heartbeat keeps the job's lease while it runs (core.jobs), however long a stage goes without progress.
    A cancel request stops it at its next progress step, recorded `cancelled` (JobStoppedError raised);
    so does finding its row no longer running (failed as abandoned meanwhile), without writing to it."""
    if job_id is None:
        job_id = create_build_job(db, tenant, level_name, extractor, reporter, summarizer)
    batch = getattr(extractor, "llm", None)
    batch = batch if isinstance(batch, Collector) else None
    if batch is not None:  # its waits stop on this job's cancel, and its batches are recorded as this job's
        batch.job_id = job_id
    results, reports = [], []
    with jobs.heartbeat(db, job_id, every_s=db.job_lease_s / jobs.HEARTBEATS_PER_LEASE) as watch:
        tracked = JobProgress(db, job_id, progress, watch)
        try:
            with db.connection() as conn:
                levels = store.list_levels(conn, tenant)
            for level in levels:
                if level_name not in (None, level.name):
                    continue
                with db.connection() as conn:
                    watch.update(conn, stage=f"level {level.name}")
                reports.append(build_level(db, tenant, level, extractor, reporter, embedder, settings, tracked,
                                           summarizer))
                results.append(asdict(reports[-1]))
                with db.connection() as conn:
                    jobs.update_job(conn, job_id, counts={"levels": results}, usage=usage() if usage else {})
        except JobStoppedError as exc:
            # cancelled: recorded here, while the row is still ours; lost: the row is not ours to write
            log.warning("graph build %s of tenant %s stopped: %s", job_id, tenant, exc)
            with db.connection() as conn:
                jobs.update_job(conn, job_id, status="cancelled", counts={"levels": results},
                                errors=[{"error": str(exc)}], usage=usage() if usage else {})
            save_call_stats(db, tenant, extractor)
            raise
        except BaseException as exc:  # Ctrl-C too: failing the row frees the tenant's slot now, not after the lease
            with db.connection() as conn:
                jobs.update_job(conn, job_id, status="failed", errors=[{"error": f"{type(exc).__name__}: {exc}"}],
                                usage=usage() if usage else {})
            save_call_stats(db, tenant, extractor)
            raise
    errors = [failure_summary(tenant, r) for r in reports if r.failed]
    status = "partial" if errors else "done"
    with db.connection() as conn:
        jobs.update_job(conn, job_id, status=status, stage=status, errors=errors, usage=usage() if usage else {})
        job = jobs.get_job(conn, job_id, db.job_lease_s)
    save_call_stats(db, tenant, extractor)  # the parts share one LLM: its measurements, for the next estimate
    if batch is not None:
        batch.finish()
    return job


def failure_summary(tenant: str, report: LevelReport) -> dict:
    """The job error of a level whose build left something undone (status `partial`)."""
    parts = [f"{n} {what}" for n, what in ((report.extraction_errors, "chunk extractions"),
                                           (report.summary_errors, "description summaries"),
                                           (report.report_fallbacks, "community reports (offline report instead)"))
             if n]
    refused = sum(report.refusals.values())
    why = f" ({refused} refused by the model)" if refused else ""
    return {"level": report.level, "error": f"level {report.level}: {', '.join(parts)} failed{why}; nothing failed "
            f"was cached: run `crossroads graph build --tenant {tenant} --level {report.level}` again to retry exactly "
            "those (first failures in counts.levels[].failures)"}
