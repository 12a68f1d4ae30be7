"""What every route returns: the route decision, the answer with its checked citations, and a trace."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Literal

from core.passages import ChunkText
from core.text.markdown import ReadingBlock, reading_blocks

Route = Literal["local", "global", "multihop"]
ROUTES: tuple[Route, ...] = ("local", "global", "multihop")
# Routes a caller may force beyond those the classifiers choose: drift (router/drift.py: a global question
# from community reports down to local searches), also taken for global questions with CROSSROADS_GLOBAL_MODE=drift.
FORCED_ROUTES: tuple[str, ...] = (*ROUTES, "drift")


@dataclass
class RouteDecision:
    route: Route
    confidence: float  # 0..1
    reason: str  # one human-readable sentence: which cues decided
    classifier: str  # "heuristic", "llm" or "forced"
    features: dict = field(default_factory=dict)  # the cues measured, for the trace


@dataclass
class Passage:
    """One numbered item sent to the answer model: a chunk (local, multihop) or a community report."""
    id: int  # chunk id or report id
    doc_id: str | None
    title: str
    heading: str
    text: str
    kind: Literal["chunk", "report"] = "chunk"
    documents: list[dict] = field(default_factory=list)  # for a report: the documents behind it
    # the search's calibrated probability that the passage is relevant (a reranker with a calibrated
    # threshold ranked it), None when nothing calibrated ranked it
    relevance: float | None = None
    # the chunk's paragraphs, list items and table rows as ingest read them; None: read from `text`
    blocks: tuple[ReadingBlock, ...] | None = None

    def reading_blocks(self) -> tuple[ReadingBlock, ...]:
        return self.blocks if self.blocks is not None else reading_blocks(self.text or "")

    @classmethod
    def of_chunk(cls, chunk: ChunkText, relevance: float | None = None) -> "Passage":
        """A search candidate's or a graph hit's chunk, as the answer sees it."""
        return cls(id=chunk.id, doc_id=chunk.doc_id, title=chunk.title, heading=chunk.heading, text=chunk.text,
                   relevance=relevance, blocks=chunk.blocks)


@dataclass
class Citation:
    number: int  # the [N] in the answer
    kind: Literal["chunk", "report"]
    id: int
    doc_id: str | None
    title: str
    heading: str
    quote: str  # the passage (or the part of it the answer relies on)
    documents: list[dict] = field(default_factory=list)


@dataclass
class Answer:
    question: str
    answer: str
    citations: list[Citation]
    route: RouteDecision
    offline: bool  # no LLM wrote this: an extractive answer
    degraded: bool = False  # a provider failed and a fallback answered (see degraded_reasons)
    degraded_reasons: list[str] = field(default_factory=list)
    partial: bool = False  # the multi-hop loop stopped on a budget, not because it had enough
    no_answer: bool = False  # the corpus (as this user may read it) does not answer the question
    errors: list[str] = field(default_factory=list)  # e.g. an LLM answer withheld for a bad citation
    usage: dict = field(default_factory=dict)  # input/output/cache tokens and cost_usd, summed per query
    latency_ms: float = 0.0
    trace: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)
