"""The offline multi-hop answer (`chain_answer`): from the entities the question names, each hop is a unit
that links the current entity to a new one; a beam search keeps the best few chains, and the one that
reaches what the question asks for, after as many hops as its form needs (`least_hops`) or once every
relation of the question has had its hop (one page may state two: "the final of the Cup was refereed by
X"), answers. A hop states a relation of the question in its own words or in its section's heading
("Billing team > Services owned" over a row naming the service); a relation an earlier hop or its page
stated counts no more, nor, after the first hop, one only the start's own clause states ("the performer
of X"), while the question's other names count as relations ("... taken by the British"). A chain starts
at a name, never at a bare year or at a part of a longer name (a question naming nothing but a date starts
at the page its description points to, by meaning: answers/chain/start.py), and goes on through names a
unit writes as names (capitalised as in the question, every word of them, consonant skeletons only across scripts),
never through a lone type word ("Inc"); a name after a locative preposition ("formed in Leyton") or a
place's kind word ("the county of Cumbria") is a place, whatever the mention finder typed, and a name
with a leading demonym ("the English Lake District") links to the page of the name without it. A hop
that states a relation word leads to the name nearest that word ("a story written by Dale Brown" for
"the author of the story"). A question asking no person, place, date or number ("what genre") is
answered, once its form has had its hops, by a sentence stating a relation word of its own about the
last entity or by a sentence of that entity's own page. A question of two parts ("Who leads X, and in
which office does he work?") is two chains, the second from the first one's answer (`question_parts`);
so is a question whose chain from its names reaches nothing it asks and that describes an entity by a
clause ("the engineer who commanded X ..."): the clause first, the rest from the entity it finds
(`nested_question`); a clause naming a kind of place ("the city where X is located") goes first even
when the direct chain reached something, since only the clause checks the kind. Near-equal last hops
written in the other language than the question are told apart by meaning (`_closest_in_meaning`). Which
units are hops and how each is scored: answers/chain/hops.py; which
name a hop leads to: answers/chain/links.py. The rules in answers/extractive.py's docstring.
"""

from __future__ import annotations

import re
from typing import Callable

from core.text.script import CYRILLIC
from core.text.tokens import LETTER
from answers.expected_type import NAME_TYPE, VALUE_KINDS
from answers.units import Extracted, Unit, cite, display, entity_key, units
from answers.chain.question import other_name_stems
from answers.chain.start import dated_only, described_start
from answers.chain.hops import Chain, distinct, entities_of, next_hops, subject_of
from answers.chain.links import BRIDGE_TYPES, related
from answers.chain.targets import is_wanted
from answers.local import local_answer
from answers.question import Question
from answers.types import Passage
from answers.unit_scoring import Focus, Scorer
from answers.unit_similarity import UnitSimilarity

MAX_HOPS = 4


BEAM = 3  # candidate hops kept at each step: a plausible first hop may lead nowhere


def chain_answer(question: Question, passages: list[Passage], *, max_hops: int = MAX_HOPS,
                 similarity: UnitSimilarity | None = None) -> Extracted:
    """The chain from the question's named entities to the asked one, one cited unit per hop; the
    local answer when the question names nothing or no unit links its names to anything new.

    A beam search: each chain grows by its BEAM best next hops; the answer is the chain that reached
    what the question asks for (a place, a person, a date) in the fewest hops the question's form
    allows, else the best-scoring one. Ties are broken by passage and unit order.

    A question of two parts ("Who leads X, and in which office does he work?") is two chains, the
    second from the entity the first reached; it has reached its answer only when both have. So is a
    question whose chain does not reach what it asks and that describes an entity by a clause ("the
    engineer who commanded X is based in which office?": who commanded X, then where that one is based);
    while only the clause is answered, the chain ends at its entity with what is still to be asked of it
    (`Extracted.still_open`), the planner's next search."""
    return _chain(question, passages, max_hops, 0, similarity)


