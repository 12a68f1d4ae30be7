"""`crossroads judge`: pairwise LLM judging of two configurations' answers, and the faithfulness of cited answers.

Off the serving path (evaluation/, tests/test_architecture.py): the HTTP app never imports this module (tests/test_judging.py checks it too), and nothing here serves a
question; it reads answers the router wrote.

Pairwise (GraphRAG's paper, Edge et al. 2024): for every question and each criterion (comprehensiveness,
diversity, empowerment, directness; router/prompts.JUDGE_CRITERIA) the judge sees the two answers twice, once
in each order, so a judge preferring the first (or second) position favours neither configuration. Each
judgment counts alone (wins of A, of B, ties); a judgment that fails (a 429 / 529 left after the client's
retries, a refusal, a malformed or missing verdict) is counted as failed, never dropped, and left out of the
win rate's denominator. A pair (both orders) is also read as one verdict: both orders agree -> that side,
they disagree -> a tie (the position decided), one failed -> the other one's.
win rate of A = (A wins + ties / 2) / (judgments that did not fail).

Faithfulness (RAGAS's idea): the answer split into claims (its sentences; a claim cites what its sentence
cites), the LLM asked per answer whether each claim is supported by its cited passages; score =
supported / claims. A claim citing nothing cannot be supported (it is counted, unsupported); a failed call
counts the answer as failed.

The counting, swapping and splitting are pure functions, tested without I/O.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

from core.citations import cited_numbers
from core.llm.errors import LLMError
from core.llm.limiter import concurrency_of, map_ordered
from core.llm.prompting import call_tool
from core.sentences import split_sentences
from router.prompts import (FAITHFUL, FAITHFUL_SYSTEM, JUDGE, JUDGE_CRITERIA, JUDGE_SYSTEM, claims_message,
                            judge_message)

CRITERIA = tuple(JUDGE_CRITERIA)
ORDERS = ("ab", "ba")  # A shown first, then B first


# --- pure: swapping and counting --------------------------------------------------------------------

def shown(order: str, a: str, b: str) -> tuple[str, str]:
    """(answer 1, answer 2) as the judge sees them in `order`."""
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}")
    return (a, b) if order == "ab" else (b, a)


def unswap(order: str, winner: str | None) -> str | None:
    """The judge's "1" / "2" / "tie" in `order` as the configuration that won: "A", "B", "tie"; None: failed."""
    if winner is None:
        return None
    if winner == "tie":
        return "tie"
    first, second = ("A", "B") if order == "ab" else ("B", "A")
    return {"1": first, "2": second}[winner]


def pair_verdict(ab: str | None, ba: str | None) -> str | None:
    """The two orders' verdicts ("A" / "B" / "tie" / None failed) as one: agreeing -> it, disagreeing ->
    tie (the position decided, not the answers), one failed -> the other, both failed -> None."""
    if ab is None or ba is None:
        return ab if ba is None else ba
    return ab if ab == ba else "tie"


class Tally:
    """Verdicts counted: "A", "B", "tie", and None (the judgment failed)."""

    def __init__(self) -> None:
        self.counts: Counter[str | None] = Counter()

    def add(self, verdict: str | None) -> None:
        self.counts[verdict] += 1

    @property
    def judged(self) -> int:
        return self.counts["A"] + self.counts["B"] + self.counts["tie"]

    def win_rate(self, side: str = "A") -> float | None:
        """(wins + ties / 2) / judgments that did not fail; None when none did."""
        if not self.judged:
            return None
        return (self.counts[side] + self.counts["tie"] / 2) / self.judged

    def as_dict(self) -> dict:
        rate_a, rate_b = self.win_rate("A"), self.win_rate("B")
        return {"a": self.counts["A"], "b": self.counts["B"], "tie": self.counts["tie"],
                "failed": self.counts[None], "judged": self.judged,
                "win_rate_a": None if rate_a is None else round(rate_a, 4),
                "win_rate_b": None if rate_b is None else round(rate_b, 4)}


def tally(judgments: Iterable[dict]) -> dict[str, dict]:
    """Per criterion: every judgment counted (`judgments`), and the pairs read as one verdict (`pairs`).
    `judgments`: {"qid", "criterion", "order", "verdict" ("A" / "B" / "tie" / None), ...}."""
    by: dict[tuple[str, str], dict[str, str | None]] = {}
    out = {c: {"judgments": Tally(), "pairs": Tally()} for c in CRITERIA}
    for j in judgments:
        out.setdefault(j["criterion"], {"judgments": Tally(), "pairs": Tally()})["judgments"].add(j["verdict"])
        by.setdefault((j["qid"], j["criterion"]), {})[j["order"]] = j["verdict"]
    for (_, criterion), orders in sorted(by.items()):
        out[criterion]["pairs"].add(pair_verdict(orders.get("ab"), orders.get("ba")))
    return {c: {k: t.as_dict() for k, t in v.items()} for c, v in out.items()}


def position_bias(judgments: Iterable[dict]) -> dict:
    """How often the judge chose the answer shown first / second (ties and failures apart): a judge without
    position bias chooses each about equally often over many questions."""
    counts = Counter()
    for j in judgments:
        if j.get("raw") in ("1", "2"):
            counts["first" if j["raw"] == "1" else "second"] += 1
    return {"first": counts["first"], "second": counts["second"]}


def split_claims(answer: str) -> list[tuple[str, list[int]]]:
    """The answer's claims: each sentence (list items too) with the passage numbers it cites; a sentence
    that cites nothing after one that did carries no citation of its own (counted unsupported). A header line
    ending in ':' is no claim."""
    claims = []
    for line in answer.splitlines():
        line = line.strip().lstrip("-*• ").strip()
        if not line or line.endswith(":"):
            continue
        for sentence in split_sentences(line):
            sentence = sentence.strip()
            if len(sentence) < 3:
                continue
            numbers = sorted(set(cited_numbers(sentence)))
            if not numbers and claims and sentence.startswith("[") and sentence.endswith("]"):
                claims[-1][1].extend(cited_numbers(sentence))  # "[1]." split off its sentence
                continue
            claims.append((sentence, numbers))
    return claims


