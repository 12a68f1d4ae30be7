"""English and Russian words that translate each other, as Snowball stems: how the search finds a page
written in the other language than the question by its words, and how the offline answers match a
question's words with a unit written in the other language ("salary" with "зарплата", "supplier" with
"поставщик"), where only names matched before (by their consonants, core/text/skeletons.py).

Two tables, built from general dictionaries (bench/build_lexicon.py says which and how), not from any
corpus or question:
- `translations`: one sense per headword (enru-dict), so a word's other senses are missing ("lead" is only
  "свинец"). The answers judge with it whether a unit states the question's words: a wrong sense there
  vouches for a unit about something else.
- `search_translations`: the same and every plain sense of the Mueller dictionary ("lead" is also
  "руководство", "head" also "руководитель"). The search finds pages with it: a missed sense loses the
  page, while a wrong one only adds words that the search weighs as one concept (vector/search/bm25.py).
A stem's translations are the union over both directions.
"""
from __future__ import annotations

import gzip
from collections import defaultdict
from functools import lru_cache
from pathlib import Path

LEXICON_PATH = Path(__file__).with_name("en_ru_stems.tsv.gz")
SENSES_PATH = Path(__file__).with_name("en_ru_senses.tsv.gz")


@lru_cache(maxsize=2)
def _table(path: Path) -> dict[str, frozenset[str]]:
    both: dict[str, set[str]] = defaultdict(set)
    try:
        with gzip.open(path, "rt", encoding="utf-8") as lines:
            for line in lines:
                english, russian = line.rstrip("\n").split("\t")
                both[english].add(russian)
                both[russian].add(english)
    except (OSError, EOFError, UnicodeDecodeError, ValueError) as exc:
        raise RuntimeError(f"{path} is missing or damaged ({exc}): reinstall Crossroads, or rebuild it as "
                           "bench/build_lexicon.py says") from exc
    return {s: frozenset(t) for s, t in both.items()}


def translations(stem: str) -> frozenset[str]:
    """The stems of the other language that translate `stem` in its one common sense (empty for a stem
    the dictionary lacks)."""
    return _table(LEXICON_PATH).get(stem, frozenset())


def search_translations(stem: str) -> frozenset[str]:
    """The stems of the other language that translate `stem` in any of its plain senses."""
    return _table(SENSES_PATH).get(stem, frozenset())


def translated_in(stem: str, stems: frozenset[str] | set[str]) -> bool:
    """Whether `stems` (a text's) hold a translation of `stem`."""
    return not translations(stem).isdisjoint(stems)


def load_lexicons() -> None:
    """Read both tables now (a server's start-up), not at the first question that needs them."""
    _table(LEXICON_PATH)
    _table(SENSES_PATH)
