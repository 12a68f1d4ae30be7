"""Bodies of the graph routes (api/http/routes_graph.py): communities, entities and relationships as the explorer
pages them, and a tenant's graph status per access level."""
from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from api.http.schemas import Page


class CommunitySummary(BaseModel):
    id: int
    level: int
    parent: int | None
    title: str
    rating: float
    summary: str
    size: int


class CommunityList(Page):
    access_level: str | None
    communities: list[CommunitySummary] = Field(description="By hierarchy level (roots first), then id.")


class Entity(BaseModel):
    key: str
    name: str
    type: str
    description: str
    degree: int


class Relationship(BaseModel):
    source: str  # entity keys (in a community's detail, both among its members)
    target: str
    description: str
    weight: float


class CommunityDetail(BaseModel):
    access_level: str
    id: int
    level: int
    parent: int | None
    title: str
    summary: str
    rating: float
    rating_explanation: str
    findings: list[dict]
    model: str
    members: list[Entity]
    relationships: list[Relationship]
    documents: list[dict]


class EntityList(Page):
    access_level: str | None
    entities: list[Entity] = Field(description="Best connected first, ties by key.")


class NamedRelationship(Relationship):
    source_name: str
    target_name: str


class RelationshipList(Page):
    access_level: str | None
    relationships: list[NamedRelationship] = Field(description="Strongest (weight) first, ties by source, then target key.")


class GraphTextCounts(BaseModel):
    entities: int
    relationships: int
    reports: int


class GraphLevelStatus(BaseModel):
    level: str
    groups: list[str] = Field(description="The groups whose chunks its graph is built from.")
    chunks: int = Field(description="Chunks its groups may read now.")
    communities: int = Field(description="Communities of its last build.")
    served: GraphTextCounts
    withdrawn: GraphTextCounts = Field(description="Text no longer served: its sources were deleted or narrowed.")
    state: Literal["empty", "emptied", "unbuilt", "withdrawn", "built"] = Field(
        description="empty: nothing to read or build; emptied: nothing to read, leftovers a build clears; "
                    "unbuilt: never built; withdrawn: a build writes the withdrawn text anew; built: up to date.")
    rebuild: str | None = Field(description="The call that brings the level up to date (admin), when one would.")


class GraphBuildSummary(BaseModel):
    id: int
    status: str
    stage: str
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    heartbeat_at: datetime | None
    usage: dict
    errors: list


class GraphStatus(BaseModel):
    access_level: str | None = Field(description="The level this token is served from (None: no level fits it).")
    levels: list[GraphLevelStatus] = Field(description="Admin: every level; otherwise only `access_level`.")
    jobs: list[GraphBuildSummary] | None = Field(
        description="The latest graph builds, newest first; admin only (null otherwise): they name every level.")
