"""One limiter per process and API endpoint for every LLM call: how many are in flight, and when to wait.

Bulk steps (extraction, summaries, reports, chunk contexts, the global map phase) run their calls from
several threads. Were each thread to retry on its own, a 429 would be answered by N threads hammering
again after their own backoff. Instead every call takes a slot here: at most `concurrency` in flight,
and a 429's `retry-after` (or a 529's backoff) pauses every thread of the process, not only the one
that got it; a success ends the 529 backoff streak.
"""
from __future__ import annotations

import contextvars
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Callable, Iterable, Iterator, TypeVar

T = TypeVar("T")
R = TypeVar("R")

BACKOFF_FIRST_S = 0.5  # the SDK's own schedule: 0.5 s doubling to 8 s, with jitter
BACKOFF_MAX_S = 8.0
RETRY_AFTER_MAX_S = 60.0  # a longer retry-after is read as a mistake, as the SDK does


def backoff_s(attempt: int) -> float:
    """The pause before retry number `attempt` (0-based) without a retry-after: exponential, jittered."""
    return min(BACKOFF_FIRST_S * 2 ** attempt, BACKOFF_MAX_S) * (1 - 0.25 * random.random())


class Limiter:
    def __init__(self, concurrency: int):
        if concurrency < 1:
            raise ValueError(f"LLM concurrency must be >= 1, got {concurrency}")
        self.concurrency = concurrency
        self._cond = threading.Condition()
        self._in_flight = 0
        self._resume_at = 0.0  # time.monotonic() before which no call starts
        self._overloads = 0  # 529s since the last success: the shared backoff grows with them
        self.max_in_flight = 0
        self.pauses = 0  # 429 / 529 pauses taken (a test and the bench read it)

    @contextmanager
    def slot(self) -> Iterator[None]:
        """Held for one HTTP call: waits for a free slot and for any pause to end."""
        with self._cond:
            while True:
                wait = self._resume_at - time.monotonic()
                if wait <= 0 and self._in_flight < self.concurrency:
                    break
                self._cond.wait(timeout=wait if wait > 0 else None)
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
        try:
            yield
        finally:
            with self._cond:
                self._in_flight -= 1
                self._cond.notify_all()

    def rate_limited(self, retry_after_s: float | None, attempt: int) -> None:
        """A 429: nobody starts a call before the server said (else the backoff for this attempt)."""
        self._pause(retry_after_s if retry_after_s is not None else backoff_s(attempt))

    def overloaded(self, retry_after_s: float | None) -> None:
        """A 529: the whole process backs off, longer with each 529 in a row."""
        with self._cond:
            self._overloads += 1
            streak = self._overloads
        self._pause(max(retry_after_s or 0.0, backoff_s(streak - 1)))

    def succeeded(self) -> None:
        with self._cond:
            self._overloads = 0

    def _pause(self, seconds: float) -> None:
        with self._cond:
            self.pauses += 1
            self._resume_at = max(self._resume_at, time.monotonic() + min(seconds, RETRY_AFTER_MAX_S))
            self._cond.notify_all()


_limiters: dict[tuple[str, int], Limiter] = {}
_registry_lock = threading.Lock()


def limiter_for(endpoint: str, concurrency: int) -> Limiter:
    """The process's limiter for an API endpoint (base URL): shared by every LLM object calling it."""
    with _registry_lock:
        return _limiters.setdefault((endpoint, concurrency), Limiter(concurrency))


def concurrency_of(llm: object) -> int:
    """Calls worth making at once through `llm`: its `concurrency` (AnthropicLLM: CROSSROADS_LLM_CONCURRENCY);
    an LLM without one (a scripted test double) is called one call at a time, in order."""
    return max(1, int(getattr(llm, "concurrency", 1) or 1))


def map_ordered(fn: Callable[[T], R], items: Iterable[T], workers: int) -> list[R | BaseException]:
    """fn over items with up to `workers` threads; results (or the exception each raised) in the items'
    order, not in the order they arrived, so what is built from them is the same on every run. Each
    call runs in a copy of the caller's context, so a question's usage meter (core.llm.client) counts it."""
    items = list(items)
    if workers <= 1 or len(items) <= 1:
        return [_capture(fn, item) for item in items]
    with ThreadPoolExecutor(max_workers=min(workers, len(items)), thread_name_prefix="llm") as pool:
        futures = [pool.submit(contextvars.copy_context().run, _capture, fn, item) for item in items]
        return [f.result() for f in futures]


def _capture(fn: Callable[[T], R], item: T) -> R | BaseException:
    try:
        return fn(item)
    except Exception as exc:  # noqa: BLE001 - handed back in order; the caller decides per item
        return exc
