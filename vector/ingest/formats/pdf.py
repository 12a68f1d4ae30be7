"""PDF -> Markdown with pypdf: the text of every page, lines set in a clearly larger font than the
body made headings (the body size is the size most characters have; larger sizes rank # to ###).
Tables come out as lines of their cells, row by row; pypdf does not find table structure."""
from __future__ import annotations

import io
import math
import re
from collections import Counter

from core.errors import BadDocument

# A line this much larger than the body text, and short, reads as a heading in nearly every layout.
HEADING_SCALE = 1.15
HEADING_MAX_CHARS = 120
HEADING_LEVELS = 3


def read_pdf(data: bytes, max_bytes: int):
    from pypdf import PdfReader
    from pypdf.errors import FileNotDecryptedError

    from vector.ingest.formats.converted import Converted

    reader = PdfReader(io.BytesIO(data))
    if reader.is_encrypted and not reader.decrypt(""):  # an empty user password only restricts printing etc.
        raise BadDocument("encrypted PDF: it needs a password to open; save a copy without one")
    lines: list[tuple[str, float]] = []  # (text, font size); ("", 0) between pages
    chars = 0
    try:
        for page in reader.pages:
            chars += _page_lines(page, lines)
            lines.append(("", 0.0))
            if chars > max_bytes:  # the size check after conversion would say so, after reading every page
                raise BadDocument(f"its text is over the {max_bytes / 1e6:.1f} MB limit "
                                  "(raise CROSSROADS_MAX_DOCUMENT_BYTES or split the file)")
    except FileNotDecryptedError:
        raise BadDocument("encrypted PDF: it needs a password to open; save a copy without one") from None
    if not any(text.strip() for text, _ in lines):
        raise BadDocument("no text layer: scanned PDF? OCR it first")
    title = _metadata_title(reader)
    return Converted(title, _markdown(lines))


def _page_lines(page, lines: list[tuple[str, float]]) -> int:
    """Append the page's lines with the largest font size on each; return the characters read."""
    current: list[str] = []
    size = 0.0
    read = 0

    def visit(text, cm, tm, font, font_size):
        nonlocal size, read
        # the size on the page is the font size scaled by the text and transformation matrices
        scale = math.hypot(tm[0], tm[1]) * math.hypot(cm[0], cm[1])
        for n, part in enumerate(text.split("\n")):
            if n:
                lines.append(("".join(current), size))
                current.clear()
                size = 0.0
            if part.strip():
                current.append(part)
                size = max(size, font_size * scale)
                read += len(part)

    page.extract_text(visitor_text=visit)
    if current:
        lines.append(("".join(current), size))
    return read


def _metadata_title(reader) -> str | None:
    try:
        title = reader.metadata.title if reader.metadata else None
    except Exception:  # a damaged info dictionary costs the title, not the document
        return None
    return title.strip() if isinstance(title, str) and title.strip() else None


def _markdown(lines: list[tuple[str, float]]) -> str:
    weight = Counter()
    for text, size in lines:
        weight[round(size, 1)] += len(text)
    body = max(weight, key=lambda s: (weight[s], -s)) if weight else 0.0
    heading_sizes = sorted({round(size, 1) for text, size in lines if _is_heading(text, size, body)}, reverse=True)
    out = []
    for text, size in lines:
        text = " ".join(text.split())  # justified lines come out with runs of spaces
        if _is_heading(text, size, body):
            level = min(heading_sizes.index(round(size, 1)) + 1, HEADING_LEVELS)
            out.extend(["", "#" * level + " " + text, ""])
        else:
            out.append(text)  # a page break ("") is a paragraph break
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out)).strip() + "\n"


def _is_heading(text: str, size: float, body: float) -> bool:
    text = text.strip()
    return bool(text) and body > 0 and size >= body * HEADING_SCALE and len(text) <= HEADING_MAX_CHARS
