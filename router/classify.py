"""Question classifier: which route answers a question (local, global or multihop).

The heuristic reads the FORM of a question, never its topic, so it carries over to unseen corpora:

- global: the question ranges over the whole collection ("main themes", "across all documents",
  "how often do guests ...", "в целом", "во всех ...");
- multihop, comparison: two things set side by side ("difference between A and B", "Which is
  older, A or B?", "Are A and B both ...", "чем отличается", "кто старше, A или B?");
- multihop, bridge: an entity given by its relation to another instead of by its name, which must
  be resolved first ("the spouse of the director of X", "X's performer", "the city where Y was
  born", "руководитель команды, которая ...");
- local: everything else, one hybrid search.

Cues are weighted and summed per route; a route needs THRESHOLD points, so one weak cue alone
("compare", "often", "the team that ...") does not leave the default. The LLM classifier asks the
fast model through a forced tool call and falls back to the heuristic on any failure.
"""
from __future__ import annotations

import logging
import math

from core.llm.client import LLM
from core.llm.errors import LLMError
from core.llm.prompting import call_tool
from core.text.terms import CLOSED_CLASS
from router.prompts import MAX_REASON_CHARS, ROUTE_SYSTEM, ROUTE_TOOL, route_message
from router.question_cues import (
    ANAPHORA, ARGUMENT_BONUS, CAPITALISED_RUN, CUES, CUE_BY_NAME, CYRILLIC, EVENT_AT_END,
    IDENTITY_START, IN_SITU_WH, LATIN, NAMED_PAIR, NAMING, NESTED, OPENER, PLACE_TIME_START,
    QUESTION_WORDS, QUOTED, CueText, RELATIONAL_DESCRIPTIONS, RU_OPENER, SENTENCE_END,
)
from answers.question_text import FUNCTION_WORDS, IMPERATIVES
from answers.types import ROUTES, RouteDecision

log = logging.getLogger(__name__)

THRESHOLD = 2.0  # points a route needs to beat `local`, the default
# A capitalised word that is never a named entity alone: grammar, a count or a request's verb opening a
# question ("However", "Three", "Describe", "Почему"), from the question readers' word classes
NEVER_A_NAME_ALONE = FUNCTION_WORDS | IMPERATIVES | CLOSED_CLASS | QUESTION_WORDS


def count_entities(question: str) -> int:
    """Named entities: quoted titles plus capitalised runs and acronyms, minus a capitalised
    question or function word that merely opens a sentence."""
    count = len(QUOTED.findall(question))
    for match in CAPITALISED_RUN.finditer(QUOTED.sub(" ", question)):
        words = match.group().split()
        if not (len(words) == 1 and words[0].lower().strip(".,") in NEVER_A_NAME_ALONE):
            count += 1
    return count


def is_keyword_query(q: CueText) -> bool:
    """A search-box query ("pierce county washington"): no question mark and no question opener.
    Without question syntax there is no relation to follow, so it is one lookup."""
    return bool(q.text) and not q.text.endswith("?") and not OPENER.match(q.text) and not RU_OPENER.match(q.text)


def premise_cues(q: CueText) -> dict[str, float]:
    """An English statement that sets up the question describes the entity the question builds on.
    English only: Russian word order puts wh-words anywhere, so an in-place wh-word means nothing."""
    if not q.text.endswith("?") or not LATIN.search(q.text) or CYRILLIC.search(q.text):
        return {}
    sentences = SENTENCE_END.split(q.text)
    if len(sentences) > 1:
        cues = {"statement before the question": 1.0}
        if ANAPHORA.search(sentences[-1].lower()):
            cues["question refers back to it"] = 1.0
        return cues
    if not OPENER.match(q.text) and IN_SITU_WH.search(q.lower):
        return {"statement with the wh-word in place": 1.5}
    return {}


def asks_for_the_description(q: CueText) -> bool:
    """ "Who is the director of X?", "Кем был сын X?", "Which of the presidents of X ...?": the
    description right after the copula (or the "which of") is the answer itself, one hop; unlike
    "What is the population of the state where X is?" or "Where was the director of X born?"."""
    if EVENT_AT_END.search(q.lower):
        return False
    for opener, names in ((IDENTITY_START, ARGUMENT_BONUS), (PLACE_TIME_START, RELATIONAL_DESCRIPTIONS)):
        for cue in (CUE_BY_NAME[name] for name in names):
            text = cue.text(q)
            start = opener.match(text)
            if start and cue.pattern.match(text, start.end()):
                return True
    return False


def find_cues(q: CueText) -> dict[str, tuple[str, float]]:
    """Every cue found: name -> (kind, points); kinds are "global", "comparison", "bridge", "penalty"."""
    found: dict[str, tuple[str, float]] = {}
    for cue in CUES:
        text = cue.text(q)
        hits = len(cue.pattern.findall(text)) if cue.repeat else int(cue.pattern.search(text) is not None)
        if hits:
            found[cue.name] = (cue.kind, cue.weight * hits)
    naming = NAMING.search(q.lower)
    if naming:
        found.pop(NESTED, None)
    bonus = max((ARGUMENT_BONUS.get(name, 0.0) for name in found), default=0.0)
    if bonus and not naming and not asks_for_the_description(q):
        found["description used as an argument"] = ("bridge", bonus)
    for name, points in premise_cues(q).items():
        found[name] = ("bridge", points)
    if any(kind == "comparison" for kind, _ in found.values()) and NAMED_PAIR.search(q.text):
        found["two named things"] = ("comparison", 1.0)
    if is_keyword_query(q):
        found["keyword query"] = ("penalty", -1.0)
    return found


