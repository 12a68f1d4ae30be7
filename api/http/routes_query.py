"""POST /v1/ask, /v1/route, /v1/search (role: reader). Tenant and groups come from the token only."""
from __future__ import annotations

import json
import logging
import math
import re

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from api import usecases
from api.http.services import Services, services
from api.http.auth import Principal, reader
from api.http.problems import validation_problem
from graph.query.global_budget import BudgetError, parse_budget
from api.http.schemas import AskRequest, RouteRequest, RouteResponse, SearchRequest, SearchResponse, check_text

log = logging.getLogger("crossroads.api")

routes = APIRouter(prefix="/v1", tags=["query"])

ERRORS = {code: {"description": text, "content": {"application/problem+json": {}}} for code, text in (
    (401, "Missing or invalid bearer token"), (403, "The token's role is too low"),
    (422, "Invalid request (the fields are named)"), (503, "A dependency is down"))}


class AskAnswer(BaseModel):
    """The answer with its checked citations, the route taken and a trace (see answers/types.py)."""
    model_config = ConfigDict(extra="allow")
    question: str
    answer: str
    citations: list[dict]
    route: dict
    offline: bool
    degraded: bool
    degraded_reasons: list[str]
    partial: bool
    no_answer: bool
    usage: dict
    latency_ms: float
    conversation: dict = Field(description="asked (as sent), question (what was routed: standalone when rewritten "
                                           "from `history`), turns, rewritten, reason (why not rewritten)")


def _default(value):
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)


def to_json(data) -> str:
    return json.dumps(data, ensure_ascii=False, default=_default)


def public_reason(reason: str | None) -> str | None:
    """What degraded, without exception messages (they may carry hosts or internals)."""
    if not reason:
        return None
    parts = []
    for part in reason.split("; "):
        pieces = part.split(": ")
        parts.append(": ".join(pieces[:2]) if len(pieces) > 1 and re.fullmatch(r"[A-Za-z_.]+", pieces[1]) else pieces[0])
    return "; ".join(parts)


def _finite(x) -> float:
    x = float(x or 0.0)
    return x if math.isfinite(x) else 0.0


@routes.post("/search", response_model=SearchResponse, responses=ERRORS,
             summary="Hybrid search (vector + full text, z-score fusion, rerank) over what the caller may read")
def search(body: SearchRequest, principal: Principal = Depends(reader), svc: Services = Depends(services)):
    check_text("query", body.query, svc.settings.api_max_query_chars)
    # absent and null differ: absent is the calibrated threshold, null none at all
    min_score = body.min_score if "min_score" in body.model_fields_set else usecases.CALIBRATED
    result = usecases.search(svc.query_searcher(), principal.tenant, principal.groups, body.query, body.k,
                             min_score=min_score, group_by=body.group_by)
    if result.degraded:
        log.warning("degraded search: %s", result.degraded_reason)
    svc.metrics.result("search", empty=not result.hits, degraded=result.degraded)
    return {"hits": result.hits, "degraded": result.degraded, "degraded_reason": public_reason(result.degraded_reason),
            "group_by": result.group_by, "threshold": result.threshold, "unmentioned": list(result.unmentioned)}


@routes.post("/route", response_model=RouteResponse, responses=ERRORS,
             summary="Which route a question would take, and why")
def route(body: RouteRequest, principal: Principal = Depends(reader), svc: Services = Depends(services)):
    check_text("question", body.question, svc.settings.api_max_question_chars)
    router_ = svc.router()
    try:
        decision = router_.classify(body.question)
    except ValueError as exc:
        raise validation_problem([{"loc": ("body", "question"), "msg": str(exc), "type": "value_error"}]) from None
    return {"route": decision.route, "confidence": round(_finite(decision.confidence), 4), "reason": decision.reason,
            "classifier": decision.classifier, "probabilities": decision.features.get("probabilities"),
            "low_confidence": bool(decision.features.get("low_confidence"))}


@routes.post("/ask", response_model=None, summary="Answer a question with citations (JSON, or server-sent events)",
             responses={**ERRORS, 200: {"description": "The answer; with `stream`: `text/event-stream` frames "
                                                      "`route`, `token`..., `citations`, `usage`, `done` (or `error`)",
                                        "model": AskAnswer,
                                        "content": {"text/event-stream": {"schema": {"type": "string"}}}}})
def ask(body: AskRequest, principal: Principal = Depends(reader), svc: Services = Depends(services)):
    check_text("question", body.question, svc.settings.api_max_question_chars)
    try:
        budget = parse_budget(body.budget)
    except BudgetError as exc:
        raise validation_problem([{"loc": ("body", "budget"), "msg": str(exc), "type": "value_error"}]) from None
    router_ = svc.router()
    groups = list(principal.groups)
    history = [turn.model_dump() for turn in body.history]
    if body.stream:
        return StreamingResponse(_events(svc, router_, principal.tenant, groups, body.question, body.route, history,
                                         budget),
                                 media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
    return JSONResponse(json.loads(to_json(answer_question(svc, router_, principal.tenant, groups, body.question,
                                                           body.route, history, budget=budget))))


def answer_question(svc: Services, router_, tenant: str, groups: list[str], question: str, route: str,
                    history: list[dict], field: str = "question", budget=None) -> dict:
    """The answer as /v1/ask returns it (and /v1/chat/completions wraps it); a 422 naming `field` (where the
    question came from) for a question the router refuses."""
    conversation = usecases.standalone_question(getattr(router_, "llm", None), question, history)
    try:
        answer = router_.ask(tenant, groups, conversation.question, route=route,
                             **({"budget": budget} if budget is not None else {}))
    except ValueError as exc:
        raise validation_problem([{"loc": ("body", *field.split(".")), "msg": str(exc), "type": "value_error"}]) from None
    answered = usecases.with_conversation(answer.to_dict(), conversation)
    _record(svc, answered)
    return answered


def _record(svc: Services, answer: dict) -> None:
    svc.metrics.result("ask", empty=bool(answer.get("no_answer")), degraded=bool(answer.get("degraded")))
    svc.metrics.usage(answer.get("usage"))


def _frame(name: str, data) -> str:
    return f"event: {name}\ndata: {to_json(data)}\n\n"


def answer_events(svc: Services, router_, tenant: str, groups: list[str], question: str, route: str,
                  history: list[dict], budget=None):
    """The router's answer events (router.service.QuestionRouter.ask_events), asked as the standalone question
    when there is history; `usage` and `done` count the rewrite, and `done` says what was asked."""
    conversation = usecases.standalone_question(getattr(router_, "llm", None), question, history)
    for name, data in router_.ask_events(tenant, groups, conversation.question, route=route,
                                         **({"budget": budget} if budget is not None else {})):
        if name == "done":
            data = usecases.with_conversation(data, conversation)
            _record(svc, data)
        elif name == "usage" and conversation.usage is not None:
            data = usecases.add_usage(data, conversation.usage)
        yield name, data


def _events(svc: Services, router_, tenant: str, groups: list[str], question: str, route: str, history: list[dict],
            budget=None):
    try:
        for name, data in answer_events(svc, router_, tenant, groups, question, route, history, budget):
            yield _frame(name, data)
    except Exception:  # noqa: BLE001 - the status line is sent: report the failure as an event
        log.exception("streaming answer failed")
        yield _frame("error", {"title": "Answering failed",
                               "detail": "The answer could not be produced; the server log has the cause."})
