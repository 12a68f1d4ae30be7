"""LLM client: one small interface over the Anthropic Messages API, with token and cost accounting.

Callers depend on the `LLM` protocol, never on the SDK, so a test can pass a scripted fake, and
offline mode is simply `make_llm(settings) is None` (callers then run their offline algorithm).
"""
from __future__ import annotations

import logging
import time
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator, Literal, Protocol

if TYPE_CHECKING:
    import anthropic

from core.llm.errors import LLMError, retry_after_s, is_retryable, to_llm_error
from core.llm.limiter import backoff_s, limiter_for
from core.llm.usage import Usage, UsageMeter
from core.llm.stats import CallStats
from core.llm.pricing import effort_for, thinking_mode
from core.llm.pricing import set_overrides as set_price_overrides
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


class AnthropicLLM:
    """`LLM` over the Anthropic Messages API.

    Retries are ours, not the SDK's (its client is made with max_retries=0): each attempt takes a slot
    of the process's limiter (core.llm.limiter), so at most CROSSROADS_LLM_CONCURRENCY calls are in
    flight, and a 429's `retry-after` / a 529's backoff pauses every thread, not only the one that got
    it. Retried, as the SDK would: connection errors, timeouts, 408, 409, 429 and every 5xx, up to
    `llm_max_retries` times. Then the error becomes one `LLMError`.

    `concurrency`: calls worth making at once (core.llm.limiter.concurrency_of); bulk steps size their
    thread pools with it. `stats`: what every reply's `usage` measured, summed per (model, stage,
    language, thinking budget): saved after a build to calibrate the next one's estimate
    (graph.indexing.calibration); a handful of sums whatever the number of calls.
    """

    def __init__(self, settings: Settings, meter: UsageMeter | None = None):
        import anthropic  # deferred: importing the SDK costs ~1.2 s, which a CLI without a key never pays
        if not settings.llm_enabled:
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
        """The SDK client (core.llm.batches sends Message Batches with it)."""
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
            # (core.llm.prompting asks again when no tool call comes back).
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
            # The API skips caching below a model's minimum prefix size (core.llm.pricing) without error.
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
        or when the model does not think (core.llm.pricing.thinking_mode; warned once there)."""
        budget = self.settings.llm_thinking.get(stage, 0)
        return budget if budget and thinking_mode(model) is not None else 0

    def effort(self, stage: str, model: str) -> str | None:
        """The effort level a call of `stage` by `model` is sent (CROSSROADS_LLM_EFFORT): None when none is set, or
        when the model does not take that level (core.llm.pricing.effort_for; warned once there). Estimates do not
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
                    raise to_llm_error(err, params["model"], self.settings) from err
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
                    if attempt == retries or not is_retryable(err):
                        raise to_llm_error(err, model, self.settings) from err
                    status = getattr(err, "status_code", None)
                    after = retry_after_s(err)
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


def make_llm(settings: Settings, meter: UsageMeter | None = None) -> LLM | None:
    """The configured LLM, or None without an API key (offline mode: callers run offline algorithms)."""
    if not settings.llm_enabled:  # `ANTHROPIC_API_KEY=` in .env means unset
        return None
    set_price_overrides(settings.llm_prices)
    return AnthropicLLM(settings, meter)
