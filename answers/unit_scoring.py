"""The question against the units of the passages (answers/units.py): its focus (what it asks
for: its type from answers/expected_type.py, its names, whether it asks what a code means) and the
scoring of each unit and of a set of units (the confidence an answer is shown with)."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import cached_property

from core.text.lexicon import translated_in
from core.text.script import script_name
from core.text.skeletons import same_word, skeleton, skeleton_match, skeletons
from core.text.terms import QueryTerms, content_stems, normalise, stem
from answers.expected_type import ERA, FORMS, MONTH, NAME_TYPE, VALUE_KINDS, YEAR, counts, quantities
from answers.units import Unit
from core.text.markdown import LIST_MARK
from core.text.tokens import LETTER, WORD
from answers.question import Question
from answers.question_text import title_core
from answers.types import Passage

# A number counting what a "how many X" question counts adds as much again as holding a number at all
# (the typed weight of a value, 0.25): it is the answer's form, not a word the question shares.
COUNTED = 0.25


@dataclass
class Focus:
    terms: QueryTerms
    kind: str | None
    names: list[str]  # the names the question spells
    name_stems: frozenset[str]
    name_skeletons: dict[str, str]  # name stem -> its skeleton
    tokens: tuple[str, ...]  # the question's words as written, in order (Question.tokens)
    script: str = "latin"
    defines: bool = False  # "what does X mean": the unit that defines X answers
    counted: frozenset[str] = frozenset()  # what a "how many" question counts (answer_types.counted)

    @cached_property
    def question_tokens(self) -> frozenset[str]:
        """The question's words, lower-cased: what an answer must add to."""
        return frozenset(normalise(w) for w in self.tokens)

    @cached_property  # read by every confidence: compiled once per focus
    def identifiers(self) -> list[re.Pattern]:
        """The question's rare tokens (core.text.terms.QueryTerms.rare) that hold a letter: codes and
        identifiers, not bare numbers. Each pattern is the token between two word boundaries; a Russian word
        that opens it is matched in any case form ("Аполлона-1" is "Аполлон-1" in the nominative)."""
        tokens = [p.pattern[len(r"(?<!\w)"):-len(r"(?!\w)")] for p in self.terms.rare]
        return [re.compile(r"(?<!\w)" + _any_case(t) + r"(?!\w)") for t in tokens if LETTER.search(t)]

    @classmethod
    def of(cls, question: Question, kind: str | None = None, passages: list[Passage] = ()) -> "Focus":
        """`kind`: the answer type when the caller knows it better than `question` says (a comparison's
        side is asked as "<side> <attribute>", which has lost the question's "how long"); `passages`: what
        tells a word that opens the question from a name (`common_word`). Reads the parts `question` has
        parsed, so a second focus of one question parses nothing again."""
        terms = question.terms
        kind = kind or question.expected_type
        defines = kind is None and question.asks_meaning
        if defines:  # "what does X mean": the form, not the topic
            terms = question.terms_without_meaning
        # codes and identifiers (ERR_2043, notify_batch_size) are names however they are written
        codes = [s for s in terms.stems if any(c.isdigit() or c == "_" for c in s)]
        names = list(dict.fromkeys([m.text for m in question.names if content_stems(m.text) and (
            m.text not in question.openers or not common_word(m.text, passages))] + codes))
        words = [w for name in names for w in WORD.findall(name)]
        skeletons = {content_stems(w)[0]: skeleton(w) for w in words if content_stems(w) and len(skeleton(w)) >= 3}
        stems = frozenset(s for name in names for s in content_stems(name))
        return cls(terms, kind, names, stems, skeletons, question.tokens, question.script,
                   defines, question.counted if kind == "number" else frozenset())


    def in_question(self, surface: str) -> bool:
        """Whether the question already names `surface`: each of its words is a question word or, across
        scripts, a question name's skeleton ("Екатеринбурге" for "Yekaterinburg"); a word of the
        question's own script that it lacks makes another name ("Iron Maiden" is not "Maiden Japan")."""
        stems = set(content_stems(surface))
        if not stems:
            return False
        if stems <= self.terms.wanted:
            return True
        matched = False
        for w in WORD.findall(surface):
            word_stems = set(content_stems(w))
            if not word_stems or word_stems <= self.terms.wanted:
                matched = matched or bool(word_stems)
            elif len(skeleton(w)) >= 3 and any(skeleton_match(sk, skeleton(w))
                                               for sk in self.name_skeletons.values()):
                matched = True
            elif script_name(w) == self.script:
                return False
        return matched


def _any_case(escaped: str) -> str:
    """An escaped identifier's pattern with its opening Russian word's case ending left open."""
    word, hyphen, rest = escaped.partition("\\-")
    if not hyphen or len(word) < 3 or not word.isalpha() or script_name(word) != "cyrillic":
        return escaped
    return f"{re.escape(stem(word))}[а-яё]{{0,3}}{hyphen}{rest}"


def _same_page(a: Passage, b: Passage) -> bool:
    return a.doc_id == b.doc_id or bool(a.title) and a.title == b.title