def _chain(question: Question, passages: list[Passage], max_hops: int, depth: int,
           similarity: UnitSimilarity | None = None) -> Extracted:
    """`chain_answer`; `depth`: how many questions this one is a step of (each step is a hop at least,
    so past MAX_HOPS a question is asked as it stands)."""
    parts = question.parts if depth < MAX_HOPS else None
    if parts is not None:
        return _through(Question(parts[0]), lambda entity: parts[1], question, passages, max_hops, depth,
                        similarity)[0]
    nested = question.nested if depth < MAX_HOPS else None
    if nested is not None and nested.place:
        # the clause types the entity it describes as a kind of place, which the direct chain does not
        # check ("the city where X is" is no country): the clause first, whatever the direct chain reaches
        through, found = _through(Question(nested.inner), nested.then, question, passages, max_hops, depth,
                                  similarity)
        if found:
            return through
    focus = Focus.of(question, passages=passages)
    direct = _answer(question, passages, max_hops, similarity=similarity, focus=focus)
    from_year = bool(direct.chain) and not LETTER.search(direct.chain[0]) or dated_only(focus.names)
    if nested is not None and not nested.place and (not direct.reached or from_year):
        # the chain from the question's names did not reach what it asks, or the question names nothing
        # but a date (the chain started at a bare year, or at a page the description points to): the
        # entity the clause describes ("the engineer who commanded X") is found by asking the clause, and
        # the rest is asked of it
        through, found = _through(Question(nested.inner), nested.then, question, passages, max_hops, depth,
                                  similarity)
        if found:  # the clause's entity is the chain's next bridge even where nothing yet leads on from it
            return through
    return direct


def _through(first_question: Question, then: Callable[[str], str], question: Question, passages: list[Passage],
             max_hops: int, depth: int, similarity: UnitSimilarity | None = None) -> tuple[Extracted, bool]:
    """The answer of a question asked in two steps: `first_question` finds an entity, and `then(entity)`
    is asked from it (the second part of a two-part question, or the question around a clause that
    describes the entity); reached only when both steps have, and with whether the first step found its
    entity. The first step may itself describe what it asks by a clause."""
    entity, first, by_place = _step(first_question, passages, max_hops, depth + 1, similarity)
    if entity is None:
        return Extracted(first.text, first.picked, first.confidence, first.chain, False), False
    known = first.chain or [entity]
    asks = Question(then(entity))
    second = _answer(asks, passages, max_hops, names=[entity], known=known, similarity=similarity)
    if len(second.chain) < 2:
        # nothing in the passages takes the first answer to what the second step asks: that step is
        # still open, and the first answer is the next bridge to search from
        return Extracted(first.text, first.picked, first.confidence, known, False, asks.text), True
    # the second step reached its answer, or went part of the way: its last entity is the next bridge
    chain = known + second.chain[1:]
    seen = {(p.passage, p.position) for p in first.picked}
    picked = first.picked + [p for p in second.picked if (p.passage, p.position) not in seen]
    steps = " ".join(f"{display(by_place[(p.passage, p.position)])} [{p.passage}]" for p in picked)
    text = f"{entity}; {chain[-1]}. {chain_label(question)}: {' -> '.join(chain)}. {steps}"
    return Extracted(text, picked, min(first.confidence, second.confidence), chain, second.reached), True


def clause_entity(question: Question, passages: list[Passage],
                  similarity: UnitSimilarity | None = None) -> tuple[str | None, Extracted]:
    """The entity a clause asked as a question finds ("Где работает Hannah Vogt?" -> "Berlin office"), as a
    step of a chain finds it, and the answer that found it; None when it finds none."""
    entity, found, _ = _step(question, passages, MAX_HOPS, 1, similarity)
    return entity, found


