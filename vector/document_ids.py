"""The rules a document id keeps: what ingest accepts and the HTTP API can address (api/http/schemas.py)."""
from __future__ import annotations

from core.text_safety import CONTROL, SURROGATE, printable

# The HTTP API addresses documents by id and accepts no longer one (api/http/schemas.py DOC_ID_MAX).
DOC_ID_MAX_CHARS = 512


def doc_id_problem(doc_id: str) -> str | None:
    """Why the HTTP API could not address this id (the rules of api/http/schemas.py), or None."""
    if not doc_id.strip():
        return "is empty"
    if SURROGATE.search(doc_id):
        return "is not valid Unicode (a file name in another encoding than UTF-8, or a lone surrogate escape)"
    if found := CONTROL.search(doc_id):
        return f"contains a control character ({printable(found.group())})"
    if doc_id != doc_id.strip():
        return "starts or ends with whitespace"
    if len(doc_id) > DOC_ID_MAX_CHARS:
        return f"is {len(doc_id)} characters, over the {DOC_ID_MAX_CHARS} the HTTP API accepts"
    return None
