"""Configuration errors are their own kind (issue 23, part 4): a 401/403 from OpenSearch or
Qdrant is the sidecar refused, not the message — never poison (that dead-lettered every batch
of a misconfigured rollout), never a 400 for an API caller, and worded for an operator.

The exceptions are the client libraries' own, built as they build them from an answer."""

from __future__ import annotations

import grpc
import httpx
import pytest
from opensearchpy.exceptions import (
    AuthenticationException,
    AuthorizationException,
    ConnectionError,
    RequestError,
    TransportError,
)
from qdrant_client.http.exceptions import UnexpectedResponse

from indexer.adapters.errors import classify
from indexer.adapters.opensearch import errors as opensearch
from indexer.adapters.opensearch import errors as opensearch_errors
from indexer.adapters.opensearch.writes import item_outcome
from indexer.adapters.qdrant import server as qdrant_server
from indexer.core.documents import point_id
from indexer.core.errors import ConfigurationError, ErrorKind, TransientError, kind_of
from indexer.core.plan import MessageRef
from indexer.core.retry import backoff_seconds

AMAZON_403 = {"message": "The request signature we calculated does not match the signature "
                         "you provided."}
ROLE_403 = {"error": {"type": "security_exception",
                      "reason": "no permissions for [indices:data/write/bulk] and User [name=x]"},
            "status": 403}


@pytest.mark.parametrize("exc", [
    AuthorizationException(403, str(AMAZON_403), AMAZON_403),
    AuthorizationException(403, "security_exception", ROLE_403),
    AuthenticationException(401, "Unauthorized", "Unauthorized"),
])
def test_an_opensearch_401_or_403_is_a_configuration_error(exc: TransportError) -> None:
    assert opensearch.classify(exc) is ErrorKind.CONFIG
    assert classify(exc) is ErrorKind.CONFIG
    assert opensearch_errors.client_error(exc) is None  # not "the engine refused the query"
    assert opensearch.is_transient(exc)  # a search answers 503, never 400
    refused = opensearch_errors.refusal(exc)
    assert isinstance(refused, ConfigurationError) and isinstance(refused, TransientError)
    assert refused.component == "opensearch"
    assert f"OpenSearch refused the sidecar's credentials ({exc.status_code})" in str(refused)


def test_the_operator_message_says_what_to_check_and_quotes_the_engine() -> None:
    amazon = str(opensearch_errors.refusal(AuthorizationException(403, "x", AMAZON_403)))
    assert "domain access policy / role mapping" in amazon and "signature we calculated" in amazon
    role = str(opensearch_errors.refusal(AuthorizationException(403, "x", ROLE_403)))
    assert "security_exception" in role and "indices:data/write/bulk" in role
    assert "SIDECAR_OPENSEARCH_AUTH" in str(opensearch_errors.refusal(
        AuthenticationException(401, "Unauthorized", "Unauthorized")))
    block = opensearch_errors.refused_message(403, '{"type": "cluster_block_exception"}')
    assert "index.blocks" in block


def test_other_opensearch_errors_keep_their_kinds() -> None:
    assert opensearch.classify(RequestError(400, "parsing_exception", {})) is ErrorKind.POISON
    assert opensearch.classify(TransportError(404, "x", {})) is ErrorKind.POISON
    assert opensearch.classify(TransportError(429, "x", {})) is ErrorKind.TRANSIENT
    assert opensearch.classify(TransportError(503, "x", {})) is ErrorKind.TRANSIENT
    assert opensearch.classify(ConnectionError("N/A", "refused", None)) is ErrorKind.TRANSIENT
    assert opensearch_errors.refusal(TransportError(400, "x", {})) is None
    assert opensearch_errors.refusal(ConnectionError("N/A", "refused", None)) is None


def test_a_refused_bulk_item_stalls_the_batch_instead_of_poisoning_its_message() -> None:
    ref = MessageRef("box@example.com", "k1")
    poison: dict[MessageRef, str] = {}
    transient: list[str] = []
    refused: list[tuple[int, str]] = []
    item = {"index": {"_id": point_id(ref), "status": 403, "error": ROLE_403["error"]}}
    item_outcome(False, item, {point_id(ref): ref}, poison, transient,
                             refused)
    assert poison == {} and transient == [] and refused and refused[0][0] == 403
    rejected = {"index": {"_id": point_id(ref), "status": 400, "error": "mapper"}}
    item_outcome(False, rejected, {point_id(ref): ref}, poison, transient,
                             refused)
    assert ref in poison  # a real rejection of the message is still poison


def _unexpected(status: int) -> UnexpectedResponse:
    return UnexpectedResponse(status, "Forbidden", b'{"status":"forbidden"}', httpx.Headers())


class _Rpc(grpc.RpcError):  # type: ignore[misc]  # grpc ships no types
    """A gRPC error as grpc's channel raises it: an RpcError with the call's code()."""

    def __init__(self, code: grpc.StatusCode) -> None:
        self._code = code

    def code(self) -> grpc.StatusCode:
        return self._code


@pytest.mark.parametrize("exc", [
    _unexpected(401), _unexpected(403),
    _Rpc(grpc.StatusCode.UNAUTHENTICATED), _Rpc(grpc.StatusCode.PERMISSION_DENIED),
])
def test_qdrant_refusals_are_configuration_errors(exc: BaseException) -> None:
    assert qdrant_server.error_kind(exc) is ErrorKind.CONFIG
    assert classify(exc) is ErrorKind.CONFIG


def test_qdrant_other_errors_keep_their_kinds() -> None:
    assert qdrant_server.error_kind(_unexpected(400)) is ErrorKind.POISON
    assert qdrant_server.error_kind(_unexpected(503)) is ErrorKind.TRANSIENT
    assert qdrant_server.error_kind(_unexpected(404)) is ErrorKind.UNEXPECTED
    assert qdrant_server.error_kind(_Rpc(grpc.StatusCode.UNAVAILABLE)) is ErrorKind.TRANSIENT


def test_the_wrapped_errors_are_configuration_errors_for_every_caller() -> None:
    auth = qdrant_server.QdrantAuthError("set SIDECAR_QDRANT_API_KEY")
    assert auth.component == "qdrant" and kind_of(auth) is ErrorKind.CONFIG
    assert isinstance(auth, TransientError)  # the API answers 503 for it
    assert kind_of(ConfigurationError("opensearch", "x")) is ErrorKind.CONFIG
    assert kind_of(TransientError("x")) is ErrorKind.TRANSIENT
    # a module missing from the install (a venv older than the code) stalls, never poisons
    assert kind_of(ModuleNotFoundError("No module named 'py3langid'")) is ErrorKind.CONFIG


def test_backoff_stays_bounded_for_a_batch_stalled_for_days() -> None:
    """A stalled batch retries without limit: the attempt number grows past 2^1024's reach."""
    for attempt in (0, 10, 1100, 10**6):
        assert 1.0 <= backoff_seconds(attempt, cap=120) <= 120
