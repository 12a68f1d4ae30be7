"""A document's location: the folders or URL path its id names, as words (vector/ingest/contextualize.py says
what it adds to retrieval)."""
from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit

_EXTENSION = re.compile(r"\.[A-Za-z0-9]{1,8}$")
_SEPARATORS = re.compile(r"[-_+\s]+")


def document_location(doc_id: str, title: str = "") -> list[str]:
    """The folders (file ids) or URL path segments (URL ids) a document sits under, as words.

    An id without "/" is opaque (a number, a database key) and has no location, and neither is a
    slash that belongs to the title ("<dbpedia:AC/DC>" titled "AC/DC"). A URL's host and fragment
    are left out: the host is the same for every page of a site, and the fragment names the section
    the title already names; so is a file's extension. A segment that only repeats the title is left
    out too."""
    parts = urlsplit(doc_id)
    path = unquote(parts.path if parts.scheme and parts.netloc else doc_id.split("#", 1)[0])
    path = "/".join(_as_words(s) for s in path.split("/"))
    name = "/".join(_as_words(s) for s in title.split("/")).casefold()
    if "/" in name:
        path = re.sub(re.escape(name), " ", path, flags=re.IGNORECASE)
    if "/" not in path:
        return []
    segments = [s.strip() for s in path.split("/") if s.strip()]
    if segments:
        segments[-1] = _EXTENSION.sub("", segments[-1]).strip()
    return [s for s in segments if s and s.casefold() != name]


def _as_words(text: str) -> str:
    return _SEPARATORS.sub(" ", text).strip()