def _step(question: Question, passages: list[Passage], max_hops: int, depth: int,
          similarity: UnitSimilarity | None) -> tuple[str | None, Extracted, dict[tuple[int, int], Unit]]:
    """A step of a chain asked as a question: the entity it finds (None: none), its answer, and the
    passages' units by (passage, position), read once for the step and what follows it."""
    found = _chain(question, passages, max_hops, depth, similarity)
    by_place = {(u.passage, u.position): u for u in units(passages)}
    return _found_entity(question, found, passages, by_place), found, by_place


def _found_entity(question: Question, found: Extracted, passages: list[Passage],
                  by_place: dict[tuple[int, int], Unit]) -> str | None:
    """The entity a step's answer found: its chain's end when the chain reached it; for an answer
    that is a passage's sentence (a question naming nothing to start a chain from), the name of the
    asked kind, or else of a team, service, person or place, that its first sentence holds and the
    question does not (the first such). `by_place`: the passages' units by (passage, position)."""
    focus = Focus.of(question, passages=passages)
    if found.chain:
        if not found.reached:
            return None
        if focus.kind in NAME_TYPE:  # the chain's end was checked to be of the asked type
            return found.chain[-1]
        # what a step finds to ask on from is a person, a team, a service or a place, never a page's topic
        end = entity_key(found.chain[-1])
        kinds = {t for u in by_place.values() for k, _, t in u.names if k == end} or {
            s[2] for s in map(subject_of, passages) if s and s[0] == end and s[2] == "location"}
        return found.chain[-1] if kinds & set(BRIDGE_TYPES) else None
    if not found.answered:
        return None
    first = by_place.get((found.picked[0].passage, found.picked[0].position))
    if first is None:
        return None
    wanted = NAME_TYPE.get(focus.kind, set(BRIDGE_TYPES))
    asked = {entity_key(n) for n in focus.names}
    names = [n for n in first.names if n[2] in wanted and n[0] not in asked and LETTER.search(n[1])]
    return names[0][1] if names else None


