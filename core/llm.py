"""LLM client: one small interface over the Anthropic Messages API, with token and cost accounting.

Callers depend on the `LLM` protocol, never on the SDK, so a test can pass a scripted fake, and
offline mode is simply `make_llm(settings) is None` (callers then run their offline algorithm).
"""
from __future__ import annotations

import logging
import threading
import time
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, Iterator, Literal, Protocol

if TYPE_CHECKING:
    import anthropic

from core.llm_limiter import backoff_s, limiter_for
from core.llm_stats import CallStats
from core.pricing import effort_for, price_of, thinking_mode
from core.pricing import set_overrides as set_price_overrides
from core.settings import Settings

log = logging.getLogger(__name__)

Task = Literal["fast", "answer"]

# What a call is for (core.settings.LLMStage), as CROSSROADS_LLM_THINKING and the estimate's calibration
# name it. Set by the step that makes the call (`llm_stage`); an answer call outside any stage is "answer".
_stage: ContextVar[str | None] = ContextVar("crossroads_llm_stage", default=None)


@contextmanager
def llm_stage(name: str) -> Iterator[None]:
    """The calls made inside (in this thread) are for `name`: their thinking budget, their calibration."""
    token = _stage.set(name)
    try:
        yield
    finally:
        _stage.reset(token)


def stage_of(task: str) -> str:
    """The stage of a call now being made: the one set by `llm_stage`, else "answer" for the answer task and
    "other" (classifier, planner, chunk contexts, ...) for the fast one."""
    return _stage.get() or ("answer" if task == "answer" else "other")


def model_prices(model: str) -> tuple[float, float] | None:
    """(input, output) USD per 1M tokens, or None (warned once per model) when unknown (core.pricing)."""
    price = price_of(model)
    return (price.input, price.output) if price else None


@dataclass
class Usage:
    # The API's input_tokens excludes cached tokens: the full prompt is input + cache_read + cache_write.
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float | None = 0.0  # None: some call was made by a model with no known price
    calls: int = 0

    @classmethod
    def priced(cls, model: str, *, input_tokens: int = 0, output_tokens: int = 0,
               cache_read_tokens: int = 0, cache_write_tokens: int = 0, calls: int = 1,
               batch: bool = False) -> "Usage":
        """`batch`: made through the Message Batches API, at its price."""
        price = price_of(model)
        cost = price.cost(input_tokens=input_tokens, output_tokens=output_tokens, cache_read_tokens=cache_read_tokens,
                          cache_write_tokens=cache_write_tokens, batch=batch) if price else None
        return cls(input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost, calls)

    @property
    def prompt_tokens(self) -> int:
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    def as_dict(self) -> dict:
        return {"llm_calls": self.calls, "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "cache_read_tokens": self.cache_read_tokens, "cache_write_tokens": self.cache_write_tokens,
                "prompt_tokens": self.prompt_tokens,
                "cost_usd": None if self.cost_usd is None else round(self.cost_usd, 6)}

    def __add__(self, other: "Usage") -> "Usage":
        return replace(self).add(other)

    def add(self, other: "Usage") -> "Usage":
        """Add `other` into this one in place; returns self."""
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cache_read_tokens += other.cache_read_tokens
        self.cache_write_tokens += other.cache_write_tokens
        # an unknown price makes the sum unknown: a partial sum would read as the whole cost
        self.cost_usd = None if self.cost_usd is None or other.cost_usd is None else self.cost_usd + other.cost_usd
        self.calls += other.calls
        return self


