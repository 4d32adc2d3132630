"""Issue 42 part 2: the precision is part of the encoder and of the collection's name.

int8 vectors are not interchangeable with float32 ones for the same model (cosine ~0.96-0.99
per text), so ``SIDECAR_EMBED_PRECISION=int8`` names its own collections (``-int8``) and a
collection is always embedded at the precision its name says: switching the setting without a
reindex routes the new configured collection to a new name and keeps writing and searching an
existing float32 collection with float32 vectors, never a mix. No model is run here.
"""

from __future__ import annotations

from typing import Any

import pytest

from indexer.adapters import factories
from indexer.adapters.embedding import embedder as embedder_mod
from indexer.adapters.embedding.model_files import (
    MODEL_SLUG,
    ModelError,
    model_catalog,
    model_info,
    split_precision,
    with_precision,
)
from indexer.adapters.qdrant import targets as vt
from indexer.adapters.qdrant.index import VectorIndex
from indexer.pipeline import vector_sync
from indexer.settings import Settings

CLIENT: Any = None  # naming never touches the client


def _recorder(built: list[str]) -> Any:
    """A stand-in for ``cached_embedder`` that records which encoder spec was asked for."""
    def cached(model: str, *args: Any) -> str:
        built.append(model)
        return model
    return cached


def test_the_spec_carries_the_precision() -> None:
    assert with_precision("", "int8") == "#int8"
    assert with_precision("#int8", "float32") == ""
    assert split_precision("/models/e5#int8") == ("/models/e5", "int8")
    assert split_precision("/models/e5") == ("/models/e5", "float32")
    with pytest.raises(ModelError):
        with_precision("", "int4")
    info = model_info("#int8")
    assert (info.slug, info.base_slug, info.precision) == (f"{MODEL_SLUG}-int8", MODEL_SLUG,
                                                           "int8")
    assert model_info("").precision == "float32"


def test_int8_is_the_default_but_on_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    """int8 passes the retrieval gates (docs/encoder.md), so it is the default; torch runs no
    int8 graph, so there the unset precision is float32, and an explicit int8 is refused."""
    monkeypatch.delenv("SIDECAR_EMBED_PRECISION", raising=False)
    monkeypatch.delenv("SIDECAR_EMBED_RUNTIME", raising=False)
    assert Settings().embed_precision == "int8"
    assert Settings(embed_runtime="torch").embed_precision == "float32"
    monkeypatch.setenv("SIDECAR_EMBED_RUNTIME", "torch")
    assert Settings().embed_precision == "float32"
    monkeypatch.setenv("SIDECAR_EMBED_PRECISION", "int8")
    assert Settings().embed_precision == "int8"
    # every place that names the configured collection reads it here (the API, the workers,
    # reconcile and purge, the benches)
    assert factories.vector_slug(Settings()) == f"{MODEL_SLUG}-int8"
    assert factories.vector_slug(Settings(embed_precision="float32")) == MODEL_SLUG
    with pytest.raises(ModelError, match="onnx runtime's int8 graph"):
        embedder_mod.Embedder(max_tokens=128, threads=1, batch_size=1, runtime="torch",
                              model="#int8")


def test_int8_collections_have_their_own_names() -> None:
    fp32 = VectorIndex(CLIENT, "mail", model_info("").slug, 384, "subject-forai")
    int8 = VectorIndex(CLIENT, "mail", model_info("#int8").slug, 384, "subject-forai")
    assert fp32.collection == "mail-all-minilm-l6-v2-subject-forai"
    assert int8.collection == "mail-all-minilm-l6-v2-int8-subject-forai"
    assert vt.VectorTargets(int8).collection_for(128) == "mail-all-minilm-l6-v2-int8-t128-subject-forai"
    targets = vt.VectorTargets.of(fp32, model_catalog(""), 256)
    assert targets.encoder_of(int8.collection) == (f"{MODEL_SLUG}-int8", 256, "subject-forai")
    assert targets.encoder_of(int8.collection).precision == "int8"
    assert targets.encoder_of("mail-all-minilm-l6-v2-int8-t128-subject-forai").tokens == 128
    assert targets.encoder_of(fp32.collection).precision == "float32"


