"""AWS plumbing shared by every DynamoDB, DynamoDB Streams and S3 caller: the one error
classification of botocore's exceptions, item decoding, the one paged Query/Scan helper, a
strongly consistent ``BatchGetItem`` that follows ``UnprocessedKeys``, and a batched delete that
follows ``UnprocessedItems``."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from boto3.dynamodb.types import TypeDeserializer
from botocore.exceptions import BotoCoreError, ClientError

from indexer.core.errors import ErrorKind, PoisonError, TransientError

_DESER = TypeDeserializer()
BATCH_KEYS = 100  # BatchGetItem's limit per call
BATCH_WRITES = 25  # BatchWriteItem's limit per call
_TRANSIENT_CODES = {
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "RequestLimitExceeded",
    "InternalServerError",
    "ServiceUnavailable",
    "LimitExceededException",
    "ServiceUnavailableException",
    "InternalServerErrorException",
}
# Rejections of this input that no retry can fix (an item over 400 KB, a malformed key).
_POISON_CODES = {"ValidationException", "ItemCollectionSizeLimitExceededException"}

Key = tuple[str, str]


def plain(item: dict[str, Any]) -> dict[str, Any]:
    """DynamoDB JSON item → Python values (numbers stay ``Decimal``; the core converts)."""
    return {k: _DESER.deserialize(v) for k, v in item.items()}


def error_code(exc: BaseException) -> str:
    """The AWS error code of a ``ClientError`` (``""`` for anything else)."""
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code", ""))
    return ""


def classify(exc: BaseException) -> ErrorKind | None:
    """The kind of a botocore exception (``None``: not botocore's).

    Network trouble (``BotoCoreError``: refused connections, read timeouts), throttling and
    5xx are transient; a permanent rejection of this input is poison; other client errors
    (a missing table, access denied) are unexpected: retried a few times, then reported.
    """
    if isinstance(exc, BotoCoreError):
        return ErrorKind.TRANSIENT
    if not isinstance(exc, ClientError):
        return None
    status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
    code = error_code(exc)
    if code in _TRANSIENT_CODES or status >= 500:
        return ErrorKind.TRANSIENT
    if code in _POISON_CODES:
        return ErrorKind.POISON
    return ErrorKind.UNEXPECTED


def classify_error(exc: Exception) -> Exception:
    """A botocore exception as the core's error of its kind (unexpected ones unchanged)."""
    kind = classify(exc)
    if kind is ErrorKind.TRANSIENT:
        return TransientError(f"aws: {error_code(exc) or exc}")
    if kind is ErrorKind.POISON:
        return PoisonError(f"aws rejected: {exc}")
    return exc


def pages(client: Any, operation: str, **kwargs: Any) -> Iterator[dict[str, Any]]:
    """Every raw page of a ``query`` or ``scan`` (boto3's paginator: it follows
    ``LastEvaluatedKey``; a DynamoDB call returns at most 1 MB). Pass ``ExclusiveStartKey`` to
    resume; each page carries its own ``LastEvaluatedKey``. Errors come out classified."""
    try:
        yield from client.get_paginator(operation).paginate(**kwargs)
    except (ClientError, BotoCoreError) as exc:
        raise classify_error(exc) from exc


def items(client: Any, operation: str, **kwargs: Any) -> Iterator[dict[str, Any]]:
    """Every raw (DynamoDB JSON) item of a paged ``query`` or ``scan``."""
    for page in pages(client, operation, **kwargs):
        yield from page.get("Items", [])


def batch_get(
    client: Any, table: str, keys: Sequence[Key], *, consistent: bool = True
) -> Iterator[dict[str, Any]]:
    """The raw (DynamoDB JSON) items found for ``keys``, strongly consistent unless
    ``consistent`` is off (half the read units), 100 per call, following ``UnprocessedKeys``
    with backoff."""
    for start in range(0, len(keys), BATCH_KEYS):
        chunk = keys[start : start + BATCH_KEYS]
        request: dict[str, Any] = {
            table: {
                "Keys": [{"PK": {"S": pk}, "SK": {"S": sk}} for pk, sk in chunk],
                "ConsistentRead": consistent,
            }
        }
        for response in _until_processed(
            lambda left: client.batch_get_item(RequestItems=left), request, "UnprocessedKeys"
        ):
            yield from response["Responses"].get(table, [])


def batch_delete(client: Any, table: str, keys: Sequence[Key]) -> int:
    """Delete these items, 25 per ``BatchWriteItem`` call, following ``UnprocessedItems``
    (throttled deletes) with backoff; the number of keys deleted (an absent item counts: a
    delete of it is a no-op)."""
    for start in range(0, len(keys), BATCH_WRITES):
        chunk = keys[start : start + BATCH_WRITES]
        request: dict[str, Any] = {table: [
            {"DeleteRequest": {"Key": {"PK": {"S": pk}, "SK": {"S": sk}}}} for pk, sk in chunk]}
        for _ in _until_processed(
            lambda left: client.batch_write_item(RequestItems=left), request, "UnprocessedItems"
        ):
            pass
    return len(keys)


def _until_processed(
    call: Callable[[dict[str, Any]], dict[str, Any]], request: dict[str, Any], left: str
) -> Iterator[dict[str, Any]]:
    """Each response of a batch call, called again with what it left unprocessed (``left``:
    ``UnprocessedKeys``, ``UnprocessedItems``) after a growing pause, up to 10 calls in all
    (then a transient error: the caller's retry takes it from there)."""
    for attempt in range(10):
        try:
            response = call(request)
        except (ClientError, BotoCoreError) as exc:
            raise classify_error(exc) from exc
        yield response
        request = response.get(left) or {}
        if not request:
            return
        time.sleep(min(2.0, 0.05 * 2**attempt))
    raise TransientError(f"dynamodb: {left} after 10 attempts")
