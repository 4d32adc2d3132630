"""DynamoDB plumbing shared by the mail-table reader and the participant store: error
classification, item decoding and a strongly consistent ``BatchGetItem`` that follows
``UnprocessedKeys``."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Any

from boto3.dynamodb.types import TypeDeserializer
from botocore.exceptions import BotoCoreError, ClientError

from indexer.core.errors import TransientError

_DESER = TypeDeserializer()
BATCH_KEYS = 100  # BatchGetItem's limit per call
_TRANSIENT_CODES = {
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "RequestLimitExceeded",
    "InternalServerError",
    "ServiceUnavailable",
    "LimitExceededException",
}

Key = tuple[str, str]


def plain(item: dict[str, Any]) -> dict[str, Any]:
    """DynamoDB JSON item → Python values (numbers stay ``Decimal``; the core converts)."""
    return {k: _DESER.deserialize(v) for k, v in item.items()}


def classify_error(exc: Exception) -> Exception:
    """Map a boto error to the core's transient class, or return it unchanged."""
    if isinstance(exc, BotoCoreError):
        return TransientError(f"dynamodb: {exc}")
    if isinstance(exc, ClientError):
        code = exc.response.get("Error", {}).get("Code", "")
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        if code in _TRANSIENT_CODES or status >= 500:
            return TransientError(f"dynamodb: {code}")
    return exc


def batch_get(client: Any, table: str, keys: Sequence[Key]) -> Iterator[dict[str, Any]]:
    """The raw (DynamoDB JSON) items found for ``keys``, strongly consistent, 100 per call,
    following ``UnprocessedKeys`` with backoff."""
    for start in range(0, len(keys), BATCH_KEYS):
        chunk = keys[start : start + BATCH_KEYS]
        request: dict[str, Any] = {
            table: {
                "Keys": [{"PK": {"S": pk}, "SK": {"S": sk}} for pk, sk in chunk],
                "ConsistentRead": True,
            }
        }
        for attempt in range(10):
            try:
                response = client.batch_get_item(RequestItems=request)
            except (ClientError, BotoCoreError) as exc:
                raise classify_error(exc) from exc
            yield from response["Responses"].get(table, [])
            request = response.get("UnprocessedKeys") or {}
            if not request:
                break
            time.sleep(min(2.0, 0.05 * 2**attempt))
        else:
            raise TransientError("dynamodb: keys left unprocessed after 10 attempts")
