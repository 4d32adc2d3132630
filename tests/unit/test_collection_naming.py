"""The one naming rule of vector collections, ``<prefix>-<model slug>[-t<N>]``, and reading it
back (which model and truncation a worker must embed with for a target collection)."""

from __future__ import annotations

from typing import Any

import pytest

from indexer.adapters import vector_targets as vt
from indexer.adapters.qdrant import VectorIndex

CLIENT: Any = None  # naming never touches the client


def _index(slug: str = "all-minilm-l6-v2") -> VectorIndex:
    return VectorIndex(CLIENT, "mail", slug, 384)


def test_names() -> None:
    index = _index()
    assert vt.collection_for(index, None) == index.collection == "mail-all-minilm-l6-v2"
    assert vt.collection_for(index, 64) == "mail-all-minilm-l6-v2-t64"
    assert vt.collection_for(index, None, "tiny-bert-e5") == "mail-tiny-bert-e5"
    assert vt.collection_for(index, 32, "tiny-bert-e5") == "mail-tiny-bert-e5-t32"


@pytest.mark.parametrize(
    ("collection", "want"),
    [
        ("mail-all-minilm-l6-v2", ("all-minilm-l6-v2", 256)),
        ("mail-all-minilm-l6-v2-t64", ("all-minilm-l6-v2", 64)),
        ("mail-tiny-bert-e5", ("tiny-bert-e5", 256)),
        ("mail-tiny-bert-e5-t32", ("tiny-bert-e5", 32)),
        ("mail-tiny-bert-e5-large", ("tiny-bert-e5-large", 256)),  # longest slug wins
    ],
)
def test_encoder_of(collection: str, want: tuple[str, int]) -> None:
    slugs = ["all-minilm-l6-v2", "tiny-bert-e5", "tiny-bert-e5-large"]
    assert vt.encoder_of(_index(), collection, slugs, 256) == want


def test_unknown_collection_names_the_setting() -> None:
    with pytest.raises(ValueError, match="SIDECAR_EMBED_MODELS"):
        vt.encoder_of(_index(), "mail-e5-base", ["all-minilm-l6-v2"], 256)
