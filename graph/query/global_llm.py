"""Global search with an LLM: dynamic community selection, map to scored points, reduce to an answer.

GraphRAG's global search ideas on Anthropic tool use (no text copied):
- selection (query/context_builder/dynamic_community_selection.py): rate the root reports'
  title + summary against the question, descend only into children of reports rated relevant, keep
  the relevant ones; irrelevant branches are never sent, which is what makes it cheaper than mapping
  every report of a level;
- map: batches of selected reports within a token budget -> points, each scored 0-100 and citing
  the reports (by id) it rests on; a point citing a report that was not in its batch is dropped;
- reduce: drop zero scores, sort, pack the best within a budget, one "answer" call cites reports as
  [n] (ranges such as [1-3] included); an answer citing a number that was not sent is retried once,
  then replaced by the extractive answer over the same points (degraded), as is an answer refused or
  cut at max_tokens twice: the paid map phase is never thrown away for the answer's sake.
Every call goes through the kernel (core.llm.prompting): scores and report ids sent as strings ("7") are
read as numbers, an invalid rating or point is dropped alone, a cut reply is asked again with a
larger budget. A batch whose reply stays malformed, or is refused, is dropped alone (a rating batch's
reports count as relevant: the map phase judges them; a map batch's points are lost, the answer is
flagged degraded and the trace counts it). An API error (the SDK already retried) falls back to the
offline `global_search`: a query never raises because the API is down. Corpus text is XML-escaped
inside tags and the system prompts say it is data, so a report cannot close its tag and speak as the
system.
Calls in flight together: each level's rating and the map phase are spread over the LLM's concurrency
(`_split`: at least MIN_REPORTS_PER_CALL reports a call), the limiter (core.llm_limiter) bounding them.
A per-question budget (graph/query/global_budget.py) sets the calls instead: a call budget ranks the reports
offline and rates / maps within its split; a dollar budget lowers the cost cap, for the selection too.
"""
from __future__ import annotations

from typing import Any, Callable

from core.citations import cited_numbers
from core.llm.client import LLM, llm_stage
from core.llm.usage import Usage
from core.llm.errors import LLMError, RefusedError
from core.llm.limiter import concurrency_of, map_ordered
from core.llm.prompting import MalformedReply, Tool, call_tool, complete_text, stream_text
from graph.query.answer_text import say
from graph.query.global_budget import GlobalBudget, spread
from graph.query.global_search import (GlobalResult, Point, choose_level, extractive_answer,
                                 global_search, relevance, stems)
from graph.levels import AccessLevel
from graph.prompts import (ANSWER_SYSTEM, MAPPING_TOOL, MAP_SYSTEM, MAP_TOOL, RATE_SYSTEM, RATE_TOOL, RATING_TOOL,
                           brief_report, full_report, points_message, reports_message)


DROPPABLE = (MalformedReply, RefusedError)  # a batch failing so is dropped alone; any other LLMError: the API is down
# A level's reports are spread over as many calls as the LLM takes at once (core.llm_limiter), so a question's
# rating and map calls are in flight together instead of one batch after another; never fewer reports than
# this per call (a call carries its system prompt and tool: one report per call would mostly pay for those).
MIN_REPORTS_PER_CALL = 2


def _tokens(text: str) -> int:
    return len(text) // 4 + 1  # the brief's estimate; a tokenizer per model is not worth the dependency


def _batches(items: list[dict], render: Callable[[dict], str], budget: int) -> list[list[tuple[dict, str]]]:
    """Consecutive items whose rendered text fits the budget; an item over it alone goes alone."""
    out: list[list[tuple[dict, str]]] = []
    used = budget + 1
    for item in items:
        text = render(item)
        if used + _tokens(text) > budget:
            out.append([])
            used = 0
        out[-1].append((item, text))
        used += _tokens(text)
    return out


