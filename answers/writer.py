"""The one answer writer the routes share (local, multi-hop, DRIFT, global): the LLM's answer with its
citations checked, else the offline extractive one (answers/extractive.py; DRIFT's answers/drift_answer.py);
a local or multi-hop answer that would be about something no readable document mentions becomes the
no-answer naming it; a global answer (graph/query's map-reduce) gets its reports as citations.

The router runs a route's search and hands the passages here; it decides nothing about what is said.
"""
from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from typing import Sequence

from answers.drift_answer import drift_answer
from answers.extractive import offline_answer
from answers.generate import CitationError, check_citations, citations_for, llm_answer, no_answer_sentence
from answers.no_answer import closest_no_answer, judged_note, unmentioned_note, unstated_note
from answers.other_language_gate import OtherLanguageGate
from answers.premise import unstated_numbers
from answers.question import Question
from answers.reader import ReaderModel
from answers.relation_judge import RelationJudge
from answers.types import Answer, Citation, Passage, RouteDecision
from answers.unit_similarity import UnitSimilarity
from answers.units import Extracted
from core.llm.client import LLM
from core.llm.errors import LLMError
from core.text.language import detect_language
from graph.query.runner import GlobalAnswer
from vector.search.hybrid import HybridSearcher
from vector.search.unmentioned import CodeCheck, check_question, check_words

log = logging.getLogger(__name__)


