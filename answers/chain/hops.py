"""One step of the multi-hop chain (answers/chain/answer.py): which units link a chain's last entity to a
next one, and how each is scored. A hop states a relation of the question in its own words or in its
section's heading; a relation an earlier hop stated counts no more; the question's other names count as
relations; a unit that names the current entity, or stands on its page, speaks of it. The entity a hop
leads to: answers/chain/links.py; whether it is of the asked type: answers/chain/targets.py.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from core.text.terms import content_stems, normalise
from answers.expected_type import VALUE_KINDS
from answers.units import Unit, display, entity_key, typed_names
from answers.chain.names import names_in, place_in_name, without_demonym
from answers.chain.question import other_name_stems
from answers.chain.links import BRIDGE_TYPES, bridge, is_alias, is_type_word, related
from answers.chain.targets import is_wanted, order_in, value_in, with_region
from answers.question_text import title_core
from answers.types import Passage
from answers.unit_scoring import Focus, Scorer


@dataclass
class Chain:
    """A chain as the beam grows it: its hops (unit, the entity it leads to, score), the name it started at,
    the entities it has passed, the relation stems its hops stated, and whether it reached what is asked."""
    hops: list[tuple[Unit, tuple[str, str, str], float]]
    start: str
    known: frozenset[str]
    used: frozenset[str]
    reached: bool = False

    @property
    def score(self) -> float:
        return sum(s for _, _, s in self.hops)


def distinct(steps: list) -> list:
    """The best hop to each entity: two units leading to one entity would fill the beam with one chain."""
    best: dict[str, tuple] = {}
    for step in steps:  # best first
        best.setdefault(step[2][0], step)
    return list(best.values())


def next_hops(chain: Chain, frontier, every: list[Unit], subjects, scorer: Scorer, relation: list[str],
               focus: Focus, least: int, names: list[str],
               typed: frozenset[str] = frozenset(),
               onward: bool = False) -> list[tuple[float, Unit, tuple[str, str, str], str, bool]]:
    """(score, unit, entity it leads to, the frontier name it links, whether the unit answers) for
    every unit that links the chain's last entity to a new one, best first. The question's names
    other than the chain's start count as its relations: "When was the country that produced X taken
    by the British?" asks for the hop that names the British."""
    taken = {id(u) for u, _, _ in chain.hops}
    described = frozenset(w for w in focus.tokens if w.islower())
    out = []
    for u in every:
        if id(u) in taken:
            continue
        subject = subjects[u.passage - 1]
        link = links_of(u, subject, frontier)
        if not link:
            continue
        # the asked type ends the chain only once the question's relations have had their hops
        final = len(chain.hops) + 1 >= least
        # each hop states a relation of its own: words an earlier hop stated count no more
        asked = relation + other_name_stems(names, chain.start if chain.hops else link[1])
        # the words of the current entity's own name state no relation ("team" of "Platform team")
        own = related(asked, u.stems - frozenset(content_stems(link[1]))) - chain.used
        # a question's own name is no answer, so its first hop none; a step that goes on from an entity an
        # earlier step found (`onward`) may answer on its first
        passed = bool(chain.hops) or onward
        value = passed and focus.kind in VALUE_KINDS and scorer.typed(u)
        # a question that asks no person, place, date or number ("What genre is the author of X
        # associated with?") is answered, once its form has had its hops and never on the first, by a
        # sentence about the last entity that states a relation word of its own (a word of the
        # question's, not another of its names) or stands on that entity's own page: the sentence is
        # the answer, whatever names it holds
        answers = final and (value or passed and focus.kind is None
                            and (bool(own & set(relation)) or bool(subject) and subject[0] == entity_key(link[1])))
        # "Young, New South Wales" is Young, placed
        fresh = [e for e in entities_of(u, subject, link[1]) if e[0] not in chain.known and not scorer.focus.in_question(e[1])
                 and entity_key(e[1].split(",")[0]) not in chain.known
                 and not is_alias(u.text, e[1]) and not is_type_word(e[1])]
        if not fresh and not answers:
            continue
        heading = related(asked, scorer.title_stems[u.passage - 1]) - chain.used - own
        # a section heading over the unit states how the page's subject relates to what the section
        # lists ("Billing team > Services owned" over a row naming the Payments Gateway: Billing owns
        # it); the words of the subject's own name ("team" of "Billing team") state no relation
        listed = link[0] == "text" and subject in fresh and bool(
            heading - set(content_stems(subject[1])) - related(asked, frozenset(content_stems(subject[1]))))
        # what the unit itself states counts fully, what its title or heading says half
        rel = math.fsum(scorer.weight(s) for s in own) + 0.5 * math.fsum(scorer.weight(s) for s in heading)
        rel /= sum(scorer.weight(s) for s in asked) or 1.0
        # the page's own subject first (the Berlin office page answers "Berlin"), then the first place
        # the unit names ("headquartered in Harlow, Essex": Harlow, shown with its region)
        wanted = sorted((e for e in fresh if is_wanted(e, focus.kind, u.text, typed)),
                        key=lambda e: (e is not subject, order_in(u.text, e[1]))) if final else []
        if value and final:  # a date or a number ends the chain; never on the first hop
            wanted = [(f"value:{u.passage}:{u.position}", value_in(u, scorer), "value")]
        elif wanted and focus.kind == "place":
            wanted[0] = with_region(wanted[0], u.text)
        if not own and not wanted and not answers and not listed and not (
                link[0] == "text" and any(e[2] in BRIDGE_TYPES for e in fresh)):
            # a bridge states one of the question's relations (in its own words or its section's
            # heading), or at least names the current entity next to a person, team, service or
            # place ("led by" is no stem of "lead")
            continue
        # a unit that names the current entity, and one on its own page, each speak of it
        own_page = bool(subject) and subject[0] == entity_key(link[1])
        score = rel + (0.3 if wanted else 0.0) + (0.05 if link[0] == "text" else 0.0) + (0.05 if own_page else 0.0) \
            + 0.05 / u.passage
        entity = wanted[0] if wanted else (bridge(fresh, subject, link, u.text, own, described) if fresh
                                           else (f"value:{u.passage}:{u.position}", display(u), "value"))
        out.append((score, u, entity, link[1], answers))
    out.sort(key=lambda x: (-x[0], x[1].passage, x[1].position))
    return out


