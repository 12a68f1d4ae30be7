"""What the offline answers are made of: the passages cut into units that never cross a list item,
table row, heading or paragraph, and what an extracted answer is. The question against the units:
answers/unit_scoring.py. The answers themselves: answers/local.py, answers/chain/answer.py
(multi-hop) and answers/extractive.py (which one answers); the rules in extractive.py's docstring.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

from core.sentences import split_sentences
from core.text.markdown import LIST_MARK
from core.text.mentions import find_mentions
from core.text.names import entity_key as _entity_key
from core.text.skeletons import skeletons
from core.text.terms import content_stems, normalise
from answers.types import Passage

MIN_UNIT_CHARS = 12
# merge keys of unit texts and names: a chain search asks for the same ones many times over
entity_key = lru_cache(maxsize=8192)(_entity_key)
# Below this share of the question (rarity-weighted words, names twice) found in the answering
# units or their passages' titles, the passages are about something else. The rule that sets it:
# the highest value that withholds at most 5% of the right answers on the dev sets, rounded down to
# one decimal (measured: 0.22-0.26 leave-one-dataset-out over xquad_ru, multihop and the fixtures,
# 0.25 over all); bench/answer_eval.py reports it leave-one-dataset-out.
MIN_CONFIDENCE = 0.2



# --- units -------------------------------------------------------------------------------------------

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


def units(passages: list[Passage]) -> list[Unit]:
    out = []
    for n, p in enumerate(passages, start=1):
        typed = typed_names(p)
        position = 0
        text = p.text or ""
        for b, read in enumerate(p.reading_blocks()):
            block, header = text[read.start:read.end], text[read.header[0]:read.header[1]]
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
    return bool(_ANAPHORA.match(LIST_MARK.sub("", part)) or _PRONOUN_CLOSES.search(part))


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
    return " ".join(LIST_MARK.sub("", u.text.strip()).split())


# --- answers -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Picked:
    passage: int
    position: int
    text: str  # the exact unit, as quoted for its citation
    score: float
    reading: str = ""  # the unit as a reader takes it (display): a table row with its header, "column: cell; ..."


@dataclass
class Extracted:
    text: str  # "" when nothing in the passages shares the question's words
    picked: list[Picked]
    confidence: float  # 0..1, see MIN_CONFIDENCE
    chain: list[str] = field(default_factory=list)  # a multi-hop answer's entities, question first
    reached: bool = True  # a chain ended at what the question asks for (a place, a person, a date...)
    # a chain that stops at an entity a step of the question found: what is still to be asked of it
    # ("Hannah Vogt is based in which office?"), the next search from there
    still_open: str = ""
    # the confidence below which the passages do not answer: MIN_CONFIDENCE for the scorer's share of
    # the question, the learned reader's own for its calibrated probability (answers/reader.py)
    threshold: float = MIN_CONFIDENCE
    logit: float | None = None  # the learned reader's answer logit, when it chose the answering unit
    # an answer chosen by meaning in the other language's passages: its unit's cosine to the question, the
    # share of the question its units cover (across scripts: of the question's names), and the share they
    # cover with the question's words found in the other language too (core/text/lexicon)
    closeness: float | None = None
    named: float | None = None
    worded: float | None = None
    row: object = None  # and the answer model's input (for bench/train_reader.py)
    # the question's words, besides its names, that the answering unit's page never says: why it is none
    unsaid: tuple[str, ...] = ()

    @property
    def answered(self) -> bool:
        return bool(self.picked) and self.confidence >= self.threshold


def cite(units_: list[Unit], scores: dict[int, float]) -> list[Picked]:
    """What each citation quotes: the unit as it stands in the passage, without its list marker."""
    return [Picked(u.passage, u.position, LIST_MARK.sub("", u.text), round(scores.get(id(u), 0.0), 4), display(u))
            for u in units_]


