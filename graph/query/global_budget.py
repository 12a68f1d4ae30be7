"""The cost dial of global search (LazyGraphRAG's idea): a per-question budget decides how many community
reports are rated and mapped.

A budget is a number of LLM calls (`6`) or dollars (`$0.05`, through core.pricing as every call is priced).
With a call budget B the answer takes one call and the rest is split between rating and mapping:
`rating = (B - 1) // 2`, `map = B - 1 - rating` (B = 2: no rating call, one map call over the reports the
offline relevance ranks first; B = 6: two rating calls, three map calls). The reports are ranked offline
first (words + the report vector: free), so what the budget leaves out is the least relevant by that
ranking. A dollar budget keeps the dynamic selection and stops rating and mapping once the question has
cost that much (the cap can be passed by at most one wave of calls). Retries of a malformed reply are
extra calls inside one planned call (the kernel asks once more): the trace counts them.

Pure functions, tested without I/O; the search that spends the budget is graph/query/global_llm.py.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

MIN_CALLS = 2  # one map call and the answer: fewer cannot write an answer from the reports
MAX_CALLS = 500
_USD = re.compile(r"^\s*(?:\$\s*(?P<a>\d+(?:\.\d+)?)|(?P<b>\d+(?:\.\d+)?)\s*(?:usd|\$))\s*$", re.IGNORECASE)
_CALLS = re.compile(r"^\s*(?P<n>\d+)\s*(?:calls?)?\s*$", re.IGNORECASE)


class BudgetError(ValueError):
    """A budget that is neither a call count nor a dollar amount; the message names the accepted forms."""


@dataclass(frozen=True)
class GlobalBudget:
    """Exactly one of `calls` (LLM calls per question, answer included) and `usd` (dollars per question)."""
    calls: int | None = None
    usd: float | None = None

    def __post_init__(self) -> None:
        if (self.calls is None) == (self.usd is None):
            raise BudgetError("a budget is a number of LLM calls or of dollars, exactly one of them")
        if self.calls is not None and not MIN_CALLS <= self.calls <= MAX_CALLS:
            raise BudgetError(f"a call budget must be within {MIN_CALLS}..{MAX_CALLS} (one map call and the answer "
                              f"at least), got {self.calls}")
        if self.usd is not None and not (self.usd > 0 and math.isfinite(self.usd)):
            raise BudgetError(f"a dollar budget must be above 0, got {self.usd}")

    def split(self) -> tuple[int, int]:
        """(rating calls, map calls) of a call budget; the answer takes the one call left."""
        if self.calls is None:
            raise BudgetError("only a call budget splits into calls")
        rest = self.calls - 1
        rating = rest // 2
        return rating, rest - rating

    def as_dict(self) -> dict:
        return {"calls": self.calls} if self.calls is not None else {"usd": self.usd}


def parse_budget(value: int | float | str | None) -> GlobalBudget | None:
    """`6`, "6", "6 calls" -> 6 calls; "$0.05", "0.05usd" -> dollars; None or "" -> no budget."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        raise BudgetError(f"a budget is a number of calls (6) or dollars ($0.05), got {value!r}")
    if isinstance(value, int):
        return GlobalBudget(calls=value)
    if isinstance(value, float):
        if value.is_integer():
            return GlobalBudget(calls=int(value))
        raise BudgetError(f"a call budget is a whole number; for dollars write ${value}")
    text = str(value)
    if m := _CALLS.match(text):
        return GlobalBudget(calls=int(m["n"]))
    if m := _USD.match(text):
        return GlobalBudget(usd=float(m["a"] or m["b"]))
    raise BudgetError(f"a budget is a number of LLM calls (6) or dollars ($0.05), got {value!r}")


def spread(n_items: int, calls: int, min_per_call: int = 1) -> list[int]:
    """How many items each of up to `calls` calls takes so that they run side by side: consecutive,
    as even as can be, at least `min_per_call` each (fewer calls when there are few items)."""
    if n_items <= 0:
        return []
    calls = max(1, min(calls, n_items // max(1, min_per_call) or 1))
    base, extra = divmod(n_items, calls)
    return [base + (1 if i < extra else 0) for i in range(calls)]
