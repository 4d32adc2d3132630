"""The vector store port: what the sync, the API, reconcile, purge and the vectors reindex need
from a vector engine, in the engine's own terms but with no client library.

Two adapters implement it (``indexer.adapters.qdrant.edge``: Qdrant's engine embedded in the
process; ``indexer.adapters.qdrant.server``: qdrant-client against a Qdrant server). A
"collection" is a name; an alias is a name that resolves to one collection, and every method
taking a collection also takes an alias. Point ids are UUID strings. Filters are the small pure
structure below, so the API can build one from a query without touching an engine.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

Payload = dict[str, Any]

# The graph search's beam (Qdrant's ``hnsw_ef``) of every approximate search, both adapters.
# Left unset, Qdrant searches with ef = limit x oversampling (400 for the API's depth 200):
# at 1,000,000 points a 100,000-point whale, whose mail holds near-copies, had clusters of
# near-copies its graph reached from nowhere at that beam (1 of 200 queries found none of its
# 10 neighbours); from 512 none was missed, and 800 costs ~0.3 ms of a search (p50 1.2 against
# 0.8 ms): docs/results/runs/2026-12-05-tenants-recall-ef.md.
SEARCH_EF = 800


@dataclass(frozen=True)
class Match:
    """``key`` equals ``value`` (a keyword)."""

    key: str
    value: str


@dataclass(frozen=True)
class MatchAny:
    """``key`` equals one of ``values``."""

    key: str
    values: tuple[str, ...]


@dataclass(frozen=True)
class Range:
    """``gte <= key < lt`` (either bound may be open)."""

    key: str
    gte: float | None = None
    lt: float | None = None


Condition = Match | MatchAny | Range


@dataclass(frozen=True)
class Filter:
    """Every ``must`` condition holds and no ``must_not`` one does."""

    must: tuple[Condition, ...] = ()
    must_not: tuple[Condition, ...] = field(default=())


def match(key: str, value: str) -> Filter:
    return Filter(must=(Match(key, value),))


@dataclass(frozen=True)
class StoredPoint:
    """A point as stored: its id, payload and (when asked for) vector."""

    id: str
    payload: Payload
    vector: list[float] | None = None


@dataclass(frozen=True)
class Hit:
    """A search answer, best first: the point and its similarity score."""

    id: str
    score: float
    payload: Payload


@dataclass(frozen=True)
class PointWrite:
    id: str
    vector: Sequence[float]
    payload: Mapping[str, Any]


class VectorStore(Protocol):
    """A vector engine's collections, aliases and points (see the module docstring).

    Every method raises :class:`indexer.core.errors.TransientError` for a failure worth a
    retry, :class:`indexer.core.errors.PoisonError` for a request the engine rejects as is, and
    lets anything else through (unexpected).
    """

    def collections(self) -> set[str]: ...
    def create(self, collection: str, dim: int, keyword_fields: Sequence[str]) -> None:
        """Create the collection (cosine, ``dim``) with a tenant index on ``mailbox_id`` and a
        keyword index on each of ``keyword_fields`` (idempotent)."""
        ...

    def drop(self, collection: str) -> None: ...
    def aliases(self) -> dict[str, str]:
        """Alias name → collection name."""
        ...

    def set_aliases(self, aliases: Mapping[str, str | None]) -> None:
        """Point each alias at a collection (None: remove it), all at once."""
        ...

    def upsert(self, collection: str, points: Sequence[PointWrite]) -> None: ...
    def overwrite_payload(self, collection: str, point_id: str, payload: Mapping[str, Any]) -> None:
        ...

    def delete(self, collection: str, ids: Sequence[str]) -> None: ...
    def delete_by_filter(self, collection: str, flt: Filter) -> None: ...
    def retrieve(
        self, collection: str, ids: Sequence[str], *, with_vector: bool
    ) -> list[StoredPoint]: ...
    def search(
        self, collection: str, vector: Sequence[float], flt: Filter, limit: int
    ) -> list[Hit]: ...
    def scroll(
        self,
        collection: str,
        flt: Filter | None,
        fields: Sequence[str] | None,
        *,
        with_vector: bool = False,
    ) -> Iterator[list[StoredPoint]]:
        """Pages of every point under the filter, with its payload (all fields, or only these)
        and, when asked, its vector."""
        ...

    def count(self, collection: str, flt: Filter | None) -> int: ...
    def flush(self) -> None:
        """Make the writes so far durable (the end of a batch that wrote)."""
        ...

    def close(self) -> None: ...
