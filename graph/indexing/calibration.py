"""What a build's LLM calls measured (core.llm.stats.CallStats), kept per tenant in `llm_call_stats`, and read back
by the next estimate (graph.indexing.estimate): characters per token by model, stage and language of the
input, the characters of a stage's instructions (system prompt and tools), output tokens per call by
model, stage and thinking budget, and how much single calls spread.

Measurements replace the estimate's defaults once MIN_CALLS calls back them; fewer say too little."""
from __future__ import annotations

import math
from dataclasses import astuple, dataclass, fields

from core.database import Database
from core.llm.stats import StageStats

MIN_CALLS = 20
# The widest spread a measured range is given, relative to its centre: a few outlying calls (a reply cut
# and asked again) must not turn a measured estimate into a wider range than the defaults' band.
MAX_SPREAD = 0.5


def save_call_stats(db: Database, tenant: str, part: object) -> None:
    """Add what the part's LLM measured since the last save to the tenant's sums (nothing for an offline part)."""
    stats = getattr(getattr(part, "llm", None), "stats", None)
    sums = stats.take() if stats is not None else {}
    if not sums:
        return
    rows = [(tenant, model, stage, lang, thinking, *astuple(s)) for (model, stage, lang, thinking), s in sorted(sums.items())]
    with db.connection() as conn, conn.cursor() as cur:
        cur.executemany(_ADD, rows)


_SUMS = [f.name for f in fields(StageStats)]
_ADD = (f"INSERT INTO llm_call_stats AS t (tenant_id, model, stage, lang, thinking, {', '.join(_SUMS)}) "
        f"VALUES ({', '.join(['%s'] * (5 + len(_SUMS)))}) ON CONFLICT (tenant_id, model, stage, lang, thinking) "
        f"DO UPDATE SET {', '.join(f'{n} = t.{n} + EXCLUDED.{n}' for n in _SUMS)}, updated_at = now()")


@dataclass(frozen=True)
class Measured:
    """A ratio over `calls` calls, and the relative spread (standard deviation / mean) of single calls."""

    calls: int
    value: float
    spread: float

    def band(self) -> tuple[float, float]:
        """(low, high) factors of the value: one spread either side."""
        return 1 - self.spread, 1 + self.spread


def _spread(n: int, total: float, squares: float) -> float:
    mean = total / n
    variance = max(0.0, squares / n - mean * mean)
    return min(MAX_SPREAD, math.sqrt(variance) / mean) if mean > 0 else MAX_SPREAD


class Calibration:
    """The tenant's measured sums, by (model, stage, language, thinking budget)."""

    def __init__(self, sums: dict[tuple[str, str, str, int], StageStats]):
        self.sums = sums

    @classmethod
    def load(cls, conn, tenant: str) -> "Calibration":
        rows = conn.execute(f"SELECT model, stage, lang, thinking, {', '.join(_SUMS)} FROM llm_call_stats "
                            "WHERE tenant_id = %s", (tenant,)).fetchall()
        return cls({tuple(r[:4]): StageStats(*r[4:]) for r in rows})

    def _pooled(self, keep) -> StageStats:
        out = StageStats()
        for key, s in self.sums.items():
            if keep(*key):
                out.calls += s.calls
                out.input_chars += s.input_chars
                out.message_chars += s.message_chars
                out.input_tokens += s.input_tokens
                out.output_tokens += s.output_tokens
                out.cpt_sum += s.cpt_sum
                out.cpt_squares += s.cpt_squares
                out.input_squares += s.input_squares
                out.output_squares += s.output_squares
        return out

    def chars_per_token(self, model: str, stage: str, lang: str | None = None) -> Measured | None:
        """Prompt characters per token of `stage`'s calls by `model` (in `lang`, or in any language)."""
        s = self._pooled(lambda m, st, lg, _: m == model and st == stage and lang in (None, lg))
        if s.calls < MIN_CALLS or not s.input_tokens:
            return None
        return Measured(s.calls, s.input_chars / s.input_tokens, _spread(s.calls, s.cpt_sum, s.cpt_squares))

    def instructions_chars(self, model: str, stage: str) -> float:
        """Characters per call of `stage`'s system prompt and tools (all but the messages: the same every call);
        0 before any call was measured."""
        s = self._pooled(lambda m, st, _, __: m == model and st == stage)
        return (s.input_chars - s.message_chars) / s.calls if s.calls else 0.0

    def input_per_call(self, model: str, stage: str) -> Measured | None:
        """Prompt tokens per call of `stage`, where prompts are not known before the build (reports)."""
        s = self._pooled(lambda m, st, _, __: m == model and st == stage)
        if s.calls < MIN_CALLS:
            return None
        return Measured(s.calls, s.input_tokens / s.calls, _spread(s.calls, s.input_tokens, s.input_squares))

    def output_per_call(self, model: str, stage: str, thinking: int) -> Measured | None:
        """Output tokens (thinking included) per call of `stage` made with this thinking budget."""
        s = self._pooled(lambda m, st, _, th: m == model and st == stage and th == thinking)
        if s.calls < MIN_CALLS:
            return None
        return Measured(s.calls, s.output_tokens / s.calls, _spread(s.calls, s.output_tokens, s.output_squares))
