"""The tokens every text reader splits on, defined once (pure): words, letter runs, hyphenated terms."""
from __future__ import annotations

import re

WORD = re.compile(r"\w+")  # a run of letters, digits or "_": "ERR_2051", "2025", "Москве"
LETTERS = re.compile(r"[^\W\d_]+")  # a run of letters only: "Марлоу" and "Хаус" of "Марлоу-Хаус"
LETTER = re.compile(r"[^\W\d_]")  # any letter: a name has one, "1989" is a value
HYPHENATED = re.compile(r"\w+(?:-\w+)*")  # a word with its hyphenated parts: "follow-up", "Санкт-Петербург"
