"""Which script a text is written in, and Russian letters spelt in Latin ones (pure).

One table for both uses: a name's consonant skeleton across scripts (core/text/skeletons.skeleton:
"Москве" and "Moscow") and a borrowed word spelt back ("алерт" and "alert", answers/themes/scoped.py).
"ц" is "c" as borrowed words spell it back (инцидент, incident; Цинциннати, Cincinnati).
"""
from __future__ import annotations

import re

CYRILLIC = re.compile(r"[а-яё]", re.IGNORECASE)  # a Russian letter: `.match` a word, `.search` a text

LATIN_SPELLING = str.maketrans({
    "а": "a", "б": "b", "в": "v", "г": "g", "д": "d", "е": "e", "ё": "e", "ж": "zh", "з": "z", "и": "i",
    "й": "j", "к": "k", "л": "l", "м": "m", "н": "n", "о": "o", "п": "p", "р": "r", "с": "s", "т": "t",
    "у": "u", "ф": "f", "х": "h", "ц": "c", "ч": "ch", "ш": "sh", "щ": "shch", "ъ": "", "ы": "y", "ь": "",
    "э": "e", "ю": "yu", "я": "ya",
})


def latin_spelling(text: str) -> str:
    """Lower-case Russian letters in Latin ones, letter by letter; any other character as it is."""
    return text.translate(LATIN_SPELLING)


def mostly_cyrillic(text: str) -> bool:
    """Written in Russian: more Cyrillic letters than Latin ones ("Это «усталость от алертов» (alert fatigue)")."""
    folded = text.casefold()
    cyrillic = sum(1 for ch in folded if "а" <= ch <= "я" or ch == "ё")
    return cyrillic > sum(1 for ch in folded if "a" <= ch <= "z")


def script_name(text: str) -> str:
    """"cyrillic" for a mostly Russian text, else "latin": which language's words it can match."""
    return "cyrillic" if mostly_cyrillic(text) else "latin"