class UsageMeter:
    """Thread-safe usage accumulator, one per question or per job (parallel map steps share it).

    Filled two ways: an `AnthropicLLM` made with it records each of its calls (a job's meter), and
    inside `with meter.metering():` every reply the call kernel (core.prompting) gets is recorded,
    whichever LLM object made the call: a question's classifier, transforms, reranker, planner and
    answer use different objects. A worker thread joins the question's meter when it runs its task
    in a copy of the caller's context (`contextvars.copy_context().run`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_model: dict[str, Usage] = {}

    def record(self, model: str, usage: Usage) -> None:
        with self._lock:
            self._by_model.setdefault(model, Usage()).add(usage)

    @property
    def total(self) -> Usage:
        with self._lock:
            return sum(self._by_model.values(), Usage())

    def summary(self) -> dict:
        """The total as JSON-ready numbers (job rows, API responses)."""
        return self.total.as_dict()

    @property
    def by_model(self) -> dict[str, Usage]:
        with self._lock:
            return {model: replace(u) for model, u in self._by_model.items()}

    @contextmanager
    def metering(self) -> Iterator["UsageMeter"]:
        token = _current_meter.set(self)
        try:
            yield self
        finally:
            _current_meter.reset(token)


_current_meter: ContextVar[UsageMeter | None] = ContextVar("crossroads_usage_meter", default=None)


def meter_reply(model: str, usage: Usage) -> None:
    """Record one reply's usage in the meter of the current context, if any (see `UsageMeter`)."""
    meter = _current_meter.get()
    if meter is not None:
        meter.record(model, usage)


@dataclass
class LLMResponse:
    text: str  # all text blocks joined
    tool_input: dict[str, Any] | None  # input of the first tool_use block
    stop_reason: str | None  # "end_turn", "max_tokens", "tool_use", ...
    model: str
    usage: Usage


class LLM(Protocol):
    """`task` picks the model ("fast": llm_model_fast, "answer": llm_model_answer). `cached_prefix`:
    a long stable text sent first and cached. `temperature`: None = model default (Sonnet 5 and
    Opus 5 reject any value)."""

    def complete(self, *, task: Task, system: str, messages: list[dict], max_tokens: int = 1024,
                 cached_prefix: str | None = None, tools: list[dict] | None = None,
                 tool_choice: dict | None = None, temperature: float | None = None) -> LLMResponse: ...


class LLMError(Exception):
    """The one error callers catch: says what happened and what to do about it."""

    usage: "Usage | None" = None  # what the failed call(s) cost, when a reply came back (core.prompting sets it)

    def __init__(self, message: str, *, status: int | None = None, retryable: bool = False):
        super().__init__(message)
        self.status = status  # HTTP status, None for network failures and timeouts
        self.retryable = retryable  # worth trying again later (rate limit, overload, outage)


class RefusedError(LLMError):
    """The model declined the request (stop_reason "refusal"). Never retried: the same request is
    refused again, and billed again; callers record it as refused and fall back."""


