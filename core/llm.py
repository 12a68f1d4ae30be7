"""LLM client: one small interface over the Anthropic Messages API, with token and cost accounting.

Callers depend on the `LLM` protocol, never on the SDK, so a test can pass a scripted fake, and
offline mode is simply `make_llm(settings) is None` (callers then run their offline algorithm).
"""
from __future__ import annotations

import logging
import threading
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any, Iterator, Literal, Protocol

import anthropic

from core.settings import Settings

log = logging.getLogger(__name__)

Task = Literal["fast", "answer"]

# USD per million tokens: (input, output). Cache writes (5-minute TTL) bill at 1.25x input and
# cache reads at 0.1x input. A dated snapshot ("claude-haiku-4-5-20251001") prices as its alias.
PRICES: dict[str, tuple[float, float]] = {
    "claude-haiku-4-5": (1.0, 5.0),
    "claude-sonnet-5": (2.0, 10.0),
    "claude-opus-5": (5.0, 25.0),
}
CACHE_WRITE_FACTOR = 1.25
CACHE_READ_FACTOR = 0.1

_unpriced_warned: set[str] = set()
_unpriced_lock = threading.Lock()


def model_prices(model: str) -> tuple[float, float] | None:
    """(input, output) USD per 1M tokens, or None (warned once per model) when unknown."""
    matches = [name for name in PRICES if model == name or model.startswith(name + "-")]
    if matches:
        return PRICES[max(matches, key=len)]
    with _unpriced_lock:
        if model not in _unpriced_warned:
            _unpriced_warned.add(model)
            log.warning("no price known for model %r: its cost counts as $0; add it to core.llm.PRICES", model)
    return None


@dataclass
class Usage:
    # The API's input_tokens excludes cached tokens: the full prompt is input + cache_read + cache_write.
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float = 0.0
    calls: int = 0

    @classmethod
    def priced(cls, model: str, *, input_tokens: int = 0, output_tokens: int = 0,
               cache_read_tokens: int = 0, cache_write_tokens: int = 0, calls: int = 1) -> "Usage":
        prices = model_prices(model)
        cost = 0.0
        if prices is not None:
            inp, out = prices
            cost = (input_tokens * inp + output_tokens * out + cache_write_tokens * inp * CACHE_WRITE_FACTOR
                    + cache_read_tokens * inp * CACHE_READ_FACTOR) / 1_000_000
        return cls(input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost, calls)

    @property
    def prompt_tokens(self) -> int:
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    def as_dict(self) -> dict:
        return {"llm_calls": self.calls, "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "cache_read_tokens": self.cache_read_tokens, "cache_write_tokens": self.cache_write_tokens,
                "prompt_tokens": self.prompt_tokens, "cost_usd": round(self.cost_usd, 6)}

    def __add__(self, other: "Usage") -> "Usage":
        return replace(self).add(other)

    def add(self, other: "Usage") -> "Usage":
        """Add `other` into this one in place; returns self."""
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cache_read_tokens += other.cache_read_tokens
        self.cache_write_tokens += other.cache_write_tokens
        self.cost_usd += other.cost_usd
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

    Retries are the SDK's job, not ours: anthropic's `_base_client` retries connection errors,
    timeouts, 408, 409, 429 and every 5xx (529 "overloaded" included) up to `max_retries` times,
    sleeping as the `retry-after-ms` / `retry-after` header says, else exponential backoff
    (0.5 s doubling to 8 s, with jitter); note it honours retry-after uncapped. Once it gives up
    we turn its error into one `LLMError`.
    """

    def __init__(self, settings: Settings, meter: UsageMeter | None = None):
        if settings.anthropic_api_key is None or not settings.anthropic_api_key.get_secret_value().strip():
            raise ValueError("AnthropicLLM needs ANTHROPIC_API_KEY; use make_llm(), which returns None offline")
        self.settings = settings
        self.meter = meter
        self.models: dict[str, str] = {"fast": settings.llm_model_fast, "answer": settings.llm_model_answer}
        self._client = anthropic.Anthropic(
            api_key=settings.anthropic_api_key.get_secret_value(),
            base_url=settings.anthropic_base_url,
            timeout=settings.llm_timeout_s,
            max_retries=settings.llm_max_retries,
        )

    def complete(self, *, task: Task, system: str, messages: list[dict], max_tokens: int = 1024,
                 cached_prefix: str | None = None, tools: list[dict] | None = None,
                 tool_choice: dict | None = None, temperature: float | None = None) -> LLMResponse:
        if task not in self.models:
            raise ValueError(f"unknown LLM task {task!r}; expected one of {sorted(self.models)}")
        model = self.models[task]
        params: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "messages": messages}
        if temperature is not None:
            # anthropic>=1.0 dropped the `temperature` keyword, and Sonnet 5 / Opus 5 / Opus 4.7+
            # answer 400 "`temperature` is deprecated for this model", so it is sent only on request
            # (haiku-4-5 still takes it) and the model default applies otherwise.
            params["extra_body"] = {"temperature": temperature}
        if cached_prefix:
            # The long stable text goes first and carries the cache breakpoint, so every call that
            # shares it (e.g. each chunk of one document) reads it from the cache at 0.1x the price.
            # The API skips caching below a model's minimum prefix size (1-4k tokens) without error.
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
        try:
            msg = self._client.messages.create(**params)
        except anthropic.AnthropicError as err:
            raise _to_llm_error(err, model, self.settings) from err

        u = msg.usage
        usage = Usage.priced(model, input_tokens=u.input_tokens, output_tokens=u.output_tokens,
                             cache_read_tokens=u.cache_read_input_tokens or 0,
                             cache_write_tokens=u.cache_creation_input_tokens or 0)
        if self.meter is not None:
            self.meter.record(model, usage)
        text = "".join(block.text for block in msg.content if block.type == "text")
        tool_input = next((dict(block.input) for block in msg.content if block.type == "tool_use"), None)
        return LLMResponse(text=text, tool_input=tool_input, stop_reason=msg.stop_reason,
                           model=msg.model, usage=usage)


def _to_llm_error(err: anthropic.AnthropicError, model: str, settings: Settings) -> LLMError:
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
    return AnthropicLLM(settings, meter)