def test_the_catalog_resolves_both_precisions() -> None:
    catalog = model_catalog("")
    assert list(catalog) == [MODEL_SLUG]  # as configured
    assert f"{MODEL_SLUG}-int8" in catalog and "e5-base-int8" not in catalog
    assert catalog[f"{MODEL_SLUG}-int8"].spec == "#int8"
    assert model_catalog("#int8")[MODEL_SLUG].spec == ""
    assert catalog.slugs() == [MODEL_SLUG, f"{MODEL_SLUG}-int8"]


@pytest.mark.parametrize(("configured", "collection_slug", "embeds_with"), [
    ("int8", MODEL_SLUG, ""),  # switched to int8, no reindex: the float32 collection stays float32
    ("float32", f"{MODEL_SLUG}-int8", "#int8"),  # and back: the int8 one stays int8
    ("int8", f"{MODEL_SLUG}-int8", "#int8"),
])
def test_a_switch_without_reindex_never_mixes(monkeypatch: pytest.MonkeyPatch, configured: str,
                                              collection_slug: str, embeds_with: str) -> None:
    """A worker embeds each target with the encoder its name says, whatever its own setting."""
    built: list[str] = []
    monkeypatch.setattr(embedder_mod, "cached_embedder", _recorder(built))
    settings = Settings(embed_precision=configured)  # type: ignore[arg-type]
    index = VectorIndex(CLIENT, "mail", model_info(with_precision("", configured)).slug, 384,
                        "subject-forai")
    targets = vt.VectorTargets.of(index, model_catalog(settings.embed_model), 256)
    encoder = targets.encoder_of(f"mail-{collection_slug}-subject-forai")
    vector_sync.embedder_for(settings, encoder.tokens, encoder.slug)
    assert built == [embeds_with]
    # what the process would create for itself is the configured precision's own collection
    assert index.collection == f"mail-{model_info(with_precision('', configured)).slug}-subject-forai"


def test_the_configured_encoder_follows_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[str] = []
    monkeypatch.setattr(embedder_mod, "cached_embedder", _recorder(built))
    embedder_mod.build_embedder(Settings(embed_precision="int8"))
    embedder_mod.build_embedder(Settings(embed_precision="float32"))
    assert built == ["#int8", ""]


def test_the_kernel_path_is_read_from_the_cpu_flags() -> None:
    from indexer.adapters.embedding.onnx_encoder import kernel_path

    assert kernel_path("flags\t: fpu avx2 avx512f avx512_vnni\n") == "avx512-vnni"
    assert kernel_path("flags\t: fpu avx2 avx_vnni\n") == "avx-vnni"
    assert kernel_path("flags\t: fpu sse4_2 avx2\n") == "avx2"
    assert kernel_path("flags\t: fpu sse4_2\n") == "other"


@pytest.mark.parametrize(("configured", "collection_model", "want"), [
    ("int8", "", "built:"),  # an int8 API reading a float32 collection embeds queries in float32
    ("int8", "#int8", "configured"),
    ("float32", "#int8", "built:#int8"),
    ("float32", "", "configured"),
])
def test_queries_are_embedded_at_the_read_collections_precision(
    monkeypatch: pytest.MonkeyPatch, configured: str, collection_model: str, want: str,
) -> None:
    from indexer.adapters import factories
    from search_api import backends as backends_mod
    from search_api import encoding

    monkeypatch.setattr(factories, "embedder", lambda settings: "configured")
    monkeypatch.setattr(encoding, "build_embedder",
                        lambda settings, model=None: f"built:{model}")
    found = backends_mod.Backends(Settings(embed_precision=configured))  # type: ignore[arg-type]
    target = encoding.ReadTarget("mail-x", collection_model)
    assert str(found.encoder.query_embedder(target)) == want
