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
- its answer type: "when" wants a date, "how many" a number, "who" a person, "where / which
  office" a place, each one the question itself does not contain;
- the passage's own title and heading count as context (a Russian office page titled with the city
  answers "When did the Yekaterinburg office open?" with its first sentence), and its rank a little.
The unit is followed by the next ones of its own list item or paragraph within half the budget, and
past that by those that refer back to it ("This is ...", "It ..."); another block is added only when
it answers a part of the question the first did not, about what the question names, with the asked
type, and never when it starts by referring back.

A multi-hop answer (`chain_answer`) follows the chain: from the entities the question names, each
hop is a unit that links the current entity (named in the unit or the subject of its passage) to a
new one, preferring units that state a relation word of the question no earlier hop stated; a beam
search keeps the best few chains, and the one that reaches the type the question asks for, after
as many hops as its form needs (`least_hops`), answers. The answer states the chain and cites every
hop, then the units that answer the question's own words and the loop's later queries
(`offline_answer`).

Either answer carries a confidence: the share of the question (rarity-weighted stems, names twice)
that the answering units and their passages' titles cover. Below MIN_CONFIDENCE the answer is that
the corpus does not say, with the closest passages listed (see `MIN_CONFIDENCE`).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import lru_cache

from core.sentences import split_sentences
from core.text.language import detect_language
from core.text.mentions import find_mentions
from core.text.names import entity_key as _entity_key
from core.text.terms import QueryTerms, content_stems, normalise
from router.question_text import question_mentions, title_core
from router.types import Passage

MIN_UNIT_CHARS = 12
# merge keys of unit texts and names: a chain search asks for the same ones many times over
entity_key = lru_cache(maxsize=8192)(_entity_key)
MAX_HOPS = 4
# Another unit joins the answer when it scores at least half the best one's and its own words cover
# a tenth of the question the answer did not yet cover (paraphrased questions spread over sentences).
EXTRA_SHARE = 0.5
EXTRA_GAIN = 0.1
# Below this share of the question (rarity-weighted words, names twice) found in the answering
# units or their passages' titles, the passages are about something else. The rule that sets it:
# the highest value that withholds at most 5% of the right answers on the dev sets, rounded down to
# one decimal (measured: 0.22-0.26 leave-one-dataset-out over xquad_ru, multihop and the fixtures,
# 0.25 over all); bench/answer_eval.py reports it leave-one-dataset-out.
MIN_CONFIDENCE = 0.2

# --- question types --------------------------------------------------------------------------------

_KIND_CUES = (  # checked in order; the first that matches decides
    ("number", r"\b(how (many|much|long|old|far|big|large|often|tall|high)|what (percentage|percent|number|share)|"
               r"сколько|как долго|какой процент|какая доля|какое количество)\b"),
    ("date", r"(^|[,;]\s*)(when|когда)\b|\b(what|which|in what|in which) (year|date|day|month|century)\b|"
             r"\b(в каком году|какого года|в какой год|с какого года|какого числа|в каком месяце|в каком веке)\b"),
    ("person", r"^(who|whom|whose)\b|[,;]\s*(who|whom|whose)\b|\b(кто|кого|кому|кем|чей|чья)\b"),
    ("place", r"(^|[,;]\s*)(where|где|откуда|куда)\b|\b(in |at |from )?(which|what) (city|country|office|state|"
              r"town|region|place|continent|county|province|island|location|site)\b|"
              r"\b(в|из) (каком|какой) (городе|офисе|стране|регионе|области|месте|штате)\b|"
              r"\bкакой (город|офис)\b|\bкакая страна\b"),
)
_KINDS = [(kind, re.compile(p, re.IGNORECASE)) for kind, p in _KIND_CUES]
_YEAR = re.compile(r"(?<![\w.,])(1[0-9]{3}|20[0-9]{2})(?![\w,]|\.\d)")
_MONTH = re.compile(r"\b(january|february|march|april|june|july|august|september|october|november|december|"
                    r"январ|феврал|март|апрел|ма[йя]\b|июн|июл|август|сентябр|октябр|ноябр|декабр)", re.IGNORECASE)
