"""Codes a reader's documents never mention (ERR_9999, INC-2023-005: core.text.terms.codes).

A question or query about such a code cannot be answered by any passage the reader may read: the
passages found are about other codes. `lookup` asks the database (full-text GIN index, ACL in SQL);
`check_codes` is what the answer writer and the search use case call: a failed lookup never fails
their answer, it comes back as an error for them to report.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Mapping, Sequence

from core.text_safety import storable_text
from vector.search import sql as search_sql

log = logging.getLogger(__name__)

MAX_CHECKED_CODES = 32  # a pasted log must not become thousands of lookups; later codes are not claimed


def lookup(db, tx_settings: Mapping[str, str], tenant: str, groups: Sequence[str],
           codes: Sequence[str]) -> tuple[str, ...]:
    """Which of the first MAX_CHECKED_CODES `codes` no chunk the reader may read holds; every code when
    the reader has no group (nothing is readable)."""
    groups = sorted({g for g in groups if g})
    codes = [code for code in dict.fromkeys(storable_text(c) for c in codes) if code.strip()][:MAX_CHECKED_CODES]
    if not codes or not groups:
        return tuple(codes)
    with db.connection() as conn, search_sql.read_only(conn, tx_settings):
        return tuple(search_sql.unmentioned(conn, tenant=tenant, groups=groups, codes=codes))


@dataclass(frozen=True)
class CodeCheck:
    unmentioned: tuple[str, ...] = ()
    error: str | None = None  # the lookup failed: nothing is claimed, and the caller says so


def check_codes(searcher, tenant: str, groups: Sequence[str], codes: Sequence[str]) -> CodeCheck:
    """`searcher.unmentioned` (HybridSearcher or a wrapper of it) for `codes`, no lookup when there are none."""
    if not codes:
        return CodeCheck()
    try:
        return CodeCheck(tuple(searcher.unmentioned(tenant, list(groups), codes)))
    except Exception as exc:  # noqa: BLE001 - a failed side check must not fail the answer or the search
        log.warning("the check for unmentioned codes failed: %s", exc)
        return CodeCheck(error=f"the check for codes no readable document mentions failed: {type(exc).__name__}: {exc}")
