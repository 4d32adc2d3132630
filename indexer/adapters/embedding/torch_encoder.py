"""The torch runtime (``SIDECAR_EMBED_RUNTIME=torch``): sentence-transformers itself, for any
model it loads, on any device, in bfloat16 where the CPU computes it natively. The default
runtime is ONNX Runtime (:mod:`indexer.adapters.embedding.onnx_encoder`); both give the same
float32 vectors (tests/integration/test_embed_runtimes.py). Imported only by
:class:`indexer.adapters.embedding.embedder.Embedder`; torch itself only when this runs.
"""

from __future__ import annotations

import os
from typing import Any

from indexer.adapters.embedding.model_files import ModelInfo

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


class TorchEncoder:
    """sentence-transformers on torch (``SIDECAR_EMBED_RUNTIME=torch``): any model it loads,
    on any device; bfloat16 where the CPU computes it natively."""

    def __init__(self, info: ModelInfo, *, max_tokens: int, threads: int, batch_size: int,
                 dtype: str, device: str) -> None:
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import torch
        from sentence_transformers import SentenceTransformer

        torch.set_num_threads(threads)
        self._model: Any = SentenceTransformer(str(info.path), device=device,
                                               local_files_only=True)
        # never past what the model was trained for (its own max_seq_length)
        self._model.max_seq_length = min(max_tokens, info.max_seq_length or max_tokens)
        # bfloat16 is chosen for CPUs that compute it natively; other devices keep float32
        self.dtype = resolve_dtype(dtype) if device == "cpu" else (
            "float32" if dtype == "auto" else dtype)
        if self.dtype == "bfloat16":
            self._model.to(torch.bfloat16)
        self.batch_size = batch_size
        size = (getattr(self._model, "get_embedding_dimension", None)
                or self._model.get_sentence_embedding_dimension)
        self.dimension = int(size() or info.dimension)

    def encode(self, texts: list[str], prompt: str | None) -> Any:
        return self._model.encode(
            texts, prompt=prompt, batch_size=self.batch_size, normalize_embeddings=True,
            convert_to_numpy=True, show_progress_bar=False,
        )
