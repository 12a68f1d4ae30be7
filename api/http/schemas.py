"""Request and response bodies. Fixed limits sit in the fields; limits an operator can change
(question, query and document sizes, batch size) are checked by `check_*` against the settings and
answered with the same 422 shape, naming the field."""
from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from api.http.problems import validation_problem
from vector.document_ids import DOC_ID_MAX_CHARS, doc_id_problem

Route = Literal["auto", "local", "global", "multihop", "drift"]


def _storable(value: str) -> str:
    """PostgreSQL text holds neither NUL nor lone surrogates (JSON can carry both as escapes)."""
    if "\x00" in value:
        raise ValueError("must not contain NUL characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must be valid Unicode text (it contains a lone surrogate escape)") from None
    return value


Text = Annotated[str, AfterValidator(_storable)]
Group = Annotated[str, Field(min_length=1, max_length=200), AfterValidator(_storable)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Query(Strict):
    """Query bodies reject unknown fields (422 naming them): a misspelt option (`"mode": "bm25"`,
    `"min_scor"`) silently answered with the defaults is a wrong answer the caller cannot see. A
    `groups` or `tenant` sent here is refused the same way: they come from the token only."""


class Page(BaseModel):
    total: int = Field(description="Items in the whole list (what the caller may see).")
    limit: int
    offset: int


# --- query ------------------------------------------------------------------------------------------


MAX_HISTORY_TURNS = 50  # the rewrite reads only the last few (vector.search.transforms); more is a client bug
MAX_TURN_CHARS = 20_000
MAX_HISTORY_CHARS = 100_000  # all turns together: far below the body limit, and a bounded rewrite prompt


class Turn(Strict):
    """One earlier turn of the conversation."""
    role: Literal["user", "assistant"]
    content: Text = Field(..., max_length=MAX_TURN_CHARS)


def _bounded_history(turns: list[Turn]) -> list[Turn]:
    size = sum(len(t.content) for t in turns)
    if size > MAX_HISTORY_CHARS:
        raise ValueError(f"is {size:,} characters in all; the limit is {MAX_HISTORY_CHARS:,} (send the last turns only)")
    return turns


History = Annotated[list[Turn], Field(max_length=MAX_HISTORY_TURNS), AfterValidator(_bounded_history)]


class AskRequest(Query):
    question: Text = Field(..., min_length=1, description="The question, in Russian or English.")
    route: Route = Field("auto", description="`auto` lets the router classify; the others force a route.")
    stream: bool = Field(False, description="Answer as server-sent events: route, token..., citations, usage, done.")
    budget: int | str | None = Field(
        None, description="The global route's cost dial for this question: LLM calls (`6`: the answer's one, the "
        "rest split between rating and mapping community reports) or dollars (`\"$0.05\"`); absent: the server's "
        "caps. No effect offline.")
    history: History = Field(
        default_factory=list, description="Earlier turns, oldest first (at most 50, 100,000 characters in all). With an "
        "LLM configured, a follow-up (\"and what about its price?\") is rewritten into a standalone question from "
        "the last turns before routing; the response's `conversation` says what was asked.")


class RouteRequest(Query):
    question: Text = Field(..., min_length=1)


class RouteResponse(BaseModel):
    route: Literal["local", "global", "multihop"]
    confidence: float
    reason: str
    classifier: str
    probabilities: dict[Literal["local", "global", "multihop"], float] | None = Field(
        None, description="The learned offline router's calibrated probability of each route, also when the "
        "LLM decided (`classifier` says which decided); null when the learned router did not run (cue table, "
        "forced route).")
    low_confidence: bool = Field(
        False, description="No route was likely enough, so the router took local search, the cheapest to be "
        "wrong; an app may offer the other routes (see `probabilities`).")


class SearchRequest(Query):
    query: Text = Field(..., min_length=1)
    k: int = Field(10, ge=1, le=100, description="Hits to return (1..100): passages, or documents with `group_by`.")
    min_score: float | None = Field(
        None, ge=-1e6, le=1e6, description="Drop reranked passages scoring below this. Absent: the reranker's calibrated "
        "threshold (the one /v1/ask's local route uses); `null`: no threshold, k hits whatever their score. The "
        "response's `threshold` says whether and where it cut.",
        # absent and null differ (calibrated vs none): no default in the schema, or a client would send null
        json_schema_extra=lambda schema: schema.pop("default", None))
    group_by: Literal["chunk", "document"] = Field(
        "chunk", description="`document`: k distinct documents, each with its best passage (chosen among 3k "
        "reranked passages, as `crossroads eval` measures).")


class Hit(BaseModel):
    id: int
    doc_id: str
    title: str
    heading: str
    text: str
    score: float


class Threshold(BaseModel):
    min_score: float | None = Field(description="The score a passage needed (null: none applied).")
    source: Literal["calibrated", "request", "none"] = Field(
        description="calibrated: the reranker's fitted threshold (min_score absent); request: the body's min_score; "
                    "none: min_score null, or no calibrated threshold for this reranker and embedder.")
    applied: bool = Field(description="False when the reranker gave no scores (it failed or is off): a threshold on "
                                      "fused scores would mean nothing, so none was applied.")
    cut: int = Field(description="Reranked passages dropped for scoring below min_score.")
    cut_at_rank: int | None = Field(description="The rank (from 1) of the best passage dropped; null when none was.")
    other_script_kept: int = Field(description="Passages in the other script than the query kept below min_score: "
                                               "the calibrated threshold holds them to a tenth of the best passage's "
                                               "score once that passed (the reranker scores them lower for the same "
                                               "relevance); 0 when the request sets min_score.")


class SearchResponse(BaseModel):
    hits: list[Hit]
    degraded: bool
    degraded_reason: str | None = None
    group_by: Literal["chunk", "document"] = "chunk"
    threshold: Threshold
    unmentioned: list[str] = Field(
        default_factory=list, description="Codes of the query (ERR_2043, INC-2023-005: a token that begins with a "
        "letter and holds a digit or an underscore), then names it spells (\"Elena Smirnova\"; not its first word), "
        "that no document the caller may read holds, as written, misspelt, translated or in the other script: the "
        "hits are not about them.")


# --- documents ----------------------------------------------------------------------------------------


class DocumentBody(Strict):
    """A document's content for PUT (its id is in the path)."""
    text: Text = Field(..., min_length=1, description="Markdown or plain text.")
    acl: list[Group] = Field(..., min_length=1, max_length=100, description="Groups that may read it (at least one).")
    title: Text | None = Field(None, max_length=1000, description="Default: the first `# ` heading, else the id.")
    lang: Literal["ru", "en", "russian", "english", "simple"] | None = Field(
        None, description="Full-text language; detected when absent.")
    source: Text | None = Field(None, max_length=2000, description="Where the document came from (shown to users).")


class BatchDocument(DocumentBody):
    doc_id: Text = Field(..., min_length=1, max_length=DOC_ID_MAX_CHARS)


BATCH_VIA_JOB = ("Message Batches answer within hours, longer than a request waits: put the documents on the "
                 "storage the workers read and queue POST /v1/jobs/reindex with `batch: true`, or send this "
                 "request without `batch`")


class DocumentPut(DocumentBody):
    batch: bool = Field(False, description="Only false: Message Batches go through POST /v1/jobs/reindex.")


class BatchRequest(Strict):
    # items are validated one by one, so one bad item is reported without rejecting the others
    documents: list[Any] = Field(..., min_length=1, description="Each item: doc_id, text, acl, title?, lang?, source?.")
    batch: bool = Field(False, description="Only false: Message Batches go through POST /v1/jobs/reindex.")


class AclRequest(Strict):
    acl: list[Group] = Field(..., min_length=1, max_length=100, description="The new groups (replace the old ones).")


class DocumentResult(BaseModel):
    doc_id: str
    status: Literal["added", "changed", "unchanged", "metadata_updated"]
    chunks: dict[str, int]
    embeddings_computed: int


class BatchItemResult(BaseModel):
    index: int
    doc_id: str | None
    status: Literal["indexed", "rejected", "failed"]
    error: str | None = None


class BatchResponse(BaseModel):
    results: list[BatchItemResult]
    documents: dict[str, int]
    chunks: dict[str, int]
    embeddings_computed: int
    errors: int


class DocumentFields(BaseModel):
    doc_id: str
    title: str
    lang: str
    acl: list[str]
    version: int
    updated_at: datetime


class DocumentInfo(DocumentFields):
    chunks: int


class DocumentList(Page):
    documents: list[DocumentInfo]


class ChunkInfo(BaseModel):
    id: int
    chunk_no: int  # its place in the document, from 0
    heading: str
    text: str


class DocumentDetail(DocumentFields):
    chunks: list[ChunkInfo]  # the indexed text, in order (neighbouring chunks overlap by a sentence or two)


class ChunkDetail(ChunkInfo):
    doc_id: str
    title: str


class Deleted(BaseModel):
    doc_id: str
    chunks_deleted: int


class AclResult(BaseModel):
    doc_id: str
    acl: list[str]


# --- checks against the settings ----------------------------------------------------------------------


def check_text(field: str, value: str, max_chars: int) -> str:
    if not value.strip():
        raise validation_problem([{"loc": ("body", field), "msg": "must not be blank", "type": "string_blank"}])
    if len(value) > max_chars:
        raise validation_problem([{"loc": ("body", field), "type": "string_too_long",
                                   "msg": f"is {len(value):,} characters; the limit is {max_chars:,}"}])
    return value


def doc_id_error(doc_id: str) -> str | None:
    """Why an id cannot be a document id: the rules ingest applies to file names and JSONL ids too."""
    return doc_id_problem(doc_id)


def check_doc_id(doc_id: str) -> str:
    error = doc_id_error(doc_id)
    if error:
        raise validation_problem([{"loc": ("path", "doc_id"), "msg": error, "type": "value_error"}])
    return doc_id


def document_size_error(text: str, max_bytes: int) -> str | None:
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        return f"is {size:,} bytes; the limit is {max_bytes:,} (CROSSROADS_MAX_DOCUMENT_BYTES)"
    return None
