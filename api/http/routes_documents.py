"""Documents: upsert one, a batch, upload a file, delete, change groups (role: writer); list (reader).

A document is indexed exactly as `crossroads ingest` indexes it (same chunking, contexts, vectors),
so re-sending an unchanged document costs nothing. A writer may create documents for any groups but
may change or delete only documents its token's groups can read.

A document the caller's groups cannot read is answered exactly as one that does not exist (404
document-not-found, same body) by every verb, a PUT over it included: a 403 "exists with other
groups" would confirm that a hidden id is taken and by whom. A PUT still cannot create a document
over one it may not see, so a writer learns that an id is taken (404 rather than 201) and no more:
ids live in one namespace per tenant and should carry no secret.

A PDF, DOCX, HTML page, email or mailbox is sent as it is: POST /v1/documents:upload?doc_id=...&acl=...
with the file's bytes as the body and its media type as Content-Type (raw bytes rather than multipart:
no form parser to trust, and `curl --data-binary @report.pdf` is the whole client). The server converts it
as `crossroads ingest` converts a file (api.usecases.uploaded_document), then indexes it as PUT does.

Chunk contexts as Message Batches (`crossroads ingest --batch`) are answered within hours, longer than a
request waits: `batch: true` here is a 422 pointing to POST /v1/jobs/reindex with `batch: true`, a job that
waits for them in a worker and survives a restart (the next run collects what was sent).
"""
from __future__ import annotations

import logging

from typing import TYPE_CHECKING, Literal

from fastapi import APIRouter, BackgroundTasks, Depends, Header, Path, Query, Request, Response
from pydantic import ValidationError

from api import usecases
from api.http.services import Services, services
from api.http.auth import Principal, reader, writer
from api.http.problems import ApiProblem, field_errors, validation_problem
from api.http.schemas import (
    BATCH_VIA_JOB, AclRequest, AclResult, BatchDocument, BatchRequest, BatchResponse, ChunkDetail, Deleted, DocumentBody,
    DocumentDetail, DocumentList, DocumentPut,
    DocumentResult, Group, Text, check_doc_id, doc_id_error, document_size_error,
)
from api.http.routes_query import ERRORS
from core.errors import BadDocument
from vector import store

if TYPE_CHECKING:  # annotations only: the module imports these where a function needs them
    from vector.ingest.sources import SourceDocument

log = logging.getLogger("crossroads.api")

routes = APIRouter(prefix="/v1", tags=["documents"])

ACTIONS = ("added", "changed", "metadata_updated", "unchanged")


def _source(doc_id: str, body: DocumentBody) -> SourceDocument:
    """The document as the ingest pipeline takes it; BadDocument / ValueError say what is wrong."""
    from vector.ingest.sources import build_document, parse_acl
    if not body.text.strip():
        raise ValueError("text: is blank")
    acl = parse_acl(list(body.acl))
    if not acl:
        raise ValueError("acl: needs at least one non-blank group name (a document is never public)")
    meta = {"acl": list(acl)}
    if body.title is not None and body.title.strip():
        meta["title"] = body.title
    if body.lang is not None:
        meta["lang"] = body.lang
    return build_document(doc_id, body.text, meta, (), body.source or "api", doc_id, meta_from="the request")


def _ingest(svc: Services, tenant: str, documents: list[SourceDocument]):
    from core.llm.usage import UsageMeter

    meter = UsageMeter()
    try:
        # a context a killed `ingest --batch` sent is taken from its batch once that has ended, never waited for
        return usecases.index_documents(svc.db(), svc.embedder(), svc.settings, tenant, documents, meter=meter,
                                        wait_for_batches=False).report
    finally:
        total = meter.total
        svc.metrics.usage({"input_tokens": total.input_tokens, "output_tokens": total.output_tokens,
                           "cache_read_tokens": total.cache_read_tokens,
                           "cache_write_tokens": total.cache_write_tokens, "cost_usd": total.cost_usd})


def _refuse_batch(batch: bool) -> None:
    """`batch: true` is the reindex job's (POST /v1/jobs/reindex): a request cannot wait hours for a Message Batch."""
    if batch:
        raise validation_problem([{"loc": ("body", "batch"), "type": "value_error", "msg": BATCH_VIA_JOB}])