class AnthropicLLM:
    """`LLM` over the Anthropic Messages API.

    Retries are ours, not the SDK's (its client is made with max_retries=0): each attempt takes a slot
    of the process's limiter (core.llm_limiter), so at most CROSSROADS_LLM_CONCURRENCY calls are in
    flight, and a 429's `retry-after` / a 529's backoff pauses every thread, not only the one that got
    it. Retried, as the SDK would: connection errors, timeouts, 408, 409, 429 and every 5xx, up to
    `llm_max_retries` times. Then the error becomes one `LLMError`.

    `concurrency`: calls worth making at once (core.llm_limiter.concurrency_of); bulk steps size their
    thread pools with it. `stats`: what every reply's `usage` measured, summed per (model, stage,
    language, thinking budget): saved after a build to calibrate the next one's estimate
    (graph.build.calibration); a handful of sums whatever the number of calls.
    """

    def __init__(self, settings: Settings, meter: UsageMeter | None = None):
        import anthropic  # deferred: importing the SDK costs ~1.2 s, which a CLI without a key never pays
        if settings.anthropic_api_key is None or not settings.anthropic_api_key.get_secret_value().strip():
            raise ValueError("AnthropicLLM needs ANTHROPIC_API_KEY; use make_llm(), which returns None offline")
        self.settings = settings
        self.meter = meter
        self.models: dict[str, str] = {"fast": settings.llm_model_fast, "answer": settings.llm_model_answer}
        self.concurrency = settings.llm_concurrency
        self.limiter = limiter_for(settings.anthropic_base_url or "https://api.anthropic.com", settings.llm_concurrency)
        self.stats = CallStats()
        self._client = anthropic.Anthropic(
            api_key=settings.anthropic_api_key.get_secret_value(),
            base_url=settings.anthropic_base_url,
            timeout=settings.llm_timeout_s,
            max_retries=0,
        )

    @property
    def client(self) -> anthropic.Anthropic:
        """The SDK client (core.batches sends Message Batches with it)."""
        return self._client

    def request(self, *, task: Task, system: str, messages: list[dict], max_tokens: int = 1024,
                cached_prefix: str | None = None, tools: list[dict] | None = None,
                tool_choice: dict | None = None, temperature: float | None = None) -> dict[str, Any]:
        """The Messages API parameters of a call (sent at once by `complete`, or in a Message Batch)."""
        if task not in self.models:
            raise ValueError(f"unknown LLM task {task!r}; expected one of {sorted(self.models)}")
        model = self.models[task]
        params: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "messages": messages}
        thinking = self.thinking_budget(stage_of(task), model)
        if thinking:
            # The budget is part of max_tokens, so the answer keeps the budget it was given: for a model
            # thinking adaptively (no budget_tokens), max_tokens is what bounds its thinking. Thinking
            # rejects sampling parameters and a forced tool_choice: the tool is offered with `auto`
            # (core.prompting asks again when no tool call comes back).
            params["max_tokens"] = max_tokens + thinking
            params["thinking"] = ({"type": "enabled", "budget_tokens": thinking}
                                  if thinking_mode(model) == "enabled" else {"type": "adaptive"})
            temperature = None
            if tool_choice and tool_choice.get("type") in ("tool", "any"):
                tool_choice = {"type": "auto"}
        effort = self.effort(stage_of(task), model)
        if effort:
            params["output_config"] = {"effort": effort}
        if temperature is not None:
            # anthropic>=1.0 dropped the `temperature` keyword, and Sonnet 5 / Opus 5 / Opus 4.7+
            # answer 400 "`temperature` is deprecated for this model", so it is sent only on request
            # (haiku-4-5 still takes it) and the model default applies otherwise.
            params["temperature"] = temperature
        if cached_prefix:
            # The long stable text goes first and carries the cache breakpoint, so every call that
            # shares it (e.g. each chunk of one document) reads it from the cache at 0.1x the price.
            # The API skips caching below a model's minimum prefix size (core.pricing) without error.
            blocks = [{"type": "text", "text": cached_prefix, "cache_control": {"type": "ephemeral"}}]
            if system:  # the API rejects empty text blocks
                blocks.append({"type": "text", "text": system})
            params["system"] = blocks
        elif system:
            params["system"] = system
        if tools:
            params["tools"] = tools
        if tool_choice:
            params["tool_choice"] = tool_choice
        return params

    def thinking_budget(self, stage: str, model: str) -> int:
        """Thinking tokens a call of `stage` by `model` is given (CROSSROADS_LLM_THINKING): 0 when none is set,
        or when the model does not think (core.pricing.thinking_mode; warned once there)."""
        budget = self.settings.llm_thinking.get(stage, 0)
        return budget if budget and thinking_mode(model) is not None else 0

    def effort(self, stage: str, model: str) -> str | None:
        """The effort level a call of `stage` by `model` is sent (CROSSROADS_LLM_EFFORT): None when none is set, or
        when the model does not take that level (core.pricing.effort_for; warned once there). Estimates do not
        count it: the API documents effort as a behavioural signal, not a token budget."""
        return effort_for(model, self.settings.llm_effort.get(stage))

    def complete(self, *, task: Task, system: str, messages: list[dict], max_tokens: int = 1024,
                 cached_prefix: str | None = None, tools: list[dict] | None = None,
                 tool_choice: dict | None = None, temperature: float | None = None) -> LLMResponse:
        return self.send(self.request(task=task, system=system, messages=messages, max_tokens=max_tokens,
                                      cached_prefix=cached_prefix, tools=tools, tool_choice=tool_choice,
                                      temperature=temperature), task=task)

    def send(self, params: dict[str, Any], *, task: Task) -> LLMResponse:
        """One call with the parameters `request` built (with retries), as its reply."""
        msg = self._send(lambda headers: self._client.messages.create(**_sdk_params(params), extra_headers=headers),
                         params["model"])
        return self.reply(params, msg, task=task)

    def stream_text(self, *, task: Task, system: str, messages: list[dict], max_tokens: int = 1024,
                    on_text: Callable[[str], None]) -> LLMResponse:
        """A free-text call whose text is handed to `on_text` piece by piece as it arrives; returns the
        whole reply like `complete`. Retried like `complete` only until the first piece was handed on."""
        import anthropic
        params = self.request(task=task, system=system, messages=messages, max_tokens=max_tokens)
        started = False

        def run(headers: dict[str, str]):
            nonlocal started
            with self._client.messages.stream(**_sdk_params(params), extra_headers=headers) as stream:
                for piece in stream.text_stream:
                    started = True
                    on_text(piece)
                return stream.get_final_message()

        def once(headers: dict[str, str]):
            try:
                return run(headers)
            except anthropic.AnthropicError as err:
                if started:  # the user saw part of it: a retry would repeat what they read
                    raise _to_llm_error(err, params["model"], self.settings) from err
                raise

        return self.reply(params, self._send(once, params["model"]), task=task)

    def reply(self, params: dict[str, Any], msg: Any, *, task: Task, batch: bool = False) -> LLMResponse:
        """A Messages API reply (or a Message Batch result's message) to a `task` call as an `LLMResponse`,
        metered, and measured in `stats` when made in a stage (`llm_stage`)."""
        model = params["model"]
        u = msg.usage
        usage = Usage.priced(model, input_tokens=u.input_tokens, output_tokens=u.output_tokens,
                             cache_read_tokens=u.cache_read_input_tokens or 0,
                             cache_write_tokens=u.cache_creation_input_tokens or 0, batch=batch)
        if self.meter is not None:
            self.meter.record(model, usage)
        text = "".join(block.text for block in msg.content if block.type == "text")
        tool_input = next((dict(block.input) for block in msg.content if block.type == "tool_use"), None)
        stage = _stage.get()
        if stage is not None:  # a step's calls, which estimates are made of (not a question's, nor a context's)
            self.stats.add(model, stage, params, self.thinking_budget(stage, model), usage)
        return LLMResponse(text=text, tool_input=tool_input, stop_reason=msg.stop_reason,
                           model=msg.model, usage=usage)

    def _send(self, call: Callable[[dict[str, str]], Any], model: str) -> Any:
        """`call(headers)` with retries; the headers say which retry it is, as the SDK's own would."""
        import anthropic
        retries = self.settings.llm_max_retries
        for attempt in range(retries + 1):
            wait = 0.0
            with self.limiter.slot():
                try:
                    result = call({"x-stainless-retry-count": str(attempt)})
                    self.limiter.succeeded()
                    return result
                except LLMError:
                    raise
                except anthropic.AnthropicError as err:
                    if attempt == retries or not _retryable(err):
                        raise _to_llm_error(err, model, self.settings) from err
                    status = getattr(err, "status_code", None)
                    after = _retry_after_s(err)
                    if status == 429:
                        self.limiter.rate_limited(after, attempt)
                    elif status == 529:
                        self.limiter.overloaded(after)
                    else:  # this request's trouble (a timeout, a 500): only it waits
                        wait = after if after is not None else backoff_s(attempt)
            if wait:
                time.sleep(wait)
        raise AssertionError("unreachable: the last attempt returns or raises")


