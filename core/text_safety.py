"""Characters no part of Crossroads can take: one definition for every entry point.

PostgreSQL stores neither NUL nor lone surrogates (a lone surrogate cannot even be encoded to UTF-8),
and control characters (Unicode category Cc) make names that no URL, header or terminal shows
faithfully. Checks refuse them where a name is given (ids, groups, tenants); `storable_text` repairs
free text (queries) where refusing would only fail the user.
"""
from __future__ import annotations

import re
import unicodedata

CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")  # Unicode category Cc
SURROGATE = re.compile("[\ud800-\udfff]")


def storable_text(text: str) -> str:
    """Free text as the database and the native embedder can take it: a lone surrogate (the CLI's argv
    decodes undecodable bytes to them) becomes U+FFFD and NUL a space."""
    return SURROGATE.sub("\ufffd", text).replace("\x00", " ")


def printable(text: str) -> str:
    """`text` safe to print, log and store: control characters and lone surrogates as escapes, and
    the bytes of a file name that is not UTF-8 (os.fsdecode's surrogate escapes) as \\xNN."""
    return "".join(_printable_char(c) for c in text)


def _printable_char(c: str) -> str:
    if "\udc80" <= c <= "\udcff":
        return f"\\x{ord(c) - 0xDC00:02x}"
    if unicodedata.category(c) in ("Cc", "Cs"):
        return c.encode("unicode_escape").decode("ascii")
    return c