def _not_readable(doc_id: str) -> ApiProblem:
    """The answer for a document that does not exist and for one the caller's groups cannot read alike."""
    return ApiProblem(404, "document-not-found", "Document not found",
                      f"No document {doc_id!r} that this token's groups can read.")


def _echoable(raw_id) -> str | None:
    """A batch item's doc_id as sent, when it can be sent back (a lone surrogate cannot be encoded as JSON)."""
    if not isinstance(raw_id, str):
        return None
    try:
        raw_id.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return raw_id


@routes.put("/documents/{doc_id:path}", response_model=DocumentResult, status_code=200,
            responses={**ERRORS, 201: {"description": "Created", "model": DocumentResult}},
            summary="Create or replace one document (only changed chunks are re-embedded)")
def put_document(doc_id: str, body: DocumentPut, response: Response, principal: Principal = Depends(writer),
                 svc: Services = Depends(services)):
    check_doc_id(doc_id)
    _refuse_batch(body.batch)
    too_big = document_size_error(body.text, svc.settings.max_document_bytes)
    if too_big:
        raise validation_problem([{"loc": ("body", "text"), "msg": too_big, "type": "too_long"}])
    try:
        document = _source(doc_id, body)
    except (BadDocument, ValueError) as exc:
        field, _, message = str(exc).partition(": ") if str(exc).startswith(("acl: ", "text: ")) else ("text", "", str(exc))
        raise validation_problem([{"loc": ("body", field), "msg": message, "type": "value_error"}]) from None
    return _store_one(svc, principal, document, response)


def _store_one(svc: Services, principal: Principal, document: SourceDocument, response: Response) -> dict:
    """Index one document unless it exists with groups the caller cannot read: PUT's and upload's answer."""
    doc_id = document.doc_id
    with svc.db().connection() as conn:
        access = store.document_access(conn, principal.tenant, doc_id, list(principal.groups))
    if access is False:
        raise _not_readable(doc_id)
    report = _ingest(svc, principal.tenant, [document])
    if report.errors:
        log.error("PUT %s failed: %s", doc_id, report.errors)
        raise ApiProblem(503, "not-indexed", "Document not indexed",
                         f"Document {doc_id!r} could not be indexed; the index keeps its previous version. "
                         "Try again; the server log has the cause.", headers={"Retry-After": "5"})
    status = next((a for a in ACTIONS if report.documents[a]), "unchanged")
    if status == "added":
        response.status_code = 201
    return {"doc_id": doc_id, "status": status, "chunks": report.chunks,
            "embeddings_computed": report.embeddings_computed}


async def _file_bytes(request: Request) -> bytes:
    """The raw body (the middleware has already refused one over CROSSROADS_API_MAX_BODY_BYTES)."""
    return await request.body()


_BINARY = {"schema": {"type": "string", "format": "binary"}}


@routes.post("/documents:upload", response_model=DocumentResult, status_code=200,
             responses={**ERRORS, 201: {"description": "Created", "model": DocumentResult},
                        413: {"description": "The file is over CROSSROADS_MAX_DOCUMENT_BYTES"},
                        415: {"description": "Content-Type is not one of the formats read"}},
             openapi_extra={"requestBody": {"required": True,
                                            "content": {t: _BINARY for t in usecases.UPLOAD_TYPES}}},
             summary="Create or replace one document from a PDF, DOCX, HTML, email or mailbox file (the body)")
