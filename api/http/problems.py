"""Every error as RFC 9457 problem details (`application/problem+json`), never a stack trace.

`type` is a URN naming the kind of problem (`about:blank` for a plain HTTP status such as 404 or
405); `title` is the same for every occurrence of the type; `detail` says what went wrong with this
request and what to do; `instance` is the request path. Validation problems add `errors`: one entry
per bad field, with the field's dotted path.
"""
from __future__ import annotations

import contextlib

import logging
import uuid
from http import HTTPStatus
from typing import Any, Callable

import psycopg
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from core.errors import CrossroadsError, DatabaseError, EmbeddingError, ModelNotServedError, SearchUnavailableError

log = logging.getLogger("crossroads.api")

MEDIA_TYPE = "application/problem+json"
URN = "urn:crossroads:problem:"
RETRY_AFTER_S = "5"  # Retry-After of every 503 problem: a restarted server or a freed connection takes seconds


class ApiProblem(Exception):
    """Raised by handlers: becomes a problem+json response."""

    def __init__(self, status: int, slug: str, title: str, detail: str, *, headers: dict | None = None, **extra: Any):
        super().__init__(detail)
        self.status, self.slug, self.title, self.detail = status, slug, title, detail
        self.headers = headers or {}
        self.extra = extra


def problem_response(status: int, title: str, detail: str, instance: str, *, slug: str | None = None,
                     headers: dict | None = None, **extra: Any) -> JSONResponse:
    body = {"type": URN + slug if slug else "about:blank", "title": title, "status": status, "detail": detail,
            "instance": instance, **extra}
    return JSONResponse(body, status_code=status, media_type=MEDIA_TYPE, headers=headers)


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"


def field_errors(errors: list[dict]) -> list[dict]:
    """Pydantic errors -> [{field, message, type}] without echoing the (possibly huge) input."""
    out = []
    for err in errors:
        loc = [str(p) for p in err.get("loc", ())]
        if loc and loc[0] in ("body", "query", "path", "header"):
            where, loc = loc[0], loc[1:]
        else:
            where = "body"
        field = ".".join(loc) or where
        out.append({"field": field, "in": where, "message": str(err.get("msg", "invalid value")),
                    "type": str(err.get("type", "value_error"))})
    return out


def validation_problem(errors: list[dict]) -> ApiProblem:
    """A 422 naming each field, in the shape `RequestValidationError` gets."""
    fields = field_errors(errors)
    detail = "; ".join(f"{f['field']}: {f['message']}" for f in fields)
    return ApiProblem(422, "validation", "Invalid request", detail, errors=fields)


