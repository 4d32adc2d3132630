"""OpenSearch's refusals of a request, told apart from its failures (one classification).

OpenSearch answers some client errors with a 5xx — ``too_many_nested_clauses`` comes as HTTP
500 — so the status alone cannot say "retry later". :func:`client_error` looks at the error
types of the body (root causes, causes, shard failures): a refused request is a 400 for the
API and never a transient error for the pipeline.

401 and 403 are different: OpenSearch refused the *sidecar* (a wrong SigV4 secret, a missing
domain access policy or fine-grained role mapping, a read-only block), not the request, so
:func:`refusal` makes them a :class:`~indexer.core.errors.ConfigurationError` — every message
would fail alike until an operator fixes it, then all succeed: stall, never dead-letter.
"""

from __future__ import annotations

from typing import Any

from opensearchpy.exceptions import ConnectionError as OSConnectionError
from opensearchpy.exceptions import ConnectionTimeout, TransportError

from indexer.core.errors import ConfigurationError, ErrorKind, PoisonError, TransientError

REFUSED_STATUSES = frozenset({401, 403})  # the sidecar refused, not the request

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
    if status in REFUSED_STATUSES:
        return None  # the sidecar's credentials, not the query: see refusal()
    types = set(_error_types(exc.info))
    if (400 <= status < 500 and status != 429) or types & CLIENT_ERROR_TYPES:
        named = sorted(types & CLIENT_ERROR_TYPES) or [str(exc.error)]
        return f"the search engine refused the query ({', '.join(named)})"
    return None


def refused_message(status: int, detail: str) -> str:
    """What an operator reads (log, ``/readyz``) when OpenSearch answers 401/403."""
    detail = " ".join(detail.split())[:300]
    if "cluster_block_exception" in detail:
        what = "OpenSearch refused writes (403 cluster_block_exception): the index is blocked "
        fix = "(read-only after the disk flood stage?): free disk and clear index.blocks"
    elif status == 401:
        what = "OpenSearch refused the sidecar's credentials (401): "
        fix = "check SIDECAR_OPENSEARCH_AUTH and its credentials (SigV4 keys, user/password)"
    else:
        what = f"OpenSearch refused the sidecar's credentials ({status}): "
        fix = "check the domain access policy / role mapping and the SigV4 credentials"
    return f"{what}{fix} [{detail}]" if detail else what + fix


def refusal(exc: BaseException) -> ConfigurationError | None:
    """The configuration error an opensearch-py 401/403 means; ``None`` for anything else."""
    if not isinstance(exc, TransportError) or isinstance(exc, OSConnectionError):
        return None
    if exc.status_code not in REFUSED_STATUSES:
        return None
    return ConfigurationError("opensearch", refused_message(int(exc.status_code), _detail(exc)))


def _detail(exc: TransportError) -> str:
    """The engine's own words: an Amazon 403's ``message``, a security plugin's reason."""
    info = exc.info
    if isinstance(info, dict):
        error = info.get("error")
        if isinstance(error, dict):
            return f"{error.get('type', '')}: {error.get('reason', '')}"
        return str(info.get("message") or error or info)
    return str(exc.error)


def classify(exc: BaseException) -> ErrorKind | None:
    """The kind of an opensearch-py exception (``None``: not opensearch-py's).

    Connection trouble, timeouts, 429 and genuine 5xx are transient; 401/403 is the sidecar
    refused (credentials, access policy, role mapping): a configuration error, retried until
    fixed; a request the engine refuses — another 4xx, or a 5xx whose causes say so
    (``too_many_nested_clauses`` comes as HTTP 500;
    :func:`~indexer.adapters.opensearch.errors.client_error`) — is poison: never retried, a
    400 for an API caller.
    """
    if isinstance(exc, OSConnectionError | ConnectionTimeout):
        return ErrorKind.TRANSIENT
    if isinstance(exc, TransportError):
        if exc.status_code in REFUSED_STATUSES:
            return ErrorKind.CONFIG
        if client_error(exc) is not None:
            return ErrorKind.POISON
        status = exc.status_code if isinstance(exc.status_code, int) else 0
        if status == 429 or status >= 500:
            return ErrorKind.TRANSIENT
        return ErrorKind.POISON if 400 <= status < 500 else ErrorKind.UNEXPECTED
    return None


def is_transient(exc: BaseException) -> bool:
    """Worth retrying later: an outage, or a 401/403 an operator will fix (for an API caller
    both are the engine unavailable, a 503 — never the query's fault)."""
    return classify(exc) in (ErrorKind.TRANSIENT, ErrorKind.CONFIG)


def core_error(exc: BaseException, what: str) -> Exception | None:
    """The core's error for an opensearch-py exception: :class:`ConfigurationError` for a
    401/403 (saying what to check), :class:`TransientError` for an outage; ``None``: let it
    through as it is."""
    refused = refusal(exc)
    if refused is not None:
        return refused
    return TransientError(f"{what}: {exc}") if classify(exc) is ErrorKind.TRANSIENT else None


class SearchBudgetExceeded(PoisonError):
    """A search took longer than its time budget: the engine stopped it (partial results are
    not served) — the request is too costly, not the engine down."""

    def __init__(self, budget_ms: int) -> None:
        super().__init__(
            f"the search took longer than its budget of {budget_ms} ms "
            "(SIDECAR_SEARCH_TIMEOUT_MS): narrow the query (fewer prefixes or words, a date "
            "range, a sender)"
        )
        self.budget_ms = budget_ms


def cancelled(exc: BaseException) -> bool:
    """OpenSearch cancelled the search task after ``cancel_after_time_interval``."""
    return isinstance(exc, TransportError) and "task_cancelled" in str(exc.info)
