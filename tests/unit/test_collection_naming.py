"""The one naming rule of vector collections, ``<prefix>-<model slug>[-t<N>][-<recipe>]`` (no
recipe suffix: ``forai``, what every collection made before recipes holds), and reading it back
(which model, truncation and embedded text a worker must embed with for a target collection)."""

from __future__ import annotations

from typing import Any

import pytest

from indexer.adapters.qdrant import targets as vt
from indexer.adapters.qdrant.index import VectorIndex
from indexer.core.recipes import Recipe

CLIENT: Any = None  # naming never touches the client


def _index(slug: str = "all-minilm-l6-v2", recipe: Recipe = "subject-forai") -> VectorIndex:
    return VectorIndex(CLIENT, "mail", slug, 384, recipe)


def test_names() -> None:
    index = _index()
    assert index.collection == "mail-all-minilm-l6-v2-subject-forai"
    assert index.cache == "mail-all-minilm-l6-v2-subject-forai-cache"
    assert vt.VectorTargets(index).collection_for(None) == index.collection
    assert vt.VectorTargets(index).collection_for(64) == "mail-all-minilm-l6-v2-t64-subject-forai"
    assert vt.VectorTargets(index).collection_for(None, "tiny-bert-e5") == "mail-tiny-bert-e5-subject-forai"
    assert vt.VectorTargets(index).collection_for(32, "tiny-bert-e5", "forai") == "mail-tiny-bert-e5-t32"
    assert vt.VectorTargets(index).collection_for(None, None, "forai") == "mail-all-minilm-l6-v2"


def test_a_forai_index_keeps_the_names_of_before_recipes() -> None:
    index = _index(recipe="forai")
    assert (index.collection, index.cache) == ("mail-all-minilm-l6-v2", "mail-all-minilm-l6-v2-cache")
    assert vt.VectorTargets(index).collection_for(64) == "mail-all-minilm-l6-v2-t64"


@pytest.mark.parametrize(
    ("collection", "want"),
    [
        # names made before recipes (and every forai collection): no suffix = forai
        ("mail-all-minilm-l6-v2", ("all-minilm-l6-v2", 256, "forai")),
        ("mail-all-minilm-l6-v2-t64", ("all-minilm-l6-v2", 64, "forai")),
        ("mail-tiny-bert-e5", ("tiny-bert-e5", 256, "forai")),
        ("mail-tiny-bert-e5-t32", ("tiny-bert-e5", 32, "forai")),
        ("mail-tiny-bert-e5-large", ("tiny-bert-e5-large", 256, "forai")),  # longest slug wins
        ("mail-all-minilm-l6-v2-subject-forai", ("all-minilm-l6-v2", 256, "subject-forai")),
        ("mail-all-minilm-l6-v2-t64-subject-forai", ("all-minilm-l6-v2", 64, "subject-forai")),
        ("mail-tiny-bert-e5-large-t8-subject-forai", ("tiny-bert-e5-large", 8, "subject-forai")),
    ],
)
def test_encoder_of(collection: str, want: tuple[str, int, str]) -> None:
    slugs = ["all-minilm-l6-v2", "tiny-bert-e5", "tiny-bert-e5-large"]
    assert vt.VectorTargets.of(_index(), slugs, 256).encoder_of(collection) == want


@pytest.mark.parametrize("recipe", ["forai", "subject-forai"])
@pytest.mark.parametrize("tokens", [None, 48])
def test_every_name_reads_back(recipe: Recipe, tokens: int | None) -> None:
    name = vt.VectorTargets(_index()).collection_for(tokens, "tiny-bert-e5", recipe)
    got = vt.VectorTargets.of(_index(), ["all-minilm-l6-v2", "tiny-bert-e5"]).encoder_of(name)
    assert got == vt.Encoder("tiny-bert-e5", tokens or 256, recipe)


@pytest.mark.parametrize(
    "collection",
    ["mail-e5-base", "mail-all-minilm-l6-v2-quote", "mail-all-minilm-l6-v2-subject-forai-t64"],
)
def test_unknown_collection_names_the_setting(collection: str) -> None:
    with pytest.raises(ValueError, match="SIDECAR_EMBED_MODELS"):
        vt.VectorTargets.of(_index(), ["all-minilm-l6-v2"]).encoder_of(collection)