@dataclass
class AnswerWriter:
    """`searcher`: looks up, with the reader's ACL in SQL, whether any readable document mentions the
    question's codes and words; `similarity`: units against the question across languages; `reader`:
    the learned reader (None: the hand-weighted scorer); `unmentioned_words`: how many of the question's
    content words no readable document uses withhold a local answer (0: never; docs/reader.md); `gate`:
    how sure a local answer chosen in the other language is (answers/other_language_gate.py; with one,
    the local route's offline search leaves such pages to it); `unknown_names`: a name of the question that no
    readable document spells, in either script, withholds the offline answer (vector/search/unmentioned.py
    `check_names`); `judge`: whether any unit a local answer quotes states what the question asks
    (answers/relation_judge.py; None: not judged)."""

    searcher: HybridSearcher
    similarity: UnitSimilarity
    reader: ReaderModel | None = None
    unmentioned_words: int = 0
    gate: OtherLanguageGate | None = None
    unknown_names: bool = True
    judge: RelationJudge | None = None

    def write(self, tenant: str, groups: list[str], question: Question, passages: list[Passage],
              decision: RouteDecision, llm: LLM | None, *, partial: bool, multihop: bool = False,
              follow_ups: list[str] = ()) -> Answer:
        """The answer over `passages` (best first): the LLM's, citations checked, else extractive. A code of
        the question no readable document holds (vector/search/unmentioned.py) makes the extractive answer
        the no-answer naming it: its units would be about other codes (ERR_2043 for ERR_9999); so does a name
        of the question no readable document spells ("Elena Smirnova": the passages are about other people).
        An LLM reads the passages itself and says so in its own words, so it is not asked then."""
        language = question.language
        trace: dict = {"passages": [{"number": n, "id": p.id, "doc_id": p.doc_id} for n, p in enumerate(passages, 1)]}
        errors, reasons = [], []
        if passages and llm is not None:
            generated = _llm_answer(question, passages, decision, llm, partial, trace, reasons, errors)
            if generated is not None:
                return generated
        check = self.unmentioned(tenant, groups, question)
        if not passages:  # nothing to cite; what no readable document mentions is still worth saying
            return uncited_no_answer(question, decision, check, offline=llm is None, trace=trace)
        withheld = _unmentioned(question, passages, decision, check, reasons, errors, trace)
        if withheld:
            return withheld
        extracted = offline_answer(question, passages, multihop=multihop, follow_ups=list(follow_ups),
                                   similarity=self.similarity, reader=self.reader, gate=self.gate)
        trace["extracted"] = [{"passage": p.passage, "score": p.score} for p in extracted.picked]
        trace["confidence"] = extracted.confidence
        trace["threshold"] = extracted.threshold
        if extracted.closeness is not None:  # chosen by meaning in the other language's passages
            trace.update(closeness=extracted.closeness, named=extracted.named, worded=extracted.worded)
        if extracted.logit is not None:
            trace["reader"] = {"logit": round(extracted.logit, 4)}
        if extracted.chain:
            trace["chain"] = extracted.chain
        if not extracted.answered:
            # the passages are about something else (or no sentence of theirs shares a word with the question): say
            # so, and show where the search looked
            if extracted.text:
                trace["withheld"] = extracted.text  # what would have been said, for the evaluation of the threshold
            if extracted.unsaid:  # the answering page is about what the question names, not what it asks
                trace["unsaid"] = list(extracted.unsaid)
            return closest_no_answer(question, passages, decision, reasons=reasons, errors=errors, trace=trace,
                                     note=unstated_note(language, extracted.unsaid) if extracted.unsaid else "")
        # A number the question states that the chosen unit's passage never writes: the answer is about
        # something else. Only a question of one hop by its form (no relative clause or possessive) and on the
        # local route: a question that describes what it links through may state a number of a page its answer
        # only passes through ("the singer whose third album is Diamond Cut (1979)", "the sequel to Tai Chi 0":
        # each a right development answer lost when every question was checked)
        one_hop = not multihop and question.least_hops == 1
        unstated = unstated_numbers(question, passages, extracted.picked) if one_hop else ()
        if unstated:
            trace["withheld"] = extracted.text
            trace["unstated_numbers"] = list(unstated)
            return closest_no_answer(question, passages, decision, note=unstated_note(language, unstated),
                                     reasons=reasons, errors=errors, trace=trace)
        # Local answers only: a multi-hop answer quotes a chain's links, none of which states the whole question
        if not multihop and self.judge is not None and extracted.picked:
            withheld = _judged(self.judge, question, passages, decision, extracted, reasons, errors, trace)
            if withheld:
                return withheld
        # Local answers only: a multi-hop question describes what it chains through in words of its own
        # ("the team that runs the service which ..."); there the check withheld 8 right held-out answers.
        # A word is checked only against text in its own language, so only an answer in the question's.
        said = " ".join(p.text for p in extracted.picked)
        if not multihop and self.unmentioned_words and detect_language(said) == language:
            words = check_words(self.searcher, tenant, groups, question.words,
                                least=self.unmentioned_words)
            if words.unmentioned:
                trace["withheld"] = extracted.text  # what would have been said
            withheld = _unmentioned(question, passages, decision, words, reasons, errors, trace)
            if withheld:
                return withheld
        quotes: dict[int, str] = {}
        for p in extracted.picked:  # a citation quotes exactly the units the answer took from its passage
            quotes[p.passage] = f"{quotes[p.passage]} {p.text}" if p.passage in quotes else p.text
        return Answer(question.text, extracted.text, citations_for(sorted(quotes), passages, quotes), decision,
                      offline=True, degraded=bool(reasons), degraded_reasons=reasons, errors=errors, trace=trace)

    def write_drift(self, question: Question, passages: list[Passage], decision: RouteDecision, llm: LLM | None, *,
                    partial: bool, follow_ups: list[str], best: dict[int, int], trace: dict,
                    reasons: list[str]) -> Answer:
        """DRIFT's answer over `passages` (community reports first, then the follow-up searches' chunks):
        the LLM's, citations checked, else one extractive line per report and per follow-up
        (answers/drift_answer.py; `best`: a follow-up's index -> its best passage's number). `reasons`:
        what already degraded the answer (a failed primer call)."""
        errors: list[str] = []
        if not passages:
            return Answer(question.text, no_answer_sentence(question.language), [], decision, offline=llm is None,
                          no_answer=True, partial=partial, trace=trace)
        if llm is not None:
            generated = _llm_answer(question, passages, decision, llm, partial, trace, reasons, errors)
            if generated is not None:
                return generated
        text, quotes = drift_answer(question, passages, follow_ups, best)
        numbers = check_citations(text, len(passages))
        return Answer(question.text, text, citations_for(numbers, passages, quotes), decision, offline=True,
                      degraded=bool(reasons), degraded_reasons=reasons, partial=partial, errors=errors, trace=trace)

    def unmentioned(self, tenant: str, groups: list[str], question: Question) -> CodeCheck:
        """The question's codes, and its names unless `unknown_names` is off, that no readable document holds."""
        return check_question(self.searcher, tenant, groups, question.codes,
                              question.name_words if self.unknown_names else {})

    @staticmethod
    def write_global(question: Question, result: GlobalAnswer, decision: RouteDecision,
                     errors: Sequence[str] = ()) -> Answer:
        """The global route's answer, written by graph/query (map-reduce over community reports), with a
        citation per report it cites, quoting what the answer shows of it: a theme's sentence, else the
        points taken from it. `errors`: a side check that failed before it (the answer stands, degraded)."""
        quotes: dict[int, list[str]] = {}
        for theme in result.themes:
            quotes.setdefault(theme.report_id, []).append(theme.summary)
        for point in result.points if not result.themes else ():
            quotes.setdefault(point.report_id, []).append(point.text)
        citations = [Citation(r.number, "report", r.id, None, r.title, f"community report, rating {r.rating}",
                              " ".join(quotes.get(r.id, [])), r.documents)
                     for r in sorted(result.reports, key=lambda r: r.number)]
        degraded = result.trace.get("degraded")
        reasons = ([str(degraded)] if result.degraded else []) + list(errors)
        return Answer(question.text, result.answer, citations, decision, offline=result.offline,
                      degraded=bool(reasons), degraded_reasons=reasons, errors=list(errors), no_answer=not citations,
                      trace={"level": result.level, "global": result.trace,
                             "points": [asdict(p) for p in result.points],
                             "themes": [asdict(t) for t in result.themes]})


