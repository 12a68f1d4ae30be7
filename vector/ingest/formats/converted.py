"""What every format's reader returns: the document as Markdown, with the title its metadata gives."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Converted:
    title: str | None  # from the document's own metadata; None: the first heading or the file name
    text: str
