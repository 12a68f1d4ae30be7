"""Sentence splitting for Russian and English text.

Chunks are packed from whole sentences and overlap is made of whole sentences, so a wrong break
cuts a thought in two ("Dr." | "Smith ...") and a missed break only makes one unit a bit longer.
The rules therefore lean towards not breaking:

- a line break inside a paragraph is a soft wrap, as in Markdown: hard-wrapped prose keeps its
  sentences whole. A line still starts a new sentence when it is a list item, a quote, a table row
  or a heading, or when the previous line ends with a Markdown hard break; a blank line always
  separates;
- inside a line a sentence ends at `.`, `!`, `?` or an ellipsis followed by whitespace and then an
  uppercase letter, a digit, an opening quote or bracket, or Markdown emphasis/code. Periods that
  are not followed by whitespace (3.14, v1.2, 1.2.3, example.com, config.yaml) never end one;
- a period does not end a sentence after an abbreviation (т.е., г., см., e.g., Dr., U.S.), an
  initial (J. R. R. Tolkien, А. С. Пушкин) or a list number ("1. Install");
- except after abbreviations that close an enumeration (etc., и т.д., и т.п., и др., и пр.): there
  the abbreviation's period also ends the sentence whenever the next word is capitalised.

Each sentence is an exact slice of the input with only the surrounding whitespace stripped, so
callers can find it in the text again.
"""
from __future__ import annotations

import re

# Words that take a period without ending a sentence, lowercased, without the final period.
# Single letters (г., д., J.) and dotted initialisms (т.е., т.д., e.g., i.e., U.S.) need no entry:
# `_INITIALISM` covers them; etc. is in `_TERMINAL_ABBREVIATION`.
_ABBREVIATIONS = frozenset(
    {
        # Russian
        "гг", "др", "пр", "см", "стр", "рис", "им", "ул", "напр", "тыс", "руб", "коп", "ст", "гл",
        "проф", "акад", "доц", "изд", "дж",
        # English
        "vs", "mr", "mrs", "ms", "dr", "prof", "inc", "ltd", "jr", "sr", "st", "fig",
        "approx", "cf", "al", "vol", "pp", "eq", "co", "corp", "dept",
    }
)
# "No." is an abbreviation only before a number ("No. 5"); otherwise it is the answer "No."
_NUMBER_ABBREVIATIONS = frozenset({"no"})

_INITIALISM = re.compile(r"(?:[^\W\d_]\.)*[^\W\d_]")
_ENUMERATOR = re.compile(r"\d{1,9}(?:\.\d{1,9})*")
_TERMINAL_ABBREVIATION = re.compile(r"(?:\betc|\bи\s+т\.\s?[дп]|\bи\s+(?:др|пр))$", re.IGNORECASE)

_OPENERS = "«\"“„'([`*_"
_CLOSERS = ")]\"'»”’"
# A run of terminators, optional closing quotes/brackets, then whitespace; group 2 is the first
# character after the whitespace.
_CANDIDATE = re.compile(rf"([.!?…]+)[{re.escape(_CLOSERS)}]*(?=\s+(\S))")
_LAST_WORD = re.compile(r"\S*$")

# Lines that start a new sentence even without terminal punctuation on the line before.
_LINE_START = re.compile(r"(?:[-*+•]\s|\d{1,9}[.)]\s|[a-zа-яё]\)\s|>|\||#{1,6}\s)", re.IGNORECASE)


def split_sentences(text: str) -> list[str]:
    """Split `text` into sentences, each an exact, whitespace-stripped slice of `text`."""
    sentences: list[str] = []
    for start, end in _line_groups(text):
        sentences.extend(_split_group(text[start:end]))
    return sentences


def _line_groups(text: str) -> list[tuple[int, int]]:
    """Spans of consecutive lines that read as one run of prose (soft-wrapped lines)."""
    groups: list[tuple[int, int]] = []
    pos = 0
    previous = ""  # the raw line before, "" at the start and after a blank line
    for line in text.split("\n"):
        stripped = line.strip()
        if stripped and previous.strip() and not _starts_new_line(stripped, previous):
            groups[-1] = (groups[-1][0], pos + len(line))
        elif stripped:
            groups.append((pos, pos + len(line)))
        previous = line
        pos += len(line) + 1
    return groups


def _starts_new_line(stripped: str, previous: str) -> bool:
    """Whether a line begins a new sentence instead of continuing the previous line."""
    previous = previous.rstrip("\r")
    hard_break = previous.endswith("  ") or previous.endswith("\\")
    return hard_break or _LINE_START.match(stripped) is not None


def _split_group(group: str) -> list[str]:
    """Split one run of prose at the candidate breaks that `_ends_sentence` accepts."""
    sentences: list[str] = []
    start = 0
    for match in _CANDIDATE.finditer(group):
        if _ends_sentence(group[start : match.start()], match.group(1), match.group(2)):
            sentences.append(group[start : match.end()].strip())
            start = match.end()
    tail = group[start:].strip()
    if tail:
        sentences.append(tail)
    return sentences


def _ends_sentence(before: str, terminators: str, next_char: str) -> bool:
    """Decide a candidate break: `before` is the sentence so far, up to the terminators."""
    if not (next_char.isupper() or next_char.isdigit() or next_char in _OPENERS):
        return False
    if terminators != ".":
        return True
    if _TERMINAL_ABBREVIATION.search(before):
        return True
    word = _LAST_WORD.search(before).group().lstrip(_OPENERS).lower()
    if word in _NUMBER_ABBREVIATIONS:
        return not next_char.isdigit()
    if word in _ABBREVIATIONS or _INITIALISM.fullmatch(word):
        return False
    return _ENUMERATOR.fullmatch(before.strip()) is None