def _llm_answer(question: Question, passages: list[Passage], decision: RouteDecision, llm: LLM, partial: bool,
                trace: dict, reasons: list[str], errors: list[str]) -> Answer | None:
    """The LLM's answer, every [N] checked against the passages sent; None when it failed its check or
    the LLM failed (why is added to `reasons` and `errors`): the caller answers offline instead."""
    try:
        generated = llm_answer(llm, question.text, passages, question.language, partial=partial)
    except CitationError as exc:
        log.warning("LLM answer withheld: %s", exc)
        errors.append(f"LLM answer withheld: {exc}")
        reasons.append("the LLM answer failed its citation check; extractive answer instead")
        trace["withheld_answer"] = exc.answer
        return None
    except LLMError as exc:
        log.warning("LLM answer failed: %s", exc)
        reasons.append(f"LLM unavailable ({exc}); extractive answer instead")
        return None
    trace["prompt_chars"] = generated.prompt_chars
    return Answer(question.text, generated.text, citations_for(generated.numbers, passages), decision, offline=False,
                  no_answer=generated.no_answer, partial=partial, degraded=bool(reasons), degraded_reasons=reasons,
                  trace=trace)


def uncited_no_answer(question: Question, decision: RouteDecision, check: CodeCheck, *, offline: bool,
                      trace: dict) -> Answer:
    """The no-answer with nothing to cite (no passage, or an offline global question about a name no readable
    document spells), naming what the reader's documents never mention; a failed lookup degrades it."""
    if check.unmentioned:
        trace["unmentioned"] = list(check.unmentioned)
    note = unmentioned_note(question.language, check.unmentioned) if check.unmentioned else ""
    errors = [check.error] if check.error else []
    return Answer(question.text, f"{no_answer_sentence(question.language)} {note}".strip(), [], decision,
                  offline=offline, no_answer=True, degraded=bool(errors), degraded_reasons=errors, errors=errors,
                  trace=trace)


def _judged(judge: RelationJudge, question: Question, passages: list[Passage], decision: RouteDecision,
            extracted: Extracted, reasons: list[str], errors: list[str], trace: dict) -> Answer | None:
    """The no-answer quoting the answer's first unit when the judge reads that none of the units it quotes
    states what the question asks; None when one does (or the judge cannot run: the answer stands, and the
    trace says so). The judge reads each unit as the answer shows it: a table row with its header's columns."""
    read = [(passages[p.passage - 1].title or "", p.reading or p.text) for p in extracted.picked]
    try:
        states, probability = judge.stated_by(question.text, read)
    except Exception as exc:  # noqa: BLE001 - onnxruntime raises its own types; a judge that fails judges nothing
        log.warning("the relation judge failed (%s: %s); the answer is not judged", type(exc).__name__, exc)
        errors.append(f"relation judge: {type(exc).__name__}")
        return None
    trace["judge"] = {"probability": round(probability, 4), "states": states}
    if states:
        return None
    trace["withheld"] = extracted.text  # what would have been said
    lead = extracted.picked[0]
    return closest_no_answer(question, passages, decision, note=judged_note(question.language, lead.text),
                             reasons=reasons, errors=errors, trace=trace)


def _unmentioned(question: Question, passages: list[Passage], decision: RouteDecision, check, reasons: list[str],
                 errors: list[str], trace: dict) -> Answer | None:
    """The no-answer naming what no readable document mentions (vector/search/unmentioned.py), or None
    when nothing is missing; a failed lookup is reported and the answer goes on, degraded."""
    if check.error:
        errors.append(check.error)
        reasons.append(check.error)
    if not check.unmentioned:
        return None
    trace["unmentioned"] = list(check.unmentioned)
    return closest_no_answer(question, passages, decision, note=unmentioned_note(question.language, check.unmentioned),
                             reasons=reasons, errors=errors, trace=trace)
