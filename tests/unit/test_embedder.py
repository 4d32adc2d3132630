"""The embedder's precision option: bfloat16 keeps every vector within the quality gate."""

from __future__ import annotations

import gzip
import json
from itertools import islice

import numpy as np
import pytest

from indexer.adapters.embedder import Embedder, native_bf16, resolve_dtype
from tests.conftest import CORPORA


def test_dtype_names() -> None:
    assert resolve_dtype("float32") == "float32"
    assert resolve_dtype("bfloat16") == "bfloat16"
    assert resolve_dtype("auto") == ("bfloat16" if native_bf16() else "float32")
    with pytest.raises(ValueError, match="embed dtype"):
        resolve_dtype("fp8")


def _texts(n: int) -> list[str]:
    with gzip.open(CORPORA / "linux-mips.jsonl.gz", "rt", encoding="utf-8") as lines:
        found = (str((json.loads(line).get("content") or {}).get("forAI") or "") for line in lines)
        return list(islice((t for t in found if t.strip()), n))


@pytest.mark.slow
def test_bfloat16_vectors_match_float32() -> None:
    """The gate of docs/benchmarks.md (cosine >= 0.99 per text) on 48 real forai texts
    (bfloat16 is the torch runtime's)."""
    texts = _texts(48)
    reference = np.asarray(
        Embedder(max_tokens=256, threads=2, batch_size=16, dtype="float32",
                 runtime="torch").embed(texts))
    half = np.asarray(
        Embedder(max_tokens=256, threads=2, batch_size=16, dtype="bfloat16",
                 runtime="torch").embed(texts))
    assert half.shape == reference.shape == (48, 384)
    assert np.allclose(np.linalg.norm(half, axis=1), 1.0, atol=1e-5)
    cosine = (half * reference).sum(axis=1)
    assert cosine.min() >= 0.99, cosine.min()
    assert not np.array_equal(half, reference), "both ran in the same precision"
