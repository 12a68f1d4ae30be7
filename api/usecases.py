"""The use cases both faces run: the CLI (api/cli*.py) and the HTTP routes (api/routes_*.py) parse,
authorise and render; what happens in between is written once, here.

Each function takes what a face already holds (the database, the embedder, the settings, the reader's
groups) and returns typed results the face renders as a table or as JSON.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

from core.database import Database
from core.errors import CrossroadsError
from core.llm import UsageMeter, make_llm
from core.pricing import BATCH_FACTOR
from core.settings import Settings
from graph import store as graph_store
from graph.build.contracts import BuildSettings
from graph.build.estimate import estimate_build
from graph.build import parts as build_parts
from graph.build.parts import GraphPipeline
from graph.build.runner import build_graph
from graph.levels import levels_to_build
from vector import store
from vector.ingest.contextualize import make_contextualizer
from vector.ingest.runner import IngestReport, drop_emptied_indexes, ingest_documents
from vector.ingest.sources import SourceDocument


@dataclass
class Indexed:
    report: IngestReport
    contexts: str  # how chunk contexts were written: the contextualizer's mode


def index_documents(db: Database, embedder, settings: Settings, tenant: str, documents: Sequence[SourceDocument],
                    skipped: Sequence[dict] = (), *, prune: bool = False, progress=None,
                    meter: UsageMeter | None = None) -> Indexed:
    """Index documents as a sync (`crossroads ingest`, PUT and POST /v1/documents): unchanged text costs
    nothing, changed text re-embeds only its changed chunks. `meter` counts the contexts' LLM usage; the
    caller keeps it, so usage is recorded even when indexing fails."""
    contextualizer = make_contextualizer(settings, make_llm(settings, meter if meter is not None else UsageMeter()))
    report = ingest_documents(db, embedder, settings, tenant, list(documents), list(skipped), prune=prune,
                              progress=progress, contextualizer=contextualizer)
    return Indexed(report, contextualizer.mode)


@dataclass
class Deletion:
    deleted: list[str]  # the ids removed, in the order asked
    chunks_deleted: int
    not_found: list[str]  # ids that do not exist, or that the reader's groups cannot read: the same to a caller
    notes: list[str] = field(default_factory=list)  # what dropping emptied indexes reported (when not deferred)


def delete_documents(db: Database, tenant: str, doc_ids: Sequence[str], *, readable_by: Sequence[str] | None = None,
                     defer: Callable[..., None] | None = None) -> Deletion:
    """Remove documents and all their chunks, then drop the HNSW indexes and graphs they emptied.

    `readable_by`: only documents these groups can read are removed (a writer's token); None for the trusted
    CLI. `defer(fn, *args)` runs the dropping later (after an HTTP response: it waits for older transactions)."""
    wanted = list(dict.fromkeys(doc_ids))
    with db.connection() as conn:
        if readable_by is not None:
            wanted = [d for d in wanted if store.document_access(conn, tenant, d, list(readable_by))]
        existing = set(store.existing_documents(conn, tenant, wanted)) if wanted else set()
        deleted = [d for d in wanted if d in existing]
        _, chunks = store.delete_documents(conn, tenant, deleted) if deleted else (0, 0)
    outcome = Deletion(deleted, chunks, [d for d in dict.fromkeys(doc_ids) if d not in existing])
    if chunks:
        if defer is not None:
            defer(drop_emptied_indexes, db, tenant)
        else:
            outcome.notes = drop_emptied_indexes(db, tenant)
    return outcome


def change_acl(db: Database, tenant: str, doc_id: str, groups: Sequence[str], *,
               readable_by: Sequence[str] | None = None) -> bool:
    """Replace a document's groups without re-embedding; False when it does not exist or `readable_by` cannot
    read it (the same answer, so a caller learns nothing of documents it may not see)."""
    with db.connection() as conn:
        if readable_by is not None and not store.document_access(conn, tenant, doc_id, list(readable_by)):
            return False
        return store.set_acl(conn, tenant, doc_id, list(groups))


@dataclass
class SearchOutcome:
    hits: list[dict]  # id, doc_id, title, heading, text, score (rounded)
    degraded: bool
    degraded_reason: str | None
    trace: dict


def search(searcher, tenant: str, groups: Sequence[str], query: str, k: int, mode: str = "hybrid+rerank") -> SearchOutcome:
    """Hybrid search as `groups` see the corpus (ACL applied in SQL); `crossroads search` and POST /v1/search."""
    result = searcher.search(tenant, list(groups), query, k=k, mode=mode)
    hits = [{"id": h.id, "doc_id": h.doc_id, "title": h.title, "heading": h.heading, "text": h.text,
             "score": round(_finite(h.score), 6)} for h in result.hits]
    return SearchOutcome(hits, result.degraded, result.degraded_reason, result.trace)


def _finite(x: float) -> float:
    """NaN or inf (a reranker's bad output) would make the response invalid JSON: 0.0 instead."""
    return x if x == x and abs(x) != float("inf") else 0.0


class BuildRefused(CrossroadsError):
    """A graph build that must not start; `field` names the input to change (level, batch, max_cost)."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


@dataclass
class BuildPlan:
    """A graph build decided and estimated, not yet started."""
    level: str | None  # None: every level
    pipeline: GraphPipeline
    settings: BuildSettings
    estimate: dict
    cost_usd: float  # the estimate at the price it will be billed (the batch price with Message Batches)
    meter: UsageMeter  # counts the build's LLM usage


def plan_graph_build(db: Database, settings: Settings, tenant: str, level: str | None, *, max_cost_usd: float,
                     claims: bool | None = None, batch: bool = False) -> BuildPlan:
    """Choose the build's parts as the settings say, estimate it, and refuse it (BuildRefused) for an unknown
    level, Message Batches without a key, a model without a price, or an estimate over `max_cost_usd`."""
    with db.connection() as conn:
        levels = graph_store.list_levels(conn, tenant)
    try:
        chosen = levels_to_build(levels, level, tenant)
    except CrossroadsError as exc:
        raise BuildRefused("level", str(exc)) from None
    meter = UsageMeter()
    try:
        pipeline = build_parts.make_pipeline(settings, make_llm(settings, meter), claims=claims,
                                             batch_for=(db, tenant) if batch else None)
    except CrossroadsError as exc:  # Message Batches without an API key
        raise BuildRefused("batch", str(exc)) from None
    build_settings = BuildSettings.from_settings(settings)
    estimate = estimate_build(db, tenant, chosen, pipeline.extractor, pipeline.reporter, pipeline.summarizer,
                              build_settings.summary_min_chars)
    if estimate["cost_usd"] is None:
        raise BuildRefused("max_cost", "a model's price is unknown, so the cost limit cannot be checked; set its price "
                                       'in CROSSROADS_LLM_PRICES (JSON: {"model": [input, output]} USD per million tokens)')
    cost = estimate["cost_usd"] * (BATCH_FACTOR if batch else 1)
    if cost > max_cost_usd:
        raise BuildRefused("max_cost", f"the build is estimated at ${cost:.4f}, over the limit of ${max_cost_usd}; "
                                       "raise the limit (--max-cost, or max_cost in the API) to proceed")
    return BuildPlan(level, pipeline, build_settings, estimate, cost, meter)


def run_graph_build(db: Database, embedder, tenant: str, plan: BuildPlan, *, progress=None,
                    job_id: int | None = None) -> dict:
    """Run a planned build in this process (its job row: `job_id`, or one it creates); returns the job."""
    return build_graph(db, tenant, plan.level, plan.pipeline.extractor, plan.pipeline.reporter, embedder,
                       plan.settings, progress, plan.meter.summary, summarizer=plan.pipeline.summarizer,
                       job_id=job_id)