def _sdk_params(params: dict[str, Any]) -> dict[str, Any]:
    # anthropic>=1.0 has no `temperature` keyword: it travels in extra_body
    if "temperature" not in params:
        return params
    rest = {k: v for k, v in params.items() if k != "temperature"}
    return {**rest, "extra_body": {"temperature": params["temperature"]}}


def _retryable(err: anthropic.AnthropicError) -> bool:
    import anthropic
    if isinstance(err, (anthropic.APITimeoutError, anthropic.APIConnectionError)):
        return True
    if isinstance(err, anthropic.APIStatusError):
        status = err.status_code
        return status in (408, 409, 429) or status >= 500
    return False


def _retry_after_s(err: anthropic.AnthropicError) -> float | None:
    """The server's retry-after (`retry-after-ms` first, as the SDK reads it), in seconds."""
    response = getattr(err, "response", None)
    if response is None:
        return None
    for header, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = response.headers.get(header)
        if value:
            try:
                seconds = float(value) / scale
            except ValueError:
                continue  # an HTTP date: rare enough to back off instead
            if seconds >= 0:
                return seconds
    return None


def _to_llm_error(err: anthropic.AnthropicError, model: str, settings: Settings) -> LLMError:
    import anthropic
    retries = settings.llm_max_retries
    after = f"after {retries} retries" if retries else "(retries disabled)"
    if isinstance(err, anthropic.APITimeoutError):
        return LLMError(f"Anthropic API request timed out (limit {settings.llm_timeout_s:g} s) {after}; "
                        "raise CROSSROADS_LLM_TIMEOUT_S or send a shorter prompt", retryable=True)
    if isinstance(err, anthropic.APIConnectionError):
        where = settings.anthropic_base_url or "api.anthropic.com"
        return LLMError(f"cannot reach the Anthropic API at {where} {after}: {err}; "
                        "check the network and anthropic_base_url", retryable=True)
    if not isinstance(err, anthropic.APIStatusError):
        return LLMError(f"Anthropic client error: {err}")

    status = err.status_code
    detail = err.api_message or err.message
    if err.request_id:
        detail += f" (request-id {err.request_id})"
    if status == 401:
        text, retryable = "authentication failed: check ANTHROPIC_API_KEY", False
    elif status == 403:
        text, retryable = f"permission denied for model {model!r}: check the API key's workspace and access", False
    elif status == 404:
        text, retryable = (f"not found: check the model id {model!r} (CROSSROADS_LLM_MODEL_FAST / _ANSWER) "
                           "and anthropic_base_url"), False
    elif status == 413:
        text, retryable = "request too large: send fewer or shorter passages", False
    elif status == 429:
        text, retryable = f"Anthropic API rate limit still exceeded {after}; lower concurrency or raise limits", True
    elif status == 529:
        text, retryable = f"Anthropic API overloaded (529) {after}; try again later", True
    elif status >= 500 or status in (408, 409):
        text, retryable = f"Anthropic API error {status} {after}; try again later", True
    else:
        text, retryable = (f"Anthropic API rejected the request ({status}): fix the request, "
                           "e.g. a malformed message or a prompt over the context window"), False
    return LLMError(f"{text} [{detail}]", status=status, retryable=retryable)


def make_llm(settings: Settings, meter: UsageMeter | None = None) -> LLM | None:
    """The configured LLM, or None without an API key (offline mode: callers run offline algorithms)."""
    key = settings.anthropic_api_key
    if key is None or not key.get_secret_value().strip():  # `ANTHROPIC_API_KEY=` in .env means unset
        return None
    set_price_overrides(settings.llm_prices)
    return AnthropicLLM(settings, meter)