def upload_document(response: Response,
                    doc_id: str = Query(..., description="The document's id, as PUT /v1/documents/{doc_id} takes it."),
                    acl: list[Group] = Query(..., min_length=1, max_length=100,
                                             description="Groups that may read it (repeat: acl=a&acl=b)."),
                    title: Text | None = Query(None, max_length=1000, description="Default: the file's own title."),
                    lang: Literal["ru", "en", "russian", "english", "simple"] | None = Query(None),
                    content_type: str | None = Header(None),
                    principal: Principal = Depends(writer), data: bytes = Depends(_file_bytes),
                    svc: Services = Depends(services)):
    from vector.ingest.sources import parse_acl
    check_doc_id(doc_id)
    media_type = (content_type or "").split(";")[0].strip().lower()
    if media_type not in usecases.UPLOAD_TYPES:
        raise ApiProblem(415, "unsupported-media-type", "Unsupported media type",
                         f"Content-Type {media_type or '(none)'!r} is not a format this server reads; send one of "
                         f"{', '.join(usecases.UPLOAD_TYPES)}. Markdown and plain text go as JSON to "
                         "PUT /v1/documents/{doc_id}.", accepted=list(usecases.UPLOAD_TYPES))
    limit = svc.settings.max_document_bytes
    if len(data) > limit:
        raise ApiProblem(413, "document-too-large", "Document too large",
                         f"The file is {len(data):,} bytes; the limit is {limit:,} (CROSSROADS_MAX_DOCUMENT_BYTES). "
                         "Split it, or ask the operator to raise the limit.", max_bytes=limit)
    try:
        groups = parse_acl(list(acl))
    except BadDocument as exc:
        raise validation_problem([{"loc": ("query", "acl"), "type": "value_error", "msg": str(exc)}]) from None
    if not groups:
        raise validation_problem([{"loc": ("query", "acl"), "type": "value_error",
                                   "msg": "needs at least one non-blank group name (a document is never public)"}])
    try:
        document = usecases.uploaded_document(doc_id, media_type, data, groups, limit, title=title, lang=lang)
    except BadDocument as exc:  # a scanned PDF, a damaged file, a bomb: the reader's reason, for the writer to act on
        raise ApiProblem(422, "unreadable-document", "Document cannot be read",
                         f"This file was not indexed: {exc}.") from None
    return _store_one(svc, principal, document, response)


@routes.post("/documents:batch", response_model=BatchResponse, responses=ERRORS,
             summary="Create or replace many documents; a bad item is reported by its index and the rest still land")
def batch_documents(body: BatchRequest, principal: Principal = Depends(writer), svc: Services = Depends(services)):
    _refuse_batch(body.batch)
    limit = svc.settings.api_max_batch_documents
    if len(body.documents) > limit:
        raise validation_problem([{"loc": ("body", "documents"), "type": "too_long",
                                   "msg": f"has {len(body.documents)} items; the limit is {limit} per request "
                                          "(CROSSROADS_API_MAX_BATCH_DOCUMENTS)"}])
    results: list[dict] = []
    accepted: dict[str, int] = {}  # doc_id -> index
    documents: list[SourceDocument] = []
    for index, item in enumerate(body.documents):
        raw_id = item.get("doc_id") if isinstance(item, dict) else None
        result = {"index": index, "doc_id": _echoable(raw_id), "status": "rejected", "error": None}
        results.append(result)
        try:
            parsed = BatchDocument.model_validate(item)
        except ValidationError as exc:
            result["error"] = "; ".join(f"{f['field']}: {f['message']}" for f in field_errors(exc.errors()))
            continue
        error = doc_id_error(parsed.doc_id)
        if error:
            result["error"] = f"doc_id: {error}"
            continue
        if parsed.doc_id in accepted:
            result["error"] = f"doc_id: {parsed.doc_id!r} is also item {accepted[parsed.doc_id]} of this batch"
            continue
        too_big = document_size_error(parsed.text, svc.settings.max_document_bytes)
        if too_big:
            result["error"] = f"text: {too_big}"
            continue
        try:
            document = _source(parsed.doc_id, parsed)
        except (BadDocument, ValueError) as exc:
            result["error"] = str(exc) if str(exc).startswith(("acl: ", "text: ")) else f"text: {exc}"
            continue
        accepted[parsed.doc_id] = index
        documents.append(document)
    if documents:
        with svc.db().connection() as conn:
            for document in list(documents):
                if store.document_access(conn, principal.tenant, document.doc_id, list(principal.groups)) is False:
                    results[accepted.pop(document.doc_id)]["error"] = (
                        "doc_id: not writable with this token's groups; nothing was changed")
                    documents.remove(document)
    report = _ingest(svc, principal.tenant, documents) if documents else None
    failed = {e["doc_id"] for e in report.errors} if report else set()
    if failed:
        log.error("batch items failed: %s", report.errors)
    for doc_id, index in accepted.items():
        if doc_id in failed:
            results[index].update(status="failed", error="not indexed (the index keeps its previous version); try again")
        else:
            results[index].update(status="indexed")
    counts = report.documents if report else {a: 0 for a in (*ACTIONS, "deleted", "skipped", "failed")}
    return {"results": results, "documents": counts,
            "chunks": report.chunks if report else {"added": 0, "changed": 0, "deleted": 0},
            "embeddings_computed": report.embeddings_computed if report else 0,
            "errors": sum(1 for r in results if r["status"] != "indexed")}


