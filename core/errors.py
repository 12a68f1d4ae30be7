"""Errors a user can act on.

Every `CrossroadsError` message says what went wrong and what to do next, so the CLI and the API
can show it as is (no stack trace). Anything else escaping is a bug.
"""
from __future__ import annotations


class CrossroadsError(Exception):
    """Base for user-facing errors whose message says what to do next."""


class EmbeddingError(CrossroadsError):
    """An embedding provider failed or answered something we cannot trust."""


class DatabaseError(CrossroadsError):
    """The database is unreachable, too old, or missing an extension."""


class ModelNotServedError(CrossroadsError):
    """A search embedded its query with a model the tenant has no vectors of (e.g. after a switch).

    Raised instead of returning an empty vector leg: comparing nothing would silently turn a
    hybrid search into full-text only.
    """
