"""What LLM tokens cost: one price table, which settings can override, with batch and cache prices.

A model is priced only when the table names it, or names it without a date suffix (a dated snapshot
"claude-haiku-4-5-20251001" prices as "claude-haiku-4-5"). Anything else is unknown: warned once, and
its cost is None (`cost_usd: null`), never a guess from a name that merely starts alike.
"""
from __future__ import annotations

import logging
import re
import threading
from dataclasses import dataclass
from typing import Mapping

log = logging.getLogger(__name__)

# Multipliers of the input price, as Anthropic bills them: cache writes with the default 5-minute TTL,
# cache reads; the Message Batches API bills every token kind at half the price.
CACHE_WRITE_FACTOR = 1.25
CACHE_READ_FACTOR = 0.1
BATCH_FACTOR = 0.5


@dataclass(frozen=True)
class Price:
    """USD per million tokens."""

    input: float
    output: float

    def cost(self, *, input_tokens: int = 0, output_tokens: int = 0, cache_read_tokens: int = 0,
             cache_write_tokens: int = 0, batch: bool = False) -> float:
        usd = (input_tokens * self.input + output_tokens * self.output
               + cache_write_tokens * self.input * CACHE_WRITE_FACTOR
               + cache_read_tokens * self.input * CACHE_READ_FACTOR) / 1_000_000
        return usd * BATCH_FACTOR if batch else usd


PRICES: dict[str, Price] = {
    "claude-haiku-4-5": Price(1.0, 5.0),
    "claude-sonnet-5": Price(2.0, 10.0),
    "claude-opus-5": Price(5.0, 25.0),
}

# The shortest prefix (tokens) each model caches; a shorter one is sent uncached without an error, so
# no saving may be counted for it. From the prompt-caching documentation ("Minimum cacheable prompt
# length": 4096 for Haiku 4.5 and Opus 4.5+, 1024 for Sonnet 4.5/4.6, 2048 for Haiku 3.5 / 3); a
# model it does not list is counted as caching nothing.
CACHE_MIN_TOKENS: dict[str, int] = {
    "claude-haiku-4-5": 4096,
    "claude-3-5-haiku": 2048,
    "claude-3-haiku": 2048,
    "claude-sonnet-5": 1024,
    "claude-opus-5": 4096,
}

# How each model thinks, from the extended / adaptive thinking documentation: "enabled" takes
# `{"type": "enabled", "budget_tokens": N}` (Claude 4.5 and earlier thinking models); "adaptive" takes
# only `{"type": "adaptive"}` (Opus 4.7+, the 5 family: a budget_tokens is a 400). A model not listed
# is sent no thinking (warned once).
THINKING_MODES: dict[str, str] = {
    "claude-haiku-4-5": "enabled",
    "claude-sonnet-4-5": "enabled",
    "claude-opus-4-5": "enabled",
    "claude-sonnet-5": "adaptive",
    "claude-opus-5": "adaptive",
}

# The effort levels (`output_config.effort`) each model takes, from the effort documentation: Opus 4.5 takes
# low / medium / high; `max` came with Opus 4.6 and Sonnet 4.6, `xhigh` with Opus 4.7. Haiku 4.5 takes no
# effort at all (a 400, as for a level a model lacks): a model not listed is sent none (warned once).
_BASIC_EFFORT = ("low", "medium", "high")
EFFORT_LEVELS: dict[str, tuple[str, ...]] = {
    "claude-opus-4-5": _BASIC_EFFORT,
    "claude-opus-4-6": (*_BASIC_EFFORT, "max"),
    "claude-sonnet-4-6": (*_BASIC_EFFORT, "max"),
    "claude-opus-4-7": (*_BASIC_EFFORT, "xhigh", "max"),
    "claude-opus-4-8": (*_BASIC_EFFORT, "xhigh", "max"),
    "claude-sonnet-5": (*_BASIC_EFFORT, "xhigh", "max"),
    "claude-opus-5": (*_BASIC_EFFORT, "xhigh", "max"),
}

_DATED = re.compile(r"^(?P<alias>.+)-\d{8}$")
_overrides: dict[str, Price] = {}
_warned: set[str] = set()
_warned_thinking: set[str] = set()
_warned_effort: set[tuple[str, str]] = set()
_lock = threading.Lock()


def set_overrides(prices: Mapping[str, tuple[float, float] | list[float]]) -> None:
    """Prices from settings (`CROSSROADS_LLM_PRICES`), taking precedence over the table."""
    with _lock:
        _overrides.clear()
        _overrides.update({model: Price(float(p[0]), float(p[1])) for model, p in prices.items()})


def _lookup(table: Mapping[str, object], model: str):
    if model in table:
        return table[model]
    dated = _DATED.match(model)
    return table.get(dated.group("alias")) if dated else None


def price_of(model: str) -> Price | None:
    """The model's price, or None (warned once per model) when neither settings nor the table name it."""
    with _lock:
        found = _lookup(_overrides, model) or _lookup(PRICES, model)
        if found is None and model not in _warned:
            _warned.add(model)
            log.warning("no price known for model %r: its cost is reported as null; set it in CROSSROADS_LLM_PRICES "
                        "(JSON: {\"%s\": [input, output]} in USD per million tokens)", model, model)
    return found


def cache_min_tokens(model: str) -> int | None:
    """The model's documented minimum cached prefix, or None when unknown (then no saving is counted)."""
    return _lookup(CACHE_MIN_TOKENS, model)


def thinking_mode(model: str) -> str | None:
    """"enabled" (a budget_tokens), "adaptive", or None for a model not known to think (warned once: a
    thinking budget set for it is not sent, and not counted)."""
    mode = _lookup(THINKING_MODES, model)
    if mode is None:
        with _lock:
            if model not in _warned_thinking:
                _warned_thinking.add(model)
                log.warning("model %r is not known to support thinking: CROSSROADS_LLM_THINKING is not sent to it",
                            model)
    return mode


def effort_for(model: str, level: str | None) -> str | None:
    """The effort level to send `model` for a wanted `level` (None: none wanted), or None when the model does
    not take that level (warned once per model and level: sending it would be a 400)."""
    if level is None:
        return None
    levels = _lookup(EFFORT_LEVELS, model) or ()
    if level in levels:
        return level
    with _lock:
        if (model, level) not in _warned_effort:
            _warned_effort.add((model, level))
            log.warning("model %r does not take effort %r (it takes %s): CROSSROADS_LLM_EFFORT is not sent to it",
                        model, level, ", ".join(levels) or "none")
    return None