_NUMBER = re.compile(r"(?<![\w])\d[\d.,]*")
_NAME_TYPE = {"person": {"person"}, "place": {"location"}}
_MEANING = re.compile(r"\b(mean|means|meaning|indicate|indicates|stand for|signify|означает|означают|значит|"
                      r"обозначает|указывает)\b", re.IGNORECASE)
_CYRILLIC = re.compile(r"[а-яё]", re.IGNORECASE)
_LATIN = re.compile(r"[a-z]", re.IGNORECASE)


def _script(text: str) -> str:
    return "cyrillic" if len(_CYRILLIC.findall(text)) > len(_LATIN.findall(text)) else "latin"


def question_kind(question: str) -> str | None:
    """"date", "number", "person", "place" or None (a "what does X mean" question: any sentence about X)."""
    q = " ".join(question.split())
    return next((kind for kind, cue in _KINDS if cue.search(q)), None)


# --- cross-script names ------------------------------------------------------------------------------

_TRANSLIT = str.maketrans({"а": "a", "б": "b", "в": "v", "г": "g", "д": "d", "е": "e", "ё": "e", "ж": "zh",
                           "з": "z", "и": "i", "й": "j", "к": "k", "л": "l", "м": "m", "н": "n", "о": "o",
                           "п": "p", "р": "r", "с": "s", "т": "t", "у": "u", "ф": "f", "х": "h", "ц": "ts",
                           "ч": "ch", "ш": "sh", "щ": "sch", "ъ": "", "ы": "y", "ь": "", "э": "e", "ю": "yu",
                           "я": "ya"})
_SKELETON_DROP = re.compile(r"[aeiouyjh]")
_WORD = re.compile(r"\w+")


def skeleton(word: str) -> str:
    """A name's consonants after transliteration, with the letters scripts render differently merged:
    Yekaterinburg, Екатеринбург and Екатеринбурге share "ktrnbrg"; Moscow and Москве "mskv"."""
    w = normalise(word).translate(_TRANSLIT).replace("ph", "f").replace("w", "v").replace("c", "k")
    w = w.replace("q", "k").replace("x", "ks")
    w = _SKELETON_DROP.sub("", w)
    return re.sub(r"(.)\1+", r"\1", w)


def _skeletons(text: str) -> frozenset[str]:
    return frozenset(s for w in _WORD.findall(text) if w[:1].isupper() and len(s := skeleton(w)) >= 3)


def _skeleton_match(a: str, b: str) -> bool:
    """Same name across scripts or cases: equal skeletons, or one the other plus an inflection's consonant."""
    if a == b:
        return True
    short, long_ = sorted((a, b), key=len)
    return len(short) >= 4 and long_.startswith(short) and len(long_) - len(short) <= 1


# --- units -------------------------------------------------------------------------------------------

_BLOCK_START = re.compile(r"^\s*(?:[-*+]\s|\d{1,3}[.)]\s|\||#{1,6}\s|>)")
_TABLE_RULE = re.compile(r"^\s*\|?[\s:|-]+\|?\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^\s*#{1,6}\s")
_LIST_MARK = re.compile(r"^\s*(?:[-*+]|\d{1,3}[.)])\s+")
_ANAPHORA = re.compile(r"^\W*(this|that|these|those|it|its|they|their|such|here|there|he|she|his|her|"
                       r"это|этот|эта|эти|он|она|оно|они|его|её|ее|их|там|здесь|такой|такая|такие)\b",
                       re.IGNORECASE)


@dataclass(frozen=True)
class Unit:
    passage: int  # 1-based number of the passage in the prompt order
    block: int  # paragraph, list item or table row within the passage
    position: int  # unit index within the passage
    text: str  # an exact slice of the passage text
    stems: frozenset[str]
    sequence: tuple[str, ...]
    skeletons: frozenset[str]
    names: tuple[tuple[str, str, str], ...]  # (merge key, surface, type) of the names the unit holds
    anaphoric: bool  # starts by referring back ("This is ...")
    header: str = ""  # a table row's header row


