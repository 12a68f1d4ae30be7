"""The offline local answer (`local_answer`): the unit that best answers the question, its block's
follow-ups, and units answering what it left open. The rules in answers/extractive.py's docstring.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from core.text.language import detect_language
from core.text.script import script_name
from answers.expected_type import CONTACT_KINDS, VALUE_KINDS, holds_value
from answers.units import MIN_CONFIDENCE, Extracted, Unit, cite, display, units
from answers.unit_scoring import Focus, Scorer
from answers.unit_similarity import UnitSimilarity, in_its_page
from answers.other_language_gate import OtherLanguageGate
from answers.reader import POOL, ReaderModel, answer_row, unit_rows
from answers.question import Question
from answers.types import Passage

# Another unit joins the answer when it scores at least half the best one's and its own words cover
# a tenth of the question the answer did not yet cover (paraphrased questions spread over sentences).
EXTRA_SHARE = 0.5
EXTRA_GAIN = 0.1
# units of passages in the other language compared in meaning per question (about a second offline)
MAX_EMBEDDED_UNITS = 32
# Two units' cosines to the question closer than this are a tie in meaning: e5-small reads a sentence about
# one office and the same sentence about another as alike. Chosen, not fitted: a hundredth of the cosine,
# under the span one question's candidate units cover (docs/reader.md, eleventh session).
NEAR_MEANING = 0.01

def local_answer(question: Question, passages: list[Passage], *, max_units: int = 3, max_chars: int = 700,
                 kind: str | None = None, similarity: UnitSimilarity | None = None,
                 reader: ReaderModel | None = None, gate: OtherLanguageGate | None = None,
                 whole: bool = False) -> Extracted:
    """The best unit for the question, its block's follow-ups, and units answering what it left open.
    `kind`: the answer type, when the caller knows it better than `question` says; `similarity`: how
    close in meaning units are to the question, for passages in the other language (`_across_languages`);
    `reader`: the learned reader (answers/reader.py, off unless `answer_learned_reader`) gives the answer
    its calibrated confidence and threshold, over the unit the rules chose (its `chooser` "rules") or the
    one its ranker chose ("ranker"); `gate`: how sure an answer chosen in the other language is
    (answers/other_language_gate.py; None: as sure as the search is of its passage). With a gate, such an
    answer keeps the gate's verdict when the reader is on too: the reader was fitted on answers in the
    question's language, and the search left those pages to the gate, not to the reranker's cut. `whole`:
    the question is asked as the user wrote it (the local route), not as a comparison's side or a chain's
    step, whose words ("older", a relation) its pages need not repeat: an answer whose page, in the
    question's script, says nothing the question asks besides its names is no answer, with those words
    (`Extracted.unsaid`, `Scorer.unsaid`)."""
    if reader is not None and reader.chooser == "ranker":
        return _read(question, passages, kind, similarity, reader, max_chars, max_units)
    extracted, first = _by_rules(question, passages, kind, similarity, max_units, max_chars, gate, whole)
    if reader is None or (gate is not None and extracted.closeness is not None) or extracted.unsaid:
        return extracted  # the page says nothing asked: no reader makes it say it
    return _confide(question, passages, kind, similarity, reader, extracted, first)


def _by_rules(question: Question, passages: list[Passage], kind: str | None, similarity: UnitSimilarity | None,
              max_units: int, max_chars: int, gate: OtherLanguageGate | None = None,
              whole: bool = False) -> tuple[Extracted, Unit | None]:
    """The hand-weighted answer and the unit it chose first (None: no answer)."""
    focus = Focus.of(question, kind, passages)
    every = units(passages)
    if not focus.terms.stems or not every:
        return Extracted("", [], 0.0), None
    scorer = Scorer(focus, passages, every)
    # the search's best passages are in the other language: the one among their units closest in meaning
    # answers, one of the asked type when the question asks one (none such: they do not answer it)
    lead = _lead(scorer, every, question)
    if similarity is not None and lead:
        # embedding a unit costs about 30 ms on the offline model: the best by their words, at most so many
        lead = sorted(lead, key=lambda u: (-scorer.score(u), u.passage, u.position))[:MAX_EMBEDDED_UNITS]
        return _across_languages(question, scorer, lead, every, similarity, max_chars, gate)
    candidates = [u for u in every if scorer.covered(u) or (scorer.focus.kind and scorer.typed(u))]
    if not candidates:
        return Extracted("", [], 0.0), None
    scores = {id(u): scorer.score(u) for u in candidates}
    # A date, a number or an amount is answered by a unit that holds one, when one on the question's
    # topic does: "what is the on-call compensation" by "€40 per night", not by the sentence repeating
    # the question's words ("This policy applies to on-call ..."): the answer-type filter of factoid QA.
    # On the topic means in a document that says something the question asks about: a pay list under
    # "Standby allowance" never repeats "on-call", a Russian page never an English question's words.
    topical = {passages[u.passage - 1].doc_id for u in candidates if scorer.covered(u)}
    # An amount asked as a price, an e-mail or a phone answers only beside whom or what it is of: a supplier's
    # number on the Vologda lab's contract is no number of the Vologda branch. A phone or an e-mail is written
    # next to whom it reaches; an amount may stand in a table under a heading or title naming its subject
    # (read with its row's header, "Berlin (EUR): 78,000").
    formed = focus.kind in CONTACT_KINDS or focus.kind == "money" and question.asks_price
    valued = [u for u in candidates if passages[u.passage - 1].doc_id in topical and (
        holds_value(focus.kind, display(u))
        and (not focus.name_stems or scorer.covered(u, with_title=focus.kind == "money") & focus.name_stems)
        if formed else focus.kind in VALUE_KINDS and scorer.typed(u))]
    # of two equal units, a whole sentence before one the chunk cut
    first = min(valued or candidates, key=lambda u: (-scores[id(u)], u.cut, u.passage, u.position))
    chosen = _with_extras(first, candidates, scores, scorer, every, max_units, max_chars)
    # no unit gives the asked amount, e-mail or phone of what the question names, or the answer's page
    # says nothing the question asks besides its names (a page written in the other script is left to the
    # names, whatever script the unit is in: the dictionary misses too many of its words): whatever else
    # they say, no answer
    page = passages[first.passage - 1]
    unsaid = scorer.unsaid(first) if whole and script_name(page.text or "") == question.script else ()
    confidence = 0.0 if formed and not valued or unsaid else scorer.confidence(chosen)
    text = " ".join(f"{display(u)} [{u.passage}]" for u in chosen)
    return Extracted(text, cite(chosen, scores), round(confidence, 4), unsaid=unsaid), first


def _confide(question: Question, passages: list[Passage], kind: str | None, similarity: UnitSimilarity | None,
             reader: ReaderModel, extracted: Extracted, first: Unit | None) -> Extracted:
    """The hand-weighted answer with the reader's confidence and threshold: the answer model over the
    unit the rules chose first (pooled with the best candidates, so that its relative features read)."""
    found = reader_pool(question, passages, kind, similarity) if first is not None else None
    if found is None:
        return replace(extracted, confidence=0.0, threshold=reader.threshold)
    at = [(u.passage, u.position) for u in found.pool]
    key = (first.passage, first.position)
    if key not in at:  # the rules chose beyond the pool (another language's unit, a typed value): pool it
        unit = next(u for u in found.every if (u.passage, u.position) == key)
        found.pool = found.pool[:POOL - 1] + [unit]
        found.closeness = (list(similarity(question.text, [display(u) for u in found.pool])) if similarity
                           else [0.0] * len(found.pool))
        at = [(u.passage, u.position) for u in found.pool]
    rows = found.rows()
    i = at.index(key)
    logit = float(reader.logits(rows[i:i + 1])[0])
    z = reader.answer_logit(rows[i], logit)
    return replace(extracted, confidence=round(reader.confidence(z), 4), threshold=reader.threshold, logit=z,
                   row=answer_row(rows[i], logit))


def _lead(scorer: Scorer, every: list[Unit], question: Question) -> list[Unit]:
    # the leading passages once, not once per unit: each reading runs the language detector over every passage
    # (a 1,000-row table's units read its 43,000 characters a thousand times: 2.5 s for one answer)
    leading = _other_language_lead(scorer.passages, question.language == "russian")
    lead = [u for u in every if u.passage in leading]
    return [u for u in lead if scorer.typed(u)] if scorer.focus.kind else lead


@dataclass
class Pool:
    """What the learned reader chooses from: the question's scorer, every unit, the candidates, and the
    best of them by their words (at most POOL) with their closeness in meaning to the question."""
    scorer: Scorer
    every: list[Unit]
    candidates: list[Unit]
    pool: list[Unit]
    closeness: list[float]

    def rows(self):
        return unit_rows(self.scorer, self.pool, self.closeness)


def reader_pool(question: Question, passages: list[Passage], kind: str | None = None,
                similarity: UnitSimilarity | None = None) -> Pool | None:
    """The candidates as the hand-weighted answer has them (the other language's leading passages'
    units when the search ranked those first and `similarity` can read them, else the units sharing
    the question's words or of its asked type); None when there are none."""
    focus = Focus.of(question, kind, passages)
    every = units(passages)
    if not focus.terms.stems or not every:
        return None
    scorer = Scorer(focus, passages, every)
    lead = _lead(scorer, every, question) if similarity is not None else []
    candidates = lead or [u for u in every if scorer.covered(u) or (focus.kind and scorer.typed(u))]
    if not candidates:
        return None
    pool = sorted(candidates, key=lambda u: (-scorer.score(u), u.passage, u.position))[:POOL]
    closeness = list(similarity(question.text, [display(u) for u in pool])) if similarity else [0.0] * len(pool)
    return Pool(scorer, every, candidates, pool, closeness)


def _read(question: Question, passages: list[Passage], kind: str | None, similarity: UnitSimilarity | None,
          reader: ReaderModel, max_chars: int, max_units: int) -> Extracted:
    """The learned reader's answer: of the pooled candidates (`reader_pool`), the unit the model gives
    the highest probability of holding the answer, with its block and the extras `_with_extras` adds;
    its confidence the calibrated probability that such an answer is right."""
    found = reader_pool(question, passages, kind, similarity)
    if found is None:
        return Extracted("", [], 0.0, threshold=reader.threshold)
    scorer, pool = found.scorer, found.pool
    scores = {id(u): scorer.score(u) for u in found.candidates}
    rows = found.rows()
    logits = reader.logits(rows)
    best = max(range(len(pool)), key=lambda i: (logits[i], -pool[i].passage, -pool[i].position))
    chosen = _with_extras(pool[best], found.candidates, scores, scorer, found.every, max_units, max_chars)
    text = " ".join(f"{display(u)} [{u.passage}]" for u in chosen)
    z = reader.answer_logit(rows[best], float(logits[best]))
    return Extracted(text, cite(chosen, scores), round(reader.confidence(z), 4), threshold=reader.threshold,
                     logit=z, row=answer_row(rows[best], float(logits[best])))


def _with_extras(first: Unit, candidates: list[Unit], scores: dict[int, float], scorer: Scorer,
                 every: list[Unit], max_units: int, max_chars: int) -> list[Unit]:
    """The first unit with its block, in the block's order, then other candidates answering what it left
    open (see EXTRA_SHARE), in passage order: the answer leads with the unit chosen to answer, not with
    an extra an earlier passage holds."""
    focus = scorer.focus
    chosen = _with_block(first, every, max_chars)
    block = len(chosen)
    covered = set().union(*(scorer.covered(u) for u in chosen))
    used = sum(len(u.text) for u in chosen)
    for u in sorted(candidates, key=lambda u: (-scores[id(u)], u.passage, u.position)):
        if len(chosen) >= max_units:
            break
        new = scorer.covered(u, with_title=False) - covered  # its own words must add to the answer
        if (u in chosen or u.anaphoric or used + len(u.text) > max_chars or not new
                or scores[id(u)] < EXTRA_SHARE * scores[id(first)] or scorer.coverage(new) < EXTRA_GAIN
                or (focus.kind and not scorer.typed(u))  # a "when" question's extra fact is a date too
                or (focus.name_stems and not scorer.covered(u) & focus.name_stems)):  # and about what it names
            continue
        chosen.append(u)
        covered |= scorer.covered(u)
        used += len(u.text)
    return chosen[:block] + sorted(chosen[block:], key=lambda u: (u.passage, u.position))


def _with_block(first: Unit, every: list[Unit], max_chars: int) -> list[Unit]:
    """The unit with what its block says around it: the sentence it refers back to, then the next
    ones of its list item (an item's sentences all describe its subject) or paragraph (the sentence
    after the one matching the question's words often holds the answer) within half the budget,
    and past that the ones that refer back."""
    same = [u for u in every if u.passage == first.passage and u.block == first.block]
    i = same.index(first)
    chosen = [first]
    if first.anaphoric and i > 0:
        chosen.insert(0, same[i - 1])
    for u in same[i + 1:]:
        length = sum(len(c.text) for c in chosen) + len(u.text)
        if length > max_chars or not (length <= max_chars // 2 or u.anaphoric):
            break
        chosen.append(u)
    return chosen


def _other_language_lead(passages: list[Passage], asked_cyrillic: bool) -> set[int]:
    """The numbers of the passages the search ranked above every passage written in the question's
    language (none when the best passage is in it). A passage is Russian as the index and the
    reranker read it (core/text/language.py: a third of its letters Cyrillic): a Russian page full of
    English setting names is still a Russian page to an English question's words."""
    lead = set()
    for number, p in enumerate(passages, start=1):
        if not p.text.strip():
            continue  # a passage blanked out (a comparison's other side) says nothing either way
        if (detect_language(p.text) == "russian") == asked_cyrillic:
            break
        lead.add(number)
    return lead


def _across_languages(question: Question, scorer: Scorer, pool: list[Unit], every: list[Unit],
                      similarity: UnitSimilarity, max_chars: int,
                      gate: OtherLanguageGate | None = None) -> tuple[Extracted, Unit]:
    """The answer when the search's best passages are written in the other language: their words match
    the question's only through a dictionary of one sense per word (core/text/lexicon), so the unit
    closest to it in meaning, read in its page (`in_its_page`), answers (`pool`: the best by their words,
    of the asked type when the question asks one), with its block; of units tied in meaning
    (`NEAR_MEANING`), the one holding most of the question's words and names. Beyond ties the words only
    choose the pool: a word score's lead outweighs the narrow band one question's cosines span. It is as
    sure as the names it shares say, or else as the `gate` says from the chosen unit's closeness and the
    share of the question's words its units hold in translation; without a gate, as the names say or as sure as the
    search is that its passage is relevant (the calibrated probability the reranker gave it,
    vector/search/rerank/offline.py)."""
    # a question that names something is answered by a unit about it: of the units, those naming (in
    # themselves or their page's title and headings) most of the question's names, as `_by_rules` keeps to
    # the pages on the question's topic; e5 reads one office's "opened in 2015" as close as another's
    named = {id(u): len(scorer.covered(u) & scorer.focus.name_stems) for u in pool}
    most = max(named.values(), default=0)
    pool = [u for u in pool if named[id(u)] == most]
    read = [in_its_page(u, scorer.passages[u.passage - 1]) for u in pool]
    closeness = dict(zip(map(id, pool), similarity(question.text, read)))
    # meaning chooses; units within NEAR_MEANING of the closest are told apart by the question's words they
    # hold, in either language (its names above all: one office's page and another's read alike)
    best = max(closeness.values())
    near = [u for u in pool if closeness[id(u)] >= best - NEAR_MEANING]
    first = max(near, key=lambda u: (scorer.confidence([u], translated=True), closeness[id(u)], -u.passage,
                                     -u.position))
    chosen = _with_block(first, every, max_chars)
    text = " ".join(f"{display(u)} [{u.passage}]" for u in chosen)
    cited = cite(chosen, {id(u): closeness.get(id(u), 0.0) for u in chosen})
    named, close = round(scorer.confidence(chosen), 4), round(closeness[id(first)], 4)
    worded = round(scorer.confidence(chosen, translated=True), 4)
    if gate is not None and named < MIN_CONFIDENCE:
        # the names give no evidence: the gate judges the meaning and the words found in translation (the
        # search's probability for such a page is not used: the search did not hold the page to its cut,
        # answers/other_language_gate.py)
        return Extracted(text, cited, round(gate.confidence(close, worded), 4), threshold=gate.threshold,
                         closeness=close, named=named, worded=worded), first
    relevance = (scorer.passages[first.passage - 1].relevance or 0.0) if gate is None else 0.0
    return Extracted(text, cited, round(max(named, relevance), 4), closeness=close, named=named,
                     worded=worded), first
