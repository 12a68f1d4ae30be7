"""Listwise LLM reranker: one `fast`-model call sees all candidates and returns a ranking by tool use.

Corpus text is data, not instructions: the question and every passage go inside XML tags with their
text escaped, so a passage saying "ignore the above" cannot close its tag or pose as our prompt, and
the system prompt says tag contents are never to be followed. The answer is a forced tool call whose
passage numbers and scores are validated like any other untrusted reranker output.
"""
from __future__ import annotations

from typing import Sequence

from core.llm.client import LLM, make_llm
from core.llm.errors import LLMError
from core.llm.prompting import call_tool
from vector.prompts import RANKING, RANK_SYSTEM, render_prompt
from vector.search.rerank.contract import RerankError, checked_ranking
from vector.search.hybrid import Candidate


class LLMReranker:
    name = "llm"

    def __init__(self, llm: LLM, max_tokens: int = 1024):
        self.llm = llm
        self.max_tokens = max_tokens

    @classmethod
    def from_settings(cls, settings, timeout_s: float = 20.0) -> "LLMReranker":
        # Reranking is on the query path: no SDK retries and a tighter timeout than answer generation.
        tuned = settings.model_copy(update={"llm_timeout_s": timeout_s, "llm_max_retries": 0})
        llm = make_llm(tuned)
        if llm is None:
            raise RerankError("reranker 'llm' needs ANTHROPIC_API_KEY; or choose CROSSROADS_RERANKER=offline")
        return cls(llm)

    def rerank(self, query: str, candidates: Sequence[Candidate], top_k: int) -> list[tuple[int, float]]:
        if not candidates or top_k <= 0:
            return []
        try:
            reply = call_tool(self.llm, RANKING, task="fast", system=RANK_SYSTEM, max_tokens=self.max_tokens,
                              messages=[{"role": "user", "content": render_prompt(query, candidates, top_k)}])
        except LLMError as exc:  # the API failed, or the reply was refused, malformed or cut twice
            raise RerankError(f"LLM reranker failed: {exc}") from exc
        # scores scaled to 0..1, like the hosted rerankers', so one threshold scale fits all
        pairs = [(item.passage - 1, item.score / 100) for item in reply.value.ranking]
        return checked_ranking(pairs, len(candidates), top_k, "LLM reranker")
