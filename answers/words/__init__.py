"""Per-language word classes of questions, as data: one TOML file per language (`english.toml`,
`russian.toml`), each a table of word lists. A word class is the union of every language's list, so a
question in either language (or mixing both) is read by one set."""
from __future__ import annotations

import tomllib
from functools import lru_cache
from pathlib import Path

HERE = Path(__file__).resolve().parent
LANGUAGES = ("english", "russian")  # the text-search configuration names (core/text/language.py)


@lru_cache(maxsize=None)
def _tables() -> tuple[dict[str, list[str]], ...]:
    return tuple(tomllib.loads((HERE / f"{language}.toml").read_text(encoding="utf-8")) for language in LANGUAGES)


def word_class(name: str) -> frozenset[str]:
    """The words of class `name` in every language; KeyError names a class no language file has."""
    found = [table[name] for table in _tables() if name in table]
    if not found:
        raise KeyError(f"no word class {name!r} in answers/words/*.toml")
    return frozenset(word for words in found for word in words)
