"""Export a sentence-transformers model's transformer to the ONNX graph the ONNX encoder runs.

Needs the ``[torch]`` extra (torch, transformers, onnx): it runs in the dev environment and in
the image's build stage, never in a runtime image. The graph is made from the weights on disk
(``local_files_only``), never fetched, and is checked before it is published: ONNX Runtime's
hidden states must match torch's on sample texts of several lengths (a bad trace never
reaches a worker), then it is renamed into place, so a concurrent reader sees either no graph
or a whole one. Called through :func:`indexer.adapters.embedding.embedder.onnx_graph` (by
``sidecar export-onnx``, the Dockerfile's build stage, or an encoder's first use where torch is
installed).

The int8 graph (:func:`quantize`) is made from the float32 one, by ONNX Runtime's own
optimizer and quantizer, on the same machine and at the same time (cached beside it under its
own name), so it too comes only from the shipped weights.

The TorchScript exporter (``dynamo=False``, opset 17, eager attention) is used: it traces a
BERT-style encoder in seconds without onnxscript, and the check above guards the trace.
"""

from __future__ import annotations

import importlib.util
import os
import re
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

NEEDS = ("torch", "transformers", "onnx", "onnxruntime")
QUANT_NEEDS = ("onnx", "onnxruntime")

MAX_ABS_DIFF = 1e-3  # hidden-state tolerance of the check (fp32 traces agree to ~1e-5)
_SAMPLES = ["a", "mips: fix the cache flush on r4k", "patch " * 300]


def can_export() -> bool:
    """Whether this environment has what an export needs (the ``[torch]`` and ``[vectors]``
    extras): a slim runtime has not, and must be given the graph."""
    return all(importlib.util.find_spec(name) is not None for name in NEEDS)


def can_quantize() -> bool:
    """Whether this environment can make the int8 graph from a float32 one (``onnx`` and
    ONNX Runtime's quantization tools; no torch needed)."""
    return all(importlib.util.find_spec(name) is not None for name in QUANT_NEEDS)


