"""The offline answers: sentences copied from the passages, chosen by what the question asks, each cited.

No LLM writes anything. The passages are cut into units that never cross a list item, a table row,
a heading or a paragraph (`units`): a sentence is a unit, a table row is one, and an answer joins
units only as its own rules say, so two list items never read as one passage.

A local answer (`local_answer`) is the unit that best answers the question:
- its focus: the question's content stems, weighted by rarity among the candidates, where a name
  the question spells in one script matches the other script ("Yekaterinburg" / "Екатеринбурге",
  by consonant skeleton), and the names count twice, since "the Berlin office opened in 2013" is
  no answer about Yekaterinburg; a unit opening with the code the question asks about (ERR_2043)
  defines it;
- its answer type (answers/expected_type.py): "when" wants a date, "how many" and "what rank" a
  number (in digits or words: "nine", "девяти"), "who" a person, "where / which office" a place,
  each one the question itself does not contain; a "how many X" question wants the number standing
  just before X ("девяти странам", "160 000 кв. миль") more than any other number;
- the passage's own title and heading count as context (a Russian office page titled with the city
  answers "When did the Yekaterinburg office open?" with its first sentence), and its rank a little;
- when the search ranked passages in the other language above every passage in the question's, no
  word of theirs can match: their unit closest to the question in meaning (the search's embedding
  model, answers/unit_similarity.py) answers, of the asked type when the question asks one, shown as
  sure as the reranker is that its passage is relevant (answers/local.py).
Of two equal units a whole sentence goes first, before one the chunk cut at its start. A unit that
refers back (it opens with "This is ...", "It ...", or closes a clause on a pronoun: "... tried to do
this.") brings the sentence before it. The unit is followed by the next ones of its own list item or
paragraph within half the budget, and past that by those that refer back; another block is added only when
it answers a part of the question the first did not, about what the question names, with the asked
type, and never when it refers back.

A multi-hop answer (`chain_answer`) follows the chain: from the entities the question names, each
hop is a unit that links the current entity (named in the unit or the subject of its passage) to a
new one, preferring units that state a relation word of the question no earlier hop stated (after
the first hop, none that only the start's own clause states: "the sibling of the performer of X"
wants a sibling next, not another "performed by"), or another name of the question ("taken by the
British"); a beam search keeps the best few chains, and the one that reaches the type the question
asks for, after as many hops as its form needs (`least_hops`) or once every relation of the question
has had its hop, answers. A unit names an entity only as a name: capitalised as the question writes it,
every word of it, consonant skeletons only across scripts;
a bare year, a part of a longer name or a lone type word ("Inc") is no entity to go through, and a
name after a locative preposition ("formed in Leyton") or a place's kind word ("the county of Cumbria")
is a place, however the mention finder typed it; a question asking no person, place, date or number
("what genre") is answered, after its hops, by a sentence about the last entity. The answer states the chain and cites every
hop, then the units that answer the question's own words and the loop's later queries
(`offline_answer`); a chain that stopped short of the asked kind of value (a date, a sum, a number)
follows the plain answer when that one holds such a value. A question whose first sentences describe
what its last one asks about is answered through the entity they describe, chosen together with the
answer (answers/chain/described.py), before any chain.

Either answer carries a confidence: the share of the question (rarity-weighted stems, names twice)
that the answering units and their passages' titles cover. Below MIN_CONFIDENCE the answer is that
the corpus does not say, with the closest passages listed (see `MIN_CONFIDENCE`).
With `answer_learned_reader` on, a local answer's confidence is instead the learned reader's calibrated
probability that it is right, held to the reader's own threshold (answers/reader.py, docs/reader.md).
"""
from __future__ import annotations

from dataclasses import replace

from answers.expected_type import CONTACT_KINDS, VALUE_KINDS, holds_value
from answers.units import Extracted, display, units
from answers.chain.answer import chain_answer, chain_label
from answers.chain.described import described_answer
from answers.comparison import comparison_answer
from answers.local import local_answer
from answers.other_language_gate import OtherLanguageGate
from answers.question import Question
from answers.reader import ReaderModel
from answers.types import Passage
from answers.unit_similarity import UnitSimilarity

def offline_answer(question: Question, passages: list[Passage], *, multihop: bool = False,
                   follow_ups: list[str] = (), similarity: UnitSimilarity | None = None,
                   reader: ReaderModel | None = None, gate: OtherLanguageGate | None = None) -> Extracted:
    """The route's offline answer: on the multi-hop route, a comparison (`question.comparison`) answers
    each side from the passages about it (answers/comparison.py); another multi-hop question states its
    chain first (after the plain answer when the chain stopped short of the asked kind of value and that
    answer holds one: `_states_asked`), then the units that answer the question's own words and the loop's later queries
    (`follow_ups`: "Billing team lead"), since a chain through unfamiliar text may miss a hop the plain
    evidence holds; any other question gets the local answer (`similarity`: for passages in the other
    language, answers/local.py, a comparison's sides too; `reader`: the learned reader, answers/reader.py,
    for the local answer; `gate`: how sure the local answer is when chosen in the other language,
    answers/other_language_gate.py)."""
    if not multihop:
        return local_answer(question, passages, similarity=similarity, reader=reader, gate=gate, whole=True)
    compared = question.comparison
    if compared is not None:
        sides = list(zip((compared.a, compared.b), compared.queries()))
        return comparison_answer(question, passages, sides, compared.attribute, similarity, compared.described)
    # statements describing what the last sentence asks about: the bridge they describe and the answer
    # through it are chosen together (answers/chain/described.py); else the chain from the question's names
    chain = (described_answer(question, passages, chain_label(question))
             or chain_answer(question, passages, similarity=similarity))
    if not chain.chain:
        return chain
    support = [local_answer(question, passages)] + [local_answer(Question(q), passages, max_units=1)
                                                    for q in follow_ups[:2]]
    if not chain.reached and _states_asked(question, support[0]):
        # the chain ended at something the question does not ask for (a team where a date is asked), and
        # the plain answer to the question's own words holds what it asks: that leads, the chain follows
        # as what was tried
        lead, rest = support[0], [chain] + support[1:]
        head = f"{lead.text} {chain_label(question, reached=False)}: {' -> '.join(chain.chain)}."
    else:
        lead, rest, head = chain, support, chain.text
    seen = {(p.passage, p.position) for p in lead.picked}
    extra = [p for answer in rest for p in answer.picked if (p.passage, p.position) not in seen
             and not seen.add((p.passage, p.position))]
    # no e-mail or phone where the chain or the plain answer ends: not answered, whatever the rest says
    unreachable = question.expected_type in CONTACT_KINDS and not any(
        holds_value(question.expected_type, p.text) for p in lead.picked)
    if lead is chain and not extra:
        return replace(chain, confidence=0.0) if unreachable else chain
    if extra:
        units_by = {(u.passage, u.position): u for u in units(passages)}
        head += " " + " ".join(f"{display(units_by[(p.passage, p.position)])} [{p.passage}]" for p in extra)
    confidence = 0.0 if unreachable else max(chain.confidence, support[0].confidence)
    return Extracted(head, lead.picked + extra, confidence, chain.chain, chain.reached)


def _states_asked(question: Question, answer: Extracted) -> bool:
    """Whether an answer's first unit holds a value of the type the question asks (a date, a sum, a
    number); names are not checked, since any capitalised word would pass for one."""
    kind = question.expected_type
    return bool(answer.picked) and kind in VALUE_KINDS and holds_value(kind, answer.picked[0].text)
