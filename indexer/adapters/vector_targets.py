"""Vector collections as write targets: the one searches read, and one being built or kept.

Like the full-text index (see :mod:`indexer.ops.reindex`), two Qdrant aliases describe the
state: ``<prefix>-vectors`` (searches) and ``<prefix>-vectors-write`` (the collection a
reindex is building, or the previous one kept for rollback). A collection's name says which
encoder filled it, ``<prefix>-<model>[-t<N>][-<recipe>]``: ``<model>`` is the slug of the
model (``SIDECAR_EMBED_MODEL``, or one of ``SIDECAR_EMBED_MODELS`` during a change of model);
no ``-t<N>`` means the configured truncation (``SIDECAR_EMBED_MAX_TOKENS``), ``-t<N>``
truncates at N tokens; ``<recipe>`` names the embedded text (:mod:`indexer.core.recipes`),
left out for ``forai`` — so the collections made before recipes existed, which embedded
``forai``, still say what they hold. Every vectors worker knows how to embed for each target
without any other shared state (:func:`collection_name` is the one naming rule,
:func:`encoder_of` reads it back). Each collection has its own embedding cache,
``<collection>-cache`` (vectors differ by encoder).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, NamedTuple

from indexer.core.recipes import RECIPES, UNNAMED_RECIPE, Recipe, collection_name, recipe

if TYPE_CHECKING:
    from indexer.adapters.qdrant import VectorIndex

WRITE_SUFFIX = "-write"


def write_alias(index: VectorIndex) -> str:
    return f"{index.alias}{WRITE_SUFFIX}"


def members(index: VectorIndex) -> dict[str, str | None]:
    """The collection behind the read alias and behind the write alias (None: no alias)."""
    found = index.store.aliases()
    return {name: found.get(name) for name in (index.alias, write_alias(index))}


def targets(index: VectorIndex) -> list[str]:
    """Collections every vectors batch writes: read first, then the extra one (if any)."""
    return [c for c in members(index).values() if c is not None]


def bound(index: VectorIndex, collection: str) -> VectorIndex:
    """A view of ``index`` that reads and writes one collection (and its cache) by name;
    it shares the store."""
    view = copy.copy(index)
    view.alias, view.collection, view.cache = collection, collection, f"{collection}-cache"
    return view


def _prefix(index: VectorIndex) -> str:
    return index.alias.removesuffix("-vectors")


def collection_for(
    index: VectorIndex,
    max_tokens: int | None,
    model_slug: str | None = None,
    text: Recipe | None = None,
) -> str:
    """The collection of an encoder (None: the configured truncation, model, recipe)."""
    slug = index.model_slug if model_slug is None else model_slug
    return collection_name(_prefix(index), slug, max_tokens, text or index.recipe)


class Encoder(NamedTuple):
    """What a collection's name says of its vectors: model slug, tokens kept, embedded text."""

    slug: str
    tokens: int
    recipe: Recipe


_SUFFIXES = "|".join(re.escape(f"-{r}") for r in RECIPES if r != UNNAMED_RECIPE)
_TAIL = re.compile(rf"(?:-t(\d+))?({_SUFFIXES})?")


def encoder_of(
    index: VectorIndex, collection: str, slugs: Iterable[str], configured: int
) -> Encoder:
    """The encoder of ``collection`` (see :func:`collection_name`), for the models in
    ``slugs``; ``configured``: the tokens of a name without ``-t<N>``."""
    for slug in sorted(slugs, key=len, reverse=True):
        base = f"{_prefix(index)}-{slug}"
        if not collection.startswith(base):
            continue
        found = _TAIL.fullmatch(collection, len(base))
        if found:
            tokens = int(found.group(1)) if found.group(1) else configured
            text = recipe(found.group(2)[1:]) if found.group(2) else UNNAMED_RECIPE
            return Encoder(slug, tokens, text)
    raise ValueError(
        f"{collection} is not a collection of a known model: add the model to "
        "SIDECAR_EMBED_MODELS of this process"
    )


def read_encoder(index: VectorIndex, slugs: Iterable[str], configured: int) -> Encoder:
    """The encoder of the collection searches read (the configured one before any alias)."""
    read = members(index).get(index.alias) or index.collection
    return encoder_of(index, read, slugs, configured)


def create(index: VectorIndex, collection: str, dim: int | None = None) -> None:
    """The collection, its cache and payload indexes (idempotent); in no alias. ``dim``: the
    vector size of its model (None: the configured model's)."""
    view = bound(index, collection)
    view.dim = dim or index.dim
    view.create_collections()


def drop(index: VectorIndex, collection: str) -> None:
    """Delete a collection and its cache (missing ones are fine)."""
    for name in (collection, f"{collection}-cache"):
        index.store.drop(name)


def exists(index: VectorIndex, collection: str) -> bool:
    return collection in index.store.collections()


def set_aliases(index: VectorIndex, read: str | None, extra: str | None) -> None:
    """Point both aliases at once (atomic on a server; one file replace when embedded):
    the read alias at ``read``, the write alias at ``extra`` (None: remove it)."""
    index.store.set_aliases({index.alias: read, write_alias(index): extra})


def point_counts(index: VectorIndex, collection: str) -> dict[str, int]:
    """Points per mailbox in one collection (a payload scroll)."""
    counts: dict[str, int] = {}
    for page in index.store.scroll(collection, None, ["mailbox_id"]):
        for point in page:
            box = str(point.payload.get("mailbox_id"))
            counts[box] = counts.get(box, 0) + 1
    return counts


def point_hashes(index: VectorIndex, collection: str, mailbox_id: str) -> dict[str, str]:
    """``content_hash`` by message key of a mailbox's points (what a vector was made from)."""
    view = bound(index, collection)
    return {
        str(p["message_key"]): str(p.get("content_hash"))
        for page in view.scroll_mailbox(mailbox_id)
        for p in page
    }
