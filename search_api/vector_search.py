"""Vector queries for the API: the pure :class:`VectorFilter` as a vector-store filter, and search.

The filter is the port's own (:mod:`indexer.core.vectors`): this module never touches a vector
engine's client; the store behind ``backends.vectors`` does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from indexer.adapters.qdrant import VectorIndex
from indexer.core.errors import TransientError
from indexer.core.plan import MessageRef
from indexer.core.vectors import Condition, Filter, Hit, Match, MatchAny, Range, StoredPoint
from search_api.backends import Backends, BackendUnavailable
from search_api.query import VectorFilter

T = TypeVar("T")


def to_filter(flt: VectorFilter) -> Filter:
    """Mailbox first (the tenant index), then the query's own conditions and exclusions."""
    must: list[Condition] = [Match("mailbox_id", flt.mailbox_id)]
    if flt.thread_key:
        must.append(Match("thread_key", flt.thread_key))
    if flt.ts_gte is not None or flt.ts_lt is not None:
        must.append(Range("ts", gte=flt.ts_gte, lt=flt.ts_lt))
    if flt.from_addresses:
        must.append(MatchAny("from", tuple(flt.from_addresses)))
    must_not: list[Condition] = [Match("thread_key", k) for k in flt.exclude_thread_keys]
    must_not += [Match("message_key", k) for k in flt.exclude_message_keys]
    return Filter(must=tuple(must), must_not=tuple(must_not))


def search(backends: Backends, vector: list[float], flt: VectorFilter, limit: int) -> list[Hit]:
    """Scored points (payload included), best first, within the filter's mailbox."""
    if flt.match_none or limit <= 0:
        return []
    return _ask(backends, lambda index: index.query(vector, to_filter(flt), limit))


def own_point(backends: Backends, ref: MessageRef) -> StoredPoint | None:
    """The message's stored point with its vector (never re-embedded), or None."""
    return _ask(backends, lambda index: index.point(ref))


def _ask(backends: Backends, call: Callable[[VectorIndex], T]) -> T:
    """The API's one call site of the vector store: its failure is a 503 naming Qdrant
    (the store's own TransientError does not say which engine failed)."""
    try:
        return call(backends.vectors)
    except TransientError as exc:
        raise BackendUnavailable("qdrant", str(exc)) from exc
