"""DOCX -> Markdown with python-docx: body paragraphs and tables in document order; `Heading N` and
`Title` styles become '#' headings, list styles '- ' items, tables Markdown tables. Headers, footers,
comments and text boxes are left out.

A DOCX is a zip archive that python-docx unpacks whole into memory, so the archive's declared sizes
are checked first: zipfile never inflates a member past its declared size, which makes the sum a bound."""
from __future__ import annotations

import io
import re
import zipfile

from core.errors import BadDocument

# Text-heavy XML compresses about tenfold; images barely. Past this multiple of the document size
# limit an archive is a bomb, not a document.
UNZIPPED_RATIO_MAX = 20
ZIP_MEMBERS_MAX = 10_000
_HEADING_STYLE = re.compile(r"heading ([1-9])", re.IGNORECASE)


def read_docx(data: bytes, max_bytes: int):
    from docx import Document
    from docx.table import Table

    from vector.ingest.formats.converted import Converted
    from vector.ingest.formats.web import markdown_table

    _check_archive(data, max_bytes)
    document = Document(io.BytesIO(data))
    blocks = []
    for item in document.iter_inner_content():
        if isinstance(item, Table):
            rows = [[cell.text for cell in row.cells] for row in item.rows]
            if table := markdown_table(rows):
                blocks.append(table)
        elif text := item.text.strip():
            blocks.append(_paragraph(text, item.style.name if item.style is not None else ""))
    title = (document.core_properties.title or "").strip() or None
    return Converted(title, "\n\n".join(blocks) + "\n")


def _check_archive(data: bytes, max_bytes: int) -> None:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
    except zipfile.BadZipFile as exc:
        raise BadDocument(f"not a DOCX file (a DOCX is a zip archive: {exc}); it may be truncated, or a .doc "
                          "renamed: save it again as .docx") from None
    if len(members) > ZIP_MEMBERS_MAX:
        raise BadDocument(f"the DOCX archive holds {len(members):,} files, over {ZIP_MEMBERS_MAX:,}: not a document")
    unzipped = sum(m.file_size for m in members)
    if unzipped > UNZIPPED_RATIO_MAX * max_bytes:
        raise BadDocument(f"the DOCX unzips to {unzipped / 1e6:,.0f} MB, over {UNZIPPED_RATIO_MAX}x the "
                          f"{max_bytes / 1e6:.1f} MB document limit: a zip bomb, or split the document")


def _paragraph(text: str, style: str) -> str:
    if heading := _HEADING_STYLE.fullmatch(style.strip()):
        return "#" * min(int(heading.group(1)), 6) + " " + " ".join(text.split())
    if style.strip().lower() == "title":
        return "# " + " ".join(text.split())
    if style.lower().startswith("list"):
        return "- " + text
    return text