@routes.delete("/documents/{doc_id:path}", response_model=Deleted, responses=ERRORS,
               summary="Remove a document and all its chunks")
def delete_document(doc_id: str, background: BackgroundTasks, principal: Principal = Depends(writer),
                    svc: Services = Depends(services)):

    check_doc_id(doc_id)
    # emptied indexes are dropped after the response: dropping one waits for older transactions
    deletion = usecases.delete_documents(svc.db(), principal.tenant, [doc_id], readable_by=principal.groups,
                                         defer=background.add_task)
    if not deletion.deleted:
        raise _not_readable(doc_id)
    return {"doc_id": doc_id, "chunks_deleted": deletion.chunks_deleted}


@routes.patch("/documents/{doc_id:path}/acl", response_model=AclResult, responses=ERRORS,
              summary="Replace a document's groups (nothing is re-embedded)")
def set_document_acl(doc_id: str, body: AclRequest, principal: Principal = Depends(writer),
                     svc: Services = Depends(services)):

    from vector.ingest.sources import parse_acl
    check_doc_id(doc_id)
    groups = list(parse_acl(list(body.acl)))
    if not groups:
        raise validation_problem([{"loc": ("body", "acl"), "type": "value_error",
                                   "msg": "needs at least one non-blank group name (a document is never public)"}])
    if not usecases.change_acl(svc.db(), principal.tenant, doc_id, groups, readable_by=principal.groups):
        raise _not_readable(doc_id)
    return {"doc_id": doc_id, "acl": groups}


@routes.get("/documents", response_model=DocumentList, responses=ERRORS,
            summary="Documents the caller's groups can read")
def list_documents(limit: int = Query(100, ge=1, le=1000), offset: int = Query(0, ge=0, le=10_000_000),
                   principal: Principal = Depends(reader), svc: Services = Depends(services)):
    with svc.db().connection() as conn:
        rows = store.readable_documents(conn, principal.tenant, list(principal.groups), limit, offset)
        total = store.readable_document_count(conn, principal.tenant, list(principal.groups))
    return {"documents": rows, "total": total, "limit": limit, "offset": offset}


@routes.get("/documents/{doc_id:path}", response_model=DocumentDetail, responses=ERRORS,
            summary="One document the caller's groups can read, with its indexed text chunk by chunk")
def get_document(doc_id: str, principal: Principal = Depends(reader), svc: Services = Depends(services)):
    check_doc_id(doc_id)
    with svc.db().connection() as conn:
        document = store.readable_document(conn, principal.tenant, list(principal.groups), doc_id)
    if document is None:
        raise _not_readable(doc_id)
    return document


@routes.get("/chunks/{chunk_id}", response_model=ChunkDetail, responses=ERRORS,
            summary="One passage (what a citation's chunk id names), if the caller's groups can read it")
def get_chunk(chunk_id: int = Path(..., ge=1, le=2**63 - 1), principal: Principal = Depends(reader),
              svc: Services = Depends(services)):
    with svc.db().connection() as conn:
        chunk = store.readable_chunk(conn, principal.tenant, list(principal.groups), chunk_id)
    if chunk is None:
        raise ApiProblem(404, "chunk-not-found", "Passage not found",
                         f"No passage {chunk_id} that this token's groups can read.")
    return chunk
