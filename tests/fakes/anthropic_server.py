"""A fake Anthropic Messages API (POST /v1/messages) on loopback, for tests that run the real SDK.

It speaks the wire format: message objects with text / tool_use content blocks, stop_reason and
usage (input_tokens, output_tokens, cache_creation_input_tokens, cache_read_input_tokens), and
error bodies `{"type": "error", "error": {"type": ..., "message": ...}}` with the real statuses.

    with FakeAnthropic(text("hi"), error(429), tool_use("route", {"route": "local"})) as api:
        settings = Settings(anthropic_api_key="test-key", anthropic_base_url=api.url)
        ...
        assert api.calls == 3 and api.bodies[0]["model"] == "claude-haiku-4-5"

Scripted replies are served first, in order; once the queue is empty `handler(body)` decides
(a function of the parsed request body returning a `Script`), else the reply is `text("ok")`.

Token counts are estimates: `estimate_tokens(s) = ceil(len(s) / 4)` for every text (system
block, message text, tool_result content, tool definitions and tool_use inputs as JSON). Prompt
caching is simulated with one breakpoint: the prefix is everything (tools, then system blocks,
then message blocks) up to the last block carrying `cache_control`; the first request with a
given model + prefix reports it as cache_creation_input_tokens, later identical ones as
cache_read_input_tokens, and input_tokens counts only the rest, as the real API does.

Like the real API it answers 401 without a key (`Authorization: Bearer` or `x-api-key`; pass
`api_key=` to require one value), 400 to an empty text block or a missing field, and 400 to
`temperature` / `top_p` / `top_k` on the models that reject sampling parameters; `thinking` as the real
API checks it: `budget_tokens` of at least 1024 and under max_tokens, `{"type": "enabled"}` refused by
the models that think only adaptively (those same models), a forced `tool_choice` refused with thinking;
`output_config.effort` refused by a model that takes none (Haiku 4.5) or not that level (EFFORT_BY_MODEL).

The real API's habits on a bad day, scripted per call or drawn at random:
- `thinking=` puts a thinking block before the text / tool call (adaptive thinking does);
- `refusal()`: stop_reason "refusal" (the model declines; content may be empty);
- `cut_tool_use()`: a tool call cut at max_tokens (its input partial, stop_reason "max_tokens");
- `forced_tool_rejected=(model, ...)`: 400 invalid_request_error to a forced `tool_choice`
  ({"type": "tool"} or "any") for those models, as thinking models answer;
- `context_window=N`: 400 "prompt is too long" to a prompt over N (estimated) tokens;
- `error(429)` / `error(529)`: rate limited / overloaded, with `retry-after`;
- `misbehave=Misbehave(share, seed)`: on that share of the calls not scripted, one of `HABITS`
  instead of the handler's answer (drawn from a seeded generator: the same draws every run; which
  request gets which draw depends on arrival order when calls run concurrently). `api.misbehaved`
  lists (call number, habit) as they happened.

Message Batches (POST /v1/messages/batches, GET .../{id}, GET .../{id}/results as JSONL, POST
.../{id}/cancel), as `client.messages.batches` calls them: each request is answered as /v1/messages
would answer it (scripts, handler, errors) when the batch is created, but the batch reports
`in_progress` for its first `batch_polls` retrieves (and while `hold_batches` is set) before `ended`.
An error reply becomes an `errored` entry, an `expired()` script an `expired` one. `batch_creates`
counts the batches created, `paid` the entries that succeeded (what a batch bills), `batch_bodies`
every request sent in a batch (`{custom_id, params}`).
"""
from __future__ import annotations

import hashlib
import itertools
import json
import math
import random
import threading
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from tests.fakes.loopback import LoopbackServer, Reply, Request

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


@dataclass
class Script:
    """One scripted reply; build it with `text()`, `tool_use()` or `error()`."""

    text: str = ""
    tool_name: str | None = None
    tool_input: dict[str, Any] | None = None
    stop_reason: str | None = None
    status: int = 200
    error_type: str | None = None
    error_message: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    input_tokens: int | None = None  # override the estimate (for hand-computed costs)
    output_tokens: int | None = None
    delay_s: float = 0.0
    thinking: str = ""  # a thinking block before the other content
    expired: bool = False  # a batch entry that expired unprocessed (see `expired()`)


def text(reply: str, *, stop_reason: str = "end_turn", input_tokens: int | None = None,
         output_tokens: int | None = None, delay_s: float = 0.0) -> Script:
    return Script(text=reply, stop_reason=stop_reason, input_tokens=input_tokens,
                  output_tokens=output_tokens, delay_s=delay_s)


