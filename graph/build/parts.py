"""The graph build's parts as the settings choose them: LLM extractor, summarizer and reporter with a
key, offline extractor and extractive reports without one. One place for the CLI and the API."""
from __future__ import annotations

from dataclasses import dataclass

from core.llm import LLM
from core.settings import Settings
from graph.build.contracts import OfflineReporter, Reporter
from graph.build.summarize import DescriptionSummarizer
from graph.types import Extractor


@dataclass
class GraphPipeline:
    extractor: Extractor
    reporter: Reporter
    summarizer: DescriptionSummarizer | None  # None: merged descriptions keep their most central sentences

    @property
    def offline(self) -> bool:
        return not (self.extractor.model or self.reporter.model)


def make_pipeline(settings: Settings, llm: LLM | None, *, claims: bool | None = None) -> GraphPipeline:
    """`claims` (default: settings.graph_extract_claims) asks the LLM extractor for claims too."""
    if llm is None:
        from graph.build.extract_offline import OfflineExtractor

        return GraphPipeline(OfflineExtractor(), OfflineReporter(), None)
    from graph.build.extract_llm import LLMExtractor
    from graph.build.reports_llm import LLMReporter
    from graph.build.summarize import LLMDescriptionSummarizer

    with_claims = settings.graph_extract_claims if claims is None else claims
    return GraphPipeline(LLMExtractor(llm, settings.llm_model_fast, with_claims=with_claims),
                         LLMReporter(llm, settings.llm_model_answer),
                         LLMDescriptionSummarizer(llm, settings.llm_model_fast))