def export(transformer: Path, max_len: int, target: Path) -> Path:
    """Write and check the graph of the transformer in ``transformer`` at ``target``."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    import torch
    from transformers import AutoModel, AutoTokenizer

    source = str(transformer)
    model = AutoModel.from_pretrained(source, local_files_only=True,
                                      attn_implementation="eager").eval()
    tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=True)
    names = [n for n in ("input_ids", "attention_mask", "token_type_ids")
             if n in tokenizer.model_input_names]

    class Hidden(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = model

        def forward(self, *inputs: Any) -> Any:
            return self.inner(**dict(zip(names, inputs, strict=True)))[0]

    # torch's own hidden states, before the export: tracing leaves the module unfit to compare
    checks = tokenizer(_SAMPLES, padding=True, truncation=True, max_length=max_len,
                       return_tensors="pt")
    with torch.no_grad():
        expected = model(**{n: checks[n] for n in names})[0].numpy()
    sample = tokenizer(["a b", "c"], padding=True, return_tensors="pt")
    target.parent.mkdir(parents=True, exist_ok=True)
    for stale in target.parent.glob(f".{target.name}.*.tmp"):  # of a process killed mid-export
        if time.time() - stale.stat().st_mtime > 3600:
            stale.unlink(missing_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        # the tracer's warnings (a legacy exporter, a branch traced as a constant) are what
        # the check below guards: not worth a line in every worker's first log
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                Hidden(), tuple(sample[n] for n in names), str(partial),
                input_names=names, output_names=["hidden"], opset_version=17, dynamo=False,
                dynamic_axes={n: {0: "batch", 1: "seq"} for n in [*names, "hidden"]},
            )
        _check(partial, {n: checks[n].numpy().astype(np.int64) for n in names}, expected)
        partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)
    return target


def _check(graph: Path, feed: dict[str, Any], expected: Any) -> None:
    """ONNX Runtime's hidden states against torch's on padded, short and truncated texts, at
    the positions pooling reads (padding's are masked out)."""
    import onnxruntime as ort

    session = ort.InferenceSession(str(graph), providers=["CPUExecutionProvider"])
    got = session.run(None, feed)[0]
    real = feed["attention_mask"][..., None] > 0
    diff = float(np.abs(np.where(real, got - expected, 0.0)).max())
    if diff > MAX_ABS_DIFF:
        raise RuntimeError(f"exported graph differs from torch (max |diff| {diff:.2e})")


# The int8 recipe (docs/encoder.md, "The int8 encoder"): what measured best here against the
# float32 graph on real linux-mips texts. Bump QUANT_RECIPE when any part of it changes: it is
# part of the int8 graph's file name, so a changed recipe is a new graph, never a stale one.
QUANT_RECIPE = "dyn-pc-2"
# Left in float32: every layer's feed-forward output projection (its input is the GELU's
# output, whose outliers a per-tensor int8 scale crushes; the last one also writes the hidden
# states that are pooled into the vector). Measured on 570 linux-mips texts in one run: mean
# top-10 overlap 0.904 -> 0.930, recall@10 -0.006 -> -0.003, cosine p1 0.981 -> 0.990, for
# 1.55x -> 1.36x float32's texts/s. Embeddings, LayerNorm, Softmax and GELU are never
# quantized by this recipe (only MatMul and the fused Attention's projections are).
FLOAT_NODES = re.compile(r"layer\.\d+/output/dense/MatMul$")
QUANT_MIN_COSINE = 0.95  # the export's own sanity check on its sample texts (see _check_int8)


def quantize(fp32_graph: Path, transformer: Path, max_len: int, target: Path) -> Path:
    """Write the int8 graph of ``fp32_graph`` at ``target``: ONNX Runtime's transformer
    optimizations first (fused attention, SkipLayerNorm, BiasGelu: the quantizer then sees one
    Attention whose Q/K/V projections it can quantize together), then dynamic int8 with
    per-output-channel int8 weights for MatMul and Attention, the feed-forward output
    projections (:data:`FLOAT_NODES`) left float32. Needs ``onnx`` and ``onnxruntime`` only
    (no torch): a graph and the weights' config are enough, so it runs where the float32
    graph was exported or given. Checked like the float32 export (pooled vectors of the
    sample texts against the float32 graph's), then renamed into place.

    Why dynamic and not static QDQ (measured, docs/encoder.md): static per-tensor activation
    scales calibrated on mail collapsed the feed-forward activations (minimum cosine 0.71); the
    QDQ graph whose activations stay float (weight-only int8) kept cosine 0.993 but ran no
    faster than float32 on this ONNX Runtime; dynamic per-channel passed the retrieval gates
    and ran faster (how much: docs/encoder.md)."""
    import json

    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers.fusion_options import FusionOptions
    from onnxruntime.transformers.optimizer import optimize_model

    config = json.loads((transformer / "config.json").read_text(encoding="utf-8"))
    heads, hidden = int(config["num_attention_heads"]), int(config["hidden_size"])
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    fused = target.with_name(f".{target.name}.{os.getpid()}.fused.tmp")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            optimized = optimize_model(str(fp32_graph), model_type="bert", num_heads=heads,
                                       hidden_size=hidden, opt_level=0,
                                       optimization_options=FusionOptions("bert"))
            optimized.save_model_to_file(str(fused))
            excluded = [n.name for n in onnx.load(str(fused)).graph.node
                        if n.op_type == "MatMul" and FLOAT_NODES.search(n.name)]
            if len(excluded) != int(config["num_hidden_layers"]):
                raise RuntimeError(f"expected one feed-forward output MatMul per layer, found "
                                   f"{len(excluded)}: the float nodes are named otherwise")
            quantize_dynamic(
                str(fused), str(partial), per_channel=True, weight_type=QuantType.QInt8,
                op_types_to_quantize=["MatMul", "Attention"], nodes_to_exclude=excluded,
                extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
            )
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
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        hidden = session.run(None, {i.name: given[i.name] for i in session.get_inputs()})[0]
        vec = (hidden * mask).sum(axis=1) / mask.sum(axis=1)
        pooled.append(vec / np.linalg.norm(vec, axis=1, keepdims=True))
    worst = float((pooled[0] * pooled[1]).sum(axis=1).min())
    if worst < QUANT_MIN_COSINE:
        raise RuntimeError(f"int8 graph's vectors differ from float32's (cosine {worst:.3f})")
