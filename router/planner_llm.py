"""The LLM planner of the agentic loop: structured output through a forced tool, offline fallback.

See router/agentic.py for the loop and what a planner decides.
"""
from __future__ import annotations

import logging

from core.llm.prompting import MalformedReply, call_tool
from router.agentic import MAX_PLANNED_QUERIES, Decision, query_key
from router.planner_offline import OfflinePlanner
from router.prompts import PLAN, PLAN_PROMPT, plan_message
from answers.question import Question
from answers.types import Passage


log = logging.getLogger(__name__)


def _distinct(queries: list[str]) -> list[str]:
    cleaned: list[str] = []
    for q in queries:
        if q and query_key(q) not in {query_key(c) for c in cleaned}:
            cleaned.append(q)
    return cleaned[:MAX_PLANNED_QUERIES]


class LLMPlanner:
    """Planner over an `LLM` (`fast` task, forced `plan_search` tool); falls back to `OfflinePlanner`."""

    name = "llm"

    def __init__(self, llm, offline: OfflinePlanner | None = None, max_tokens: int = 512):
        self.llm = llm
        self.offline = offline or OfflinePlanner()
        self.max_tokens = max_tokens

    def plan(self, question: Question, evidence: list[Passage], asked: list[str]) -> Decision:
        from core.llm.errors import LLMError

        try:
            reply = call_tool(self.llm, PLAN, task="fast", system=PLAN_PROMPT, max_tokens=self.max_tokens,
                              messages=[{"role": "user", "content": plan_message(question.text, evidence, asked)}])
        except LLMError as err:  # refused, malformed or cut twice, or the API failed
            kind = "reply malformed" if isinstance(err, MalformedReply) else "failed"
            decision = self._fallback(question, evidence, asked, f"LLM planner {kind}: {err}")
            if err.usage is not None:  # replies came back and were paid for, unusable as they were
                decision.usage = err.usage.as_dict()
            return decision
        except Exception as err:  # noqa: BLE001 - a planner never raises into the loop
            return self._fallback(question, evidence, asked, f"LLM planner failed: {type(err).__name__}: {err}")
        usage = reply.usage.as_dict() | {"model": reply.model}
        plan = reply.value
        queries = [] if plan.enough else _distinct(plan.queries)
        return Decision(plan.enough, queries, plan.reason or ("enough" if plan.enough else "searching further"),
                        planner="llm", usage=usage)

    def _fallback(self, question: Question, evidence: list[Passage], asked: list[str], error: str) -> Decision:
        log.warning("%s; falling back to the offline planner", error)
        d = self.offline.plan(question, evidence, asked)
        return Decision(d.enough, d.queries, f"{error}; offline planner: {d.reason}", planner="llm->offline",
                        error=error)
