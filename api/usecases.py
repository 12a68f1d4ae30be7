"""The use cases both faces run: the CLI (api/cli*.py) and the HTTP routes (api/routes_*.py) parse,
authorise and render; what happens in between is written once, here.

Each function takes what a face already holds (the database, the embedder, the settings, the reader's
groups) and returns typed results the face renders as a table or as JSON.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePath
from typing import TYPE_CHECKING, Callable, Sequence

from core.llm.batches import BatchLLM, CollectingLLM, pending_requests
from core.database import Database
from core.errors import BadDocument, CrossroadsError
from core.llm.client import AnthropicLLM, make_llm
from core.llm.usage import Usage, UsageMeter
from core.llm.pricing import BATCH_FACTOR
from answers.question import Question
from core.settings import Settings
from core.text.terms import codes
from graph import store as graph_store
from graph.levels import levels_to_build
from vector import store
from vector.search.hybrid import in_other_script
from vector.search.rerank.cut import passing
from vector.search.transforms import rewrite_conversational
from vector.search.unmentioned import check_question

if TYPE_CHECKING:  # annotations only: the module imports these where a function needs them
    from graph.indexing.contracts import BuildSettings
    from graph.indexing.parts import GraphPipeline
    from vector.ingest.runner import IngestReport
    from vector.ingest.sources import SourceDocument


@dataclass
class Indexed:
    report: IngestReport
    contexts: str  # how chunk contexts were written: the contextualizer's mode


def index_documents(db: Database, embedder, settings: Settings, tenant: str, documents: Sequence[SourceDocument],
                    skipped: Sequence[dict] = (), *, prune: bool = False, progress=None,
                    meter: UsageMeter | None = None, batch: bool = False,
                    job_id: int | None = None, wait_for_batches: bool = True) -> Indexed:
    """Index documents as a sync (`crossroads ingest`, PUT and POST /v1/documents): unchanged text costs
    nothing, changed text re-embeds only its changed chunks. `meter` counts the contexts' LLM usage; the
    caller keeps it, so usage is recorded even when indexing fails. `batch` (`ingest --batch`): the chunk
    contexts go out as Message Batches at the batch price, waited for (core.llm.batches); `job_id`: the queued
    job running it, whose cancel request ends the wait. Without `batch`, the contexts an earlier batch ingest
    sent and never used (it died) are answered from its batches (core.llm.batches.CollectingLLM), not paid again;
    waiting for one still running unless `wait_for_batches` is False (an HTTP request: those are sent now)."""
    from vector.ingest.contextualize import make_contextualizer
    from vector.ingest.runner import ingest_documents
    llm = make_llm(settings, meter if meter is not None else UsageMeter())
    if batch:
        refused = batch_ingest_refused(settings)
        if refused:
            raise CrossroadsError(refused)
        llm = BatchLLM(llm, db, tenant, settings.llm_batch_poll_s, job="ingest")
        llm.job_id = job_id
    elif isinstance(llm, AnthropicLLM) and settings.contextual_retrieval != "title":
        pending = pending_requests(db, tenant)
        if pending:
            llm = CollectingLLM(llm, db, tenant, settings.llm_batch_poll_s, pending, job="ingest",
                                wait=wait_for_batches)
            llm.job_id = job_id
    contextualizer = make_contextualizer(settings, llm)
    report = ingest_documents(db, embedder, settings, tenant, list(documents), list(skipped), prune=prune,
                              progress=progress, contextualizer=contextualizer)
    return Indexed(report, contextualizer.mode)


def estimate_ingest(db: Database, settings: Settings, tenant: str, documents: Sequence[SourceDocument], *,
                    batch: bool = False) -> dict:
    """What an ingest of `documents` would spend on the LLM's chunk contexts (`crossroads ingest --dry-run`):
    vector.ingest.estimate's figures and ranges for the chunks without a cached context, at the batch price with
    `batch`; `contexts` names how contexts are written (no call, $0, when offline). Reads, writes nothing."""
    from vector.ingest.contextualize import make_contextualizer
    from core.embeddings import model_id_for
    from vector.ingest.estimate import context_requests, estimate_contexts
    from vector.ingest.context_step import contexts_to_write

    if batch:
        refused = batch_ingest_refused(settings)
        if refused:
            raise CrossroadsError(refused)
    contextualizer = make_contextualizer(settings, make_llm(settings))
    work = contexts_to_write(db, settings, tenant, list(documents), contextualizer,
                             model_id_for(settings, settings.embed_provider))
    estimate = estimate_contexts([context_requests(doc, drafts) for doc, drafts in work], settings.llm_model_fast,
                                 batch=batch, max_tokens=getattr(contextualizer, "max_tokens", 0))
    return estimate | {"contexts": contextualizer.mode}


def batch_ingest_refused(settings: Settings) -> str | None:
    """Why an ingest with Message Batches cannot run with these settings (the CLI's error, the reindex job's
    422), or None when it can."""
    if not settings.llm_enabled or settings.contextual_retrieval == "title":
        return ("`ingest --batch` sends the LLM's chunk contexts as Anthropic Message Batches: set ANTHROPIC_API_KEY "
                "(and CROSSROADS_CONTEXTUAL_RETRIEVAL to auto or llm), or ingest without --batch")
    return None


# media type -> the file suffix vector.ingest.formats reads it by (POST /v1/documents:upload)
UPLOAD_TYPES = {
    "application/pdf": ".pdf",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": ".docx",
    "text/html": ".html",
    "message/rfc822": ".eml",
    "application/mbox": ".mbox",
}


def uploaded_document(doc_id: str, media_type: str, data: bytes, acl: Sequence[str], max_bytes: int, *,
                      title: str | None = None, lang: str | None = None, source: str = "api") -> SourceDocument:
    """A file sent over HTTP (`media_type`: a key of UPLOAD_TYPES) as the ingest pipeline takes it, converted
    in the same bounded child process as `crossroads ingest` converts a file on disk; `BadDocument` says why
    not (a scanned or damaged PDF, a zip bomb, text over `max_bytes`). The file's own size is the caller's
    to check first (the route answers 413)."""
    from vector.ingest.formats import FORMAT_SUFFIXES, convert
    from vector.ingest.sources import build_document
    suffix = UPLOAD_TYPES[media_type]
    if not data.strip():
        raise BadDocument(f"the {FORMAT_SUFFIXES[suffix]} file is empty")
    stem = PurePath(doc_id).stem or "document"  # the mailbox's title, and the title when the file names none
    converted = convert(stem + suffix, data, max_bytes)
    meta: dict = {"acl": list(acl)}
    if title is not None and title.strip():
        meta["title"] = title
    elif converted.title:
        meta["title"] = converted.title
    if lang is not None:
        meta["lang"] = lang
    return build_document(doc_id, converted.text, meta, (), source, stem, meta_from=FORMAT_SUFFIXES[suffix])


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
    from vector.ingest.runner import drop_emptied_indexes
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


CALIBRATED = "calibrated"  # min_score not given: the reranker's calibrated threshold, as the answer routes use
GROUP_BY_POOL = 3  # group_by document: k documents chosen among 3k reranked passages, as `crossroads eval` ranks


@dataclass
class SearchOutcome:
    hits: list[dict]  # id, doc_id, title, heading, text, score (rounded)
    degraded: bool
    degraded_reason: str | None
    trace: dict
    threshold: dict  # min_score, source, applied, cut, cut_at_rank, other_script_kept (api/http/schemas.py Threshold)
    group_by: str = "chunk"
    unmentioned: tuple[str, ...] = ()  # codes and names of the query no readable document holds (hits are not about them)


def search(searcher, tenant: str, groups: Sequence[str], query: str, k: int, mode: str = "hybrid+rerank", *,
           min_score: float | None | str = CALIBRATED, group_by: str = "chunk") -> SearchOutcome:
    """Hybrid search as `groups` see the corpus (ACL applied in SQL); `crossroads search` and POST /v1/search.

    `min_score`: CALIBRATED (the searcher's own threshold), a number, or None (no threshold). The cut is
    made here from the reranker's full top list (the trace's `rerank` stage, recorded before the searcher's
    own threshold), so every choice costs one search and the response can say what was cut and where.
    `group_by="document"`: k distinct documents, each with its best passage, from GROUP_BY_POOL * k passages."""
    pool = k * GROUP_BY_POOL if group_by == "document" else k
    result = searcher.search(tenant, list(groups), query, k=pool, mode=mode)
    reranked = result.trace.get("stages", {}).get("rerank")  # [] when the reranker failed; absent when off
    calibrated = result.trace.get("rerank_threshold")
    cutoff = calibrated if min_score == CALIBRATED else min_score
    source = "none" if cutoff is None else ("calibrated" if min_score == CALIBRATED else "request")
    cut, cut_at = 0, None
    if reranked:
        by_id = {c.id: c for c in result.candidates}
        listed = [(rank, by_id[e["id"]], e["score"]) for rank, e in enumerate(reranked, start=1) if e["id"] in by_id]
        # the calibrated cut holds a page in the other script to the list's best where the reranker asks it
        # (vector/search/rerank/cut.py); a threshold the request sets is applied as it is
        share = result.trace.get("other_script_share") if min_score == CALIBRATED else None
        other = in_other_script(query, [c for _, c, _ in listed])
        ranked = []
        for (rank, chunk, score), passed in zip(listed, passing([s for _, _, s in listed], other, cutoff, share)):
            if not passed:
                cut += 1
                cut_at = cut_at or rank
                continue
            ranked.append((chunk, score))
    else:  # fused or leg scores: a threshold calibrated on reranker scores does not apply to them
        ranked = [(h, h.score) for h in result.hits]
    if group_by == "document":
        best: dict[str, tuple] = {}
        for chunk, score in ranked:  # best first: the first passage of a document is its best
            best.setdefault(chunk.doc_id, (chunk, score))
        ranked = list(best.values())
    hits = [{"id": c.id, "doc_id": c.doc_id, "title": c.title, "heading": c.heading, "text": c.text,
             "score": round(_finite(score), 6)} for c, score in ranked[:k]]
    other_kept = sum(1 for _, score in ranked[:k] if reranked and cutoff is not None and score < cutoff)
    threshold = {"min_score": cutoff if reranked else None, "source": source if reranked else "none",
                 "applied": bool(reranked) and cutoff is not None, "cut": cut, "cut_at_rank": cut_at,
                 "other_script_kept": other_kept}
    check = check_question(searcher, tenant, groups, codes(query), Question(query).name_words)  # the hits stand
    reason = "; ".join(r for r in (result.degraded_reason, check.error) if r) or None
    return SearchOutcome(hits, result.degraded or bool(check.error), reason, result.trace, threshold, group_by,
                         check.unmentioned)


def _finite(x: float) -> float:
    """NaN or inf (a reranker's bad output) would make the response invalid JSON: 0.0 instead."""
    return x if x == x and abs(x) != float("inf") else 0.0


@dataclass
class Conversation:
    """What a question with history became before routing (the response's `conversation`)."""
    asked: str  # the question as sent
    question: str  # what was routed and answered: standalone when rewritten
    turns: int  # earlier turns sent
    rewritten: bool
    reason: str | None = None  # why it was not rewritten (no LLM, the rewrite failed)
    degraded: bool = False  # the rewrite failed: the follow-up was answered as asked
    usage: Usage | None = None  # the rewrite's LLM call

    def to_dict(self) -> dict:
        return {"asked": self.asked, "question": self.question, "turns": self.turns, "rewritten": self.rewritten,
                "reason": self.reason}


def standalone_question(llm, question: str, history: Sequence[dict]) -> Conversation:
    """A follow-up ("and what about its price?") rewritten from the earlier turns into a question that
    routes and searches on its own (vector.search.transforms.rewrite_conversational); never raises."""
    if not history:
        return Conversation(question, question, 0, False)
    if llm is None:
        return Conversation(question, question, len(history), False,
                            "no LLM is configured, so the question was answered as asked, without the earlier turns")
    rewrite = rewrite_conversational(llm, question, history)
    text = rewrite.text if rewrite.text.strip() else question
    return Conversation(question, text, len(history), not rewrite.degraded and text != question, rewrite.reason,
                        rewrite.degraded, rewrite.usage)


def with_conversation(answer: dict, conversation: Conversation) -> dict:
    """The answer as /v1/ask returns it: the conversation said, and the rewrite's degradation and cost counted."""
    answer = {**answer, "conversation": conversation.to_dict()}
    if conversation.degraded:
        answer["degraded"] = True
        answer["degraded_reasons"] = [*answer.get("degraded_reasons", []), conversation.reason]
    if conversation.usage is not None:
        answer["usage"] = add_usage(answer.get("usage") or {}, conversation.usage)
    return answer


def add_usage(summary: dict, extra: Usage) -> dict:
    """A `Usage.as_dict()` summary with another call's usage added."""
    base = Usage(summary.get("input_tokens", 0), summary.get("output_tokens", 0), summary.get("cache_read_tokens", 0),
                 summary.get("cache_write_tokens", 0), summary.get("cost_usd", 0.0), summary.get("llm_calls", 0))
    return {**summary, **(base + extra).as_dict()}


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
    cost_usd: float | None  # the estimate at the price it will be billed (the batch price with Message Batches);
    # None only for an estimate without a cost limit (a model without a price)
    meter: UsageMeter  # counts the build's LLM usage


def plan_graph_build(db: Database, settings: Settings, tenant: str, level: str | None, *, max_cost_usd: float | None,
                     claims: bool | None = None, batch: bool = False) -> BuildPlan:
    """Choose the build's parts as the settings say, estimate it, and refuse it (BuildRefused) for an unknown
    level, Message Batches without a key, a model without a price, or an estimate over `max_cost_usd`
    (None: no limit, for an estimate only: `graph build --dry-run`)."""
    from graph.indexing import parts as build_parts
    from graph.indexing.contracts import BuildSettings
    from graph.indexing.estimate import estimate_build
    with db.connection() as conn:
        levels = graph_store.list_levels(conn, tenant)
    try:
        chosen = levels_to_build(levels, level, tenant)
    except CrossroadsError as exc:
        raise BuildRefused("level", str(exc)) from None
    meter = UsageMeter()
    try:
        pipeline = build_parts.make_pipeline(settings, make_llm(settings, meter), claims=claims,
                                             batch_for=(db, tenant) if batch else None,
                                             collect_for=None if batch else (db, tenant))
    except CrossroadsError as exc:  # Message Batches without an API key
        raise BuildRefused("batch", str(exc)) from None
    build_settings = BuildSettings.from_settings(settings)
    estimate = estimate_build(db, tenant, chosen, pipeline.extractor, pipeline.reporter, pipeline.summarizer,
                              build_settings.summary_min_chars)
    if estimate["cost_usd"] is None and max_cost_usd is not None:
        raise BuildRefused("max_cost", "a model's price is unknown, so the cost limit cannot be checked; set its price "
                                       'in CROSSROADS_LLM_PRICES (JSON: {"model": [input, output]} USD per million tokens)')
    cost = None if estimate["cost_usd"] is None else estimate["cost_usd"] * (BATCH_FACTOR if batch else 1)
    if max_cost_usd is not None and cost > max_cost_usd:
        raise BuildRefused("max_cost", f"the build is estimated at ${cost:.4f}, over the limit of ${max_cost_usd}; "
                                       "raise the limit (--max-cost, or max_cost in the API) to proceed")
    return BuildPlan(level, pipeline, build_settings, estimate, cost, meter)


def run_graph_build(db: Database, embedder, tenant: str, plan: BuildPlan, *, progress=None,
                    job_id: int | None = None) -> dict:
    """Run a planned build in this process (its job row: `job_id`, or one it creates); returns the job."""
    from graph.indexing.runner import build_graph
    return build_graph(db, tenant, plan.level, plan.pipeline.extractor, plan.pipeline.reporter, embedder,
                       plan.settings, progress, plan.meter.summary, summarizer=plan.pipeline.summarizer,
                       job_id=job_id)
