"""POST /v1/chat/completions (role: reader): the OpenAI Chat Completions wire format over /v1/ask, so the
chat front-ends people already run (any OpenAI client with a base URL and an API key) can ask the corpus.

The last message is the question and the earlier user / assistant messages are the history, rewritten
into a standalone question exactly as /v1/ask's `history` is; system and developer messages are read
by nothing (the router answers from the corpus with its own instructions, and a client's system prompt
must not steer what the caller may read). Tenant and groups come from the bearer token only, the same
tokens as every /v1 call (`OPENAI_API_KEY=<token>`). GET /v1/models lists one model, `crossroads`, for
the front-ends that fill a model picker from it.

The answer is the assistant message; its checked citations ride along in `citations` (each: the
passage's document, chunk and text) and what the router did in `crossroads` (route, offline, degraded,
no_answer, conversation). `model` is echoed as sent: the models that answer are the server's settings.
Sampling parameters clients send by habit (temperature, top_p, max_tokens, stop, seed, ...) are accepted
and ignored: the answer is written under the server's own limits. What cannot be honoured is refused
with a 422 naming the field: `n` above 1, `logprobs`, a JSON `response_format`, tools, image parts, and
any field not listed here.

With `stream: true` the answer comes as `chat.completion.chunk` server-sent events ending with
`data: [DONE]`. An answer streamed from the model that then fails its citation check cannot be taken
back in this format (it can with /v1/ask's `withdraw` event): the replacement follows a visible notice
saying so, and the last chunk's `crossroads.withdrawn` is true.

Errors of this endpoint come in OpenAI's body, `{"error": {"message", "type", "param", "code"}}`, with the
status codes of every other endpoint: the SDKs and front-ends that call it read that shape (and show
`message`), where every other endpoint answers RFC 9457 problem details. `message` is the problem's
detail, `param` the first field at fault, `code` the problem's kind (`validation`, `unauthorized`, ...).
"""
from __future__ import annotations

import inspect
import json
import logging
import time
import uuid
from typing import Callable, Literal

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from api.http.auth import Principal, reader
from api.http.problems import URN, internal_error, validation_problem
from api.http.routes_query import ERRORS, answer_events, answer_question, to_json
from api.http.schemas import MAX_HISTORY_CHARS, MAX_HISTORY_TURNS, MAX_TURN_CHARS, Route, Strict, Text, check_text
from api.http.services import Services, services

log = logging.getLogger("crossroads.api")

routes = APIRouter(prefix="/v1", tags=["chat"])
CHAT_PATH = "/v1/chat/completions"  # its clients read OpenAI's error body, even for a 413 (api/http/app.py)

MODEL_NAME = "crossroads"  # what GET /v1/models lists; the models that answer are the server's settings
WITHDRAWN_NOTICE = ("\n\n---\n(The text above did not pass the citation check and is withdrawn; "
                    "the answer that stands follows.)\n\n")


class TextPart(Strict):
    type: Literal["text"] = Field(description="Only text parts: the corpus is text.")
    text: Text = Field(..., max_length=MAX_TURN_CHARS)


class ChatMessage(Strict):
    role: Literal["system", "developer", "user", "assistant"]
    content: Text | list[TextPart] | None = Field(
        None, description="Text, or a list of text parts; null only on an assistant message (it is skipped).")
    name: str | None = Field(None, max_length=200, description="Accepted and ignored.")

    def text(self) -> str:
        if isinstance(self.content, list):
            return "\n".join(part.text for part in self.content)
        return self.content or ""


class StreamOptions(Strict):
    include_usage: bool = Field(False, description="Send a last chunk with `usage` (and no choices) before [DONE].")


class ChatRequest(Strict):
    model: str = Field(..., min_length=1, max_length=200, description="Echoed in the response; the server's settings "
                                                                      "choose the models that answer.")
    messages: list[ChatMessage] = Field(..., min_length=1, max_length=2 * MAX_HISTORY_TURNS + 1,
                                        description="The conversation; the last one (role user) is the question.")
    stream: bool = Field(False, description="Answer as `chat.completion.chunk` server-sent events, then `[DONE]`.")
    stream_options: StreamOptions | None = None
    n: int | None = Field(None, ge=1, le=1, description="Only 1: one answer per question.")
    route: Route = Field("auto", description="Crossroads' own: force a route as /v1/ask does (`extra_body`).")
    logprobs: bool | None = Field(None, description="Not available: only false or absent.")
    response_format: dict | None = Field(None, description='Only {"type": "text"}: the answer is prose with citations.')
    # sent by habit by most clients: accepted and ignored (the server's own limits apply)
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, ge=0, le=1)
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    presence_penalty: float | None = Field(None, ge=-2, le=2)
    frequency_penalty: float | None = Field(None, ge=-2, le=2)
    stop: str | list[str] | None = None
    seed: int | None = None
    user: str | None = Field(None, max_length=500)
    logit_bias: dict[str, float] | None = None
    top_logprobs: int | None = Field(None, ge=0, le=0)
    metadata: dict[str, str] | None = None
    store: bool | None = None
    parallel_tool_calls: bool | None = None
    service_tier: str | None = Field(None, max_length=50)
    reasoning_effort: str | None = Field(None, max_length=50)


