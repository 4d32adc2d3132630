"""The embedder's precision option by name (the bfloat16 quality gate runs the model: it is
``tests/integration/test_embed_runtimes.py::test_bfloat16_vectors_match_float32``)."""

from __future__ import annotations

import pytest

from indexer.adapters.embedding.embedder import native_bf16, resolve_dtype


def test_dtype_names() -> None:
    assert resolve_dtype("float32") == "float32"
    assert resolve_dtype("bfloat16") == "bfloat16"
    assert resolve_dtype("auto") == ("bfloat16" if native_bf16() else "float32")
    with pytest.raises(ValueError, match="embed dtype"):
        resolve_dtype("fp8")
