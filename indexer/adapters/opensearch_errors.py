"""OpenSearch's refusals of a request, told apart from its failures (one classification).

OpenSearch answers some client errors with a 5xx — ``too_many_nested_clauses`` comes as HTTP
500 — so the status alone cannot say "retry later". :func:`client_error` looks at the error
types of the body (root causes, causes, shard failures): a refused request is a 400 for the
API and never a transient error for the pipeline.
"""

from __future__ import annotations

from typing import Any

from opensearchpy.exceptions import ConnectionError as OSConnectionError
from opensearchpy.exceptions import ConnectionTimeout, TransportError

# Error types OpenSearch may answer with any status (``too_many_nested_clauses`` comes as
# HTTP 500) that are about the request, never the engine's health: retrying cannot help.
CLIENT_ERROR_TYPES = frozenset(
    {
        "too_many_clauses",
        "too_many_nested_clauses",
        "parsing_exception",
        "x_content_parse_exception",
        "search_parse_exception",
        "query_shard_exception",
        "illegal_argument_exception",
        "number_format_exception",
        "query_parsing_exception",
    }
)


def _error_types(info: Any) -> list[str]:
    """Every ``type`` in an OpenSearch error body (root causes, causes, shard failures)."""
    found: list[str] = []
    if isinstance(info, dict):
        if isinstance(info.get("type"), str):
            found.append(info["type"])
        for value in info.values():
            found += _error_types(value)
    elif isinstance(info, list):
        for value in info:
            found += _error_types(value)
    return found


def client_error(exc: Exception) -> str | None:
    """The reason, when OpenSearch refused the request itself (a 4xx, or a 5xx whose causes
    are a parse error, an illegal argument or too many clauses); else None."""
    if isinstance(exc, OSConnectionError | ConnectionTimeout) or not isinstance(
        exc, TransportError
    ):
        return None
    status = exc.status_code if isinstance(exc.status_code, int) else 0
    types = set(_error_types(exc.info))
    if (400 <= status < 500 and status != 429) or types & CLIENT_ERROR_TYPES:
        named = sorted(types & CLIENT_ERROR_TYPES) or [str(exc.error)]
        return f"the search engine refused the query ({', '.join(named)})"
    return None
