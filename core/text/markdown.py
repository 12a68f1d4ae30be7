"""The one reader of Markdown structure: heading sections for the chunker, and the reading blocks of a
chunk (paragraphs, list items, table rows with their header) that ingest stores beside it
(chunks.blocks) so the answer side reads them instead of parsing the text again.

Sections: Markdown split into heading sections made of prose, code and table blocks.

The chunker needs two things from Markdown: the heading path of every piece of text (a cheap,
precise context for embedding and full-text search: "Limits > Retries"), and the places it must
never cut. A fenced code block or a table is only useful whole, so each is one atomic block; a
'#' line inside a fence is code, not a heading. Everything else is prose, one block per paragraph
(paragraphs are separated by blank lines), kept line for line as in the source.

This is a line scanner for the subset that matters, not a full CommonMark parser: ATX and setext
headings, ``` and ~~~ fences (an unclosed fence runs to the end, as in CommonMark), and GFM tables
(rows starting with '|', or a header row followed by a delimiter row). Front matter is the
caller's job.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterator, Literal


@dataclass(frozen=True)
class Block:
    """A piece of a section: prose (one paragraph), or an atomic code block or table."""

    kind: Literal["prose", "code", "table"]
    text: str


@dataclass(frozen=True)
class Section:
    """The blocks under one heading; `heading_path` runs from the top-level heading down."""

    heading_path: tuple[str, ...]
    blocks: tuple[Block, ...]


_ATX = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*")
_SETEXT = re.compile(r" {0,3}(=+|-+)[ \t]*")
_THEMATIC_BREAK = re.compile(r" {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*")
# Any indentation opens a fence, so fences nested in list items are found too.
_FENCE = re.compile(r"[ \t]*(`{3,}|~{3,})(.*)")
_TABLE_ROW = re.compile(r" {0,3}\|")
_TABLE_DELIMITER = re.compile(r" {0,3}\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*")
_LIST_ITEM = re.compile(r"\s*(?:[-*+]|\d{1,9}[.)])(?:\s|$)")
# a list item's marker, as a reader takes it off ("- ", "2) "); a year opening a sentence ("1957. ") is none
LIST_MARK = re.compile(r"^\s*(?:[-*+]|\d{1,3}[.)])\s+")
_ATX_START = re.compile(r"^\s*#{1,6}\s")  # a heading line, however indented (a reader skips it)
# the reading blocks' line starts: a list item, a table row, a heading or a quote opens a block
_BLOCK_START = re.compile(r"^\s*(?:[-*+]\s|\d{1,3}[.)]\s|\||#{1,6}\s|>)")


def split_sections(text: str) -> list[Section]:
    """Split Markdown into sections; a heading without body text yields no section of its own."""
    sections: list[Section] = []
    path: list[tuple[int, str]] = []  # (level, title) of the open headings
    blocks: list[Block] = []
    for item in _scan(text.replace("\r\n", "\n").split("\n")):
        if isinstance(item, Block):
            blocks.append(item)
            continue
        if blocks:
            sections.append(Section(_names(path), tuple(blocks)))
            blocks = []
        level, title = item
        while path and path[-1][0] >= level:
            path.pop()
        path.append((level, title))
    if blocks:
        sections.append(Section(_names(path), tuple(blocks)))
    return sections


def _names(path: list[tuple[int, str]]) -> tuple[str, ...]:
    return tuple(title for _, title in path if title)


def _scan(lines: list[str]) -> Iterator[Block | tuple[int, str]]:
    """Yield blocks and headings (as `(level, title)`) in document order."""
    paragraph: list[str] = []

    def end_paragraph() -> Iterator[Block]:
        if paragraph:
            yield Block("prose", "\n".join(paragraph))
            paragraph.clear()

    i = 0
    while i < len(lines):
        line = lines[i]
        if atomic := _atomic_block(lines, i):
            yield from end_paragraph()
            block, i = atomic
            yield block
            continue
        if heading := _ATX.fullmatch(line):
            yield from end_paragraph()
            yield len(heading.group(1)), (heading.group(2) or "").strip()
        elif (setext := _SETEXT.fullmatch(line)) and _is_setext_title(paragraph):
            yield (1 if setext.group(1)[0] == "=" else 2), paragraph.pop().strip()
        elif _THEMATIC_BREAK.fullmatch(line) or not line.strip():
            yield from end_paragraph()
        else:
            paragraph.append(line)
        i += 1
    yield from end_paragraph()


def _is_setext_title(paragraph: list[str]) -> bool:
    """Only a one-line, non-list paragraph becomes a setext title; anything else keeps its text."""
    return len(paragraph) == 1 and not _LIST_ITEM.match(paragraph[0])


def _atomic_block(lines: list[str], i: int) -> tuple[Block, int] | None:
    """A code block or table starting at line `i`, and the index of the line after it."""
    end = _fence_end(lines, i)
    if end is not None:
        return Block("code", "\n".join(lines[i:end])), end
    end = _table_end(lines, i)
    if end is not None:
        return Block("table", "\n".join(lines[i:end])), end
    return None


def _fence_end(lines: list[str], i: int) -> int | None:
    """If a fenced code block opens at line `i`, the index just past its closing fence."""
    opening = _FENCE.fullmatch(lines[i])
    if opening is None:
        return None
    fence, info = opening.groups()
    if fence[0] == "`" and "`" in info:  # ```inline``` code, not a fence
        return None
    for j in range(i + 1, len(lines)):
        closing = _FENCE.fullmatch(lines[j])
        if closing is None or closing.group(2).strip():
            continue
        if closing.group(1)[0] == fence[0] and len(closing.group(1)) >= len(fence):
            return j + 1
    return len(lines)


def _table_end(lines: list[str], i: int) -> int | None:
    """If a GFM table starts at line `i`, the index just past its last row."""
    if _TABLE_ROW.match(lines[i]):
        j = i + 1
    elif (
        "|" in lines[i]
        and i + 1 < len(lines)
        and "|" in lines[i + 1]
        and _TABLE_DELIMITER.fullmatch(lines[i + 1])
    ):
        j = i + 2
    else:
        return None
    while j < len(lines) and lines[j].strip() and "|" in lines[j]:
        j += 1
    return j


def without_fenced_code(text: str) -> str:
    """The text with each fenced code block replaced by a paragraph break (code is not prose)."""
    lines, out, i = text.split("\n"), [], 0
    while i < len(lines):
        end = _fence_end(lines, i)
        if end is None:
            out.append(lines[i])
            i += 1
        else:
            out += ["", ""]
            i = end
    return "\n".join(out)


# --- reading blocks -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReadingBlock:
    """A span of a chunk's text a reader reads as one piece: a paragraph, a list item or a table row.
    `header`: a table row's header row (the span of it), which says what its cells are; (0, 0) for none."""

    start: int
    end: int
    header: tuple[int, int] = (0, 0)

    def to_json(self) -> list[int]:
        return [self.start, self.end, *self.header]

    @classmethod
    def from_json(cls, value: list[int]) -> "ReadingBlock":
        return cls(value[0], value[1], (value[2], value[3]))


