"""The one place an exception is classified: the core's own errors by their type, every
engine's by its adapter (AWS, OpenSearch, Qdrant, Redis). Tasks, the tailer and the API all
ask here, so "transient", "poison" and "unexpected" mean the same everywhere."""

from __future__ import annotations

from collections.abc import Callable

from indexer.adapters import broker
from indexer.adapters.aws import io as dynamo_io
from indexer.adapters.opensearch import errors as opensearch
from indexer.adapters.qdrant import server as qdrant_server
from indexer.core.errors import ErrorKind, kind_of

_ENGINES: tuple[Callable[[BaseException], ErrorKind | None], ...] = (
    dynamo_io.classify,
    opensearch.classify,
    qdrant_server.error_kind,
    broker.classify,
)


def classify(exc: BaseException) -> ErrorKind:
    """Transient → retry with backoff; poison → dead-letter (a 4xx to a caller); anything
    else unexpected. Plain network errors of the standard library are transient."""
    for judge in (kind_of, *_ENGINES):
        kind = judge(exc)
        if kind is not None:
            return kind
    if isinstance(exc, ConnectionError | TimeoutError):
        return ErrorKind.TRANSIENT
    return ErrorKind.UNEXPECTED
