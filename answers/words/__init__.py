"""Per-language word classes of questions, as data: one TOML file per language (`english.toml`,
`russian.toml`), each a table of word lists, read as core/text/words reads the text-wide ones. A word class
is the union of every language's list, so a question in either language (or mixing both) is read by one set."""
from __future__ import annotations

from pathlib import Path

from core.text.words import LANGUAGES, WordFiles

HERE = Path(__file__).resolve().parent
QUESTION_WORDS = WordFiles(HERE)
word_class = QUESTION_WORDS.word_class

__all__ = ["HERE", "LANGUAGES", "word_class"]