def _blocks(text: str) -> list[tuple[str, str]]:
    """The passage's blocks as (exact slice, table header): paragraphs, list items and table rows,
    never a heading, a table's header or rule, or a fenced code block (code is quoted by search, not
    read as sentences). A table row carries its header row, which says what its cells are."""
    blocks: list[tuple[list, str]] = []
    current: list = []
    header, fenced, pos = "", False, 0

    def close() -> None:
        nonlocal current
        if current:
            blocks.append((current, header))
        current = []

    for line in text.splitlines(keepends=True):
        start, pos = pos, pos + len(line)
        stripped = line.strip()
        if _FENCE.match(line):
            fenced = not fenced
            close()
            continue
        if _TABLE_RULE.match(line) and "-" in line and stripped.startswith("|"):
            close()
            if blocks and text[blocks[-1][0][0][0]:blocks[-1][0][-1][1]].lstrip().startswith("|"):
                rows, _ = blocks.pop()  # the row above a rule is the header, not data
                header = text[rows[0][0]:rows[-1][1]]
            continue
        if fenced or not stripped or _HEADING.match(line):
            close()
            header = ""
            continue
        if _BLOCK_START.match(line) and current:
            close()
        if not stripped.startswith("|"):
            header = ""
        current.append((start, start + len(line.rstrip())))
        if stripped.startswith("|"):  # a table row is a block of its own
            close()
    close()
    return [(text[b[0][0]:b[-1][1]], h) for b, h in blocks]


def units(passages: list[Passage]) -> list[Unit]:
    out = []
    for n, p in enumerate(passages, start=1):
        typed = _typed_names(p)
        position = 0
        for b, (block, header) in enumerate(_blocks(p.text or "")):
            parts = [block.strip()] if block.lstrip().startswith("|") else split_sentences(block)
            for part in parts:
                part = part.strip()
                if len(part) < MIN_UNIT_CHARS:
                    continue
                sequence = tuple(content_stems(part))
                folded = normalise(part)
                names = tuple((k, s, t) for k, s, t in typed if normalise(s) in folded)
                out.append(Unit(n, b, position, part, frozenset(sequence) | frozenset(content_stems(header)),
                                sequence, _skeletons(part), names, bool(_ANAPHORA.match(_LIST_MARK.sub("", part))),
                                header))
                position += 1
    return out


def _typed_names(p: Passage) -> list[tuple[str, str, str]]:
    """(key, surface, type) of every name in the passage, its most voted type deciding."""
    return list(_names_of(p.text or "", p.title or "", p.heading or ""))


@lru_cache(maxsize=1024)  # the planner reads the same evidence again each round
def _names_of(text: str, title: str, heading: str) -> tuple[tuple[str, str, str], ...]:
    seen: dict[str, tuple[str, str, str]] = {}
    for mentions in find_mentions(text, title, heading).found:
        for key, surface, votes in mentions:
            if key not in seen:
                kind = max(sorted(votes), key=lambda t: votes[t]) if votes else "concept"
                seen[key] = (key, surface, kind)
    return tuple(seen[k] for k in sorted(seen))


def _cells(row: str) -> list[str]:
    return [c.strip() for c in row.strip().strip("|").split("|")]


def display(u: Unit) -> str:
    """A unit as the answer shows it: one line, without its list marker; a table row as "column: cell"."""
    if u.text.startswith("|"):
        cells = _cells(u.text)
        names = _cells(u.header) if u.header else [""] * len(cells)
        pairs = [f"{h}: {c}" if h else c for h, c in zip(names + [""] * len(cells), cells) if c]
        return "; ".join(" ".join(p.split()) for p in pairs)
    return " ".join(_LIST_MARK.sub("", u.text.strip()).split())


# --- the question against the units ----------------------------------------------------------------

@dataclass
class Focus:
    question: str
    terms: QueryTerms
    kind: str | None
    names: list[str]  # the names the question spells
    name_stems: frozenset[str]
    name_skeletons: dict[str, str]  # name stem -> its skeleton
    question_tokens: frozenset[str]  # lower-cased words of the question: what an answer must add to
    script: str = "latin"
    defines: bool = False  # "what does X mean": the unit that defines X answers

    @classmethod
    def of(cls, question: str) -> "Focus":
        terms = QueryTerms.of(question)
        kind = question_kind(question)
        defines = kind is None and bool(_MEANING.search(question))
        if defines:  # "what does X mean": the form, not the topic
            terms = QueryTerms.of(_MEANING.sub(" ", question))
        # codes and identifiers (ERR_2043, notify_batch_size) are names however they are written
        codes = [s for s in terms.stems if any(c.isdigit() or c == "_" for c in s)]
        names = list(dict.fromkeys([m.text for m in question_mentions(question) if content_stems(m.text)] + codes))
        words = [w for name in names for w in _WORD.findall(name)]
        skeletons = {content_stems(w)[0]: skeleton(w) for w in words if content_stems(w) and len(skeleton(w)) >= 3}
        stems = frozenset(s for name in names for s in content_stems(name))
        return cls(question, terms, kind, names, stems, skeletons,
                   frozenset(normalise(w) for w in _WORD.findall(question)), _script(question), defines)