def reading_blocks(text: str) -> tuple[ReadingBlock, ...]:
    """The text's reading blocks, in order: paragraphs, list items and table rows, never a heading, a
    table's header or rule, or a fenced code block (code is quoted by search, not read as sentences).
    A table row is a block of its own and carries the span of its header row."""
    blocks: list[tuple[list[tuple[int, int]], tuple[int, int]]] = []
    current: list[tuple[int, int]] = []
    header, fenced, pos = (0, 0), False, 0

    def close() -> None:
        nonlocal current
        if current:
            blocks.append((current, header))
        current = []

    for line in text.splitlines(keepends=True):
        start, pos = pos, pos + len(line)
        stripped = line.strip()
        if _FENCE.fullmatch(line.rstrip("\r\n")):
            fenced = not fenced
            close()
            continue
        if _TABLE_DELIMITER.fullmatch(line.rstrip("\r\n")) and stripped.startswith("|"):
            close()
            if blocks and text[blocks[-1][0][0][0]:blocks[-1][0][-1][1]].lstrip().startswith("|"):
                rows, _ = blocks.pop()  # the row above a rule is the header, not data
                header = (rows[0][0], rows[-1][1])
            continue
        if fenced or not stripped or _ATX_START.match(line):
            close()
            header = (0, 0)
            continue
        if _BLOCK_START.match(line) and current:
            close()
        if not stripped.startswith("|"):
            header = (0, 0)
        current.append((start, start + len(line.rstrip())))
        if stripped.startswith("|"):  # a table row is a block of its own
            close()
    close()
    return tuple(ReadingBlock(spans[0][0], spans[-1][1], h) for spans, h in blocks)
