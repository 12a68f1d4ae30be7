"""Per-language word classes as data: a folder holds one TOML file per language (`english.toml`,
`russian.toml`), each a table of word lists. A word class is the union of every language's list, so a text in
either language (or mixing both) is read by one set. This folder's files hold the text-wide classes
(stop words, the closed word classes, words that are never names); answers/words holds the questions' own."""
from __future__ import annotations

import tomllib
from functools import cached_property
from pathlib import Path

LANGUAGES = ("english", "russian")  # the text-search configuration names (core/text/language.py)


class WordFiles:
    """The word classes of one folder of language files."""

    def __init__(self, folder: Path):
        self.folder = folder

    @cached_property
    def _tables(self) -> tuple[dict[str, list[str]], ...]:
        return tuple(tomllib.loads((self.folder / f"{language}.toml").read_text(encoding="utf-8"))
                     for language in LANGUAGES)

    def word_class(self, name: str) -> frozenset[str]:
        """The words of class `name` in every language; KeyError names a class no language file has."""
        found = [table[name] for table in self._tables if name in table]
        if not found:
            raise KeyError(f"no word class {name!r} in {self.folder}/*.toml")
        return frozenset(word for words in found for word in words)


TEXT_WORDS = WordFiles(Path(__file__).resolve().parent)
word_class = TEXT_WORDS.word_class
