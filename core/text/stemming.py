"""Snowball stemming that is safe across threads.

A snowballstemmer object keeps its working string on itself while it stems, so one shared object
used by two threads at once corrupts both results (seen under API load as an IndexError deep in
the English stemmer). Each thread gets its own pair of stemmers.
"""
from __future__ import annotations

import threading

import snowballstemmer

_local = threading.local()


def stem_word(word: str, language: str) -> str:
    """`language`: "russian" or "english" (Snowball's names)."""
    stemmers = getattr(_local, "stemmers", None)
    if stemmers is None:
        stemmers = _local.stemmers = {"russian": snowballstemmer.stemmer("russian"),
                                      "english": snowballstemmer.stemmer("english")}
    return stemmers[language].stemWord(word)
