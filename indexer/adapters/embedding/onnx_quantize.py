"""The int8 graph: made from the float32 graph of the shipped weights, never fetched.

Needs ``onnx`` and ONNX Runtime's own optimizer and quantizer (no torch): it runs wherever the
float32 graph was exported or given (the dev environment, CI, the image's build stage), and is
cached beside the float32 graph under its own name, so it too comes only from the shipped
weights. Called through :func:`indexer.adapters.embedding.embedder.onnx_graph`.

The recipe (docs/encoder.md, "The int8 encoder"), and why each part:

1. ONNX Runtime's transformer optimizer first (fused ``Attention``, ``EmbedLayerNormalization``,
   ``BiasGelu``): the quantizer then sees one Attention whose Q/K/V projections it quantizes
   together (``QAttention``). *Not* ``SkipLayerNormalization``: ONNX Runtime 1.32's CPU kernel
   for it measured ~20x slower than the Add + LayerNormalization it replaces (50 vs 2-3 ms on a
   32x191x384 batch), a fifth of the int8 graph's time; the encoder's sessions also disable
   ONNX Runtime's own load-time fusion of it (:data:`DISABLED_OPTIMIZERS`).
2. Dynamic int8 with per-output-channel int8 weights on every MatMul and Attention (activations
   scaled per batch at run time, uint8: ``DynamicQuantizeMatMul``, MLAS's u8s8 kernels).
3. Except the ``[CLS]`` position's feed-forward block, which runs in float32
   (:func:`split_cls`). In every layer of MiniLM the feed-forward inputs of position 0 reach
   24-30 while every other token stays under 6-13 (p99.9 2-7), so one per-tensor scale sized by
   ``[CLS]`` left the other tokens a fifth of the int8 range: that is why the feed-forward
   layers could not be quantized before (recipe ``dyn-pc-2`` kept the output projections float,
   a third of the arithmetic). Split off, the rest quantize as well as the attention does.
4. Embeddings, LayerNorm, Softmax, GELU and the attention's Q.K / weights.V products stay
   float32 (the quantizer does not touch them).
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np

QUANT_NEEDS = ("onnx", "onnxruntime")
# Bump when any part of the recipe changes: it is part of the int8 graph's file name, so a
# changed recipe is a new graph (and, through the graph, never a stale one).
QUANT_RECIPE = "dyn-pc-cls-3"
QUANT_MIN_COSINE = 0.95  # the export's own sanity check on its sample texts (see _check_int8)
# ONNX Runtime graph optimizers the encoder's sessions leave out (see the module docstring)
DISABLED_OPTIMIZERS = ["SkipLayerNormFusion"]
_FFN_IN = re.compile(r"layer\.(\d+)/intermediate/dense/MatMul$")
_FFN_OUT = re.compile(r"layer\.(\d+)/output/dense/MatMul$")
_ACTIVATIONS = ("BiasGelu", "Gelu", "FastGelu")
_SAMPLES = ["a", "mips: fix the cache flush on r4k", "patch " * 300]


class _NoPreprocessingHint(logging.Filter):
    """Drops the quantizer's advice, logged on the root logger at every call, to run ONNX
    Runtime's pre-processing first: the transformer optimizer already ran."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "pre-processing before quantization" not in record.getMessage()


def can_quantize() -> bool:
    """Whether this environment can make the int8 graph from a float32 one (``onnx`` and
    ONNX Runtime's quantization tools; no torch needed)."""
    return all(importlib.util.find_spec(name) is not None for name in QUANT_NEEDS)