def faithfulness_score(verdicts: Sequence[bool]) -> float | None:
    return None if not verdicts else sum(verdicts) / len(verdicts)


# --- with the LLM -----------------------------------------------------------------------------------

@dataclass
class Case:
    """One question's two answers, and each answer's cited passages (number -> text) for faithfulness."""
    qid: str
    question: str
    a: str
    b: str
    a_passages: dict[int, str] = field(default_factory=dict)
    b_passages: dict[int, str] = field(default_factory=dict)


def judge_one(llm, question: str, criterion: str, order: str, a: str, b: str) -> dict:
    """One judgment; a failure (any LLMError: 429 / 529 after the retries, refusal, malformed) is kept with its
    reason and verdict None."""
    first, second = shown(order, a, b)
    try:
        reply = call_tool(llm, JUDGE, task="fast", system=JUDGE_SYSTEM, max_tokens=512,
                          messages=[{"role": "user", "content": judge_message(question, criterion, first, second)}])
    except LLMError as err:
        return {"verdict": None, "raw": None, "error": f"{type(err).__name__}: {err}"}
    return {"verdict": unswap(order, reply.value.winner), "raw": reply.value.winner, "reason": reply.value.reason}


def faithfulness_one(llm, answer: str, passages: dict[int, str]) -> dict:
    claims = split_claims(answer)
    if not claims:
        return {"claims": 0, "supported": 0, "score": None, "error": "no claim in the answer"}
    asked = [(text, [passages[n] for n in numbers if n in passages]) for text, numbers in claims]
    checkable = [i for i, (_, ps) in enumerate(asked) if ps]
    verdicts = [False] * len(claims)  # a claim citing no passage sent is unsupported
    if checkable:
        try:
            reply = call_tool(llm, FAITHFUL, task="fast", system=FAITHFUL_SYSTEM, max_tokens=1024,
                              messages=[{"role": "user", "content": claims_message([asked[i] for i in checkable])}])
        except LLMError as err:
            return {"claims": len(claims), "supported": None, "score": None, "error": f"{type(err).__name__}: {err}"}
        got = {v.claim: v.supported for v in reply.value.verdicts}
        missing = [n for n in range(1, len(checkable) + 1) if n not in got]
        if missing:
            return {"claims": len(claims), "supported": None, "score": None,
                    "error": f"MalformedReply: no verdict for claims {missing}"}
        for n, i in enumerate(checkable, start=1):
            verdicts[i] = got[n]
    return {"claims": len(claims), "supported": sum(verdicts), "score": round(faithfulness_score(verdicts), 4)}


def judge_cases(llm, cases: Sequence[Case], criteria: Sequence[str] = CRITERIA,
                faithfulness: bool = True, progress: Callable[[int, int], None] | None = None) -> dict:
    """Every (case, criterion, order) judged, up to the LLM's concurrency at once, then counted."""
    jobs = [(c, crit, order) for c in cases for crit in criteria for order in ORDERS]
    done = [0]

    def run(job):
        case, crit, order = job
        out = {"qid": case.qid, "criterion": crit, "order": order,
               **judge_one(llm, case.question, crit, order, case.a, case.b)}
        done[0] += 1
        if progress:
            progress(done[0], len(jobs))
        return out

    judgments = [j if isinstance(j, dict) else {"qid": job[0].qid, "criterion": job[1], "order": job[2],
                                                "verdict": None, "raw": None, "error": repr(j)}
                 for job, j in zip(jobs, map_ordered(run, jobs, concurrency_of(llm)))]
    result = {"criteria": tally(judgments), "position": position_bias(judgments),
              "failed": [{k: j[k] for k in ("qid", "criterion", "order", "error")} for j in judgments
                         if j["verdict"] is None], "judgments": judgments, "questions": len(cases)}
    if faithfulness:
        faith_jobs = [(c, side) for c in cases for side in "ab"]
        faith = map_ordered(lambda job: faithfulness_one(llm, getattr(job[0], job[1]),
                                                         getattr(job[0], f"{job[1]}_passages")),
                            faith_jobs, concurrency_of(llm))
        per = {"A": [], "B": []}
        for (case, side), f in zip(faith_jobs, faith):
            f = f if isinstance(f, dict) else {"claims": 0, "supported": None, "score": None, "error": repr(f)}
            per[side.upper()].append({"qid": case.qid, **f})
        result["faithfulness"] = {side: {"mean": _mean([x["score"] for x in rows if x["score"] is not None]),
                                         "scored": sum(1 for x in rows if x["score"] is not None),
                                         "failed": sum(1 for x in rows if x.get("error")),
                                         "answers": rows} for side, rows in per.items()}
    return result


def _mean(values: list[float]) -> float | None:
    return None if not values else round(sum(values) / len(values), 4)


def table_rows(result: dict) -> list[tuple[str, ...]]:
    """The printed table: per criterion, judgments (A / B / tie / failed, win rate of A) and pairs."""
    rows = []
    for crit, t in result["criteria"].items():
        j, p = t["judgments"], t["pairs"]
        rate = "—" if j["win_rate_a"] is None else f"{j['win_rate_a']:.2f}"
        rows.append((crit, str(j["a"]), str(j["b"]), str(j["tie"]), str(j["failed"]), rate,
                     f"{p['a']}/{p['b']}/{p['tie']}/{p['failed']}"))
    return rows
