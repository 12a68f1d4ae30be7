"""Reading a question and passages without a model: words, stems, named mentions, coverage.

Both languages, no corpus-specific words; used by the agentic loop and its offline planner.
"""
from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass

from answers.expected_type import ENGLISH_MONTHS
from answers.words import word_class
from answers.types import Passage


WORD = re.compile(r"[^\W_]+(?:['’\-][^\W_]+)*")
_QUOTED = re.compile(r"«([^«»\n]{1,80})»|„([^„“\n]{1,80})“|“([^“”\n]{1,80})”|\"([^\"\n]{1,80})\"")
_PAREN = re.compile(r"\s*\([^)]*\)")
SENTENCE_END = re.compile(r"(?<=[.!?;])\s+(?=[\"'«(\[]?[A-ZА-ЯЁ0-9])")

# Word classes of questions, per language in answers/words/*.toml: grammar, never a corpus's topics.
FUNCTION_WORDS = word_class("function_words")  # never a query's content, never a name's first word
EARLIER_WORDS = word_class("earlier_words")  # "older", "first", "старше": the earlier date wins a comparison
LATER_WORDS = word_class("later_words")  # "younger", "later", "моложе": the later date wins
# cues that a question compares two things
COMPARATIVES = word_class("comparatives")  # "larger", "больше": which side has more of something
COMPARE_WORDS = word_class("comparison_cues") | COMPARATIVES | EARLIER_WORDS | LATER_WORDS
# comparison words that say nothing about the attribute ("older" does: it stays)
ATTRIBUTE_NOISE = word_class("comparison_cues") | word_class("pair_extra")
IMPERATIVES = word_class("imperatives")  # open a request ("Compare ...", "Сравни ..."): never a name's start
# Cues that two names joined by "and"/"or" are compared or both asked about ("which" and "first"
# alone are not: "by which rapper", "the first president", answers/words `not_pair_cues`).
PAIR_CUES = (COMPARE_WORDS - word_class("not_pair_cues")) | word_class("pair_extra")
AUX_START = word_class("aux_start")  # a yes/no question
CONJUNCTIONS = word_class("conjunctions")
# Lower-case words allowed inside a name ("Bank of America", "Jump for Glory", "Bastien und Bastienne").
_CONNECTORS = frozenset("of the a to from de du des la le les von van der den da del di al bin und y for with &".split())
DEMONYM = re.compile(r"(?:an|ian|ese|ish|ic|i)$")


def fold(text: str) -> str:
    """Accents off, so "Aschenbrödel" matches "Aschenbrodel" (Cyrillic й/ё kept: they are letters)."""
    out = []
    for ch in unicodedata.normalize("NFD", text):
        if unicodedata.combining(ch):
            if out and out[-1] in "иИеЕ" and ch in "\u0306\u0308":  # й, ё
                out[-1] = unicodedata.normalize("NFC", out[-1] + ch)
            continue
        out.append(ch)
    return "".join(out)


def stem_of(word: str) -> str:
    """A crude cross-language stem: casefold, no possessive, no plural -s, first 5 letters."""
    w = fold(word).casefold().replace("’", "'")
    if w.endswith("'s"):
        w = w[:-2]
    w = w.strip("'-")
    if len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
        w = w[:-1]
    return w[:5]


def words_of(text: str) -> list[str]:
    return WORD.findall(text)


def is_function_word(word: str) -> bool:
    """A function word, unless written as an abbreviation: "US" in "US region" is no pronoun "us"."""
    return fold(word).casefold() in FUNCTION_WORDS and not (len(word) > 1 and word.isupper())


def content_words(text: str) -> list[str]:
    """Words of `text` that carry meaning (no function words), in order, deduplicated by stem."""
    out, stems = [], set()
    for w in words_of(text):
        low = fold(w).casefold()
        if low in FUNCTION_WORDS or (low.endswith("'s") and low[:-2] in FUNCTION_WORDS) or len(low) < 2 and not low.isdigit():
            continue
        s = stem_of(w)
        if s not in stems:
            stems.add(s)
            out.append(w)
    return out


def stems_of(text: str) -> set[str]:
    return {stem_of(w) for w in content_words(text)}


_CLAUSE_BREAK = re.compile(r"[,;:?!()]")


