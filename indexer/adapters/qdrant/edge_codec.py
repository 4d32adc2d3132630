"""Qdrant Edge's own types for the port's (:mod:`indexer.core.vectors`), and its errors classified.

Edge raises plain ``Exception``s: a request it rejects as is is poison; anything else passes
through as unexpected (see :func:`classified`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import qdrant_edge as qe

from indexer.core.errors import PoisonError
from indexer.core.vectors import Condition, Filter, Match, MatchAny, StoredPoint

T = TypeVar("T")


def _condition(c: Condition) -> qe.FieldCondition:
    if isinstance(c, Match):
        return qe.FieldCondition(key=c.key, match=qe.MatchValue(c.value))
    if isinstance(c, MatchAny):
        return qe.FieldCondition(key=c.key, match=qe.MatchAny(list(c.values)))
    return qe.FieldCondition(key=c.key, range=qe.RangeFloat(gte=c.gte, lt=c.lt))


def to_filter(flt: Filter | None) -> qe.Filter | None:
    if flt is None or not (flt.must or flt.must_not):
        return None
    must: list[Any] = [_condition(c) for c in flt.must]
    must_not: list[Any] = [_condition(c) for c in flt.must_not]
    return qe.Filter(must=must or None, must_not=must_not or None)


_POISON_SIGNS = ("Wrong input", "Vector dimension error", "Bad input", "Bad request")


def classified(fn: Callable[[], T]) -> T:
    """Edge raises plain ``Exception``s: a request it rejects as is (a wrong input, a vector of
    the wrong dimension) is poison; anything else is unexpected."""
    try:
        return fn()
    except Exception as exc:
        if type(exc) is Exception and any(sign in str(exc) for sign in _POISON_SIGNS):
            raise PoisonError(f"qdrant edge rejected the request: {exc}") from exc
        raise


def stored(record: Any, with_vector: bool) -> StoredPoint:
    """Edge gives ids as ``uuid.UUID`` and vectors as lists of floats."""
    vector = [float(x) for x in record.vector] if with_vector and record.vector else None
    return StoredPoint(str(record.id), dict(record.payload or {}), vector)
