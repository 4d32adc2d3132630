"""Export a sentence-transformers model's transformer to the ONNX graph the ONNX encoder runs.

Needs the ``[torch]`` extra (torch, transformers, onnx): it runs in the dev environment and in
the image's build stage, never in a runtime image. The graph is made from the weights on disk
(``local_files_only``), never fetched, and is checked before it is published: ONNX Runtime's
hidden states must match torch's on sample texts of several lengths (a bad trace never
reaches a worker), then it is renamed into place, so a concurrent reader sees either no graph
or a whole one. Called through :func:`indexer.adapters.embedding.embedder.onnx_graph` (by
``sidecar export-onnx``, the Dockerfile's build stage, or an encoder's first use where torch is
installed).

The int8 graph is made from the float32 one (:mod:`indexer.adapters.embedding.onnx_quantize`),
so it too comes only from the shipped weights.

The TorchScript exporter (``dynamo=False``, opset 17, eager attention) is used: it traces a
BERT-style encoder in seconds without onnxscript, and the check above guards the trace.
"""

from __future__ import annotations

import importlib.util
import os
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

NEEDS = ("torch", "transformers", "onnx", "onnxruntime")

MAX_ABS_DIFF = 1e-3  # hidden-state tolerance of the check (fp32 traces agree to ~1e-5)
_SAMPLES = ["a", "mips: fix the cache flush on r4k", "patch " * 300]


def can_export() -> bool:
    """Whether this environment has what an export needs (the ``[torch]`` and ``[vectors]``
    extras): a slim runtime has not, and must be given the graph."""
    return all(importlib.util.find_spec(name) is not None for name in NEEDS)


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
