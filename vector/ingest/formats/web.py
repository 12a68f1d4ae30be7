"""HTML -> Markdown with lxml: h1-h6 become '#' headings, tables Markdown tables, list items '- ' lines,
<pre> fenced code; scripts, styles and the page's chrome (nav, header, footer, aside, forms) are
dropped, and when the page marks its content with <main> or <article> only that is read.

The walk is iterative (lxml's iterwalk), so a page nested thousands of levels deep costs no Python
recursion. Bytes are decoded here, not by lxml: BOM, then the page's declared charset, then UTF-8,
then the likeliest encoding, so a Windows-1251 or KOI8-R page reads as the text it is."""
from __future__ import annotations

import codecs
import re

from core.errors import BadDocument

_DROP = frozenset({"script", "style", "noscript", "template", "nav", "header", "footer", "aside", "form", "iframe",
                   "svg", "math", "button", "select", "textarea", "head", "object", "embed", "canvas", "dialog"})
_BLOCK = frozenset({"p", "div", "section", "article", "main", "ul", "ol", "dl", "dt", "dd", "blockquote", "tr",
                    "br", "hr", "figure", "figcaption", "address", "details", "summary", "li", "body", "html",
                    "h1", "h2", "h3", "h4", "h5", "h6", "center", "fieldset", "caption"})
_HEADINGS = {f"h{n}": n for n in range(1, 7)}
_DECLARED_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE)


def read_html(data: bytes, max_bytes: int):
    from lxml import html

    from vector.ingest.formats.converted import Converted

    if b"\x00" in data[:8192] and not data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise BadDocument("binary file (contains NUL bytes), not an HTML page")
    text = decode_html(data)
    try:
        # huge_tree: libxml2 otherwise drops everything nested over 256 deep (with it, over 2048); the
        # walk below is iterative, and the child process bounds time and memory
        document = html.document_fromstring(text, parser=html.HTMLParser(huge_tree=True))
    except Exception as exc:  # lxml's ParserError on a page with no element at all
        raise BadDocument(f"not an HTML page ({exc}): nothing to read") from None
    title_element = document.find(".//title")
    title = " ".join(title_element.text_content().split()) if title_element is not None else ""
    content = document.find(".//main")
    if content is None:
        content = document.find(".//article")
    if content is None:
        return Converted(title or None, html_markdown(document))
    # inside <main> or <article>, a <header> holds the article's own title: keep it
    return Converted(title or None, html_markdown(content, drop=_DROP - {"header", "footer"}))


def decode_html(data: bytes, charset: str | None = None) -> str:
    """The page as text: its BOM, `charset` (an email part's), its <meta charset>, UTF-8, or the likeliest."""
    for bom, encoding in ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16")):
        if data.startswith(bom):
            return data.decode(encoding, "replace")
    declared = _DECLARED_CHARSET.search(data[:4096])
    for candidate in (charset, declared.group(1).decode("ascii") if declared else None, "utf-8"):
        if candidate:
            try:
                return data.decode(candidate)
            except (LookupError, UnicodeDecodeError):  # an unknown name, or a page that lies about its charset
                continue
    from charset_normalizer import from_bytes

    guess = from_bytes(data[:65536]).best()
    return data.decode(guess.encoding if guess else "utf-8", "replace")


def html_markdown(root, drop: frozenset[str] = _DROP) -> str:
    from lxml import etree

    blocks: list[str] = []
    inline: list[str] = []
    prefixes: list[str] = []  # the open heading or list item, innermost last

    def flush() -> None:
        text = " ".join("".join(inline).split())
        if text:
            blocks.append("".join(prefixes[-1:]) + text)
        inline.clear()

    walker = etree.iterwalk(root, events=("start", "end", "comment", "pi"))
    for event, element in walker:
        tag = element.tag.lower() if isinstance(element.tag, str) else ""
        if event in ("comment", "pi"):
            inline.append(element.tail or "")
            continue
        if event == "start":
            if tag in drop or tag == "table" or tag == "pre":
                walker.skip_subtree()
                if tag == "table":
                    flush()
                    rows = [[cell.text_content() for cell in row if isinstance(cell.tag, str) and cell.tag in ("td", "th")]
                            for row in element.iter("tr")]
                    if table := markdown_table(rows):
                        blocks.append(table)
                elif tag == "pre":
                    flush()
                    code = element.text_content().strip("\n")
                    if code.strip():
                        blocks.append(f"```\n{code.replace('```', '` ` `')}\n```")
                continue
            if tag in _BLOCK:
                flush()
                if tag in _HEADINGS:
                    prefixes.append("#" * _HEADINGS[tag] + " ")
                elif tag == "li":
                    prefixes.append("- ")
            inline.append(element.text or "")
        else:
            if tag in _BLOCK and tag not in drop:
                flush()
                if tag in _HEADINGS or tag == "li":
                    prefixes.pop()
            inline.append(element.tail or "")
    flush()
    if not blocks:
        raise BadDocument("no text in this HTML page (only scripts, styles or navigation)")
    return "\n\n".join(blocks) + "\n"


def markdown_table(rows: list[list[str]]) -> str:
    """Rows of cell texts as a Markdown table (the first row is the header), or "" when it holds no text."""
    cells = [[" ".join(cell.split()).replace("|", "\\|") for cell in row] for row in rows if row]
    if not any(any(row) for row in cells):
        return ""
    width = max(len(row) for row in cells)
    cells = [row + [""] * (width - len(row)) for row in cells]
    lines = ["| " + " | ".join(cells[0]) + " |", "|" + "---|" * width]
    lines += ["| " + " | ".join(row) + " |" for row in cells[1:]]
    return "\n".join(lines)
