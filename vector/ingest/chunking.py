"""Markdown to chunks: whole sentences packed up to a size, with a sentence-level overlap.

A chunk is the unit that is embedded, searched and cited. Small chunks give sharp vectors but lose
context; large ones blur the vector and fill the prompt with noise, so chunks are packed up to
`max_chars` code points from whole sentences, never across a heading (the heading path travels
with every chunk as its cheapest context).

Overlap repeats the tail of the previous chunk at the start of the next one, so a thought cut at a
chunk border is still whole in one of them. It is made of whole sentences totalling at most
`overlap * max_chars` code points and never crosses a section. A chunk is closed only when the
next unit does not fit, and that unit then joins the overlap, so no chunk is made only of overlap.

Code blocks and tables are useless cut in half: each is one unit, packed like a sentence when it
fits and emitted alone, oversized but intact, when it does not; it is never repeated as overlap.
A sentence longer than `max_chars` is cut at whitespace (a single over-long word by code points);
its pieces are not whole sentences, so they are never used as overlap either.

Sizes are measured on the rendered content, separators included, so every chunk except an
oversized code block or table is at most `max_chars` long. Separators follow the source: sentences
of one line are joined with " ", lines (list items) with "\\n", paragraphs and blocks with "\\n\\n".
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from core.text.markdown import Section, split_sections
from core.sentences import split_sentences


@dataclass(frozen=True)
class ChunkDraft:
    """A chunk before it is stored: its number in the document, heading path and text."""

    chunk_no: int
    heading: str
    content: str


@dataclass(frozen=True)
class _Unit:
    """The smallest piece packed into a chunk: a sentence, a sentence piece or an atomic block."""

    text: str
    separator: str  # what joins it to the unit before it in the same section
    whole_sentence: bool = True  # only whole sentences are carried as overlap


_WORD = re.compile(r"\S+")


def chunk_markdown(text: str, *, max_chars: int = 1000, overlap: float = 0.15) -> list[ChunkDraft]:
    """Split a Markdown document (front matter already removed) into chunks, numbered from 0."""
    if max_chars < 1:
        raise ValueError(f"max_chars must be positive, got {max_chars}")
    if not 0 <= overlap < 1:
        raise ValueError(f"overlap must be in [0, 1), got {overlap}")
    overlap_chars = int(overlap * max_chars)
    drafts: list[ChunkDraft] = []
    for section in split_sections(text):
        heading = " > ".join(section.heading_path)
        for units in _pack(_units(section, max_chars), max_chars, overlap_chars):
            drafts.append(ChunkDraft(len(drafts), heading, _render(units)))
    return drafts


def _units(section: Section, max_chars: int) -> list[_Unit]:
    """The section's blocks as units, each with the separator the source puts before it."""
    units: list[_Unit] = []
    for block in section.blocks:
        separator = "\n\n"
        if block.kind != "prose":
            units.append(_Unit(block.text, separator, whole_sentence=False))
            continue
        position = 0
        for i, sentence in enumerate(split_sentences(block.text)):
            start = block.text.index(sentence, position)
            if i:
                separator = _gap_separator(block.text[position:start])
            position = start + len(sentence)
            if len(sentence) <= max_chars:
                units.append(_Unit(sentence, separator))
            else:
                units.extend(_split_long(sentence, separator, max_chars))
    return units


def _split_long(sentence: str, separator: str, max_chars: int) -> list[_Unit]:
    """Cut an over-long sentence at whitespace into pieces of at most `max_chars`."""
    pieces: list[_Unit] = []
    start = end = 0  # the piece being built is sentence[start:end]
    for word in _WORD.finditer(sentence):
        if word.end() - start <= max_chars:
            end = word.end()
            continue
        if end > start:
            pieces.append(_Unit(sentence[start:end], separator, whole_sentence=False))
            separator = _gap_separator(sentence[end : word.start()])
        start, end = word.start(), word.end()
        while end - start > max_chars:  # one word longer than a chunk: cut by code points
            pieces.append(_Unit(sentence[start : start + max_chars], separator, whole_sentence=False))
            separator, start = "", start + max_chars
    pieces.append(_Unit(sentence[start:end], separator, whole_sentence=False))
    return pieces


def _gap_separator(gap: str) -> str:
    """Join two units the way the whitespace between them in the source does: a line or a space."""
    return "\n" if "\n" in gap else " "


def _pack(units: list[_Unit], max_chars: int, overlap_chars: int) -> list[list[_Unit]]:
    """Greedily pack units into chunks, starting each chunk after the first with an overlap.

    An oversized block needs no special case: it never fits next to anything (so it closes the
    chunk before it and pushes out the overlap), and it is not a sentence (so nothing of it is
    carried into the chunk after it).
    """
    chunks: list[list[_Unit]] = []
    current: list[_Unit] = []
    size = 0  # len(_render(current)), kept up to date instead of re-rendering
    for unit in units:
        if current and size + _joined_size(unit) > max_chars:
            chunks.append(current)
            current = _overlap(current, overlap_chars)
            size = _size(current)
            while current and size + _joined_size(unit) > max_chars:
                size -= len(current.pop(0).text)  # the overlap must leave room for the new unit
                size -= len(current[0].separator) if current else 0
        size = size + _joined_size(unit) if current else len(unit.text)
        current.append(unit)
    if current:
        chunks.append(current)
    return chunks


def _overlap(chunk: list[_Unit], overlap_chars: int) -> list[_Unit]:
    """The longest run of whole sentences at the end of `chunk` within `overlap_chars`."""
    tail: list[_Unit] = []
    size = 0
    for unit in reversed(chunk):
        grown = len(unit.text) + (len(tail[0].separator) + size if tail else 0)
        if not unit.whole_sentence or grown > overlap_chars:
            break
        tail.insert(0, unit)
        size = grown
    return tail


def _render(units: list[_Unit]) -> str:
    return units[0].text + "".join(unit.separator + unit.text for unit in units[1:])


def _size(units: list[_Unit]) -> int:
    """The length of `_render(units)` without building the string."""
    return sum(map(_joined_size, units)) - len(units[0].separator) if units else 0


def _joined_size(unit: _Unit) -> int:
    return len(unit.separator) + len(unit.text)
