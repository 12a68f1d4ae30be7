"""The graph build's contracts: its settings, what a reporter must do, and what a build records per level.

Shared by the runner, its steps (summary_step) and the faces that configure a build (parts), so none of
them imports the runner for a type.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, Sequence

from core.settings import Settings
from graph.indexing.assemble import PairDescriptions
from graph.types import Community
from graph.indexing.reports import OFFLINE_RECIPE, offline_report
from graph.indexing.summarize import SUMMARY_MIN_CHARS
from graph.types import GraphClaim, GraphEntity, GraphRelationship

class Reporter(Protocol):
    """`claims`: the members' claims (graph.indexing.reports.community_claims order); empty without claim extraction."""

    model: str  # "" for the offline extractive report
    recipe: str  # how it writes; a new recipe rewrites every stored report once ("" for the first)

    def report(self, community: Community, ents: list[GraphEntity], rels: list[GraphRelationship],
               sub_reports: list[dict], claims: Sequence[GraphClaim] = ()) -> dict:
        ...


class OfflineReporter:
    model = ""
    recipe = OFFLINE_RECIPE

    def report(self, community, ents, rels, sub_reports, claims=()) -> dict:
        return offline_report(ents, rels, claims)


FAILURE_STAGES = ("extract", "summaries", "reports")
# What each stage's progress (graph.indexing.job_progress.Progress) counts; "" for a stage told only as it starts.
STAGE_UNITS = {"extract": "chunks", "resolve": "", "summaries": "descriptions", "communities": "",
               "reports": "communities", "embed": ""}
MAX_FAILURES_LISTED = 20  # per level: enough to see the pattern, not a log


@dataclass
class BuildSettings:
    max_cluster_size: int = 10
    seed: int = 42
    iterations: int = 2
    resolution_threshold: float = 0.93
    concurrency: int | None = None  # LLM calls at once; None: the LLM's own (CROSSROADS_LLM_CONCURRENCY)
    # an entity is summarised (with a summarizer) from >= 2 distinct descriptions joined longer than this
    summary_min_chars: int = SUMMARY_MIN_CHARS
    # embed entities for linking questions by meaning (graph/query/entity_link.py); names link without it
    entity_vectors: bool = False

    @classmethod
    def from_settings(cls, settings: Settings) -> "BuildSettings":
        """The knobs of CROSSROADS_GRAPH_* (one place for the CLI, the API and the worker)."""
        return cls(max_cluster_size=settings.graph_max_cluster_size, seed=settings.graph_leiden_seed,
                   iterations=settings.graph_leiden_iterations,
                   resolution_threshold=settings.graph_resolution_threshold,
                   summary_min_chars=settings.graph_summary_min_chars,
                   entity_vectors=settings.graph_entity_vectors)


@dataclass
class LevelReport:
    level: str
    groups: list[str]
    chunks: int = 0
    extracted: int = 0
    extraction_cached: int = 0
    extraction_errors: int = 0  # chunk texts whose extraction failed (refusals included): not cached, retried
    entities: int = 0
    relationships: int = 0
    merged_entities: int = 0
    claims: int = 0  # distinct claims attached to the level's entities
    summaries_computed: int = 0  # entity and relationship descriptions summarised by the LLM in this build
    summaries_cached: int = 0  # ... taken from the cache
    summary_errors: int = 0  # ... that failed: central sentences kept, retried next build
    communities: int = 0
    communities_per_level: dict[int, int] = field(default_factory=dict)
    reports_generated: int = 0
    reports_kept: int = 0
    report_fallbacks: int = 0  # ... of those written, the offline report standing in for a failed LLM one
    # failures the model declined (stop_reason "refusal"), per stage; each is counted in its stage's errors too
    refusals: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FAILURE_STAGES, 0))
    failures: list[str] = field(default_factory=list)  # the first MAX_FAILURES_LISTED, each named with its reason
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def failed(self) -> int:
        """What this build could not do and the next one retries: chunks, summaries, reports."""
        return self.extraction_errors + self.summary_errors + self.report_fallbacks

    def record_failure(self, stage: str, message: str, *, refused: bool) -> None:
        self.refusals[stage] += refused
        if len(self.failures) < MAX_FAILURES_LISTED:
            self.failures.append(message)


@dataclass
class LevelGraph:
    """A level's graph and what its stored rows do not keep, all by final (post-resolution) key."""

    entities: list[GraphEntity]
    relationships: list[GraphRelationship]
    descriptions: dict[str, tuple[str, ...]]  # the distinct raw descriptions behind each entity
    claims: dict[str, tuple[GraphClaim, ...]]  # the claims about each entity
    merges: dict[str, str]  # resolution: old key -> surviving key
    relationship_descriptions: PairDescriptions  # ... behind each relationship (source key, target key)
