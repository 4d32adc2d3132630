"""Encoder variants: the float32 graph the encoder ships against its int8 graph, same texts,
same run, with the retrieval gates that decide whether int8 may be the default.

Every variant is the production encoder (:class:`indexer.adapters.embedding.embedder.Embedder` on
the
onnx runtime: the same tokenizer, token-length bucketed batches, pooling and normalisation),
so what is timed is what a vectors worker runs. Variants are interleaved chunk by chunk so a
noisy neighbour slows every variant alike (the 2-core bench machine is shared): compare ratios
within one run, not texts/s across runs.

The gates (issue 42), each against the float32 reference on the same texts:

- same-thread recall@10 within :data:`MAX_RECALL_DROP` of the reference's;
- top-10 overlap: the share of a message's 10 nearest neighbours (by the variant's vectors)
  that are also among its 10 nearest by the reference's, mean over messages
  >= :data:`MIN_OVERLAP` (the 5th percentile and the minimum are reported beside it);
- per-text cosine to the reference vector: minimum >= :data:`MIN_COSINE` and 1st percentile
  >= :data:`MIN_P1_COSINE`. Why these floors: on the linux-mips texts the int8 graph's minimum
  was ~0.96 and its 1st percentile ~0.98 while recall and overlap held; a broken quantization
  (per-tensor dynamic int8 without fusions, or static activation scales) falls to 0.6-0.85. The
  floor is a tripwire for such a graph, the retrieval gates are what users feel;
- batch stability (int8 only): the same texts encoded one at a time vs in batches (dynamic
  int8 scales activations per batch), minimum cosine reported;
- speed: >= :data:`MIN_SPEEDUP` x the reference's texts/s on a VNNI CPU (AVX-512 VNNI or
  AVX-VNNI), >= :data:`MIN_SPEEDUP_AVX2` x on AVX2 only (the kernel path is reported).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from indexer.adapters.embedding.embedder import Embedder, onnx_graph, with_precision
from indexer.adapters.embedding.onnx_encoder import kernel_path

Encode = Callable[[list[str]], Any]  # texts -> (n, d) normalised float array
MIN_COSINE = 0.95
MIN_P1_COSINE = 0.97
MAX_RECALL_DROP = 0.01
MIN_OVERLAP = 0.90
MIN_SPEEDUP = 2.5
MIN_SPEEDUP_AVX2 = 1.6
STABILITY_TEXTS = 40


@dataclass
class Variant:
    name: str
    encode: Encode
    precision: str = "float32"
    tokens: int = 256
    seconds: float = 0.0
    chunks: list[float] = field(default_factory=list)  # seconds of each interleaved chunk
    vectors: Any = None
    single: Any = None  # the first STABILITY_TEXTS texts encoded one at a time (int8)


def onnx_encoder(precision: str, max_tokens: int, threads: int, batch: int,
                 onnx_dir: Path | None = None) -> Encode:
    """The production encoder at ``precision`` (its graph made here if missing)."""
    spec = with_precision("", precision)
    onnx_graph(spec, onnx_dir)
    embedder = Embedder(max_tokens=max_tokens, threads=threads, batch_size=batch,
                        runtime="onnx", model=spec, onnx_dir=onnx_dir)
    return lambda texts: np.asarray(embedder.embed(texts), dtype=np.float32)


def variants(max_tokens: int, threads: int, batch: int, onnx_dir: Path | None = None,
             short: int = 128) -> list[Variant]:
    """The float32 reference first (the vectors every gate compares against), the int8 graph
    at the same truncation, then both at ``short`` tokens (the sequence length is part of
    the recipe: a shorter one is faster, and the gates say what it costs)."""
    found = [
        Variant(f"onnx float32, {max_tokens} tokens (reference)",
                onnx_encoder("float32", max_tokens, threads, batch, onnx_dir), "float32",
                max_tokens),
        Variant(f"onnx int8, {max_tokens} tokens",
                onnx_encoder("int8", max_tokens, threads, batch, onnx_dir), "int8", max_tokens),
    ]
    if short and short < max_tokens:
        found += [
            Variant(f"onnx int8, {short} tokens",
                    onnx_encoder("int8", short, threads, batch, onnx_dir), "int8", short),
            Variant(f"onnx float32, {short} tokens",
                    onnx_encoder("float32", short, threads, batch, onnx_dir), "float32", short),
        ]
    return found


def measure(variants: list[Variant], texts: Sequence[str], chunk: int) -> None:
    """Encode ``texts`` with every variant, chunk by chunk in turn (interleaved timing); then
    the int8 variants' batch stability on the first texts, one at a time (not timed)."""
    parts: dict[str, list[Any]] = {v.name: [] for v in variants}
    for v in variants:
        v.encode(list(texts[:2]))  # warm-up
    for i in range(0, len(texts), chunk):
        for v in variants:
            started = time.perf_counter()
            parts[v.name].append(v.encode(list(texts[i : i + chunk])))
            v.chunks.append(time.perf_counter() - started)
            v.seconds += v.chunks[-1]
    for v in variants:
        v.vectors = np.concatenate(parts[v.name])
        if v.precision == "int8":
            v.single = np.concatenate([v.encode([t]) for t in texts[:STABILITY_TEXTS]])