def split_cls(model: Any) -> list[str]:
    """Rewrite each layer's feed-forward block (MatMul, GELU, MatMul) so that sequence
    position 0 (``[CLS]``) goes through a float32 copy of it and positions 1.. through the one
    to be quantized, joined again after the output projection: the ``[CLS]`` row's outliers no
    longer set the int8 scale of the whole batch. Both paths share the weight initializers
    (the quantizer keeps the float one for the excluded nodes). Returns the float32 path's
    node names, to exclude from quantization. Raises when the graph holds no such block (a
    model named otherwise: the recipe would silently quantize the outliers)."""
    import onnx
    from onnx import helper, numpy_helper

    graph = model.graph
    producer = {out: node for node in graph.node for out in node.output}
    blocks = []  # (first MatMul, activation, output MatMul) of each layer
    for node in graph.node:
        if node.op_type == "MatMul" and _FFN_OUT.search(node.name):
            act = producer.get(node.input[0])
            first = producer.get(act.input[0]) if act is not None else None
            if (act is None or act.op_type not in _ACTIVATIONS or first is None
                    or first.op_type != "MatMul" or not _FFN_IN.search(first.name)):
                raise RuntimeError(f"{node.name}: not a MatMul-GELU-MatMul feed-forward block")
            blocks.append((first, act, node))
    if not blocks:
        raise RuntimeError("no feed-forward blocks found: the graph's nodes are named otherwise")
    for name, value in (("cls_0", 0), ("cls_1", 1), ("cls_end", 2**62), ("cls_axis", 1)):
        graph.initializer.append(numpy_helper.from_array(np.array([value], np.int64), name))
    where = {b[0].name: i for i, b in enumerate(blocks)} | {b[2].name: i for i, b in
                                                             enumerate(blocks)}
    nodes, float_names = [], []
    for original in graph.node:
        node = onnx.NodeProto()
        node.CopyFrom(original)
        if node.name not in where:
            nodes.append(node)
            continue
        first, act, last = blocks[where[node.name]]
        tag = f"cls{where[node.name]}"
        if node.name == first.name:  # position 0 apart, through the block in float32
            x = node.input[0]
            nodes += [
                helper.make_node("Slice", [x, "cls_0", "cls_1", "cls_axis"], [f"{tag}_x"],
                                 name=f"{tag}/Slice"),
                helper.make_node("Slice", [x, "cls_1", "cls_end", "cls_axis"], [f"{tag}_rest"],
                                 name=f"{tag}/SliceRest"),
                helper.make_node("MatMul", [f"{tag}_x", first.input[1]], [f"{tag}_h"],
                                 name=f"{tag}/MatMulIn"),
                helper.make_node(act.op_type, [f"{tag}_h", *act.input[1:]], [f"{tag}_g"],
                                 name=f"{tag}/{act.op_type}", domain=act.domain),
                helper.make_node("MatMul", [f"{tag}_g", last.input[1]], [f"{tag}_y"],
                                 name=f"{tag}/MatMulOut"),
            ]
            float_names += [f"{tag}/MatMulIn", f"{tag}/MatMulOut"]
            node.input[0] = f"{tag}_rest"
            nodes.append(node)
        else:  # the output projection: the two paths joined again
            joined, node.output[0] = node.output[0], f"{tag}_rest_y"
            nodes += [node, helper.make_node("Concat", [f"{tag}_y", f"{tag}_rest_y"], [joined],
                                             name=f"{tag}/Concat", axis=1)]
    del graph.node[:]
    graph.node.extend(nodes)
    return float_names


def quantize(fp32_graph: Path, transformer: Path, max_len: int, target: Path) -> Path:
    """Write the int8 graph of ``fp32_graph`` at ``target`` by the recipe above, check it
    like the float32 export (pooled vectors of sample texts against the float32 graph's), then
    rename it into place, so a concurrent reader sees either no graph or a whole one."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers.fusion_options import FusionOptions
    from onnxruntime.transformers.optimizer import optimize_model

    config = json.loads((transformer / "config.json").read_text(encoding="utf-8"))
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    fused = target.with_name(f".{target.name}.{os.getpid()}.fused.tmp")
    options = FusionOptions("bert")
    options.enable_skip_layer_norm = False
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            optimized = optimize_model(
                str(fp32_graph), model_type="bert", opt_level=0, optimization_options=options,
                num_heads=int(config["num_attention_heads"]),
                hidden_size=int(config["hidden_size"]))
            excluded = split_cls(optimized.model)
            if len(excluded) != 2 * int(config["num_hidden_layers"]):
                raise RuntimeError(f"expected one feed-forward block per layer, found "
                                   f"{len(excluded) // 2}: the nodes are named otherwise")
            optimized.save_model_to_file(str(fused))  # with its com.microsoft opset
            hint = _NoPreprocessingHint()  # the optimizer above is that pre-processing
            logging.getLogger().addFilter(hint)
            try:
                quantize_dynamic(
                    str(fused), str(partial), per_channel=True, weight_type=QuantType.QInt8,
                    op_types_to_quantize=["MatMul", "Attention"], nodes_to_exclude=excluded,
                    extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
                )
            finally:
                logging.getLogger().removeFilter(hint)
        _check_int8(partial, fp32_graph, transformer, max_len)
        partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)
        fused.unlink(missing_ok=True)
    return target


def _check_int8(graph: Path, fp32_graph: Path, transformer: Path, max_len: int) -> None:
    """Mean-pooled vectors of the sample texts from the int8 graph against the float32
    graph's: a quantization that went wrong (a node quantized that must not be) is caught
    here, before any worker loads it. The retrieval gates are the bench's and CI's job."""
    import onnxruntime as ort
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(transformer / "tokenizer.json"))
    tokenizer.enable_truncation(max_length=max_len)
    tokenizer.enable_padding()
    batch = tokenizer.encode_batch(_SAMPLES)
    given = {"input_ids": np.asarray([e.ids for e in batch], dtype=np.int64),
             "attention_mask": np.asarray([e.attention_mask for e in batch], dtype=np.int64),
             "token_type_ids": np.asarray([e.type_ids for e in batch], dtype=np.int64)}
    mask = given["attention_mask"][..., None].astype(np.float32)
    pooled = []
    for path in (graph, fp32_graph):
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"],
                                       disabled_optimizers=DISABLED_OPTIMIZERS)
        hidden = session.run(None, {i.name: given[i.name] for i in session.get_inputs()})[0]
        vec = (hidden * mask).sum(axis=1) / mask.sum(axis=1)
        pooled.append(vec / np.linalg.norm(vec, axis=1, keepdims=True))
    worst = float((pooled[0] * pooled[1]).sum(axis=1).min())
    if worst < QUANT_MIN_COSINE:
        raise RuntimeError(f"int8 graph's vectors differ from float32's (cosine {worst:.3f})")
