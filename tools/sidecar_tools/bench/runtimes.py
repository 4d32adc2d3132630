"""``sidecar bench --compare-runtime``: the encoder limit and the pipeline on a second runtime.

The pipeline/encoder ratio is only comparable across runtimes when both are measured in the
same run: on a shared 2-core machine, two runs an hour apart differ by more than ONNX and torch
do (docs/results/runs/2026-12-03-5000-runtimes.md). So the other runtime gets the same texts for
its encoder limit and the same stream, workers and batch size for its pipeline, in a namespace
of its own (no cached vectors, no documents of the first pipeline), and only ``embed_runtime``
differs (and with it the precision where the onnx side is int8, its default: torch runs
float32).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from indexer.adapters.embedding.embedder import Embedder, build_embedder
from indexer.settings import Settings
from sidecar_tools.bench import limits, pipeline
from sidecar_tools.bench.dataset import Dataset

Runtime = Literal["onnx", "torch"]
RUNTIMES: tuple[Runtime, ...] = ("onnx", "torch")
TAG = "runtime"  # the namespace tag of the second pipeline (``bench-<run>-runtime``)


@dataclass
class RuntimeFigures:
    """One runtime's two rates in one run, and their ratio: the pipeline's share of the encoder
    limit, which says whether the pipeline or the encoder is what holds indexing back."""

    runtime: str
    dtype: str  # what the encoder computed in (torch's ``auto`` may be bfloat16)
    encoder: limits.Throughput
    pipeline: pipeline.IngestRun
    workers_warm_s: float | None = None  # None: the run's main pipeline (reported there)

    @property
    def ratio(self) -> float:
        return self.pipeline.per_s / self.encoder.per_s if self.encoder.per_s else float("inf")

    def as_json(self) -> dict[str, Any]:
        return {
            "runtime": self.runtime,
            "dtype": self.dtype,
            "encoder_texts_per_s": self.encoder.per_s,
            "encoder_texts": self.encoder.items,
            "pipeline_messages_per_s": self.pipeline.per_s,
            "pipeline_seconds": round(self.pipeline.seconds, 3),
            "embed_s": round(self.pipeline.summary.embed_s, 3),
            "pipeline_per_encoder": round(self.ratio, 3),
            "workers_warm_s": self.workers_warm_s,
        }


def other(runtime: str) -> Runtime:
    """The runtime that is not ``runtime`` (the default for ``--compare-runtime``)."""
    return "torch" if runtime == "onnx" else "onnx"


def check(runtime: str, base: Settings) -> Runtime:
    """``runtime`` as a setting value; refused when it is the run's own (nothing to compare)."""
    if runtime not in RUNTIMES:
        raise ValueError(f"--compare-runtime must be one of {', '.join(RUNTIMES)}, not {runtime}")
    if runtime == base.embed_runtime:
        raise ValueError(f"--compare-runtime {runtime} is this run's own runtime "
                         f"(SIDECAR_EMBED_RUNTIME); compare with {other(runtime)}")
    return runtime


def with_runtime(settings: Settings, runtime: Runtime) -> Settings:
    """``settings`` on ``runtime``; the workers get it through the environment (``to_env``).
    torch runs float32 only (int8 is the onnx runtime's graph), as its settings default to."""
    update: dict[str, str] = {"embed_runtime": runtime}
    if runtime == "torch":
        update["embed_precision"] = "float32"
    return settings.model_copy(update=update)


def embedder(settings: Settings, runtime: Runtime) -> Embedder:
    return build_embedder(with_runtime(settings, runtime))


def measure(
    runtime: Runtime, base: Settings, data: Dataset, texts: list[str], run_dir: Path, run_id: str,
) -> RuntimeFigures:
    """The encoder limit on ``texts`` in this process, then the pipeline over ``data``'s stream
    with a fulltext and a vectors worker on ``runtime`` (both warmed before the clock starts)."""
    ns = with_runtime(pipeline.namespace(base, data.table, run_id, TAG, run_dir), runtime)
    encoder = embedder(ns, runtime)
    rate = limits.encoder_limit(encoder, texts, ns.batch_messages)
    workers = pipeline.start_workers(ns, ("fulltext", "vectors"), run_dir / "workers.log")
    try:
        ran = pipeline.ingest(ns, data.stream, len(data.messages), fulltext_only=False)
    finally:
        pipeline.stop(workers)
    return RuntimeFigures(runtime, encoder.dtype, rate, ran, workers.warm_s)