def neighbours(vectors: Any, k: int = 10) -> Any:
    """Each message's k nearest others (indices), by cosine."""
    sims = vectors @ vectors.T
    np.fill_diagonal(sims, -np.inf)
    return np.argsort(-sims, axis=1)[:, :k]


def same_thread_recall(vectors: Any, threads: Sequence[str], k: int = 10) -> float:
    """Mean over messages with thread-mates: share of thread-mates (at most k) in the top k."""
    top = neighbours(vectors, k)
    labels = np.asarray(threads)
    scores = []
    for i, row in enumerate(top):
        mates = int((labels == labels[i]).sum()) - 1
        if mates:
            scores.append(float((labels[row] == labels[i]).sum()) / min(k, mates))
    return float(np.mean(scores)) if scores else float("nan")


def top_overlap(vectors: Any, reference: Any, k: int = 10) -> Any:
    """Per message: the share of its k nearest (by ``vectors``) among its k nearest by
    ``reference``."""
    mine, theirs = neighbours(vectors, k), neighbours(reference, k)
    return np.asarray([len(set(a) & set(b)) / k for a, b in zip(mine, theirs, strict=True)])


def compare(variants: list[Variant], threads: Sequence[str]) -> list[dict[str, Any]]:
    """Throughput and the gates of each variant against the first (the float32 reference)."""
    base = variants[0]
    base_recall = same_thread_recall(base.vectors, threads)
    path = kernel_path()
    floor = MIN_SPEEDUP if "vnni" in path else MIN_SPEEDUP_AVX2
    rows = []
    for v in variants:
        cosine = (v.vectors * base.vectors).sum(axis=1)
        recall = same_thread_recall(v.vectors, threads)
        overlap = top_overlap(v.vectors, base.vectors)
        speedup = base.seconds / v.seconds
        # the median of the chunks' ratios: a neighbour's burst slows a few chunks, not it
        per_chunk = float(np.median(np.asarray(base.chunks) / np.asarray(v.chunks)))
        stable = (float((v.single * v.vectors[: len(v.single)]).sum(axis=1).min())
                  if v.single is not None else None)
        quality = bool(
            cosine.min() >= MIN_COSINE and np.percentile(cosine, 1) >= MIN_P1_COSINE
            and recall >= base_recall - MAX_RECALL_DROP and overlap.mean() >= MIN_OVERLAP
        )
        rows.append({
            "variant": v.name,
            "precision": v.precision,
            "tokens": v.tokens,
            "texts": len(v.vectors),
            "texts_per_s": len(v.vectors) / v.seconds,
            "speedup": speedup,
            "speedup_median_chunk": per_chunk,
            "min_cosine": float(cosine.min()),
            "p1_cosine": float(np.percentile(cosine, 1)),
            "recall_at_10": recall,
            "recall_delta": recall - base_recall,
            "overlap_mean": float(overlap.mean()),
            "overlap_p5": float(np.percentile(overlap, 5)),
            "overlap_min": float(overlap.min()),
            "batch_stability_min_cosine": stable,
            "kernel_path": path,
            "passes_quality": quality,
            "passes_speed": bool(speedup >= floor) if v is not base else None,
        })
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    """The rows as the table docs/encoder.md shows."""
    lines = [
        f"kernel path: {rows[0]['kernel_path']} (speed gate "
        f"{MIN_SPEEDUP if 'vnni' in rows[0]['kernel_path'] else MIN_SPEEDUP_AVX2}x)",
        "",
        "| variant | texts/s | x ref (chunk median) | min cos | p1 cos | recall@10 | Δ recall "
        "| overlap mean | p5 | min | batch-stable min cos | quality gates | speed gate |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for r in rows:
        stable = r["batch_stability_min_cosine"]
        speed = r["passes_speed"]
        lines.append(
            f"| {r['variant']} | {r['texts_per_s']:.1f} | {r['speedup']:.2f} "
            f"({r['speedup_median_chunk']:.2f}) | "
            f"{r['min_cosine']:.4f} | {r['p1_cosine']:.4f} | {r['recall_at_10']:.3f} | "
            f"{r['recall_delta']:+.3f} | {r['overlap_mean']:.3f} | {r['overlap_p5']:.2f} | "
            f"{r['overlap_min']:.2f} | {'' if stable is None else f'{stable:.4f}'} | "
            f"{'pass' if r['passes_quality'] else 'FAIL'} | "
            f"{'' if speed is None else ('pass' if speed else 'FAIL')} |"
        )
    return "\n".join(lines)
