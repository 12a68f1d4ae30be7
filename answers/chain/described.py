"""The offline answer to a question whose first sentences describe what its last one asks about
(`described_answer`): "Платёжный шлюз сначала отправляет каждое списание основному эквайеру. До какой даты
действует наш договор с этим эквайером?", "Our route planner computes its distance matrices from a single
outside geodata service. The review of that provider's 2025 outage singles out one thing ... What was it?".

The statements name no entity to start a chain from, or name the wrong one: they describe the bridge by
what a page says of it. The bridge and the answer are chosen together, as a two-hop path is scored in
multi-hop retrieval (a bridge passage, then an answer passage linked to it by the bridge's name):

- the units that best cover the statements (`DESCRIBING_UNITS`, by the unit scorer with the statements as
  the question) offer their names and their page's title as bridges, except what the question names itself;
- each bridge is asked the last sentence ("До какой даты действует наш договор с этим эквайером? Ferrocard"),
  answered only by a unit that names the bridge, in its own words, its table row's header, or its page's
  title or heading (a value of the asked type first, as the local answer prefers one), and that holds a word
  of the last sentence besides the bridge and the names it spells (else the path answers nothing);
- the path whose statements' share (of the describing unit) plus the answer's share (of the last
  sentence with the bridge) is highest answers; a tie goes to the better describing unit.

No word list and no pattern is added: the sentence splitter, the unit scorer and the name matcher are the
ones the local answer and the chain use.
"""
from __future__ import annotations

from dataclasses import dataclass

from core.text.terms import content_stems
from core.text.tokens import LETTER
from answers.chain.names import names_in
from answers.chain.targets import value_in
from answers.expected_type import VALUE_KINDS
from answers.question import Question
from answers.question_text import title_core
from answers.types import Passage
from answers.unit_scoring import Focus, Scorer
from answers.units import Extracted, Unit, cite, display, units

# the units best covering the statements whose names are bridges (3, 5, 8 and 12 chose alike on demo_dev)
DESCRIBING_UNITS = 5


@dataclass(frozen=True)
class _Path:
    score: float
    bridge: str
    described_by: Unit
    answer: Unit
    confidence: float
    scorer: Scorer


def described_answer(question: Question, passages: list[Passage], label: str) -> Extracted | None:
    """The answer through the entity the question's statements describe, with the unit that describes
    it and the unit that answers, cited; None when the question has no statements before its last
    sentence, or no unit that names a bridge answers anything of that sentence. `label`: what a chain is
    called in the answer ("Chain")."""
    if question.described is None:
        return None
    statements, asked = question.described
    every = units(passages)
    if not every:
        return None
    describing = Scorer(Focus.of(Question(statements), passages=passages), passages, every)
    whole = Focus.of(question, passages=passages)
    best: _Path | None = None
    for bridge, (share, described_by) in _bridges(describing, whole, every, passages).items():
        path = _answer_through(bridge, asked, share, described_by, every, passages)
        if path is not None and (best is None or path.score > best.score):
            best = path
    if best is None:
        return None
    return _as_extracted(best, label)


def _bridges(describing: Scorer, whole: Focus, every: list[Unit],
             passages: list[Passage]) -> dict[str, tuple[float, Unit]]:
    """Each bridge the best describing units offer, in their order, with the share of the statements its
    unit (with its page's title) covers; none the question (`whole`) names itself."""
    ranked = sorted(every, key=lambda u: (-describing.score(u), u.passage, u.position))[:DESCRIBING_UNITS]
    found: dict[str, tuple[float, Unit]] = {}
    for u in ranked:
        share = describing.coverage(describing.covered(u))
        for name in [surface for _, surface, _ in u.names] + [title_core(passages[u.passage - 1].title)]:
            if name not in found and LETTER.search(name) and not whole.in_question(name):
                found[name] = (share, u)
    return found


def _answer_through(bridge: str, asked: str, share: float, described_by: Unit, every: list[Unit],
                    passages: list[Passage]) -> _Path | None:
    """The best unit naming `bridge` for the last sentence asked of it; None when no unit names it or the
    best one holds no word of that sentence besides the bridge (`_answers_something`)."""
    scorer = Scorer(Focus.of(Question(f"{asked.rstrip().rstrip('?')} {bridge}?"), passages=passages),
                    passages, every)
    linked = [u for u in every if _names(bridge, u, passages[u.passage - 1])]
    if not linked:
        return None
    typed = [u for u in linked if scorer.focus.kind and scorer.typed(u)]
    answer = min(typed or linked, key=lambda u: (-scorer.score(u), u.passage, u.position))
    if not _answers_something(scorer, answer, bridge):
        return None
    confidence = scorer.confidence([answer])
    return _Path(share + confidence, bridge, described_by, answer, confidence, scorer)


def _answers_something(scorer: Scorer, answer: Unit, bridge: str) -> bool:
    """Whether the unit holds a word the last sentence asks besides the bridge and the names it spells
    ("burst" of "What burst does the plan allow?"): naming the bridge alone answers nothing of it. A last
    sentence asking nothing of its own ("What was it?") leaves the statements to say what is asked."""
    own = set(scorer.focus.terms.stems) - set(content_stems(bridge)) - scorer.focus.name_stems
    return not own or bool(scorer.covered(answer) & own)


def _names(bridge: str, u: Unit, p: Passage) -> bool:
    """Whether the unit is about the bridge: it names it, or its row's header, page title or heading does."""
    return (names_in(bridge, f"{u.header} {u.text}", u.stems)
            or names_in(bridge, f"{title_core(p.title)} {p.heading}", frozenset()))


def _as_extracted(path: _Path, label: str) -> Extracted:
    """The answer first (the asked value where the unit holds one, else its sentence), then the path."""
    answer, described_by = path.answer, path.described_by
    steps = [described_by, answer] if (described_by.passage, described_by.position) != (
        answer.passage, answer.position) else [answer]
    if path.scorer.focus.kind in VALUE_KINDS and path.scorer.typed(answer):
        value = value_in(answer, path.scorer)
        quoted = " ".join(f"{display(u)} [{u.passage}]" for u in steps)
        text = f"{value}. {label}: {path.bridge} -> {value}. {quoted}"
        chain = [path.bridge, value]
    else:  # the answering sentence leads; the describing one follows the bridge, once
        quoted = "".join(f" {display(u)} [{u.passage}]" for u in steps[:-1])
        text = f"{display(answer)} [{answer.passage}] {label}: {path.bridge}.{quoted}"
        chain = [path.bridge]
    scores = {id(answer): path.confidence}
    return Extracted(text, cite(steps, scores), round(path.confidence, 4), chain, True)