@dataclass
class Scorer:
    """Scores units for one question over one candidate set (idf is over the candidates)."""
    focus: Focus
    passages: list[Passage]
    all_units: list[Unit]
    idf: dict[str, float] = field(default_factory=dict)
    title_stems: list[frozenset[str]] = field(default_factory=list)
    title_skeletons: list[frozenset[str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.title_stems = [frozenset(content_stems(f"{title_core(p.title)} {p.heading}")) for p in self.passages]
        self.title_skeletons = [_skeletons(f"{title_core(p.title)} {p.heading}") for p in self.passages]
        n = len(self.all_units) or 1
        for s in self.focus.terms.stems:
            df = sum(1 for u in self.all_units if self.matches(s, u.stems, u.skeletons))
            self.idf[s] = math.log(1 + n / (1 + df))

    def weight(self, stem: str) -> float:
        return self.idf.get(stem, 0.0) * (2.0 if stem in self.focus.name_stems else 1.0)

    @property
    def total(self) -> float:
        return sum(self.weight(s) for s in self.focus.terms.stems) or 1.0

    def matches(self, stem: str, stems: frozenset[str], skeletons: frozenset[str]) -> bool:
        if stem in stems:
            return True
        sk = self.focus.name_skeletons.get(stem)
        return bool(sk) and any(_skeleton_match(sk, other) for other in skeletons)

    def covered(self, u: Unit, with_title: bool = True) -> set[str]:
        stems, skeletons = u.stems, u.skeletons
        if with_title:
            stems, skeletons = stems | self.title_stems[u.passage - 1], skeletons | self.title_skeletons[u.passage - 1]
        return {s for s in self.focus.terms.stems if self.matches(s, stems, skeletons)}

    def coverage(self, stems: set[str]) -> float:
        return sum(self.weight(s) for s in stems) / self.total

    def confidence(self, chosen: list[Unit]) -> float:
        """The share of the question the units (and their passages' titles) cover. A unit in the other
        script can match only the question's names (only names survive translation), so there the
        share is of the names."""
        covered = set().union(*(self.covered(u) for u in chosen)) if chosen else set()
        share = self.coverage(covered)
        if self.focus.name_stems and any(_script(u.text) != self.focus.script for u in chosen):
            names = sum(self.weight(s) for s in self.focus.name_stems if s in self.idf)
            share = max(share, sum(self.weight(s) for s in covered & self.focus.name_stems) / (names or 1.0))
        return share

    def typed(self, u: Unit) -> bool:
        """Whether the unit holds a value of the asked type that the question does not already hold."""
        kind = self.focus.kind
        if kind == "date":
            return any(y not in self.focus.question_tokens for y in _YEAR.findall(u.text)) or bool(_MONTH.search(u.text))
        if kind == "number":
            return any(normalise(m.group()).strip(".,") not in self.focus.question_tokens
                       for m in _NUMBER.finditer(u.text))
        if kind in _NAME_TYPE:
            return any(t in _NAME_TYPE[kind] and not self.in_question(s) for _, s, t in u.names)
        return False

    def in_question(self, surface: str) -> bool:
        stems = set(content_stems(surface))
        return bool(stems) and (stems <= self.focus.terms.wanted or any(
            _skeleton_match(sk, skeleton(w)) for w in _WORD.findall(surface) for sk in self.focus.name_skeletons.values()
            if len(skeleton(w)) >= 3))

    def score(self, u: Unit) -> float:
        own = self.covered(u, with_title=False)
        lex = self.coverage(own)
        context = self.coverage(self.covered(u))
        terms = self.focus.terms
        pairs = set(zip(u.sequence, u.sequence[1:]))
        bigram = len(terms.bigrams & pairs) / len(terms.bigrams) if terms.bigrams else 0.0
        # a date or a number is found by pattern; a person or a place by the mention finder's vote,
        # which often misses or mistypes one, so it counts less
        typed = (0.25 if self.focus.kind in _VALUE_KINDS else 0.1) if self.focus.kind and self.typed(u) else 0.0
        return 0.5 * lex + 0.15 * context + 0.1 * bigram + typed + 0.2 * self.about(u) + 0.1 / u.passage

    def about(self, u: Unit) -> bool:
        """For a "what does X mean" question, whether the unit opens with the code X: "`ERR_2043` — the carrier API
        rate limit was hit" defines ERR_2043; "... which the connector reports as `ERR_2043`" does not.
        Only codes: a person or a place opens most sentences of its own article, defining nothing."""
        if not self.focus.defines:
            return False
        opening = set(content_stems(" ".join(_WORD.findall(_LIST_MARK.sub("", u.text))[:4])))
        return any(s in opening for s in self.focus.name_stems if any(c.isdigit() or c == "_" for c in s))


# --- answers -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Picked:
    passage: int
    position: int
    text: str  # the exact unit, as quoted for its citation
    score: float


@dataclass
class Extracted:
    text: str  # "" when nothing in the passages shares the question's words
    picked: list[Picked]
    confidence: float  # 0..1, see MIN_CONFIDENCE
    chain: list[str] = field(default_factory=list)  # a multi-hop answer's entities, question first
    reached: bool = True  # a chain ended at what the question asks for (a place, a person, a date...)

    @property
    def answered(self) -> bool:
        return bool(self.picked) and self.confidence >= MIN_CONFIDENCE


def _cite(units_: list[Unit], scores: dict[int, float]) -> list[Picked]:
    """What each citation quotes: the unit as it stands in the passage, without its list marker."""
    return [Picked(u.passage, u.position, _LIST_MARK.sub("", u.text), round(scores.get(id(u), 0.0), 4))
            for u in units_]


def local_answer(question: str, passages: list[Passage], *, max_units: int = 3, max_chars: int = 700) -> Extracted:
    """The best unit for the question, its block's follow-ups, and units answering what it left open."""
    focus = Focus.of(question)
    every = units(passages)
    if not focus.terms.stems or not every:
        return Extracted("", [], 0.0)
    scorer = Scorer(focus, passages, every)
    candidates = [u for u in every if scorer.covered(u) or (focus.kind and scorer.typed(u))]
    if not candidates:
        return Extracted("", [], 0.0)
    scores = {id(u): scorer.score(u) for u in candidates}
    first = min(candidates, key=lambda u: (-scores[id(u)], u.passage, u.position))
    chosen = _with_block(first, every, max_chars)
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
    chosen.sort(key=lambda u: (u.passage, u.position))
    confidence = scorer.confidence(chosen)
    text = " ".join(f"{display(u)} [{u.passage}]" for u in chosen)
    return Extracted(text, _cite(chosen, scores), round(confidence, 4))


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


BEAM = 3  # candidate hops kept at each step: a plausible first hop may lead nowhere


@dataclass
class _Chain:
    hops: list[tuple[Unit, tuple[str, str, str], float]]
    start: str
    known: frozenset[str]
    used: frozenset[str]
    reached: bool = False

    @property
    def score(self) -> float:
        return sum(s for _, _, s in self.hops)


def chain_answer(question: str, passages: list[Passage], *, max_hops: int = MAX_HOPS) -> Extracted:
    """The chain from the question's named entities to the asked one, one cited unit per hop; the
    local answer when the question names nothing or no unit links its names to anything new.

    A beam search: each chain grows by its BEAM best next hops; the answer is the chain that reached
    what the question asks for (a place, a person, a date) in the fewest hops the question's form
    allows, else the best-scoring one. Ties are broken by passage and unit order."""
    focus = Focus.of(question)
    every = units(passages)
    names = _extend_names(question, focus.names, passages)
    if not names or not every:
        return local_answer(question, passages)
    scorer = Scorer(focus, passages, every)
    relation = [s for s in focus.terms.stems if s not in focus.name_stems]
    subjects = [_subject(p) for p in passages]
    least = min(max_hops, least_hops(question))
    seed = _Chain([], names[0], frozenset(entity_key(n) for n in names), frozenset())
    finished: list[_Chain] = []
    beam = [seed]
    for _ in range(max_hops):
        grown: list[_Chain] = []
        for chain in beam:
            frontier = ([(e[0], e[1]) for _, e, _ in chain.hops[-1:]] or [(entity_key(n), n) for n in names])
            steps = _next_hops(chain, frontier, every, subjects, scorer, relation, focus, least)
            for score, u, entity, linked in steps[:BEAM]:
                hop = _Chain(chain.hops + [(u, entity, score)], chain.start if chain.hops else linked,
                             chain.known | {k for k, _, _ in _entities(u, subjects[u.passage - 1])},
                             chain.used | _related(relation, u.stems))
                hop.reached = len(hop.hops) >= least and (entity[2] == "value" or _is_wanted(entity, focus.kind))
                (finished if hop.reached else grown).append(hop)
        finished += [c for c in beam if c.hops and c not in finished]
        beam = sorted(grown, key=lambda c: -c.score)[:BEAM]
        if not beam:
            break
    finished += beam
    if not finished:
        return local_answer(question, passages)
    best = min(finished, key=lambda c: (not c.reached, -c.score / len(c.hops) if c.reached else -c.score,
                                        [(u.passage, u.position) for u, _, _ in c.hops]))
    hops = best.hops
    chain = [best.start, *(e[1] for _, e, _ in hops)]
    # a chain that reached the asked type through as many hops as the question's form needs was
    # checked link by link; otherwise it is as sure as the share of the question its hops cover
    confidence = 1.0 if best.reached and len(hops) >= least else scorer.confidence([u for u, _, _ in hops])
    steps_text = " ".join(f"{display(u)} [{u.passage}]" for u, _, _ in hops)
    text = f"{chain[-1]}. {_chain_label(question)}: {' -> '.join(chain)}. {steps_text}"
    scores = {id(u): s for u, _, s in hops}
    return Extracted(text, _cite([u for u, _, _ in hops], scores), round(confidence, 4), chain,
                     best.reached or focus.kind not in _NAME_TYPE and focus.kind not in _VALUE_KINDS)


def _next_hops(chain: _Chain, frontier, every: list[Unit], subjects, scorer: Scorer, relation: list[str],
               focus: Focus, least: int) -> list[tuple[float, Unit, tuple[str, str, str], str]]:
    """(score, unit, entity it leads to, the frontier name it links) for every unit that links the
    chain's last entity to a new one, best first."""
    taken = {id(u) for u, _, _ in chain.hops}
    out = []
    for u in every:
        if id(u) in taken:
            continue
        subject = subjects[u.passage - 1]
        link = _links(u, subject, frontier, scorer)
        if not link:
            continue
        value = bool(chain.hops) and focus.kind in _VALUE_KINDS and scorer.typed(u)
        fresh = [e for e in _entities(u, subject) if e[0] not in chain.known and not scorer.in_question(e[1])
                 and not _alias(u.text, e[1])]
        if not fresh and not value:
            continue
        # each hop states a relation of its own: words an earlier hop stated count no more
        own = _related(relation, u.stems) - chain.used
        heading = _related(relation, scorer.title_stems[u.passage - 1]) - chain.used - own
        # what the unit itself states counts fully, what its title or heading says half
        rel = sum(scorer.weight(s) for s in own) + 0.5 * sum(scorer.weight(s) for s in heading)
        rel /= sum(scorer.weight(s) for s in relation) or 1.0
        # the asked type ends the chain only once the question's relations have had their hops
        final = len(chain.hops) + 1 >= least
        wanted = sorted((e for e in fresh if _is_wanted(e, focus.kind)), key=lambda e: e is not subject) \
            if final else []  # the page's own subject first: the Berlin office page answers "Berlin"
        if value and final:  # a date or a number ends the chain; never on the first hop
            wanted = [(f"value:{u.passage}:{u.position}", _value(u, scorer), "value")]
        if not own and not wanted and not (link[0] == "text" and any(e[2] in _BRIDGE_TYPES for e in fresh)):
            # a bridge states one of the question's relations, or at least names the current entity
            # next to a person, team, service or place ("led by" is no stem of "lead")
            continue
        score = rel + (0.3 if wanted else 0.0) + (0.05 if link[0] == "text" else 0.0) + 0.05 / u.passage
        out.append((score, u, wanted[0] if wanted else _bridge(fresh, subject, link, u.text), link[1]))
    out.sort(key=lambda x: (-x[0], x[1].passage, x[1].position))
    return out


def _extend_names(question: str, names: list[str], passages: list[Passage]) -> list[str]:
    """A question's names, each extended by the words after it while a passage title still names the
    longer phrase: Russian names go on in lower case ("Сервис уведомлений"), which capitals miss."""
    titles = [frozenset(content_stems(title_core(p.title))) for p in passages if p.title]
    out = []
    for name in names:
        at = question.find(name)
        rest = _WORD.findall(question[at + len(name):]) if at >= 0 else []
        for extra in range(1, 3):
            longer = " ".join([name, *rest[:extra]])
            want = set(content_stems(longer))
            if len(rest) < extra or len(want) <= len(set(content_stems(name))) or not any(want <= t for t in titles):
                break
            name = longer
        out.append(name)
    return out


_BRIDGE_TYPES = ("person", "team", "organization", "service", "location")
# Each relative clause or possessive links one more entity: "the lead of the team that owns X" is
# X -> team -> lead -> the asked office, at least three hops.
_RELATIVE = re.compile(r"(?<=\w)\s*,?\s+(that|which|who|whom|whose|where)\b|'s\b|’s\b|\bof the\b|"
                       r"\b(котор\w+|чей|чья|чьё|чьи|где)\b", re.IGNORECASE)


def least_hops(question: str) -> int:
    """The fewest hops the question's form allows: one, plus one per relative clause or possessive."""
    words = list(_WORD.finditer(question))
    opening = words[1].end() if len(words) > 1 else 0  # "In which office ...": the question's own word
    return 1 + sum(1 for m in _RELATIVE.finditer(question) if m.start() >= opening)


def _related(relation: list[str], stems: frozenset[str]) -> set[str]:
    """The relation stems a text holds, a stem also matching a word it begins with a suffix of at
    most two letters (four in Russian, whose agent suffixes are longer), which Snowball leaves on agent
    nouns (own / owner, руковод / руководител)."""
    return {r for r in relation if r in stems or (len(r) >= 3 and any(
        s.startswith(r) and len(s) - len(r) <= (4 if _CYRILLIC.match(r) else 2) for s in stems))}


def _bridge(fresh: list, subject, link: tuple[str, str], text: str) -> tuple[str, str, str]:
    """The entity a hop leads to: the passage's subject when the unit names the current entity (the
    Billing team's page listing the Payments Gateway leads to the Billing team) unless the subject is
    a mere topic and the unit names a team, person, service or place; else the unit's typed name
    nearest to the current entity ("команда Маршрутизации для Оптимизатора маршрутов или команда
    Billing для Платёжного шлюза": the first), else its nearest name that is not a code."""
    typed = [e for e in fresh if e[2] in _BRIDGE_TYPES and e is not subject]
    if link[0] == "text" and subject in fresh and (subject[2] in _BRIDGE_TYPES or not typed):
        return subject
    folded = normalise(text)
    anchor = _position(folded, link[1])
    anchor_end = anchor + len(link[1])

    def distance(e) -> int:  # the gap between the two names, whichever comes first
        at = folded.find(normalise(e[1]))
        if at < 0 or anchor < 0:
            return len(folded)
        return max(0, anchor - (at + len(e[1])), at - anchor_end)

    others = [e for e in fresh if e[2] != "code" and e is not subject]
    return min(typed or others or fresh, key=lambda e: (distance(e), e[0]))


def _position(folded: str, name: str) -> int:
    """Where the unit names `name` (by its first word's stem when inflected), -1 if it does not."""
    at = folded.find(normalise(name))
    if at < 0 and _WORD.findall(name):
        word = content_stems(_WORD.findall(name)[0])
        at = folded.find(word[0]) if word else -1
    return at


def _alias(text: str, name: str) -> bool:
    """A name in brackets right after another one is that one's other name: "Команда Маршрутизации
    (Routing team)" names one team, so the bracketed name leads nowhere new."""
    return bool(re.search(r"[\w*»\"'`]\s*\(\s*" + re.escape(name) + r"\b", text))


def _chain_label(question: str) -> str:
    return "Цепочка" if detect_language(question) == "russian" else "Chain"


def _subject(p: Passage) -> tuple[str, str, str] | None:
    """The entity a passage is about: its title, typed as the passage's own names type it."""
    title = title_core(p.title)
    if not title:
        return None
    key = entity_key(title)
    typed = {k: t for k, _, t in _typed_names(p)}
    kind = typed.get(key) or next((t for k, t in typed.items() if k and (k in key or key in k)), "concept")
    if any(w in normalise(title) for w in ("office", "офис")):
        kind = "location"  # an office page is about a place
    return key, title, kind


def _entities(u: Unit, subject) -> list[tuple[str, str, str]]:
    out = list(u.names)
    if subject and subject[0] not in {k for k, _, _ in out}:
        out.append(subject)
    return out


def _links(u: Unit, subject, frontier, scorer: Scorer) -> tuple[str, str] | None:
    """("text", name) when the unit names a frontier entity, ("subject", name) when its passage is about one."""
    for key, name in frontier:
        if _names(name, u.text, u.stems, u.skeletons, scorer):
            return "text", name
        if subject and (subject[0] == key or _names(name, subject[1], frozenset(content_stems(subject[1])),
                                                      _skeletons(subject[1]), scorer)):
            return "subject", name
    return None


def _names(name: str, text: str, stems: frozenset[str], skeletons: frozenset[str], scorer: Scorer) -> bool:
    """Whether `text` names `name`: the same merge key inside, all its content stems, or (across
    scripts) the skeletons of its capitalised words."""
    if entity_key(name) and entity_key(name) in entity_key(text):
        return True
    want = set(content_stems(name))
    if want and want <= stems:
        return True
    name_sk = [skeleton(w) for w in _WORD.findall(name) if w[:1].isupper() and len(skeleton(w)) >= 3]
    return bool(name_sk) and all(any(_skeleton_match(a, b) for b in skeletons) for a in name_sk)


_VALUE_KINDS = ("date", "number")


def _value(u: Unit, scorer: Scorer) -> str:
    """The first value of the asked type in the unit that the question does not hold."""
    pattern = _YEAR if scorer.focus.kind == "date" else _NUMBER
    for m in pattern.finditer(u.text):
        if normalise(m.group()).strip(".,") not in scorer.focus.question_tokens:
            return m.group().strip(".,")
    return display(u)


def _is_wanted(entity: tuple[str, str, str], kind: str | None) -> bool:
    return kind in _NAME_TYPE and entity[2] in _NAME_TYPE[kind]


def offline_answer(question: str, passages: list[Passage], *, multihop: bool = False,
                   sides: list[str] | None = None, follow_ups: list[str] = ()) -> Extracted:
    """The route's offline answer: a comparison (`sides`: one query per compared entity) answers each
    side; a multi-hop question states its chain first, then the units that answer the question's own
    words and the loop's later queries (`follow_ups`: "Billing team lead"), since a chain through
    unfamiliar text may miss a hop the plain evidence holds; any other question gets the local answer."""
    if sides:
        return _joined([local_answer(q, passages, max_units=2) for q in sides])
    if not multihop:
        return local_answer(question, passages)
    chain = chain_answer(question, passages)
    if not chain.chain:
        return chain
    support = [local_answer(question, passages)] + [local_answer(q, passages, max_units=1) for q in follow_ups[:2]]
    seen = {(p.passage, p.position) for p in chain.picked}
    extra = [p for answer in support for p in answer.picked if (p.passage, p.position) not in seen
             and not seen.add((p.passage, p.position))]
    if not extra:
        return chain
    units_by = {(u.passage, u.position): u for u in units(passages)}
    text = chain.text + " " + " ".join(f"{display(units_by[(p.passage, p.position)])} [{p.passage}]" for p in extra)
    return Extracted(text, chain.picked + extra, max(chain.confidence, support[0].confidence), chain.chain,
                     chain.reached)


def _joined(answers: list[Extracted]) -> Extracted:
    picked, seen = [], set()
    for answer in answers:
        for p in answer.picked:
            if (p.passage, p.position) not in seen:
                seen.add((p.passage, p.position))
                picked.append(p)
    text = " ".join(answer.text for answer in answers if answer.text)
    return Extracted(text, picked, min(answer.confidence for answer in answers))