def install(app: FastAPI) -> None:
    @app.exception_handler(ApiProblem)
    async def _api_problem(request: Request, exc: ApiProblem):
        return problem_response(exc.status, exc.title, exc.detail, request.url.path, slug=exc.slug,
                                headers=exc.headers, **exc.extra)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException):
        status = exc.status_code
        detail = exc.detail if isinstance(exc.detail, str) else _phrase(status)
        if status == 404 and detail == "Not Found":
            detail = f"No route {request.url.path}; see /docs or /openapi.json for the API."
        elif status == 405:
            detail = f"{request.method} is not allowed on {request.url.path}."
        elif status == 400 and detail == "There was an error parsing the body":
            detail = "The body could not be read as JSON: send UTF-8 encoded JSON with Content-Type: application/json."
            return problem_response(400, "Malformed request body", detail, request.url.path, slug="malformed-body",
                                    headers=getattr(exc, "headers", None))
        return problem_response(status, _phrase(status), detail, request.url.path, headers=getattr(exc, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError):
        errors = list(exc.errors())
        bad_json = [e for e in errors if e.get("type") == "json_invalid"]
        if bad_json:
            err = bad_json[0]
            pos = err.get("loc", ("body", "?"))[-1]
            reason = (err.get("ctx") or {}).get("error", "invalid JSON")
            return problem_response(400, "Malformed JSON", f"The body is not valid JSON: {reason} at character {pos}.",
                                    request.url.path, slug="malformed-json")
        whole_body = [e for e in errors if tuple(e.get("loc", ())) == ("body",)]
        if whole_body:
            kind = "missing" if whole_body[0].get("type") == "missing" else "not a JSON object"
            return problem_response(
                422, "Invalid request",
                f"The request needs a JSON object as its body (Content-Type: application/json); the body is {kind}.",
                request.url.path, slug="validation",
                errors=[{"field": "body", "in": "body", "message": kind, "type": str(whole_body[0].get("type"))}])
        problem = validation_problem(errors)
        return problem_response(422, problem.title, problem.detail, request.url.path, slug=problem.slug, **problem.extra)

    @app.exception_handler(ModelNotServedError)
    async def _model(request: Request, exc: ModelNotServedError):
        return problem_response(503, "Search index not served", str(exc), request.url.path, slug="model-not-served")

    @app.exception_handler(DatabaseError)
    async def _database(request: Request, exc: DatabaseError):
        log.error("database unavailable on %s %s: %s", request.method, request.url.path, exc)
        return database_unavailable(request, "The database cannot be reached right now")

    @app.exception_handler(psycopg.OperationalError)
    async def _database_lost(request: Request, exc: psycopg.OperationalError):
        # The server went away mid-request, no pooled connection came within CROSSROADS_DATABASE_WAIT_S
        # (PoolTimeout), a statement was cancelled, or a deadlock rolled it back: a retry can succeed.
        log.warning("database unavailable on %s %s: %s: %s", request.method, request.url.path,
                    type(exc).__name__, exc)
        if isinstance(exc, psycopg.errors.QueryCanceled):
            return database_unavailable(request, "The database did not answer in time")
        if (exc.sqlstate or "").startswith("40"):  # class 40, transaction rollback: deadlock, serialization
            return database_unavailable(request, "The database rolled this request back (a conflicting write)")
        return database_unavailable(request, "The database cannot be reached right now")

    @app.exception_handler(EmbeddingError)
    async def _embedding(request: Request, exc: EmbeddingError):
        return problem_response(503, "Embedding provider unavailable", str(exc), request.url.path,
                                slug="embedding-unavailable", headers={"Retry-After": RETRY_AFTER_S})

    @app.exception_handler(SearchUnavailableError)
    async def _search(request: Request, exc: SearchUnavailableError):
        log.error("search failed: %s", exc)  # the cause stays in the log: it may name hosts or internals
        return problem_response(503, "Search unavailable", "The search failed or timed out; try again shortly.",
                                request.url.path, slug="search-unavailable", headers={"Retry-After": RETRY_AFTER_S})

    @app.exception_handler(CrossroadsError)
    async def _crossroads(request: Request, exc: CrossroadsError):
        # Messages of this family are written for users (they say what to do next).
        return problem_response(422, "Request cannot be served", str(exc), request.url.path, slug="unprocessable")


def database_unavailable(request: Request, what: str) -> JSONResponse:
    """503 for an outage: the cause stays in the log (it may name hosts); the client learns when to retry."""
    return problem_response(503, "Database unavailable",
                            f"{what}; try again in {RETRY_AFTER_S} s (GET /readyz shows when it is back).",
                            request.url.path, slug="database-unavailable", headers={"Retry-After": RETRY_AFTER_S})


def internal_error(path: str) -> JSONResponse:
    incident = uuid.uuid4().hex[:12]
    log.exception("unhandled error on %s (incident %s)", path, incident)
    return problem_response(500, "Internal Server Error",
                            f"The server failed to handle this request. The log has the cause under incident {incident}.",
                            path, slug="internal", incident=incident)


class CatchAllMiddleware:
    """The last line: any exception a handler lets escape becomes a problem+json 500 (traceback logged).

    Pure ASGI, so streaming responses pass through untouched. Once a response has started nothing
    else can be sent, so the exception is re-raised and the server closes the connection.
    """

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception:
            if started:
                log.exception("error after the response started on %s", scope.get("path"))
                raise
            await internal_error(scope.get("path", ""))(scope, receive, send)


class BodyTooLarge(Exception):
    """Raised inside the app's receive() once a streamed body passes the limit; answered with 413."""


class BodyLimitMiddleware:
    """413 for bodies over the limit: by Content-Length up front, or by counting a streamed body.
    `reshape`: path -> a function that rewrites the problem response for a path whose clients expect
    another error body (the OpenAI-compatible chat endpoint)."""

    def __init__(self, app: ASGIApp, max_bytes: int,
                 reshape: dict[str, Callable[[JSONResponse], JSONResponse]] | None = None):
        self.app, self.max_bytes, self.reshape = app, max_bytes, dict(reshape or {})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None:
            try:
                size = int(declared)
            except ValueError:
                await problem_response(400, "Bad Request", "Content-Length is not a number.", path)(scope, receive, send)
                return
            if size > self.max_bytes:
                await self._too_large(scope, receive, send, path)
                return
        received = 0
        too_large = replaced = False

        async def counting_receive() -> Message:
            nonlocal received, too_large
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    too_large = True
                    raise BodyTooLarge()
            return message

        async def guarded_send(message: Message) -> None:
            # once the limit is hit, whatever the app answers (FastAPI turns the read error into a
            # 400) is replaced by the 413
            nonlocal replaced
            if not too_large:
                await send(message)
            elif message["type"] == "http.response.start" and not replaced:
                replaced = True
                await self._too_large(scope, receive, send, path)

        with contextlib.suppress(BodyTooLarge):  # `too_large` is set: the 413 is sent below
            await self.app(scope, counting_receive, guarded_send)
        if too_large and not replaced:
            await self._too_large(scope, receive, send, path)

    async def _too_large(self, scope, receive, send, path) -> None:
        detail = (f"The body is over the {self.max_bytes:,} byte limit (CROSSROADS_API_MAX_BODY_BYTES); "
                  "send fewer or smaller documents per request.")
        response = problem_response(413, "Request body too large", detail, path, slug="body-too-large",
                                    max_bytes=self.max_bytes)
        if path in self.reshape:
            response = self.reshape[path](response)
        await response(scope, receive, send)
