"""Vector collections as write targets: the one searches read, and one being built or kept.

Like the full-text index (see :mod:`indexer.ops.reindex`), two Qdrant aliases describe the
state: ``<prefix>-vectors`` (searches) and ``<prefix>-vectors-write`` (the collection a
reindex is building, or the previous one kept for rollback). A collection's name says which
encoder filled it — ``<prefix>-<model>`` uses the configured truncation
(``SIDECAR_EMBED_MAX_TOKENS``), ``<prefix>-<model>-t<N>`` truncates at N tokens — so every
vectors worker knows how to embed for each target without any other shared state. Each
collection has its own embedding cache, ``<collection>-cache`` (vectors differ by encoder).
"""

from __future__ import annotations

import copy
import re

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


def collection_for(index: VectorIndex, max_tokens: int | None) -> str:
    """The collection of an encoder truncating at ``max_tokens`` (None: the configured one)."""
    return index.collection if max_tokens is None else f"{index.collection}-t{max_tokens}"


def encoder_tokens(index: VectorIndex, collection: str, configured: int) -> int:
    """How many tokens the encoder of ``collection`` keeps (see :func:`collection_for`)."""
    found = re.fullmatch(re.escape(index.collection) + r"-t(\d+)", collection)
    if found:
        return int(found.group(1))
    if collection == index.collection:
        return configured
    raise ValueError(f"{collection} is not a collection of {index.collection}")


def create(index: VectorIndex, collection: str) -> None:
    """The collection, its cache and payload indexes (idempotent); in no alias."""
    bound(index, collection).create_collections()


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