def _split(items: list[dict], render: Callable[[dict], str], budget: int, calls: int,
           min_per_call: int) -> list[list[tuple[dict, str]]]:
    """`items` spread over up to `calls` consecutive batches (graph.query.global_budget.spread), each batch
    further cut where it passes the token budget."""
    out, start = [], 0
    for size in spread(len(items), calls, min_per_call):
        out += _batches(items[start:start + size], render, budget)
        start += size
    return out


class LLMGlobalSearch:
    def __init__(self, llm: LLM, *, rate_threshold: float = 30, map_budget_tokens: int = 6000,
                 reduce_budget_tokens: int = 6000, max_map_calls: int | None = None,
                 max_cost_usd: float | None = None, budget: GlobalBudget | None = None,
                 on_text: Callable[[str], None] | None = None):
        """`max_map_calls`, `max_cost_usd`: the question's cap on map calls and on its cost so far (rating
        included), checked before each map call; the highest-rated reports are mapped first, so a cap
        leaves out the least relevant ones, and the trace says so (`map_capped`). `budget`: the question's
        cost dial (graph/query/global_budget.py): a call budget decides how many reports are rated and
        mapped, a dollar budget lowers the cost cap (and stops the selection's rating too). `on_text`: the
        reduce's first answer attempt is streamed to it as it arrives (the caller withdraws it when the
        answer returned is another)."""
        self.llm, self.rate_threshold = llm, rate_threshold
        self.map_budget, self.reduce_budget = map_budget_tokens, reduce_budget_tokens
        self.budget, self.on_text = budget, on_text
        if budget is not None and budget.usd is not None:
            max_cost_usd = budget.usd if max_cost_usd is None else min(max_cost_usd, budget.usd)
        self.max_map_calls, self.max_cost_usd = max_map_calls, max_cost_usd

    def search(self, levels: list[AccessLevel], user_groups: set[str], load_reports, question: str,
               query_vec=None) -> GlobalResult:
        """`query_vec`: the question's vector, for the offline ranking a call budget spends itself on."""
        level = choose_level(levels, user_groups)
        if level is None:  # no LLM call can help a user who fits no level
            return GlobalResult(say("no_level", question), None, offline=False,
                                trace={"levels": [lvl.name for lvl in levels]})
        usage = Usage(calls=0)
        trace: dict = {"level": level.name, "rating_calls": 0, "map_calls": 0, "answer_calls": 0}
        try:
            reports = load_reports(level.name)
            trace["reports"] = len(reports)
            return self._search(level.name, reports, question, usage, trace, query_vec)
        except LLMError as err:
            result = global_search(levels, user_groups, load_reports, question, None)
            result.degraded = True
            result.trace = {**result.trace, **trace, "degraded": f"LLM global search failed, offline answer: {err}"}
            result.trace["usage"] = _usage(usage)
            return result

    def _ask_all(self, usage: Usage, trace: dict, counter: str, system: str, tool: Tool,
                 messages: list[str]) -> list:
        """One structured call per message through the kernel, up to the LLM's concurrency at once; each
        call's value, or the DROPPABLE error it raised, in the messages' order (never arrival order), its
        calls (retries included) counted and summed here, in this thread. Any other LLMError raises."""

        def ask(message: str):
            with llm_stage("global_map"):  # its thinking budget (CROSSROADS_LLM_THINKING), in the worker thread
                return call_tool(self.llm, tool, task="fast", system=system, max_tokens=4096,
                                 messages=[{"role": "user", "content": message}])

        out = []
        for reply in map_ordered(ask, messages, concurrency_of(self.llm)):
            if isinstance(reply, DROPPABLE):
                trace[counter] += 1
                out.append(reply)
                continue
            if isinstance(reply, BaseException):
                raise reply
            trace[counter] += reply.usage.calls
            usage.add(reply.usage)
            out.append(reply.value)
        return out

    def _rate(self, reports: list[dict], question: str, usage: Usage, trace: dict,
              batches: list | None = None) -> dict[int, float]:
        scores: dict[int, float] = {}
        if batches is None:
            batches = _split(reports, brief_report, self.map_budget, concurrency_of(self.llm), MIN_REPORTS_PER_CALL)
        messages = [reports_message(question, [t for _, t in batch], RATE_TOOL) for batch in batches]
        for batch, reply in zip(batches, self._ask_all(usage, trace, "rating_calls", RATE_SYSTEM, RATING_TOOL,
                                                        messages)):
            sent = {r["id"] for r, _ in batch}
            if isinstance(reply, DROPPABLE):  # unrated is not irrelevant here: the map phase judges them instead
                trace.setdefault("rating_batches_dropped", []).append(str(reply))
                scores.update(dict.fromkeys(sent, self.rate_threshold))
                continue
            for item in reply.ratings:
                if item.report_id in sent:  # a rating for an id not sent cannot select anything
                    scores[item.report_id] = item.score
            scores.update({rid: scores.get(rid, 0.0) for rid in sent})  # unrated = irrelevant
        return scores

    def _select(self, reports: list[dict], question: str, usage: Usage, trace: dict) -> tuple[list[int], dict]:
        children: dict[Any, list[dict]] = {}
        for r in reports:
            children.setdefault(r["parent"], []).append(r)
        selected, ratings, frontier = [], {}, children.get(None, [])
        while frontier:
            # a dollar budget stops the descent too (the server's cost cap only the map phase); the roots are
            # always rated: the map phase needs something to read
            cap = self._cost_cap_reached(usage) if self.budget is not None and self.budget.usd else None
            if cap and ratings:
                trace["rating_capped"] = f"{cap}: {len(frontier)} reports deeper down were not rated"
                break
            scores = self._rate(sorted(frontier, key=lambda r: r["id"]), question, usage, trace)
            ratings.update(scores)
            relevant = [rid for rid in sorted(scores) if scores[rid] >= self.rate_threshold]
            selected += relevant
            frontier = [c for rid in relevant for c in children.get(rid, [])]
        return selected, ratings

    def _select_within(self, reports: list[dict], question: str, usage: Usage, trace: dict,
                       query_vec) -> tuple[list[int], dict]:
        """A call budget's selection: every report of the level ranked offline (words + vector, no call),
        the best that fit `rating` calls rated, the relevant kept (best rated first); without a rating
        call, the offline ranking's order stands."""
        rating_calls, _ = self.budget.split()
        q = set(stems(question))
        offline = {r["id"]: relevance(q, query_vec, r) for r in reports}
        ranked = sorted(reports, key=lambda r: (-offline[r["id"]], r["id"]))
        if not rating_calls:
            trace["budget_ranked"] = [r["id"] for r in ranked]
            return [r["id"] for r in ranked], {rid: round(100 * s, 1) for rid, s in offline.items()}
        # the best-ranked reports that fit the rating calls, spread over all of them (in flight together)
        fit = [r for batch in _batches(ranked, brief_report, self.map_budget)[:rating_calls] for r, _ in batch]
        batches = _split(fit, brief_report, self.map_budget, rating_calls, 1)[:rating_calls]
        rated = [r for batch in batches for r, _ in batch]
        trace["budget_unrated"] = len(reports) - len(rated)
        scores = self._rate(rated, question, usage, trace, batches)
        relevant = [rid for rid in scores if scores[rid] >= self.rate_threshold]
        return sorted(relevant, key=lambda rid: (-scores[rid], -offline[rid], rid)), scores

    def _map(self, reports: list[dict], question: str, usage: Usage, trace: dict) -> list[tuple[str, float, list[int]]]:
        points, dropped = [], 0
        wave = concurrency_of(self.llm)
        if self.budget is not None and self.budget.calls is not None:
            calls = self.budget.split()[1]  # the budget's map calls, one report each at the least
            batches = _split(reports, full_report, self.map_budget, calls, 1)
            if len(batches) > calls:
                left = batches[calls:]
                trace["budget_left_out"] = (f"the budget of {self.budget.calls} calls maps {calls} batches: "
                                            f"{sum(len(b) for b in left)} reports (the lowest rated) were not read")
                batches = batches[:calls]
        else:
            batches = _split(reports, full_report, self.map_budget, wave, MIN_REPORTS_PER_CALL)
        n = 0
        # In waves of as many calls as the LLM takes at once: the caps are checked before each wave (the
        # cost cap can be passed by at most one wave), and the calls cap is never passed.
        while n < len(batches):
            cap = self._cap_reached(usage, trace)
            if cap:
                left = batches[n:]
                trace["map_capped"] = (f"{cap}: {len(left)} of {len(batches)} map batches "
                                       f"({sum(len(b) for b in left)} reports, the lowest rated) were not read")
                break
            size = wave if self.max_map_calls is None else max(1, min(wave, self.max_map_calls - trace["map_calls"]))
            chunk = batches[n:n + size]
            n += len(chunk)
            messages = [reports_message(question, [t for _, t in batch], MAP_TOOL) for batch in chunk]
            for batch, reply in zip(chunk, self._ask_all(usage, trace, "map_calls", MAP_SYSTEM, MAPPING_TOOL, messages)):
                if isinstance(reply, DROPPABLE):  # the other batches' points are paid for and kept
                    trace.setdefault("map_batches_dropped", []).append(str(reply))
                    continue
                sent = {r["id"] for r, _ in batch}
                for item in reply.points:
                    if not (item.report_ids and set(item.report_ids) <= sent):
                        dropped += 1  # a citation outside the batch is invented: the point cannot be traced
                        continue
                    points.append((item.description, item.score, list(dict.fromkeys(item.report_ids))))
        trace["points_dropped"] = dropped
        if batches and len(trace.get("map_batches_dropped", ())) == len(batches):
            raise MalformedReply(f"every map batch failed, last: {trace['map_batches_dropped'][-1]}")
        return points

    def _cap_reached(self, usage: Usage, trace: dict) -> str | None:
        if self.max_map_calls is not None and trace["map_calls"] >= self.max_map_calls:
            return f"the cap of {self.max_map_calls} map calls per question (CROSSROADS_GLOBAL_MAX_MAP_CALLS) was reached"
        return self._cost_cap_reached(usage)

    def _cost_cap_reached(self, usage: Usage) -> str | None:
        if self.max_cost_usd is not None and usage.cost_usd is not None and usage.cost_usd >= self.max_cost_usd:
            return (f"the cap of ${self.max_cost_usd:g} per question (CROSSROADS_GLOBAL_MAX_COST_USD) was reached "
                    f"(${usage.cost_usd:.4f} spent)")
        return None

    def _search(self, level: str, reports: list[dict], question: str, usage: Usage, trace: dict,
                query_vec=None) -> GlobalResult:
        by_id = {r["id"]: r for r in reports}
        if self.budget is not None:
            trace["budget"] = self.budget.as_dict()
            if self.budget.calls is not None:
                rating, mapping = self.budget.split()
                trace["budget"].update(rating_calls=rating, map_calls=mapping, answer_calls=1)
        if self.budget is not None and self.budget.calls is not None:
            selected, ratings = self._select_within(reports, question, usage, trace, query_vec)
        else:
            selected, ratings = self._select(reports, question, usage, trace)
        trace.update(selected=selected, ratings={rid: ratings[rid] for rid in sorted(ratings)})
        # a cap leaves out the least relevant; a call budget's selection comes ranked already
        by_rating = selected if "budget_ranked" in trace or "budget_unrated" in trace else \
            sorted(selected, key=lambda rid: (-ratings[rid], rid))
        mapped = self._map([by_id[rid] for rid in by_rating], question, usage, trace)
        # reduce: zeros say "does not help"; ties broken by text so the order is reproducible
        packed, used, seen = [], 0, set()
        for text, score, ids in sorted(mapped, key=lambda p: (-p[1], p[0])):
            if score <= 0 or text in seen or used + _tokens(text) > self.reduce_budget:
                continue
            packed.append((text, score, ids))
            seen.add(text)
            used += _tokens(text)
        trace["usage"] = _usage(usage)
        lost = trace.get("map_batches_dropped")
        if lost:
            trace["degraded"] = (f"{len(lost)} map batches failed (malformed or refused) and were dropped: the "
                                 "answer rests on the others")
        if not packed:
            return GlobalResult(say("no_answer", question), level, selected=selected, offline=False, trace=trace,
                                degraded=bool(lost))
        numbers = {rid: n for n, rid in enumerate(dict.fromkeys(rid for _, _, ids in packed for rid in ids), 1)}
        points = [Point(ids[0], text, score, sorted({c for rid in ids for c in by_id[rid]["source_chunk_ids"]}))
                  for text, score, ids in packed]
        answer, cited, failed = self._answer(question, packed, numbers, usage, trace)
        degraded = failed or bool(lost)
        if failed:  # the answer call failed: cite what the extractive answer cites, each point's first report
            answer, cited = extractive_answer(points, numbers, question), {numbers[p.report_id] for p in points}
        trace["usage"] = _usage(usage)
        cited_reports = [{"number": n, "id": rid, "title": by_id[rid]["title"], "rating": by_id[rid]["rating"],
                          "chunk_ids": sorted(by_id[rid]["source_chunk_ids"])}
                         for rid, n in numbers.items() if n in cited]
        return GlobalResult(answer, level, points, cited_reports, selected, offline=False, trace=trace,
                            degraded=degraded)

    def _answer(self, question: str, packed: list, numbers: dict[int, int], usage: Usage,
                trace: dict) -> tuple[str, set[int], bool]:
        points = [(text, score, [numbers[r] for r in ids]) for text, score, ids in packed]
        messages = [{"role": "user", "content": points_message(question, points)}]
        sent = set(numbers.values())
        for attempt in range(2):
            trace["answer_calls"] += 1
            try:
                if attempt == 0 and self.on_text is not None:  # the first token reaches the reader at once
                    reply = stream_text(self.llm, task="answer", system=ANSWER_SYSTEM, messages=messages,
                                        max_tokens=4096, on_text=self.on_text)
                    trace["answer_streamed"] = True
                else:
                    reply = complete_text(self.llm, task="answer", system=ANSWER_SYSTEM, messages=messages,
                                          max_tokens=4096)
            except LLMError as err:  # refused, cut twice, the API down: the paid points stand, answered extractively
                trace["degraded"] = f"the answer failed ({err}): extractive answer instead"
                return "", set(), True
            usage.add(reply.usage)
            text = reply.text.strip()
            cited = set(cited_numbers(text))
            if text and cited <= sent:
                return text, cited, False
            bad = sorted(cited - sent)
            trace.setdefault("rejected_answers", []).append(f"cited {bad}" if bad else "empty answer")
            # the retry sees its own reply and what was wrong with it
            messages = messages[:1] + [{"role": "assistant", "content": text or "(empty)"},
                                       {"role": "user", "content": f"Your answer cited {bad or 'nothing'}, but only "
                                        f"{sorted(sent)} exist. Rewrite it citing only those numbers."}]
        trace["degraded"] = "the answer cited reports that were not given, twice: extractive answer instead"
        return "", set(), True


def _usage(u: Usage) -> dict:
    return {"calls": u.calls, "input_tokens": u.prompt_tokens, "output_tokens": u.output_tokens,
            "cost_usd": None if u.cost_usd is None else round(u.cost_usd, 6)}
