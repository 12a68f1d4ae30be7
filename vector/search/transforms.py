"""Query transforms before hybrid search: conversational rewrite, multi-query and HyDE.

Each one is an extra LLM call (the `fast` model, 0.3-0.8 s) and a new way to fail, so multi-query
and HyDE are off until evaluations show they pay; the rewrite runs only when the caller passes a
conversation history. Every call forces one tool, so the reply is structured data checked here, and
every user string is XML-escaped inside the prompt's tags (it is data, never instructions). Any LLM
failure or malformed reply drops that transform, flags the result `degraded` with the reason, and
the search goes on with what is left: at worst the plain search of the original question.

Multi-query searches the question and its paraphrases in parallel, each in the searcher's own mode
(hybrid when reranking), fuses the per-query candidate lists with RRF (ties by id), then reranks the
fused list once against the question. A fused candidate keeps the leg ranks and scores of the query
that ranked it best, because the offline reranker's features were fitted on single-search values;
its `score` is the multi-query RRF score. With HyDE, the hypothetical passage replaces the question
on the vector leg of the question's own search only; full text and rerank keep the question.
"""
from __future__ import annotations

import contextvars
import logging
import re
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Sequence

from core.llm.client import LLM
from core.llm.usage import Usage
from core.llm.errors import LLMError
from core.llm.prompting import MalformedReply, Tool, call_tool
from vector.search.fusion import rrf
from core.text.language import detect_language
from vector.prompts import (HYDE_SCHEMA, HYDE_SYSTEM, PARAPHRASE_SYSTEM, REWRITE_SCHEMA, REWRITE_SYSTEM,
                            paraphrase_message, paraphrase_tool, question_message, rewrite_message)
from vector.search.hybrid import MODES, Candidate, HybridSearcher, Mode, SearchResult


log = logging.getLogger(__name__)

MAX_HISTORY_TURNS = 6  # the referent of "and for Python?" is almost always in the last few turns
MAX_TURN_CHARS = 2000  # a long pasted answer costs tokens and adds nothing to resolving references
MAX_PASSAGE_CHARS = 2000  # beyond this the embedder truncates anyway
MAX_PARAPHRASES = 8  # each one is a whole search; more adds latency, not recall


class TransformError(MalformedReply):
    """The model's reply fits the tool but is no usable transform (another language, nothing new); the
    transform is skipped, flagged degraded."""


@dataclass
class Rewrite:
    text: str
    degraded: bool = False
    reason: str | None = None
    usage: Usage | None = None  # None when no call was made


def _ask(llm: LLM, tool: Tool, system: str, content: str, max_tokens: int, usage: Usage | None):
    """The tool's validated input (core.llm.prompting); its cost added to `usage`, failed calls' too."""
    try:
        reply = call_tool(llm, tool, task="fast", system=system, max_tokens=max_tokens,
                          messages=[{"role": "user", "content": content}])
    except LLMError as err:
        if usage is not None and err.usage is not None:
            usage.add(err.usage)  # spent even though the reply turned out unusable
        raise
    if usage is not None:
        usage.add(reply.usage)
    return reply.value


def _within(value: str, key: str, limit: int) -> str:
    if len(value) > limit:
        raise TransformError(f"{key} is {len(value)} characters, over {limit}: the model answered instead")
    return value


def _cyrillic(text: str) -> bool:
    return detect_language(text) == "russian"  # script is what a short query's language reliably shows


def _key(text: str) -> str:  # "Reset password?" and "reset  password" are the same query
    return " ".join(re.findall(r"\w+", text.casefold().replace("ё", "е")))


def _turns(history: Sequence[dict], max_turns: int) -> list[tuple[str, str]]:
    """(role, text) of the last well-formed turns; history comes from API callers, so it is checked."""
    turns = []
    for item in history or ():
        if not isinstance(item, dict) or item.get("role") not in ("user", "assistant"):
            continue
        content = item.get("content")
        if isinstance(content, list):  # Messages API style blocks: keep the text ones
            content = " ".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
        if isinstance(content, str) and content.strip():
            turns.append((item["role"], content.strip()[:MAX_TURN_CHARS]))
    return turns[-max_turns:] if max_turns > 0 else []


