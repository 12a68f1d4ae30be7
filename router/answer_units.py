"""What the offline answers are made of: the question's focus (its type: router/answer_types.py), the
passages cut into units that never cross a list item, table row, heading or paragraph, the scoring of
units against the question, and what an extracted answer is. The answers themselves:
router/local_answer.py, router/chain_answer.py (multi-hop) and router/extractive.py (which one
answers); the rules in extractive.py's docstring.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import lru_cache

from core.sentences import split_sentences
from core.text.mentions import find_mentions
from core.text.names import entity_key as _entity_key
from core.text.script import LATIN_SPELLING, mostly_cyrillic
from core.text.terms import QueryTerms, content_stems, normalise
from router.answer_types import (MONEY, MONTH, NAME_TYPE, NUMBER, NUMERAL, VALUE_KINDS, YEAR, counted, counts,
                                 question_kind)
from router.question_text import question_mentions, title_core
from router.types import Passage

MIN_UNIT_CHARS = 12
# A number counting what a "how many X" question counts adds as much again as holding a number at all
# (the typed weight of a value, 0.25): it is the answer's form, not a word the question shares.
COUNTED = 0.25
# merge keys of unit texts and names: a chain search asks for the same ones many times over
entity_key = lru_cache(maxsize=8192)(_entity_key)
# Below this share of the question (rarity-weighted words, names twice) found in the answering
# units or their passages' titles, the passages are about something else. The rule that sets it:
# the highest value that withholds at most 5% of the right answers on the dev sets, rounded down to
# one decimal (measured: 0.22-0.26 leave-one-dataset-out over xquad_ru, multihop and the fixtures,
# 0.25 over all); bench/answer_eval.py reports it leave-one-dataset-out.
MIN_CONFIDENCE = 0.2

_MEANING = re.compile(r"\b(mean|means|meaning|indicate|indicates|stand for|signify|означает|означают|значит|"
                      r"обозначает|указывает)\b", re.IGNORECASE)
CYRILLIC = re.compile(r"[а-яё]", re.IGNORECASE)
_LETTER = re.compile(r"[^\W\d_]")  # an identifier has a letter: a bare number or year is a value, not a name


def _script(text: str) -> str:
    return "cyrillic" if mostly_cyrillic(text) else "latin"


# --- cross-script names ------------------------------------------------------------------------------

_SKELETON_DROP = re.compile(r"[aeiouyjh]")
WORD = re.compile(r"\w+")


def skeleton(word: str) -> str:
    """A name's consonants after transliteration, with the letters scripts render differently merged:
    Yekaterinburg, Екатеринбург and Екатеринбурге share "ktrnbrg"; Moscow and Москве "mskv"."""
    w = normalise(word).translate(LATIN_SPELLING).replace("ph", "f").replace("w", "v").replace("c", "k")
    w = w.replace("q", "k").replace("x", "ks")
    w = _SKELETON_DROP.sub("", w)
    return re.sub(r"(.)\1+", r"\1", w)


def skeletons(text: str) -> frozenset[str]:
    return frozenset(s for w in WORD.findall(text) if w[:1].isupper() and len(s := skeleton(w)) >= 3)


def skeleton_match(a: str, b: str) -> bool:
    """Same name across scripts or cases: equal skeletons, or one the other plus an inflection's consonant."""
    if a == b:
        return True
    short, long_ = sorted((a, b), key=len)
    return len(short) >= 4 and long_.startswith(short) and len(long_) - len(short) <= 1


def same_word(a: str, b: str) -> bool:
    """Two stems of one word that Snowball cut at different places: the shorter (at least five letters)
    begins the longer, which adds at most two letters (three in Russian): directed / director,
    объединилось / объединению ("объедин" / "объединен"). Short stems never match this way."""
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    return (len(short) >= 5 and long_.startswith(short)
            and len(long_) - len(short) <= (3 if CYRILLIC.match(short) else 2))


# --- units -------------------------------------------------------------------------------------------

_BLOCK_START = re.compile(r"^\s*(?:[-*+]\s|\d{1,3}[.)]\s|\||#{1,6}\s|>)")
_TABLE_RULE = re.compile(r"^\s*\|?[\s:|-]+\|?\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^\s*#{1,6}\s")
_LIST_MARK = re.compile(r"^\s*(?:[-*+]|\d{1,3}[.)])\s+")
_ANAPHORA = re.compile(r"^\W*(this|that|these|those|it|its|they|their|such|here|there|he|she|his|her|"
                       r"это|этот|эта|эти|он|она|оно|они|его|её|ее|их|там|здесь|такой|такая|такие)\b",
                       re.IGNORECASE)
