"""Per-document language -> PostgreSQL text-search configuration (`russian`, `english`, `simple`)."""
from __future__ import annotations

from core.text.tokens import LETTERS

_ENGLISH_FUNCTION_WORDS = frozenset(
    "the of and to in is that for it with as on are was be by this or from at an not have which you".split()
)


def detect_language(text: str) -> str:
    """`russian` when Cyrillic letters dominate, `english` when Latin text reads as English, else `simple`.

    Script decides Russian (a Russian document full of English code identifiers stays Russian);
    function words separate English from other Latin-script languages, which get the stemming-free
    `simple` configuration rather than a wrong stemmer.
    """
    letters = [c for c in text if c.isalpha()]
    if not letters:
        return "simple"
    cyrillic = sum(1 for c in letters if "\u0400" <= c <= "\u04ff")
    if cyrillic / len(letters) >= 0.3:
        return "russian"
    words = [w.lower() for w in LETTERS.findall(text)]
    if words and sum(w in _ENGLISH_FUNCTION_WORDS for w in words) / len(words) >= 0.05:
        return "english"
    return "simple"