class ChatChoice(BaseModel):
    index: int
    message: dict = Field(description="role assistant, content: the answer")
    finish_reason: Literal["stop"]
    logprobs: None = None


class ChatCompletion(BaseModel):
    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    choices: list[ChatChoice]
    usage: dict = Field(description="prompt_tokens, completion_tokens, total_tokens: every LLM call of the answer")
    citations: list[dict] = Field(description="The answer's checked citations (as /v1/ask's).")
    crossroads: dict = Field(description="route, offline, degraded, degraded_reasons, partial, no_answer, "
                                         "conversation, latency_ms (as /v1/ask's)")
    system_fingerprint: str | None = None


def _invalid(field: str, message: str):
    return validation_problem([{"loc": ("body", *field.split(".")), "msg": message, "type": "value_error"}])


def _conversation(body: ChatRequest, max_question_chars: int) -> tuple[str, list[dict]]:
    """(question, history) from the messages, or a 422 naming the message at fault."""
    if body.logprobs:
        raise _invalid("logprobs", "log probabilities are not available; send false or leave it out")
    if body.response_format is not None and body.response_format != {"type": "text"}:
        raise _invalid("response_format", 'only {"type": "text"}: the answer is prose with citations')
    last = len(body.messages) - 1
    if body.messages[last].role != "user":
        raise _invalid(f"messages.{last}.role", "the last message must be the question, with role user")
    question = check_text(f"messages.{last}.content", body.messages[last].text(), max_question_chars)
    history = [{"role": m.role, "content": m.text()} for m in body.messages[:last]
               if m.role in ("user", "assistant") and m.text().strip()]
    if len(history) > MAX_HISTORY_TURNS:
        raise _invalid("messages", f"has {len(history)} earlier user and assistant turns; the limit is "
                                   f"{MAX_HISTORY_TURNS} (send the last turns only)")
    size = sum(len(turn["content"]) for turn in history)
    if size > MAX_HISTORY_CHARS:
        raise _invalid("messages", f"the earlier turns are {size:,} characters in all; the limit is "
                                   f"{MAX_HISTORY_CHARS:,} (send the last turns only)")
    return question, history


def _usage(answer_usage: dict) -> dict:
    prompt = int(answer_usage.get("prompt_tokens") or 0)
    completion = int(answer_usage.get("output_tokens") or 0)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _extras(answer: dict, withdrawn: bool = False) -> dict:
    return {"route": answer["route"]["route"], "offline": answer["offline"], "degraded": answer["degraded"],
            "degraded_reasons": answer["degraded_reasons"], "partial": answer["partial"],
            "no_answer": answer["no_answer"], "conversation": answer.get("conversation"),
            "latency_ms": answer["latency_ms"], "withdrawn": withdrawn}


# OpenAI's error types by status; any other 4xx is an invalid request, any 5xx a server error
_ERROR_TYPES = {401: "authentication_error", 403: "permission_error", 404: "not_found_error",
                429: "rate_limit_error"}


class OpenAIError(BaseModel):
    message: str
    type: str
    param: str | None
    code: str | None


class OpenAIErrorBody(BaseModel):
    error: OpenAIError


def openai_error(problem: Response) -> JSONResponse:
    """A problem+json response in OpenAI's error body, its status and headers (Retry-After,
    WWW-Authenticate) kept."""
    body = json.loads(problem.body)
    status = problem.status_code
    kind = body.get("type", "")
    errors = body.get("errors") or []
    error = {"message": body.get("detail") or body.get("title") or "The request failed.",
             "type": _ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error"),
             "param": errors[0]["field"] if errors else None,
             "code": kind[len(URN):] if kind.startswith(URN) else None}
    headers = {k: v for k, v in problem.headers.items() if k.lower() not in ("content-length", "content-type")}
    return JSONResponse({"error": error}, status_code=status, headers=headers)


class OpenAIErrorRoute(APIRoute):
    """A route whose errors (validation, auth, refusals, a crash) are answered by the app's own problem
    handlers, then reshaped by `openai_error`: one source of status codes and messages for both shapes."""

    def get_route_handler(self) -> Callable:
        handle = super().get_route_handler()

        async def route(request: Request) -> Response:
            try:
                return await handle(request)
            except Exception as exc:  # noqa: BLE001 - each is answered as the app answers it, then reshaped
                handler = _handler_for(request.app.exception_handlers, exc)
                if handler is None:
                    return openai_error(internal_error(request.url.path))
                problem = handler(request, exc)
                return openai_error(await problem if inspect.isawaitable(problem) else problem)

        return route


