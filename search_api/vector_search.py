"""Qdrant queries for the API: the pure :class:`VectorFilter` as a Qdrant filter, and search."""

from __future__ import annotations

from typing import Any

from qdrant_client import models

from indexer.core.errors import TransientError
from indexer.core.plan import MessageRef
from search_api.backends import Backends, BackendUnavailable
from search_api.query import VectorFilter


def _match(key: str, value: str) -> models.FieldCondition:
    return models.FieldCondition(key=key, match=models.MatchValue(value=value))


def to_qdrant(flt: VectorFilter) -> models.Filter:
    must: list[Any] = [_match("mailbox_id", flt.mailbox_id)]
    if flt.thread_key:
        must.append(_match("thread_key", flt.thread_key))
    if flt.ts_gte is not None or flt.ts_lt is not None:
        must.append(
            models.FieldCondition(key="ts", range=models.Range(gte=flt.ts_gte, lt=flt.ts_lt))
        )
    if flt.from_addresses:
        must.append(
            models.FieldCondition(key="from", match=models.MatchAny(any=list(flt.from_addresses)))
        )
    must_not: list[Any] = [_match("thread_key", k) for k in flt.exclude_thread_keys]
    must_not += [_match("message_key", k) for k in flt.exclude_message_keys]
    return models.Filter(must=must, must_not=must_not or None)


def search(backends: Backends, vector: list[float], flt: VectorFilter, limit: int) -> list[Any]:
    """Scored points (payload included), best first, within the filter's mailbox."""
    if flt.match_none or limit <= 0:
        return []
    try:
        return backends.vectors.query(vector, to_qdrant(flt), limit)
    except TransientError as exc:
        raise BackendUnavailable("qdrant", str(exc)) from exc


def own_point(backends: Backends, ref: MessageRef) -> Any | None:
    """The message's stored point with its vector (never re-embedded), or None."""
    try:
        return backends.vectors.point(ref)
    except TransientError as exc:
        raise BackendUnavailable("qdrant", str(exc)) from exc