def tool_use(name: str, input: dict[str, Any], *, text: str = "", input_tokens: int | None = None,
             output_tokens: int | None = None, thinking: str = "") -> Script:
    return Script(text=text, tool_name=name, tool_input=input, stop_reason="tool_use",
                  input_tokens=input_tokens, output_tokens=output_tokens, thinking=thinking)


def refusal(text: str = "") -> Script:
    """The model declines: stop_reason "refusal", no tool call, at most the start of a text."""
    return Script(text=text, stop_reason="refusal")


def cut_tool_use(name: str, input: dict[str, Any]) -> Script:
    """A tool call cut at max_tokens: `cut_input(input)` (the first list half sent, the rest missing)."""
    return Script(tool_name=name, tool_input=cut_input(input), stop_reason="max_tokens")


def cut_input(input: dict[str, Any]) -> dict[str, Any]:
    """What a reply cut mid-way keeps of a tool input: the fields before the first list, half that
    list, and nothing after it."""
    kept: dict[str, Any] = {}
    for key, value in input.items():
        if isinstance(value, list):
            kept[key] = value[: len(value) // 2]
            break
        kept[key] = value
    return kept


def error(status: int, message: str | None = None, *, type: str | None = None,
          retry_after: str | None = None, headers: dict[str, str] | None = None) -> Script:
    """An API error. 429 and 529 carry `retry-after` (default "0.01": the real API sends whole
    seconds; the SDK accepts fractions, and "0" would make it fall back to 0.5 s+ backoff)."""
    hdrs = dict(headers or {})
    if retry_after is None and status in (429, 529):
        retry_after = "0.01"
    if retry_after is not None:
        hdrs["retry-after"] = retry_after
    etype = type or ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    return Script(status=status, error_type=etype, error_message=message or f"fake {etype}", headers=hdrs)


def expired() -> Script:
    """A Message Batch entry left unprocessed when the batch expired (24 h); no meaning outside a batch."""
    return Script(expired=True)


HABITS = ("overloaded", "rate_limited", "refusal", "max_tokens", "thinking")


@dataclass
class Misbehave:
    """On `share` of the unscripted calls, one of `habits` (see HABITS) instead of the handler's answer."""

    share: float
    seed: int = 0
    habits: tuple[str, ...] = HABITS

    def __post_init__(self) -> None:
        unknown = set(self.habits) - set(HABITS)
        if unknown:
            raise ValueError(f"unknown habits {sorted(unknown)}; known: {HABITS}")
        self._rng = random.Random(self.seed)

    def draw(self) -> str | None:  # called under the server's lock: one draw sequence per seed
        return self._rng.choice(self.habits) if self._rng.random() < self.share else None


def _habit(name: str, healthy: Script) -> Script:
    """`healthy` (the handler's answer) as the API would send it with this habit."""
    if name == "overloaded":
        return error(529, "Overloaded")
    if name == "rate_limited":
        return error(429, "Number of request tokens has exceeded your per-minute rate limit")
    if name == "refusal":
        return refusal()
    if name == "thinking":
        return replace(healthy, thinking="The user wants the tool called; let me read the input first.")
    if healthy.status != 200:  # max_tokens on an error: the error stands
        return healthy
    if healthy.tool_name is not None:
        return cut_tool_use(healthy.tool_name, healthy.tool_input or {})
    return replace(healthy, text=healthy.text[: len(healthy.text) // 2], stop_reason="max_tokens")


# Models that answer 400 to sampling parameters, as Sonnet 5, Opus 5 and Opus 4.7+ do.
NO_SAMPLING_MODELS = ("claude-sonnet-5", "claude-opus-5", "claude-opus-4-7", "claude-opus-4-8")
# `output_config.effort` levels by model, as the effort documentation lists them; any other model (Haiku 4.5)
# answers an effort with a 400, as does a model given a level it lacks. Kept apart from core.llm.pricing's table:
# the fake checks the client, it does not share its assumptions.
EFFORT_BY_MODEL = {"claude-opus-4-5": ("low", "medium", "high"),
                   "claude-opus-4-6": ("low", "medium", "high", "max"),
                   "claude-sonnet-4-6": ("low", "medium", "high", "max")}
EFFORT_BY_MODEL |= {m: ("low", "medium", "high", "xhigh", "max")
                    for m in ("claude-opus-4-7", "claude-opus-4-8", "claude-sonnet-5", "claude-opus-5")}


def estimate_tokens(s: str) -> int:
    return math.ceil(len(s) / 4)


# the most a call waits for `gather` calls of its kind in flight: a client calling one at a time waits it out
# on every call and its count stays at one
GATHER_WAIT_S = 3.0


class FakeAnthropic:
    def __init__(self, *scripted: Script, handler: Callable[[dict], Script] | None = None,
                 api_key: str | None = None, misbehave: Misbehave | None = None,
                 forced_tool_rejected: tuple[str, ...] = (), context_window: int | None = None,
                 latency_s: float = 0.0, batch_polls: int = 1, gather: int = 0):
        self.handler = handler
        self.batch_polls = batch_polls  # retrieves answering in_progress before a batch has ended
        self.hold_batches = False  # while set, every batch stays in_progress (a batch that takes hours)
        self.batch_creates = 0
        self.paid = 0
        self.batch_bodies: list[dict] = []
        self._batches: dict[str, dict] = {}
        self.latency_s = latency_s  # every /v1/messages answer takes this long (throughput benches)
        # with gather, a call is held until this many calls of its kind have been in flight at once (then it
        # and every later one answer at once), GATHER_WAIT_S at most: a concurrency test that passes or fails
        # the same on a loaded machine, where calls may take longer to start than a fixed latency lasts
        self.gather = gather
        self.in_flight = 0
        self.max_in_flight = 0  # the most /v1/messages requests being answered at once
        self.max_in_flight_by_kind: dict[str, int] = {}  # ... per kind: the tool offered, else "text"
        self._kind_in_flight: dict[str, int] = {}
        self.api_key = api_key  # when set, any other key gets a 401
        self.misbehave = misbehave
        self.forced_tool_rejected = forced_tool_rejected
        self.context_window = context_window
        self.misbehaved: list[tuple[int, str]] = []
        self._queue: deque[Script] = deque(scripted)
        self._lock = threading.Lock()
        self._gathered = threading.Condition(self._lock)
        self._cache: set[str] = set()
        self._ids = itertools.count(1)
        self._server = LoopbackServer(self._respond)

    # --- test-facing -----------------------------------------------------------------------
    @property
    def url(self) -> str:
        return self._server.url

    @property
    def requests(self) -> list[Request]:
        return [r for r in self._server.requests if r.path.split("?")[0] == "/v1/messages"]

    @property
    def calls(self) -> int:
        return len(self.requests)

    @property
    def results_downloads(self) -> int:
        """Downloads of a Message Batch's results: a batch collected once is downloaded once."""
        return sum(1 for r in self._server.requests if r.method == "GET" and r.path.split("?")[0].endswith("/results"))

    @property
    def bodies(self) -> list[dict]:
        return [r.json() for r in self.requests]

    def enqueue(self, *scripts: Script) -> None:
        with self._lock:
            self._queue.extend(scripts)

    def __enter__(self) -> "FakeAnthropic":
        self._server.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._server.__exit__(*exc)

    # --- server side -----------------------------------------------------------------------
    def _respond(self, req: Request) -> Reply:
        if req.method == "POST" and req.path.split("?")[0] == "/v1/messages" and (self.latency_s or self.gather):
            kind = _kind(req)
            with self._gathered:
                self.in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self.in_flight)
                self._kind_in_flight[kind] = self._kind_in_flight.get(kind, 0) + 1
                self.max_in_flight_by_kind[kind] = max(self.max_in_flight_by_kind.get(kind, 0),
                                                       self._kind_in_flight[kind])
                self._gathered.notify_all()
            try:  # the latency is spent here, not in Reply.delay_s, so in-flight counts it
                if self.gather:
                    with self._gathered:
                        self._gathered.wait_for(lambda: self.max_in_flight_by_kind[kind] >= self.gather,
                                                timeout=GATHER_WAIT_S)
                else:
                    threading.Event().wait(self.latency_s)
                return self._answer(req)
            finally:
                with self._lock:
                    self.in_flight -= 1
                    self._kind_in_flight[kind] -= 1
        return self._answer(req)

    def _answer(self, req: Request) -> Reply:
        n = next(self._ids)
        rid = {"request-id": f"req_fake_{n:04d}"}
        path = req.path.split("?")[0]
        batch = path.startswith("/v1/messages/batches")
        if not batch and (req.method != "POST" or path != "/v1/messages"):
            return _error_reply(error(404, f"no route {req.method} {req.path}"), rid)
        # anthropic 2.x sends the key as `Authorization: Bearer`; older clients and curl use x-api-key
        key = req.headers.get("x-api-key") or req.headers.get("authorization", "").removeprefix("Bearer ")
        if not key or (self.api_key is not None and key != self.api_key):
            return _error_reply(error(401, "invalid x-api-key"), rid)
        if "anthropic-version" not in req.headers:
            return _error_reply(error(400, "anthropic-version header is required"), rid)
        if batch:
            return self._batch_route(req, path, rid)
        try:
            body = req.json()
        except ValueError as exc:
            return _error_reply(error(400, f"malformed request: {exc}"), rid)
        reply = self._message(body, n, rid)
        return _error_reply(error(500, "expired() is a batch entry, not a reply"), rid) if reply is None else reply

    def _message(self, body: Any, n: int, rid: dict[str, str]) -> Reply | None:
        """The answer to one Messages request (sent alone or in a batch); None for an `expired()` script."""
        try:
            problem = _validate(body)
        except (ValueError, TypeError, AttributeError) as exc:
            problem = f"malformed request: {exc}"
        if problem:
            return _error_reply(error(400, problem), rid)
        forced = (body.get("tool_choice") or {}).get("type") in ("tool", "any")
        if forced and body["model"].startswith(self.forced_tool_rejected):
            return _error_reply(error(400, "Thinking may not be enabled when tool_choice forces tool use."), rid)
        prefix_tokens, total_tokens, cache_key = _prompt_tokens(body)
        if self.context_window is not None and total_tokens > self.context_window:
            return _error_reply(error(400, f"prompt is too long: {total_tokens} tokens > {self.context_window} "
                                           "maximum"), rid)

        with self._lock:
            script = self._queue.popleft() if self._queue else None
            habit = self.misbehave.draw() if script is None and self.misbehave else None
            if habit:
                self.misbehaved.append((n, habit))
        if script is None:
            script = self.handler(body) if self.handler else text("ok")
            script = _habit(habit, script) if habit else script
        if script.expired:
            return None
        if script.status != 200:
            return _error_reply(script, rid)

        cache_write = cache_read = 0
        if cache_key is not None:
            with self._lock:
                hit = cache_key in self._cache
                self._cache.add(cache_key)
            cache_read, cache_write = (prefix_tokens, 0) if hit else (0, prefix_tokens)
        content: list[dict] = []
        if script.thinking:
            content.append({"type": "thinking", "thinking": script.thinking, "signature": f"sig_fake_{n:04d}"})
        if script.text:
            content.append({"type": "text", "text": script.text})
        if script.tool_name is not None:
            content.append({"type": "tool_use", "id": f"toolu_fake_{n:04d}", "name": script.tool_name,
                            "input": script.tool_input or {}})
        out = (estimate_tokens(script.thinking + script.text)
               + (estimate_tokens(json.dumps(script.tool_input)) if script.tool_name else 0))
        usage = {
            "input_tokens": script.input_tokens if script.input_tokens is not None
            else total_tokens - cache_read - cache_write,
            "output_tokens": script.output_tokens if script.output_tokens is not None else max(out, 1),
            "cache_creation_input_tokens": cache_write,
            "cache_read_input_tokens": cache_read,
        }
        message = {"id": f"msg_fake_{n:04d}", "type": "message", "role": "assistant", "model": body["model"],
                   "content": content, "stop_reason": script.stop_reason or "end_turn",
                   "stop_sequence": None, "usage": usage}
        if body.get("stream"):
            return Reply(200, _sse(message), {**rid, **script.headers, "Content-Type": "text/event-stream"},
                         delay_s=script.delay_s)
        return Reply(200, message, {**rid, **script.headers}, delay_s=script.delay_s)

    # --- Message Batches -------------------------------------------------------------------
    def _batch_route(self, req: Request, path: str, rid: dict[str, str]) -> Reply:
        parts = path.removeprefix("/v1/messages/batches").strip("/").split("/")
        if req.method == "POST" and parts == [""]:
            return self._create_batch(req, rid)
        with self._lock:
            batch = self._batches.get(parts[0])
        if batch is None:
            return _error_reply(error(404, f"no Message Batch {parts[0]!r}"), rid)
        if req.method == "GET" and len(parts) == 1:
            return Reply(200, self._batch_object(batch, poll=True), rid)
        if req.method == "POST" and parts[1:] == ["cancel"]:
            with self._lock:
                batch["canceled"] = True
            return Reply(200, self._batch_object(batch), rid)
        if req.method == "GET" and parts[1:] == ["results"]:
            if self._batch_object(batch)["processing_status"] != "ended":
                return _error_reply(error(400, "the Message Batch is still in progress"), rid)
            lines = [json.dumps({"custom_id": cid, "result": result}) for cid, result in batch["results"]]
            return Reply(200, ("\n".join(lines) + "\n").encode(), {**rid, "Content-Type": "application/binary"})
        return _error_reply(error(404, f"no route {req.method} {req.path}"), rid)

    def _create_batch(self, req: Request, rid: dict[str, str]) -> Reply:
        try:
            requests = req.json()["requests"]
            ids = [r["custom_id"] for r in requests]
        except (ValueError, KeyError, TypeError) as exc:
            return _error_reply(error(400, f"malformed batch: {exc}"), rid)
        if not requests or len(set(ids)) != len(ids):
            return _error_reply(error(400, "requests: custom_id values must be unique and at least one is needed"),
                                rid)
        results = []
        for r in requests:
            n = next(self._ids)
            reply = self._message(r.get("params"), n, {"request-id": f"req_fake_{n:04d}"})
            if reply is None:
                results.append((r["custom_id"], {"type": "expired"}))
            elif reply.status != 200:
                results.append((r["custom_id"], {"type": "errored", "error": reply.body}))
            else:
                results.append((r["custom_id"], {"type": "succeeded", "message": reply.body}))
        with self._lock:
            self.batch_creates += 1
            self.batch_bodies += requests
            self.paid += sum(1 for _, result in results if result["type"] == "succeeded")
            batch_id = f"msgbatch_fake_{self.batch_creates:04d}"
            # the real API lists results in no particular order: reversed here, so order is never relied on
            batch = self._batches[batch_id] = {"id": batch_id, "results": results[::-1], "polls": 0,
                                               "canceled": False}
        return Reply(200, self._batch_object(batch), rid)

    def _batch_object(self, batch: dict, poll: bool = False) -> dict:
        with self._lock:
            if poll:
                batch["polls"] += 1
            ended = batch["canceled"] or (not self.hold_batches and batch["polls"] > self.batch_polls)
        counts = dict.fromkeys(("processing", "succeeded", "errored", "canceled", "expired"), 0)
        for _, result in batch["results"]:
            counts[result["type"] if ended else "processing"] += 1
        stamp = "2025-01-01T00:00:00Z"
        return {"id": batch["id"], "type": "message_batch", "created_at": stamp, "expires_at": "2025-01-02T00:00:00Z",
                "processing_status": "ended" if ended else "in_progress", "request_counts": counts,
                "ended_at": stamp if ended else None, "archived_at": None, "cancel_initiated_at": None,
                "results_url": f"{self.url}/v1/messages/batches/{batch['id']}/results" if ended else None}


STREAM_PIECE_CHARS = 5  # text deltas this long, so a streamed answer arrives in many pieces


def _sse(message: dict) -> str:
    """The message as the streaming wire format: message_start, per block a start, deltas and a stop,
    message_delta (stop_reason, output tokens), message_stop."""
    def event(name: str, data: dict) -> str:
        return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n"

    usage = message["usage"]
    head = {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    frames = [event("message_start", {"message": head})]
    for i, block in enumerate(message["content"]):
        if block["type"] == "text":
            frames.append(event("content_block_start", {"index": i, "content_block": {"type": "text", "text": ""}}))
            text = block["text"]
            frames += [event("content_block_delta", {"index": i, "delta": {"type": "text_delta",
                                                                           "text": text[k:k + STREAM_PIECE_CHARS]}})
                       for k in range(0, len(text), STREAM_PIECE_CHARS)]
        elif block["type"] == "tool_use":
            frames.append(event("content_block_start", {"index": i, "content_block": {**block, "input": {}}}))
            frames.append(event("content_block_delta", {"index": i, "delta": {
                "type": "input_json_delta", "partial_json": json.dumps(block["input"])}}))
        else:  # thinking
            frames.append(event("content_block_start", {"index": i, "content_block": {**block, "thinking": ""}}))
            frames.append(event("content_block_delta", {"index": i, "delta": {"type": "thinking_delta",
                                                                              "thinking": block["thinking"]}}))
        frames.append(event("content_block_stop", {"index": i}))
    frames.append(event("message_delta", {"delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                                          "usage": {"output_tokens": usage["output_tokens"]}}))
    frames.append(event("message_stop", {}))
    return "".join(frames)


def _kind(req: Request) -> str:
    """What a request asks for, for in-flight counts: the first tool offered, else "text"."""
    try:
        tools = req.json().get("tools") or []
        return tools[0]["name"] if tools else "text"
    except (ValueError, AttributeError, KeyError, IndexError, TypeError):
        return "malformed"


def _error_reply(script: Script, extra_headers: dict[str, str]) -> Reply:
    body = {"type": "error", "error": {"type": script.error_type, "message": script.error_message}}
    return Reply(script.status, body, {**extra_headers, **script.headers}, delay_s=script.delay_s)


def _validate(body: dict) -> str | None:
    """The checks the real API makes that catch client wiring bugs."""
    for name in ("model", "max_tokens", "messages"):
        if name not in body:
            return f"{name}: Field required"
    if not body["messages"]:
        return "messages: at least one message is required"
    if body["model"].startswith(NO_SAMPLING_MODELS):
        for name in ("temperature", "top_p", "top_k"):
            if name in body:
                return f"`{name}` is deprecated for this model."
    effort = (body.get("output_config") or {}).get("effort")
    if effort is not None:
        levels = next((v for m, v in EFFORT_BY_MODEL.items() if body["model"].startswith(m)), ())
        if not levels:
            return "output_config.effort: This model does not support the effort parameter."
        if effort not in levels:
            return f"output_config.effort: {effort!r} is not supported for this model; use one of {', '.join(levels)}"
    thinking = body.get("thinking")
    if thinking is not None:
        if thinking.get("type") == "enabled":
            if body["model"].startswith(NO_SAMPLING_MODELS):
                return ('"thinking.type.enabled" is not supported for this model. Use "thinking.type.adaptive" '
                        'and "output_config.effort" to control thinking behavior.')
            budget = thinking.get("budget_tokens")
            if not isinstance(budget, int) or budget < 1024:
                return "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
            if budget >= body["max_tokens"]:
                return "`max_tokens` must be greater than `thinking.budget_tokens`"
        elif thinking.get("type") not in ("adaptive", "disabled"):
            return f"thinking.type: unsupported {thinking.get('type')!r}"
        if (body.get("tool_choice") or {}).get("type") in ("tool", "any"):
            return "Thinking may not be enabled when tool_choice forces tool use."
    for seg_text, _ in _segments(body):
        if seg_text == "":
            return "text content blocks must be non-empty"
    for block in _blocks(body):
        cc = block.get("cache_control")
        if cc is not None and cc.get("type") != "ephemeral":
            return f"cache_control.type: unsupported {cc.get('type')!r}"
    return None


def _blocks(body: dict) -> list[dict]:
    system = body.get("system")
    blocks = [t for t in body.get("tools", [])]
    blocks += system if isinstance(system, list) else []
    for m in body["messages"]:
        blocks += m["content"] if isinstance(m["content"], list) else []
    return blocks


def _segments(body: dict) -> list[tuple[str, bool]]:
    """(text, carries cache_control) in the API's prefix order: tools, system, messages."""
    segs = [(json.dumps(t, sort_keys=True), "cache_control" in t) for t in body.get("tools", [])]
    system = body.get("system")
    if isinstance(system, str):
        segs.append((system, False))
    elif isinstance(system, list):
        segs += [(b["text"], "cache_control" in b) for b in system]
    for m in body["messages"]:
        if isinstance(m["content"], str):
            segs.append((m["content"], False))
            continue
        for b in m["content"]:
            if b.get("type") == "text":
                s = b["text"]
            elif b.get("type") == "tool_result":
                s = json.dumps(b.get("content", ""), sort_keys=True)
            elif b.get("type") == "tool_use":
                s = json.dumps(b.get("input", {}), sort_keys=True)
            else:
                s = json.dumps(b, sort_keys=True)
            segs.append((s, "cache_control" in b))
    return segs


def _prompt_tokens(body: dict) -> tuple[int, int, str | None]:
    """(tokens in the cached prefix, tokens in the whole prompt, cache key or None)."""
    segs = _segments(body)
    total = sum(estimate_tokens(s) for s, _ in segs)
    marked = [i for i, (_, cached) in enumerate(segs) if cached]
    if not marked:
        return 0, total, None
    prefix = segs[: marked[-1] + 1]
    key = hashlib.sha256(json.dumps([body["model"], [s for s, _ in prefix]]).encode()).hexdigest()
    return sum(estimate_tokens(s) for s, _ in prefix), total, key