def subject_of(p: Passage) -> tuple[str, str, str] | None:
    """The entity a passage is about: its title, typed as the passage's own names type it."""
    title = title_core(p.title)
    if not title:
        return None
    key = entity_key(title)
    typed = {k: t for k, _, t in typed_names(p)}
    kind = typed.get(key) or next((t for k, t in typed.items() if k and (k in key or key in k)), "concept")
    if any(w in normalise(title) for w in ("office", "офис")):
        kind = "location"  # an office page is about a place
    return key, title, kind


def entities_of(u: Unit, subject, current: str = "") -> list[tuple[str, str, str]]:
    """The unit's names, its passage's subject, and a place a longer name of the `current` entity ends with."""
    out = list(u.names)
    out += [p for _, n, _ in u.names if current and (p := place_in_name(n, current))]
    if subject and subject[0] not in {k for k, _, _ in out}:
        out.append(subject)
    return out


def links_of(u: Unit, subject, frontier) -> tuple[str, str] | None:
    """("text", name) when the unit names a frontier entity, ("subject", name) when its passage is about one."""
    for key, name in frontier:
        if names_in(name, u.text, u.stems):
            return "text", name
        if subject and (subject[0] == key or names_in(name, subject[1], frozenset(content_stems(subject[1])))
                        or subject[0] == entity_key(without_demonym(name))):
            return "subject", name
    return None
