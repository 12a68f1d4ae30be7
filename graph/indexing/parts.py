"""The graph build's parts as the settings choose them: LLM extractor, summarizer and reporter with a
key, offline extractor and extractive reports without one. One place for the CLI and the API."""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator, Protocol

from core.llm.batches import BatchLLM, CollectingLLM, pending_requests
from core.database import Database
from core.errors import CrossroadsError
from core.llm.client import LLM, AnthropicLLM, llm_stage
from core.settings import Settings
from graph.indexing.contracts import OfflineReporter, Reporter
from graph.indexing.job_progress import dropping_pool
from graph.indexing.summarize import DescriptionSummarizer
from graph.types import Extractor


@dataclass
class GraphPipeline:
    extractor: Extractor
    reporter: Reporter
    summarizer: DescriptionSummarizer | None  # None: merged descriptions keep their most central sentences

    @property
    def offline(self) -> bool:
        return not (self.extractor.model or self.reporter.model)

    @property
    def batch(self) -> BatchLLM | None:
        """The LLM sending the build's calls as Message Batches (`--batch`), else None."""
        llm = getattr(self.extractor, "llm", None)
        return llm if isinstance(llm, BatchLLM) else None


def make_pipeline(settings: Settings, llm: LLM | None, *, claims: bool | None = None,
                  batch_for: tuple[Database, str] | None = None,
                  collect_for: tuple[Database, str] | None = None) -> GraphPipeline:
    """`claims` (default: settings.graph_extract_claims) asks the LLM extractor for claims too.
    `batch_for`: (database, tenant) of a build whose LLM calls go out as Message Batches (core.llm.batches).
    `collect_for`: (database, tenant) of a build without batches, which still collects the Message Batches
    an earlier batch build of the tenant left (core.llm.batches.CollectingLLM) rather than pay for them again."""
    if batch_for is not None:
        if not isinstance(llm, AnthropicLLM):
            raise CrossroadsError("a batch build sends the LLM's work as Anthropic Message Batches: set "
                                  "ANTHROPIC_API_KEY, or build without batch (offline)")
        llm = BatchLLM(llm, *batch_for, settings.llm_batch_poll_s)
    elif collect_for is not None and isinstance(llm, AnthropicLLM):
        pending = pending_requests(*collect_for)
        if pending:
            llm = CollectingLLM(llm, *collect_for, settings.llm_batch_poll_s, pending)
    if llm is None:
        from graph.indexing.extract_offline import OfflineExtractor

        return GraphPipeline(OfflineExtractor(), OfflineReporter(), None)
    from graph.indexing.extract_llm import LLMExtractor
    from graph.indexing.reports_llm import LLMReporter
    from graph.indexing.summarize import LLMDescriptionSummarizer

    with_claims = settings.graph_extract_claims if claims is None else claims
    return GraphPipeline(LLMExtractor(llm, settings.llm_model_fast, with_claims=with_claims),
                         LLMReporter(llm, settings.llm_model_answer),
                         LLMDescriptionSummarizer(llm, settings.llm_model_fast))


class Mapper(Protocol):
    def map(self, fn, items): ...


class _Staged:
    """A mapper whose calls run as `stage`'s (core.llm.client.llm_stage), in whichever thread runs them."""

    def __init__(self, mapper: Mapper, stage: str):
        self.mapper, self.stage = mapper, stage

    def map(self, fn, items):
        def staged(item):
            with llm_stage(self.stage):
                return fn(item)

        return self.mapper.map(staged, items)


@contextmanager
def step_pool(part: object, workers: int, stage: str) -> Iterator[Mapper]:
    """How a step runs its items' calls through `part`, as `stage`'s calls (their thinking budget, their
    calibration): a thread pool of `workers`, or, when the part's LLM sends Message Batches (`--batch`),
    one batch per pass (core.llm.batches.BatchLLM.map)."""
    llm = getattr(part, "llm", None)
    if isinstance(llm, BatchLLM):
        yield _Staged(llm, stage)
        return
    with dropping_pool(workers) as pool:
        yield _Staged(pool, stage)
