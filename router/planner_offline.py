"""The offline planner of the agentic loop: decomposes comparisons, asks the clause that describes an entity,
follows bridge entities.

See router/agentic.py for the loop and what a planner decides.
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

from core.text.mentions import mentioned_names
from router.agentic import MAX_PLANNED_QUERIES, Decision, query_key
from answers.chain.answer import MAX_HOPS, chain_answer
from answers.comparison import about_indices, resolve_side
from answers.question_text import (DEMONYM, FUNCTION_WORDS, SENTENCE_END, covers, fold, stem_of,
                                  stems_of, title_core, words_of)
from answers.comparison_form import Comparison
from answers.question import Question
from answers.types import Passage

log = logging.getLogger(__name__)


# --- the offline planner ------------------------------------------------------------------------

def _is_about(evidence: list[Passage], name: str, other: str) -> bool:
    """Whether a passage of the evidence is about `name` by its title, heading or document, not only by
    holding its words somewhere."""
    chosen, by_document = about_indices(evidence, name, [other])
    return bool(chosen) and by_document


@dataclass
class _State:
    explored: set[int] = field(default_factory=set)  # evidence ids already mined for bridge entities
    hops: int = 0  # rounds whose queries followed an entity found in the evidence


class OfflinePlanner:
    """Question-form planner without a model (see the module docstring).

    `min_hops`: bridge hops (searches for entities found in the evidence) before a bridge question
    counts as covered; past them it goes on, up to `max_hops`, while the evidence's chain has not
    reached what the question asks for; `max_bridges`: bridge queries per round; `per_passage`: at most this many
    entities from one passage per round. It remembers, per question, which evidence it has mined, so
    "the previous round's evidence" is what arrived since its last call; a loop restarts it (one
    question asked so far)."""

    name = "offline"

    def __init__(self, min_hops: int = 1, max_bridges: int = MAX_PLANNED_QUERIES, per_passage: int = 2,
                 frontier: int = 5, off_anchor: float = 0.5, max_hops: int = MAX_HOPS - 1):
        self.min_hops, self.max_bridges, self.per_passage, self.frontier = min_hops, max_bridges, per_passage, frontier
        self.max_hops = max_hops
        self.off_anchor = off_anchor
        self._states: dict[tuple[int, str], _State] = {}
        self._lock = threading.Lock()

    def _state(self, question: str, asked: list[str]) -> _State:
        key = (threading.get_ident(), question)
        with self._lock:
            if len(asked) <= 1 or key not in self._states:
                if len(self._states) > 256:
                    self._states.clear()
                self._states[key] = _State()
            return self._states[key]

    def plan(self, question: Question, evidence: list[Passage], asked: list[str]) -> Decision:
        state = self._state(question.text, asked)
        asked_keys = {query_key(a) for a in asked}
        # what the loop searched besides the question itself: a name in it has had its own search
        asked_text = fold(" ".join(a for a in asked if query_key(a) != query_key(question.text))).casefold()
        comparison = question.comparison
        if comparison is not None:
            return self._plan_comparison(comparison, evidence, asked_keys, asked_text)

        mentions = [m.text for m in question.names]
        uncovered = [m for m in mentions if not any(covers(p, m) for p in evidence)]
        new = [p for p in evidence if p.id not in state.explored]
        state.explored.update(p.id for p in new)
        # The chain the evidence holds so far (answers/chain/answer.py): when it ends at what the question
        # asks for (a place, a person, a date) the loop is done; when it stops short, its last entity is
        # the next bridge, so a 3- or 4-hop question goes on past the first bridge.
        chain = chain_answer(question, evidence) if evidence else None
        reached = chain is not None and chain.reached and len(chain.chain) > 1
        if not uncovered and state.hops >= self.min_hops and (reached or state.hops >= self.max_hops):
            return Decision(True, [], f"every named entity has a passage ({', '.join(mentions) or 'none named'}) "
                                      f"and {state.hops} bridge hop(s) searched"
                                      + (f"; chain: {' -> '.join(chain.chain)}" if reached else ""))
        queries: list[str] = []
        for m in uncovered:  # a named part of the question without a passage: search it in its clause
            q = " ".join([m, *question.clause_words(m)[:6]]).strip()
            if query_key(q) not in asked_keys and fold(m).casefold() not in asked_text:
                queries.append(q)
        queries = queries[:2]
        nested = question.nested
        if nested is not None and query_key(nested.inner) not in asked_keys and len(queries) < 2:
            # an entity the question only describes ("the engineer who commanded X") is found by asking
            # the clause that describes it, as DecompRC asks a bridging question's first part
            queries.append(nested.inner)
        bridges = self._bridges(question, mentions, new[: self.frontier], asked_text)
        if chain is not None and len(chain.chain) > 1 and not reached:
            last = chain.chain[-1]
            same = [(e, q) for e, q in bridges if fold(last).casefold() == fold(e).casefold()]
            if chain.still_open and fold(last).casefold() not in asked_text:
                # a step of the question found it: searched first, with what the question still asks of
                # it ("Ines Moreau is based in which office?") in place of the evidence's query for it
                bridges = [b for b in bridges if b not in same]
                still_open = Question(chain.still_open)
                bridges.insert(0, (last, _bridge_query(still_open, last, Passage(0, None, "", "", ""), set())))
            elif fold(last).casefold() not in asked_text and not same:
                bridges.insert(0, (last, _bridge_query(question, last, Passage(0, None, "", "", ""), set())))
            bridges = bridges[: self.max_bridges]
        for entity, q in bridges:
            if len(queries) >= MAX_PLANNED_QUERIES:
                break
            if query_key(q) not in asked_keys:
                queries.append(q)
        if bridges:
            state.hops += 1
        if not queries:
            return Decision(False, [], "nothing new to search: " + (
                f"no passage about {', '.join(uncovered)}" if uncovered else "no new entity in the evidence"))
        reason = []
        if uncovered:
            reason.append(f"no passage yet about {', '.join(uncovered)}")
        if bridges:
            reason.append("bridge entities from the evidence: " + ", ".join(e for e, _ in bridges[: len(queries)]))
        return Decision(False, queries, "; ".join(reason) or "searching further")

    def _plan_comparison(self, c: Comparison, evidence: list[Passage], asked_keys: set, asked_text: str) -> Decision:
        # a side described by a clause ("the office where the CTO works") is the entity the clause's answer
        # finds in the evidence, as the answer will read it; until it finds one, the clause is its search
        sides, clauses, found_sides = [], [], []
        for (name, query), clause in zip(zip((c.a, c.b), c.queries()), c.described):
            name, query, _, found = resolve_side(name, query, clause, c.attribute, evidence, None)
            sides.append((name, query))
            if clause and not found and query_key(clause) not in asked_keys:
                clauses.append(clause)
            if found and query_key(query) not in asked_keys:
                found_sides.append(name)
        if clauses:
            return Decision(False, clauses, f"comparison: the entity described by {', '.join(map(repr, clauses))} "
                                            "is not found yet")
        (a, qa), (b, qb) = sides
        # a side is covered by a passage about it, as its answer will read it (answers/comparison.py):
        # an overview that names both sides in passing is about neither, so each still gets its search; a
        # side its clause found is searched with the attribute once, since the page that found it (the
        # office's staff list) is about it but seldom states what is compared
        missing = [(name, q) for name, other, q in ((a, b, qa), (b, a, qb))
                   if name in found_sides or not _is_about(evidence, name, other)]
        if not missing:
            return Decision(True, [], f"comparison: both {a!r} and {b!r} have passages")
        queries = []
        for name, q in missing:
            if query_key(q) not in asked_keys:
                queries.append(q)
            elif query_key(name) not in asked_keys:  # the attribute may have misled the search: the bare name
                queries.append(name)
        if not queries:
            return Decision(False, [], f"comparison: no passage about {', '.join(n for n, _ in missing)} "
                                       "after searching for it")
        return Decision(False, queries, f"comparison of {a!r} and {b!r}"
                                        + (f" on {c.attribute!r}" if c.attribute else "")
                                        + f": no passage yet about {', '.join(n for n, _ in missing)}")

    # -- bridge entities ------------------------------------------------------------------------
    def _entities(self, passage: Passage) -> list[str]:
        try:
            return mentioned_names(passage.text or "", passage.title or "", passage.heading or "")
        except Exception:  # noqa: BLE001 - a mention-finder bug must not break the loop
            log.exception("finding the entities of chunk %s failed", passage.id)
            return []

    def _bridges(self, question: Question, mentions: list[str], frontier: list[Passage],
                 asked_text: str) -> list[tuple[str, str]]:
        """(entity, query) for entities of the frontier passages that the question does not name, best first."""
        q_stems = question.stems
        mention_stems = set().union(*(stems_of(m) for m in mentions)) if mentions else set()
        relation_stems = q_stems - mention_stems  # "spouse", "director", "country": what links the hops
        scored: list[tuple[float, int, str, Passage]] = []
        anchors = [any(covers(p, m) for m in mentions) for p in frontier]
        for rank, p in enumerate(frontier):
            weight = 1.0 / (1.0 + 0.35 * rank)
            anchor_passage = anchors[rank]
            if anchor_passage:
                weight *= 1.5  # an anchor: a passage about a named part of the question
            elif any(anchors):
                weight *= self.off_anchor  # the bridge leads out of an anchor; other passages are noise or targets
            text = p.text or ""
            folded = fold(text).casefold()
            sentences = _sentence_spans(text)
            candidates = list(self._entities(p))
            title = title_core(p.title)
            # An anchor's title is usually the named entity itself; when it names something else (the
            # "Billing team" page listing the Payments Gateway among its services), it is the bridge.
            title_is_other = bool(title) and not (stems_of(title) & mention_stems)
            if title and (not anchor_passage or title_is_other):
                candidates.insert(0, title)
            seen_local: set[str] = set()
            for name in candidates:
                key = fold(name).casefold().strip()
                n_stems = stems_of(name)
                if not n_stems or key in seen_local or key in asked_text:
                    continue
                seen_local.add(key)
                if n_stems <= q_stems or (n_stems & mention_stems and len(n_stems - q_stems) == 0):
                    continue  # the question names it already
                if any(stem_of(w) in mention_stems for w in words_of(name)) and len(n_stems) <= 2:
                    continue  # a part of a named entity ("Neil" of "Neil Young album")
                pos = folded.find(key)
                if pos < 0 and name == title:
                    pos = 0
                if pos < 0 or (anchor_passage and pos < 3 and not (name == title and title_is_other)):
                    continue  # not in the text, or the anchor's own subject ('Andrew Alan "Drew" Fuller ...')
                if _is_adjective(text, pos, name):
                    continue
                sentence = next((s for a, b, s in sentences if a <= pos < b), "")
                s_stems = stems_of(sentence) - n_stems
                relation = len(s_stems & relation_stems)
                anchor = len(s_stems & mention_stems)
                score = weight * (1.0 + relation + 0.25 * anchor) / (1.0 + pos / 300.0)
                if len(n_stems) >= 2:
                    score *= 1.15
                scored.append((score, rank, name, p))
        scored.sort(key=lambda x: (-x[0], x[1], -len(x[2])))
        out: list[tuple[str, str]] = []
        per: dict[int, int] = {}
        used: set[str] = set()
        for score, rank, name, p in scored:
            key = fold(name).casefold()
            if key in used or any(key in u or u in key for u in used) or per.get(p.id, 0) >= self.per_passage:
                continue
            used.add(key)
            per[p.id] = per.get(p.id, 0) + 1
            out.append((name, _bridge_query(question, name, p, mention_stems)))
            if len(out) >= self.max_bridges:
                break
        return out


def _sentence_spans(text: str) -> list[tuple[int, int, str]]:
    spans, start = [], 0
    for m in SENTENCE_END.finditer(text):
        spans.append((start, m.start(), text[start:m.start()]))
        start = m.end()
    spans.append((start, len(text) + 1, text[start:]))
    return spans


def _is_adjective(text: str, pos: int, name: str) -> bool:
    """"American" in "a 2014 American drama film": a one-word demonym used as an adjective, not a name."""
    if " " in name.strip() or not DEMONYM.search(name.casefold()):
        return False
    after = words_of(text[pos + len(name): pos + len(name) + 40])
    return bool(after) and after[0][:1].islower() and after[0].casefold() not in FUNCTION_WORDS


def _bridge_query(question: Question, entity: str, passage: Passage, mention_stems: set[str]) -> str:
    """The entity plus the words of the question the passage did not resolve ("spouse" for "Tim Burton")."""
    covered = stems_of(f"{passage.title} {passage.heading} {passage.text}") | mention_stems
    e_stems = stems_of(entity)
    rest = [w for w in question.query_words if stem_of(w) not in covered and stem_of(w) not in e_stems]
    return " ".join([entity, *rest[:8]]).strip()
