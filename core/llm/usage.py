"""What LLM calls cost: `Usage` (tokens and dollars of one call or a sum), the `UsageMeter` a question or a job
sums them in, and `meter_reply`, which records a reply in the meter of the current context.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Iterator

from core.llm.pricing import price_of


def model_prices(model: str) -> tuple[float, float] | None:
    """(input, output) USD per 1M tokens, or None (warned once per model) when unknown (core.llm.pricing)."""
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
    inside `with meter.metering():` every reply the call kernel (core.llm.prompting) gets is recorded,
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