def rewrite_conversational(llm: LLM, question: str, history: Sequence[dict] | None, *,
                           max_turns: int = MAX_HISTORY_TURNS) -> Rewrite:
    """A standalone question from the conversation; never raises (the original question on failure)."""
    turns = _turns(history or (), max_turns)
    if not turns:
        return Rewrite(question)
    content = rewrite_message(turns, question)
    usage = Usage()
    try:
        data = _ask(llm, REWRITE_SCHEMA, REWRITE_SYSTEM, content, 300, usage)
        return Rewrite(_within(data.question, "question", max(500, 2 * len(question))), usage=usage)
    except Exception as exc:  # noqa: BLE001 - degraded, not down: the original question still searches
        log.warning("conversational rewrite failed: %s", exc)
        return Rewrite(question, True, f"conversational rewrite failed: {type(exc).__name__}: {exc}", usage)


def paraphrases(llm: LLM, question: str, n: int = 3, *, usage: Usage | None = None) -> list[str]:
    """[question, up to n distinct paraphrases in its script]; raises LLMError or TransformError."""
    n = max(1, min(n, MAX_PARAPHRASES))
    items = _ask(llm, paraphrase_tool(n), PARAPHRASE_SYSTEM, paraphrase_message(question, n), 150 + 120 * n,
                 usage).paraphrases
    out, seen, limit = [question], {_key(question)}, max(500, 3 * len(question))
    for item in items:
        text = " ".join(item.split())
        # another script than the question's means a translation: its full-text leg would miss
        if not _key(text) or len(text) > limit or _cyrillic(text) != _cyrillic(question) or _key(text) in seen:
            continue
        seen.add(_key(text))
        out.append(text)
    if len(out) == 1:
        raise TransformError(f"no usable paraphrase among {len(items)} returned")
    return out[: n + 1]


def hypothetical_document(llm: LLM, question: str, *, usage: Usage | None = None) -> str:
    """HyDE passage in the question's script; raises LLMError or TransformError."""
    passage = _ask(llm, HYDE_SCHEMA, HYDE_SYSTEM, question_message(question), 400,
                   usage).passage[:MAX_PASSAGE_CHARS]  # a long one is cut, not refused
    if _cyrillic(passage) != _cyrillic(question):
        raise TransformError("passage is not in the language of the question")
    return passage


def _stage(candidates: Sequence[Candidate]) -> list[dict]:
    return [{"id": c.id, "rank": r, "score": c.score} for r, c in enumerate(candidates, start=1)]