# A demonstrative with no noun after it, closing a clause, stands for what was said before: "... tried
# to do this.", "... пытался сделать это." (one before a noun, "this rule", may name its own referent)
_PRONOUN_CLOSES = re.compile(r"\b(this|that|these|those|это|этого|этому|этим|этом)\s*[.!?;]", re.IGNORECASE)


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
    anaphoric: bool  # refers back: starts so ("This is ...") or closes a clause on a pronoun ("... did this.")
    header: str = ""  # a table row's header row

    @property
    def cut(self) -> bool:
        """The passage's first unit begins mid-sentence (a lower-case word, no list marker): the chunk
        cut off its start, so it reads as a fragment ("where A is the area ...")."""
        return self.position == 0 and self.text[:1].islower()


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
        typed = typed_names(p)
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
                                sequence, skeletons(part), names, _refers_back(part),
                                header))
                position += 1
    return out


def _refers_back(part: str) -> bool:
    return bool(_ANAPHORA.match(_LIST_MARK.sub("", part)) or _PRONOUN_CLOSES.search(part))


def typed_names(p: Passage) -> list[tuple[str, str, str]]:
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
    counted: frozenset[str] = frozenset()  # what a "how many" question counts (answer_types.counted)

    @property
    def identifiers(self) -> list[re.Pattern]:
        """The question's rare tokens (core.text.terms.QueryTerms.rare) that hold a letter: codes and
        identifiers, not bare numbers. Each pattern is the escaped token between two word boundaries."""
        return [p for p in self.terms.rare if _LETTER.search(p.pattern[len(r"(?<!\w)"):-len(r"(?!\w)")])]

    @classmethod
    def of(cls, question: str, kind: str | None = None) -> "Focus":
        """`kind`: the answer type when the caller knows it better than `question` says (a comparison's
        side is asked as "<side> <attribute>", which has lost the question's "how long")."""
        terms = QueryTerms.of(question)
        kind = kind or question_kind(question)
        defines = kind is None and bool(_MEANING.search(question))
        if defines:  # "what does X mean": the form, not the topic
            terms = QueryTerms.of(_MEANING.sub(" ", question))
        # codes and identifiers (ERR_2043, notify_batch_size) are names however they are written
        codes = [s for s in terms.stems if any(c.isdigit() or c == "_" for c in s)]
        names = list(dict.fromkeys([m.text for m in question_mentions(question) if content_stems(m.text)] + codes))
        words = [w for name in names for w in WORD.findall(name)]
        skeletons = {content_stems(w)[0]: skeleton(w) for w in words if content_stems(w) and len(skeleton(w)) >= 3}
        stems = frozenset(s for name in names for s in content_stems(name))
        return cls(question, terms, kind, names, stems, skeletons,
                   frozenset(normalise(w) for w in WORD.findall(question)), _script(question), defines,
                   counted(question) if kind == "number" else frozenset())


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
        self.title_skeletons = [skeletons(f"{title_core(p.title)} {p.heading}") for p in self.passages]
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
        if stem in stems or any(same_word(stem, other) for other in stems):
            return True
        sk = self.focus.name_skeletons.get(stem)
        return bool(sk) and any(skeleton_match(sk, other) for other in skeletons)

    def covered(self, u: Unit, with_title: bool = True) -> set[str]:
        stems, skeletons = u.stems, u.skeletons
        if with_title:
            stems, skeletons = stems | self.title_stems[u.passage - 1], skeletons | self.title_skeletons[u.passage - 1]
        return {s for s in self.focus.terms.stems if self.matches(s, stems, skeletons)}

    def coverage(self, stems: set[str]) -> float:
        return sum(self.weight(s) for s in stems) / self.total

    def confidence(self, chosen: list[Unit]) -> float:
        """The share of the question the units (and their passages' titles) cover. The names the question
        spells count as covered when the units' own documents name them elsewhere among the passages: a
        document about `RouteOptimizerClient.plan()` answers its limits in a sentence that does not repeat
        the name. An identifier the question spells (L4, ERR_2043, v4.3) that those documents never hold
        means they are about something else: no confidence. A unit in the other script can match only
        the question's names (only names survive translation), so there the share is of the names."""
        if not chosen:
            return 0.0
        documents = {self.passages[u.passage - 1].doc_id for u in chosen}
        around = [u for u in self.all_units if self.passages[u.passage - 1].doc_id in documents]
        text = normalise(" ".join(f"{p.title or ''} {p.heading or ''} {p.text or ''}" for p in self.passages
                                  if p.doc_id in documents))
        if any(not pattern.search(text) for pattern in self.focus.identifiers):
            return 0.0
        covered = set().union(*(self.covered(u) for u in chosen), *(
            self.covered(u) & self.focus.name_stems for u in around))
        share = self.coverage(covered)
        if self.focus.name_stems and any(_script(u.text) != self.focus.script for u in chosen):
            names = sum(self.weight(s) for s in self.focus.name_stems if s in self.idf)
            share = max(share, sum(self.weight(s) for s in covered & self.focus.name_stems) / (names or 1.0))
        return share

    def typed(self, u: Unit) -> bool:
        """Whether the unit holds a value of the asked type that the question does not already hold."""
        kind = self.focus.kind
        if kind == "date":
            return any(y not in self.focus.question_tokens for y in YEAR.findall(u.text)) or bool(MONTH.search(u.text))
        if kind == "money":
            return bool(MONEY.search(u.text))
        if kind == "number":
            return any(normalise(m.group()).strip(".,") not in self.focus.question_tokens
                       for pattern in (NUMBER, NUMERAL) for m in pattern.finditer(u.text))
        if kind in NAME_TYPE:
            return any(t in NAME_TYPE[kind] and not self.in_question(s) for _, s, t in u.names)
        return False

    def in_question(self, surface: str) -> bool:
        """Whether the question already names `surface`: each of its words is a question word or, across
        scripts, a question name's skeleton ("Екатеринбурге" for "Yekaterinburg"); a word of the
        question's own script that it lacks makes another name ("Iron Maiden" is not "Maiden Japan")."""
        stems = set(content_stems(surface))
        if not stems:
            return False
        if stems <= self.focus.terms.wanted:
            return True
        matched = False
        for w in WORD.findall(surface):
            word_stems = set(content_stems(w))
            if not word_stems or word_stems <= self.focus.terms.wanted:
                matched = matched or bool(word_stems)
            elif len(skeleton(w)) >= 3 and any(skeleton_match(sk, skeleton(w))
                                               for sk in self.focus.name_skeletons.values()):
                matched = True
            elif _script(w) == self.focus.script:
                return False
        return matched

    def score(self, u: Unit) -> float:
        own = self.covered(u, with_title=False)
        lex = self.coverage(own)
        context = self.coverage(self.covered(u))
        terms = self.focus.terms
        pairs = set(zip(u.sequence, u.sequence[1:]))
        bigram = len(terms.bigrams & pairs) / len(terms.bigrams) if terms.bigrams else 0.0
        # a date or a number is found by pattern; a person or a place by the mention finder's vote,
        # which often misses or mistypes one, so it counts less
        typed = (0.25 if self.focus.kind in VALUE_KINDS else 0.1) if self.focus.kind and self.typed(u) else 0.0
        # "how many countries": a number right before "countries" is the count asked for, not any number
        typed += COUNTED * counts(u.text, self.focus.counted, self.focus.question_tokens)
        return 0.5 * lex + 0.15 * context + 0.1 * bigram + typed + 0.2 * self.about(u) + 0.1 / u.passage

    def about(self, u: Unit) -> bool:
        """For a "what does X mean" question, whether the unit opens with the code X: "`ERR_2043` — the carrier API
        rate limit was hit" defines ERR_2043; "... which the connector reports as `ERR_2043`" does not.
        Only codes: a person or a place opens most sentences of its own article, defining nothing."""
        if not self.focus.defines:
            return False
        opening = set(content_stems(" ".join(WORD.findall(_LIST_MARK.sub("", u.text))[:4])))
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


def cite(units_: list[Unit], scores: dict[int, float]) -> list[Picked]:
    """What each citation quotes: the unit as it stands in the passage, without its list marker."""
    return [Picked(u.passage, u.position, _LIST_MARK.sub("", u.text), round(scores.get(id(u), 0.0), 4))
            for u in units_]