def _answer(question: Question, passages: list[Passage], max_hops: int, names: list[str] | None = None,
            known: list[str] = (), similarity: UnitSimilarity | None = None,
            focus: Focus | None = None) -> Extracted:
    """One chain's answer; `names`: where it starts, when not at the question's own names (the second
    part of a two-part question starts at what the first part reached, and `known`, the entities the
    first part passed, lead nowhere new); `similarity`: to choose, by meaning, among near-equal last
    hops written in the other language (`_closest_in_meaning`); `focus`: the question's, when the caller
    has made it."""
    focus = focus or Focus.of(question, passages=passages)
    every = units(passages)
    # a bare number or year the question holds is a value a hop must state, not an entity to start
    # from: "1989" links every passage that mentions the year
    if not names and similarity is not None and dated_only(focus.names):
        names = described_start(question, focus.names, passages, every, similarity)
    names = names or question.extended_names([n for n in focus.names if LETTER.search(n)] or focus.names, passages)
    if not names or not every:
        return local_answer(question, passages)
    scorer = Scorer(focus, passages, every)
    typed = question.asked_kind_words  # "what mountain range": a name holding "Range" is of the asked type
    relation = [s for s in focus.terms.stems if s not in focus.name_stems]
    every_relation = set(relation)
    subjects = [subject_of(p) for p in passages]
    least = min(max_hops, question.least_hops)
    seed = Chain([], names[0], frozenset(entity_key(n) for n in [*names, *known]), frozenset())
    finished: list[Chain] = []
    beam = [seed]
    for _ in range(max_hops):
        grown: list[Chain] = []
        for chain in beam:
            frontier = ([(e[0], e[1]) for _, e, _ in chain.hops[-1:]] or [(entity_key(n), n) for n in names])
            steps = next_hops(chain, frontier, every, subjects, scorer, relation, focus, least, names, typed,
                               onward=bool(known))
            for score, u, entity, linked, answers in distinct(steps)[:BEAM]:
                start = chain.start if chain.hops else linked
                asked = relation + other_name_stems(names, start)
                hop = Chain(chain.hops + [(u, entity, score)], start,
                             chain.known | {k for k, _, _ in entities_of(u, subjects[u.passage - 1])},
                             chain.used | related(asked, u.stems | scorer.title_stems[u.passage - 1])
                             | (set() if chain.hops else question.start_clause(linked, relation)))
                stated = every_relation <= hop.used  # every relation of the question has had its hop
                hop.reached = (len(hop.hops) >= least or stated) and (answers or entity[2] == "value"
                                                                      or is_wanted(entity, focus.kind, u.text, typed))
                (finished if hop.reached else grown).append(hop)
        finished += [c for c in beam if c.hops and c not in finished]
        beam = sorted(grown, key=lambda c: -c.score)[:BEAM]
        if not beam:
            break
    finished += beam
    if not finished:
        return local_answer(question, passages)
    ranked = sorted(finished, key=lambda c: (not c.reached, -c.score / len(c.hops) if c.reached else -c.score,
                                             [(u.passage, u.position) for u, _, _ in c.hops]))
    best = _closest_in_meaning(question, ranked, similarity) if similarity is not None else ranked[0]
    hops = best.hops
    chain = [best.start, *(e[1] for _, e, _ in hops)]
    # a chain that reached the asked type through as many hops as the question's form needs was
    # checked link by link; otherwise it is as sure as the share of the question its hops cover
    confidence = 1.0 if best.reached and len(hops) >= least else scorer.confidence([u for u, _, _ in hops])
    steps_text = " ".join(f"{display(u)} [{u.passage}]" for u, _, _ in hops)
    text = f"{chain[-1]}. {chain_label(question)}: {' -> '.join(chain)}. {steps_text}"
    scores = {id(u): s for u, _, s in hops}
    return Extracted(text, cite([u for u, _, _ in hops], scores), round(confidence, 4), chain,
                     best.reached or focus.kind not in NAME_TYPE and focus.kind not in VALUE_KINDS)


MEANING_MARGIN = 0.1  # per hop: chains this close are equal on the words they state
MEANING_CANDIDATES = 6  # last hops embedded at most (a sentence costs tens of milliseconds offline)


def _closest_in_meaning(question: Question, ranked: list[Chain], similarity: UnitSimilarity) -> Chain:
    """The best chain, or, among the reached ones within MEANING_MARGIN of it per hop, the one whose last
    unit is closest in meaning to the question, when some of those last units are written in the other
    language: no word of "США (Остин) — 20 рабочих дней" states "days of paid vacation", so the words
    alone would rank "The Austin office opened in 2019" level with it."""
    best = ranked[0]
    if not best.reached:
        return best
    near = [c for c in ranked if c.reached and c.score / len(c.hops) >= best.score / len(best.hops) - MEANING_MARGIN]
    near = near[:MEANING_CANDIDATES]
    russian = question.language == "russian"
    if len(near) < 2 or all(bool(CYRILLIC.search(c.hops[-1][0].text)) == russian for c in near):
        return best
    # what is asked of the last entity, without the names that started the chain: they would pull the
    # question towards any sentence that repeats them ("Head of Customer Support" towards "customer support")
    asked = question.text
    for name in {c.start for c in near}:
        asked = re.sub(re.escape(name), " ", asked, flags=re.IGNORECASE)
    closeness = similarity(" ".join(asked.split()), [display(c.hops[-1][0]) for c in near])
    return max(zip(closeness, range(len(near)), near), key=lambda x: (x[0], -x[1]))[2]


def chain_label(question: Question, reached: bool = True) -> str:
    """What a chain is called in the answer, in the question's language; one that stopped short of
    what was asked says so."""
    if question.language == "russian":
        return "Цепочка" if reached else "Цепочка (не дошла до ответа)"
    return "Chain" if reached else "Chain (did not reach the answer)"