def clause_words(question: str, name: str) -> list[str]:
    """The content words of the clause that spells `name`, without the name's own: "state" for "Silverton"
    in "..., in the state where Silverton is located, ..." ("located" is a function word)."""
    clause = next((c for c in _CLAUSE_BREAK.split(question) if name in c), question)
    name_stems = stems_of(name)
    return [w for w in content_words(clause) if stem_of(w) not in name_stems]


# an English month is capitalised, and a date beside it ("November 2024", "9 April") is no name's part
_MONTHS = frozenset(ENGLISH_MONTHS)


def _is_date_word(tokens: list, i: int) -> bool:
    """Whether the token at i is a month written with a day or a year beside it, or that number."""
    def month_at(k: int) -> bool:
        return 0 <= k < len(tokens) and tokens[k][0].casefold() in _MONTHS
    def number_at(k: int) -> bool:
        return 0 <= k < len(tokens) and tokens[k][0].isdigit()
    if month_at(i):
        return number_at(i - 1) or number_at(i + 1)
    return number_at(i) and (month_at(i - 1) or month_at(i + 1))


def _is_name_word(word: str) -> bool:
    return bool(word) and (word[0].isupper() or (any(c.isdigit() for c in word) and any(c.isalpha() for c in word)))


@dataclass(frozen=True)
class Mention:
    text: str
    start: int
    end: int


def question_mentions(question: str) -> list[Mention]:
    """Names a question mentions: quoted titles and runs of capitalised words (with "of", "de", "und"...
    inside). A capitalised function word that starts the question ("Who", "Are", "Какой") is not a name."""
    found: list[Mention] = []
    taken: list[tuple[int, int]] = []
    for m in _QUOTED.finditer(question):
        g = next(i for i in range(1, 5) if m.group(i))
        text = m.group(g).strip()
        if text and content_words(text):
            found.append(Mention(text, m.start(g), m.end(g)))
            taken.append((m.start(), m.end()))
    tokens = [(m.group(), m.start(), m.end()) for m in WORD.finditer(question)
              if not any(a <= m.start() < b for a, b in taken)]
    i = 0
    while i < len(tokens):
        word, start, end = tokens[i]
        low = word.casefold()
        base = low[:-2] if low.endswith(("'s", "’s")) else low
        if (not _is_name_word(word) or base in FUNCTION_WORDS or (i == 0 and base in IMPERATIVES)
                or _is_date_word(tokens, i)):
            i += 1
            continue
        j, last = i + 1, i
        while j < len(tokens):
            w = tokens[j][0]
            gap = question[tokens[j - 1][2]:tokens[j][1]]
            if any(c in gap for c in ",;:?!()\"«»") or _is_date_word(tokens, j):
                break
            if tokens[j - 1][0].casefold().endswith(("'s", "’s")) and not _is_name_word(w):
                break  # "Izgoy's performer" ends the name; "Homer's Odyssey" goes on
            if _is_name_word(w) or (w.isdigit() and j == last + 1):  # "Big Hero 6", "Songs I Wrote with Amy"
                last = j
                j += 1
            elif w.casefold() in _CONNECTORS and _connects(tokens, j):
                j += 1
            else:
                break
        text = question[start:tokens[last][2]]
        if text.endswith(("'s", "’s")):
            text = text[:-2]
        found.append(Mention(text, start, start + len(text)))
        i = last + 1
    found.sort(key=lambda m: m.start)
    return found


def _connects(tokens: list, j: int) -> bool:
    """Connector words at j (at most two: "to the") followed by a name word continue the name."""
    for n in (j + 1, j + 2):
        if n >= len(tokens):
            return False
        if _is_name_word(tokens[n][0]):
            return True
        if tokens[n][0].casefold() not in _CONNECTORS:
            return False
    return False


def title_core(title: str) -> str:
    return _PAREN.sub("", title or "").strip()


def covers(passage: Passage, name: str) -> bool:
    """Whether `passage` is about `name`: its title or heading names it, or its text opens with it."""
    want = stems_of(name)
    if not want:
        return False
    for label in (title_core(passage.title), passage.heading.split(">")[-1] if passage.heading else ""):
        have = stems_of(label)
        if have and len(want & have) >= math.ceil(0.6 * len(want)) and len(want & have) >= 0.5 * len(have):
            return True
    folded = fold(passage.text[:200]).casefold()
    return fold(name).casefold() in folded