def common_word(word: str, passages: list[Passage]) -> bool:
    """Whether the passages read `word` as a common word: one writes it (its stem) in lower case and none
    writes it capitalised after another word of its sentence, where only a name is ("led by Rhiwallon").
    A word they do not hold at all stays a name: "Kazan" may be spelt "Казани" there."""
    target = stem(normalise(word))
    inside = re.compile(rf"[\w,;)»][^\S\n]+{re.escape(word)}(?!\w)")
    lower = any(w[:1].islower() and stem(normalise(w)) == target for p in passages for w in WORD.findall(p.text))
    return lower and not any(inside.search(p.text) for p in passages)


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

    def matches(self, stem: str, stems: frozenset[str], skeletons: frozenset[str], translated: bool = True) -> bool:
        """Whether `stems` (a unit's) hold the question's `stem`: the same word, or a name by its consonants,
        or (`translated`) the word in the other language (core/text/lexicon)."""
        if stem in stems or any(same_word(stem, other) for other in stems):
            return True
        if translated and translated_in(stem, stems):
            return True
        sk = self.focus.name_skeletons.get(stem)
        return bool(sk) and any(skeleton_match(sk, other) for other in skeletons)

    def covered(self, u: Unit, with_title: bool = True, translated: bool = True) -> set[str]:
        stems, skeletons = u.stems, u.skeletons
        if with_title:
            stems, skeletons = stems | self.title_stems[u.passage - 1], skeletons | self.title_skeletons[u.passage - 1]
        return {s for s in self.focus.terms.stems if self.matches(s, stems, skeletons, translated)}

    def coverage(self, stems: set[str]) -> float:
        # summed exactly: a set's order changes with the interpreter's hash seed, and a rounding that
        # follows it would break ties between equal units differently from one run to the next
        return math.fsum(self.weight(s) for s in stems) / self.total

    def confidence(self, chosen: list[Unit], translated: bool = False) -> float:
        """The share of the question the units (and their passages' titles) cover. The names the question
        spells count as covered when the units' own documents name them elsewhere among the passages: a
        document about `RouteOptimizerClient.plan()` answers its limits in a sentence that does not repeat
        the name. An identifier the question spells (L4, ERR_2043, v4.3) that those documents never hold
        means they are about something else: no confidence. A unit in the other script can match only
        the question's names (only names survive transliteration), so there the share is of the names.
        `translated`: the question's words count in the other language too (core/text/lexicon); off for the
        confidence an answer is shown with: a dictionary of one sense per word finds the question's words in
        a page about something else too often to vouch for it alone (answers/other_language_gate.py weighs
        that share as one piece of evidence)."""
        if not chosen:
            return 0.0
        # their pages: a document, or every document under its title (`_same_page`)
        documents = {p.doc_id for p in self.passages
                     if any(_same_page(p, self.passages[u.passage - 1]) for u in chosen)}
        around = [u for u in self.all_units if self.passages[u.passage - 1].doc_id in documents]
        text = normalise(" ".join(f"{p.title or ''} {p.heading or ''} {p.text or ''}" for p in self.passages
                                  if p.doc_id in documents))
        if any(not pattern.search(text) for pattern in self.focus.identifiers):
            return 0.0
        covered = set().union(*(self.covered(u, translated=translated) for u in chosen), *(
            self.covered(u, translated=translated) & self.focus.name_stems for u in around))
        share = self.coverage(covered)
        if self.focus.name_stems and any(script_name(u.text) != self.focus.script for u in chosen):
            names = math.fsum(self.weight(s) for s in self.focus.name_stems if s in self.idf)
            share = max(share, math.fsum(self.weight(s) for s in covered & self.focus.name_stems) / (names or 1.0))
        return share

    def unsaid(self, u: Unit) -> tuple[str, ...]:
        """The question's words besides its names, as it writes them, when the unit's page among the
        passages (its document, or every document under its title) holds none of them (in the question's
        language or translated): a page about what the question names that says nothing of what it asks
        ("Какая зарплата у Павла Кузьмина?" over his page, which never mentions pay) does not answer. Empty
        when the page holds one, and for a question of names alone ("Who is X?")."""
        asked = set(self.focus.terms.stems) - self.focus.name_stems
        page = self.passages[u.passage - 1]
        # a page is what a reader sees under one title: a corpus cut into one document per paragraph (an
        # encyclopaedia article's) holds one page in several documents
        if not asked or any(self.covered(v) & asked for v in self.all_units
                            if _same_page(self.passages[v.passage - 1], page)):
            return ()
        words = [w for w in self.focus.tokens if set(content_stems(w)) & asked]
        return tuple(dict.fromkeys(words)) or tuple(sorted(asked))

    def typed(self, u: Unit) -> bool:
        """Whether the unit holds a value of the asked type that the question does not already hold."""
        kind = self.focus.kind
        if kind == "date":
            return (any(y not in self.focus.question_tokens for y in YEAR.findall(u.text)) or bool(MONTH.search(u.text))
                    or bool(ERA.search(u.text)))
        if kind in FORMS:
            return bool(FORMS[kind].search(u.text))
        if kind == "number":  # a numbered list's marker ("1. ...") is no value, nor a date's day or a "№3"
            return any(normalise(m.group()).strip(".,") not in self.focus.question_tokens
                       for m in quantities(LIST_MARK.sub("", u.text)))
        if kind in NAME_TYPE:
            return any(t in NAME_TYPE[kind] and not self.focus.in_question(s) for _, s, t in u.names)
        return False

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
        opening = set(content_stems(" ".join(WORD.findall(LIST_MARK.sub("", u.text))[:4])))
        return any(s in opening for s in self.focus.name_stems if any(c.isdigit() or c == "_" for c in s))