def _handler_for(handlers: dict, exc: Exception):
    """The handler the app would run for `exc`: by status for an HTTP exception, else by class (Starlette's order)."""
    if isinstance(exc, StarletteHTTPException) and exc.status_code in handlers:
        return handlers[exc.status_code]
    return next((handlers[cls] for cls in type(exc).__mro__ if cls in handlers), None)


_OPENAI_ERRORS = {code: {"description": entry["description"] + " (OpenAI's error body)", "model": OpenAIErrorBody}
                  for code, entry in ERRORS.items()}


def chat_completions(body: ChatRequest, principal: Principal = Depends(reader), svc: Services = Depends(services)):
    question, history = _conversation(body, svc.settings.api_max_question_chars)
    router_ = svc.router()
    completion_id, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())
    groups = list(principal.groups)
    if body.stream:
        usage = bool(body.stream_options and body.stream_options.include_usage)
        return StreamingResponse(
            _chunks(svc, router_, principal.tenant, groups, question, body.route, history, completion_id, created,
                    body.model, usage),
            media_type="text/event-stream", headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
    answer = answer_question(svc, router_, principal.tenant, groups, question, body.route, history,
                             field=f"messages.{len(body.messages) - 1}.content")
    completion = {"id": completion_id, "object": "chat.completion", "created": created, "model": body.model,
                  "choices": [{"index": 0, "message": {"role": "assistant", "content": answer["answer"], "refusal": None},
                               "finish_reason": "stop", "logprobs": None}],
                  "usage": _usage(answer["usage"]), "citations": answer["citations"], "crossroads": _extras(answer),
                  "system_fingerprint": None}
    return JSONResponse(json.loads(to_json(completion)))


routes.add_api_route(
    "/chat/completions", chat_completions, methods=["POST"], response_model=None,
    route_class_override=OpenAIErrorRoute,
    summary="OpenAI-compatible chat: the last user message answered like /v1/ask, with citations",
    responses={**_OPENAI_ERRORS, 200: {"description": "A `chat.completion`; with `stream`: `text/event-stream` of "
                                                     "`chat.completion.chunk` objects ending with `data: [DONE]`",
                                       "model": ChatCompletion,
                                       "content": {"text/event-stream": {"schema": {"type": "string"}}}}})


class ModelInfo(BaseModel):
    id: str
    object: Literal["model"]
    created: int
    owned_by: str


class ModelList(BaseModel):
    object: Literal["list"]
    data: list[ModelInfo]


@routes.get("/models", response_model=ModelList, responses=ERRORS,
            summary="OpenAI-compatible model list: the one name chat front-ends offer (any `model` is accepted)")
def list_models(principal: Principal = Depends(reader)):
    """Chat front-ends fill their model picker from this list before the first question."""
    return {"object": "list", "data": [{"id": MODEL_NAME, "object": "model", "created": 0, "owned_by": "crossroads"}]}


def _data(payload) -> str:
    return f"data: {to_json(payload)}\n\n"


def _chunks(svc: Services, router_, tenant: str, groups: list[str], question: str, route: str, history: list[dict],
            completion_id: str, created: int, model: str, include_usage: bool):
    def chunk(delta: dict, finish: str | None = None, **extra) -> str:
        return _data({"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model,
                      "system_fingerprint": None,
                      "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}], **extra})

    yield chunk({"role": "assistant", "content": ""})
    withdrawn = False
    try:
        for name, data in answer_events(svc, router_, tenant, groups, question, route, history):
            if name == "token":
                yield chunk({"content": data["text"]})
            elif name == "withdraw":
                withdrawn = True
                yield chunk({"content": WITHDRAWN_NOTICE})
            elif name == "error":  # the router refused the question: OpenAI clients raise on an `error` object
                yield _data({"error": {"message": f"{data['title']}: {data['detail']}", "type": "invalid_request_error",
                                       "param": "messages", "code": None}})
                break
            elif name == "done":
                yield chunk({}, "stop", citations=data["citations"], crossroads=_extras(data, withdrawn))
                if include_usage:
                    yield _data({"id": completion_id, "object": "chat.completion.chunk", "created": created,
                                 "model": model, "choices": [], "usage": _usage(data["usage"])})
    except Exception:  # noqa: BLE001 - the status line is sent: report the failure in the stream
        log.exception("streaming chat completion failed")
        yield _data({"error": {"message": "The answer could not be produced; the server log has the cause.",
                               "type": "server_error", "param": None, "code": None}})
    yield "data: [DONE]\n\n"
