"""Vector queries for the API: the pure :class:`VectorFilter` as a vector-store filter, and search.

The filter is the port's own (:mod:`indexer.core.vectors`): this module never touches a vector
engine's client; the store behind ``backends.vectors`` does.
"""

from __future__ import annotations

from indexer.core.plan import MessageRef
from indexer.core.vectors import Condition, Filter, Hit, Match, MatchAny, Range, StoredPoint
from search_api.backends import Backends
from search_api.encoding import ReadTarget
from search_api.query import VectorFilter


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


def search(
    backends: Backends,
    vector: list[float],
    flt: VectorFilter,
    limit: int,
    target: ReadTarget | None = None,
) -> list[Hit]:
    """Scored points (payload included), best first, within the filter's mailbox; in the
    ``target`` collection by name when given (the one the query vector was embedded for),
    else behind the read alias."""
    if flt.match_none or limit <= 0:
        return []
    collection = target.collection if target else None
    return backends.ask_vectors(lambda index: index.query(vector, to_filter(flt), limit),
                                collection)


def own_point(backends: Backends, ref: MessageRef) -> StoredPoint | None:
    """The message's stored point with its vector and payload (never re-embedded), or None."""
    return backends.ask_vectors(lambda index: index.point(ref))