class HeuristicClassifier:
    """Pure and fast: regular expressions over the question, no I/O."""

    name = "heuristic"

    def classify(self, question: str) -> RouteDecision:
        q = CueText.of(question)
        found = find_cues(q)
        points = {kind: 0.0 for kind in ("global", "comparison", "bridge", "penalty")}
        for kind, value in found.values():
            points[kind] += value
        global_ = points["global"]
        multihop = points["comparison"] + points["bridge"] + points["penalty"]
        if global_ >= THRESHOLD and global_ >= multihop:
            route, margin = "global", global_ - max(multihop, 0.0)
        elif multihop >= THRESHOLD:
            route, margin = "multihop", multihop - global_
        else:
            route, margin = "local", THRESHOLD - max(multihop, global_, 0.0)
        features = {
            "global_points": round(global_, 2),
            "comparison_points": round(points["comparison"], 2),
            "bridge_points": round(points["bridge"], 2),
            "multihop_points": round(multihop, 2),
            "entities": count_entities(q.text),
            "cues": {name: round(value, 2) for name, (_, value) in found.items()},
        }
        return RouteDecision(route=route, confidence=confidence(margin), reason=explain(route, found),
                             classifier=self.name, features=features)


def confidence(margin: float) -> float:
    """0.5 on a tie with the runner-up (or right at the threshold), rising towards 0.95 with the margin."""
    return round(0.5 + 0.45 * (1.0 - math.exp(-max(margin, 0.0))), 3)


def explain(route: str, found: dict[str, tuple[str, float]]) -> str:
    """One sentence naming the cues that decided, strongest first."""
    def listed(*kinds: str) -> str:
        ranked = sorted(((points, name) for name, (kind, points) in found.items() if kind in kinds), reverse=True)
        return ", ".join(name for _, name in ranked)

    if route == "global":
        return f"global: corpus-wide scope ({listed('global')})."
    if route == "multihop":
        return f"multihop: needs several searches ({listed('comparison', 'bridge')})."
    weak = listed("global", "comparison", "bridge")
    if not weak:
        return "local: no corpus-wide, comparison or bridge cue, so one search should answer it."
    where = " in a keyword query" if "keyword query" in found else ""
    return f"local: only weak cues ({weak}){where}, below the threshold of another route."


# --- LLM classifier (its prompt and tool: router/prompts.py) ------------------------------------


class LLMClassifier:
    """The fast model picks the route by a forced tool call; any failure falls back to `fallback`."""

    name = "llm"

    def __init__(self, llm: LLM, fallback: HeuristicClassifier | None = None, max_tokens: int = 256):
        self.llm = llm
        self.fallback = fallback or HeuristicClassifier()
        self.max_tokens = max_tokens

    def classify(self, question: str) -> RouteDecision:
        try:
            reply = call_tool(self.llm, ROUTE_TOOL, task="fast", system=ROUTE_SYSTEM, max_tokens=self.max_tokens,
                              messages=[{"role": "user", "content": route_message(question)}])
        except LLMError as exc:  # refused, malformed twice, cut twice, or the API failed
            decision = self.fallback.classify(question)
            decision.features["llm_error"] = str(exc)
            return decision
        usage, answer = reply.usage, reply.value
        return RouteDecision(route=answer.route, confidence=answer.confidence,
                             reason=answer.reason[:MAX_REASON_CHARS], classifier=self.name,
                             features={"model": reply.model, "input_tokens": usage.input_tokens,
                                       "output_tokens": usage.output_tokens})


def classify(question: str, *, llm: LLM | None = None, forced: str | None = None,
             offline: HeuristicClassifier | None = None) -> RouteDecision:
    """A forced route wins (confidence 1); else the LLM classifier when `llm` is given; else `offline`
    (default the heuristic; the router passes its learned model), which is also the LLM's fallback."""
    if forced is not None:
        if forced not in ROUTES:
            raise ValueError(f"unknown route {forced!r}: choose one of {', '.join(ROUTES)}")
        return RouteDecision(route=forced, confidence=1.0, reason=f"route forced to {forced} by the caller.",
                             classifier="forced")
    offline = offline or HeuristicClassifier()
    if llm is not None:
        decision = LLMClassifier(llm, fallback=offline).classify(question)
        if decision.classifier == LLMClassifier.name:
            _record_agreement(decision, offline.classify(question))
        return decision
    return offline.classify(question)


def _record_agreement(llm_decision: RouteDecision, offline_decision: RouteDecision) -> None:
    """How often the offline router agrees with the model is the evidence for trusting it without a key:
    kept in the trace and logged for an operator to count. The learned model's probabilities travel
    with the LLM's decision (`/v1/route` returns them), so an app sees how sure the second opinion
    is; `classifier` stays "llm", the one that decided, and `offline_classifier` names the other."""
    agrees = llm_decision.route == offline_decision.route
    llm_decision.features["offline_route"] = offline_decision.route
    llm_decision.features["offline_classifier"] = offline_decision.classifier
    llm_decision.features["offline_agrees"] = agrees
    if "probabilities" in offline_decision.features:
        llm_decision.features["probabilities"] = offline_decision.features["probabilities"]
        llm_decision.features["low_confidence"] = None  # the LLM decided: no fallback to local was taken
    log.info("route agreement: llm=%s offline=%s (%s) agrees=%s", llm_decision.route, offline_decision.route,
             offline_decision.classifier, agrees)