class TransformingSearcher:
    """`HybridSearcher.search` plus `history`, with the switched-on transforms; the caller owns `searcher`."""

    def __init__(self, searcher: HybridSearcher, llm: LLM | None, *, multi_query: bool = False,
                 hyde: bool = False, n_paraphrases: int = 3, max_history_turns: int = MAX_HISTORY_TURNS):
        self.searcher, self.llm = searcher, llm
        self.multi_query, self.hyde = multi_query, hyde
        self.n_paraphrases, self.max_history_turns = max(1, min(n_paraphrases, MAX_PARAPHRASES)), max_history_turns
        self._pool = ThreadPoolExecutor(max_workers=self.n_paraphrases + 1, thread_name_prefix="transform")

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    def __enter__(self) -> "TransformingSearcher":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def unmentioned(self, tenant: str, groups: Sequence[str], codes: Sequence[str], *,
                    misspellings: bool = False, spellings: bool = False) -> tuple[str, ...]:
        return self.searcher.unmentioned(tenant, groups, codes, misspellings=misspellings, spellings=spellings)

    def search(self, tenant: str, groups: Sequence[str], query: str, k: int = 10, mode: Mode = "hybrid",
               history: Sequence[dict] | None = None, hold_other_script: bool = True) -> SearchResult:
        info: dict = {"multi_query": self.multi_query, "hyde": self.hyde, "history_turns": len(history or ())}
        if self.llm is None:
            info["pass_through"] = "no LLM configured: query transforms are off"
        elif not (history or self.multi_query or self.hyde):
            info["pass_through"] = "no transform switched on and no history"
        elif mode not in MODES or not any(g for g in groups) or not query.strip() or k <= 0:
            info["pass_through"] = "nothing to search: no LLM call spent"  # the searcher says why
        if "pass_through" in info:
            result = self.searcher.search(tenant, groups, query, k, mode, hold_other_script=hold_other_script)
            result.trace["transforms"] = info
            return result
        return self._transformed(tenant, groups, query, k, mode, history, info, hold_other_script)

    def _transformed(self, tenant, groups, query, k, mode, history, info, hold_other_script: bool = True) -> SearchResult:
        started, timings, usage, reasons = time.perf_counter(), {}, Usage(), []
        rewrite = rewrite_conversational(self.llm, query, history, max_turns=self.max_history_turns)
        question = rewrite.text
        usage.add(rewrite.usage or Usage())
        reasons += [rewrite.reason] if rewrite.reason else []
        timings["rewrite"] = (time.perf_counter() - started) * 1000
        info.update(question=query, rewritten=question if rewrite.usage is not None and not rewrite.degraded else None)

        start = time.perf_counter()
        calls = {}  # paraphrases and HyDE do not depend on each other: ask both at once
        if self.multi_query:
            calls["multi-query"] = (Usage(), lambda u: paraphrases(self.llm, question, self.n_paraphrases, usage=u))
        if self.hyde:
            calls["HyDE"] = (Usage(), lambda u: hypothetical_document(self.llm, question, usage=u))
        # each in a copy of the caller's context: their calls count in the question's usage meter
        futures = {name: self._pool.submit(contextvars.copy_context().run, call, u) for name, (u, call) in calls.items()}
        answers = {}
        for name, future in futures.items():
            try:
                answers[name] = future.result()
            except Exception as exc:  # noqa: BLE001 - degraded, not down: search without this transform
                log.warning("%s transform failed: %s", name, exc)
                reasons.append(f"{name} failed: {type(exc).__name__}: {exc}")
            usage.add(calls[name][0])
        timings["llm"] = (time.perf_counter() - start) * 1000
        queries = answers.get("multi-query", [question])
        hyde = answers.get("HyDE")
        info.update(paraphrases=queries[1:], hyde=hyde)

        start = time.perf_counter()
        if len(queries) == 1:
            result = self.searcher.search(tenant, groups, question, k, mode, vector_text=hyde,
                                          hold_other_script=hold_other_script)
            per_query = [result]
        else:
            result, per_query = self._multi(tenant, groups, queries, hyde, k, mode, reasons, hold_other_script)
        timings["search"] = (time.perf_counter() - start) * 1000
        info["queries"] = [{"query": q, "vector_text": hyde if i == 0 else None, "candidates": _stage(r.candidates),
                            "degraded_reason": r.degraded_reason} for i, (q, r) in enumerate(zip(queries, per_query))
                           if r is not None]
        if result.degraded_reason and result.degraded_reason not in reasons:
            reasons.append(result.degraded_reason)
        timings["total"] = (time.perf_counter() - started) * 1000
        info.update(usage=asdict(usage), timings_ms=timings, degraded_reasons=reasons)
        result.trace["transforms"] = info
        result.degraded = bool(reasons)
        result.degraded_reason = result.trace["degraded_reason"] = "; ".join(reasons) or None
        return result

    def _multi(self, tenant, groups, queries, hyde, k, mode, reasons,
               hold_other_script: bool = True) -> tuple[SearchResult, list]:
        inner = "hybrid" if mode == "hybrid+rerank" else mode  # rerank once, on the fused list
        futures = [self._pool.submit(contextvars.copy_context().run, self.searcher.search, tenant, groups, q, k, inner,
                                     hyde if i == 0 else None)
                   for i, q in enumerate(queries)]
        per_query: list[SearchResult | None] = [futures[0].result()]  # the question's own search: as plain search
        for q, future in zip(queries[1:], futures[1:]):
            try:
                per_query.append(future.result())
            except Exception as exc:  # noqa: BLE001 - a paraphrase's search is extra recall, not essential
                reasons.append(f"search for paraphrase {q!r} failed: {type(exc).__name__}: {exc}")
                per_query.append(None)
        done = [r for r in per_query if r is not None]
        fused = rrf([[c.id for c in r.candidates] for r in done], k=self.searcher.rrf_k)[: self.searcher.candidates]
        best: dict[int, tuple[int, Candidate]] = {}
        for r in done:
            for position, c in enumerate(r.candidates):
                if c.id not in best or position < best[c.id][0]:  # strict: ties keep the earlier query
                    best[c.id] = (position, c)
        candidates = []
        for chunk_id, score in fused:
            c = Candidate(**vars(best[chunk_id][1]))
            c.score = score
            candidates.append(c)
        trace: dict = {"mode": mode, "k": k, "stages": {"multi_query_rrf": _stage(candidates)}, "timings_ms": {},
                       "searches": [r.trace for r in done]}
        if mode == "hybrid+rerank":
            hits, reason = self.searcher.rerank(queries[0], candidates, k, trace, hold_other_script)
            if reason:
                reasons.append(reason)
        else:
            hits = [Candidate(**vars(c)) for c in candidates[:k]]
        trace["stages"]["final"] = _stage(hits)
        degraded = "; ".join(dict.fromkeys(r.degraded_reason for r in done if r.degraded_reason)) or None
        return SearchResult(hits, candidates, bool(degraded), degraded, trace), per_query
