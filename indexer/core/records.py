"""Stream records, whatever wrapper they arrive in, decoded into one immutable shape.

Accepted wrappers (see ``store-items.md``): Lambda event batches ``{"Records": [...]}``,
Kinesis Data Streams for DynamoDB payloads (``{"kinesis": {"data": <base64>}}`` or the decoded
payload itself), and bare stream records (JSON lines). Full/incremental S3 export rows are
handled by the backfill source, not here.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from indexer.core.dynamo_json import Value, decode_item
from indexer.core.errors import RecordError

TTL_PRINCIPAL = "dynamodb.amazonaws.com"


@dataclass(frozen=True, slots=True)
class RawRecord:
    """One raw record (or the error that replaced it) and where it came from."""

    source: str
    raw: object
    error: RecordError | None = None


class EventName(StrEnum):
    INSERT = "INSERT"
    MODIFY = "MODIFY"
    REMOVE = "REMOVE"


@dataclass(frozen=True, slots=True)
class StreamRecord:
    """One decoded change of one item. ``keys`` always holds ``PK`` and ``SK``."""

    event_name: EventName
    pk: str
    sk: str
    new_image: Mapping[str, Value] | None
    old_image: Mapping[str, Value] | None
    sequence_number: str | None
    approximate_creation: float | None
    event_id: str | None
    ttl_delete: bool = False


def unwrap(document: object) -> Iterator[object]:
    """Yield the raw stream records inside one parsed JSON document of any accepted wrapper."""
    if isinstance(document, Mapping) and isinstance(document.get("Records"), list):
        for entry in document["Records"]:
            yield from unwrap(entry)
    elif isinstance(document, list):
        for entry in document:
            yield from unwrap(entry)
    else:
        yield document


def _kinesis_payload(raw: Mapping[str, Any]) -> object:
    data = raw.get("kinesis", {}).get("data") if isinstance(raw.get("kinesis"), Mapping) else None
    if not isinstance(data, str):
        raise RecordError("kinesis record without a base64 'data' string")
    try:
        return json.loads(base64.b64decode(data, validate=True))
    except (binascii.Error, ValueError) as exc:
        raise RecordError(f"kinesis data is not base64 JSON: {exc}") from exc


def _creation_seconds(value: object) -> float | None:
    """Stream records carry whole seconds; Kinesis-for-DynamoDB carries milliseconds."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RecordError("ApproximateCreationDateTime must be a number")
    return float(value) / 1000.0 if value > 10**11 else float(value)


def _image(ddb: Mapping[str, Any], name: str) -> Mapping[str, Value] | None:
    return decode_item(ddb[name], name) if ddb.get(name) is not None else None


def decode_record(raw: object) -> StreamRecord:
    """Decode one raw stream record; raises :class:`RecordError` with the reason if it can't."""
    if not isinstance(raw, Mapping):
        raise RecordError(f"stream record must be an object, got {type(raw).__name__}")
    if "kinesis" in raw and "dynamodb" not in raw:
        return decode_record(_kinesis_payload(raw))
    ddb = raw.get("dynamodb")
    if not isinstance(ddb, Mapping):
        raise RecordError("stream record has no 'dynamodb' object")
    try:
        event = EventName(str(raw.get("eventName")))
    except ValueError as exc:
        raise RecordError(f"unknown eventName {str(raw.get('eventName'))[:20]!r}") from exc
    keys = decode_item(ddb.get("Keys"), "Keys")
    pk, sk = keys.get("PK"), keys.get("SK")
    if not isinstance(pk, str) or not isinstance(sk, str):
        raise RecordError("Keys must hold string PK and SK")
    sequence = ddb.get("SequenceNumber")
    if sequence is not None and not (isinstance(sequence, str) and sequence.isdigit()):
        raise RecordError("SequenceNumber must be a decimal string")
    identity = raw.get("userIdentity")
    ttl = isinstance(identity, Mapping) and identity.get("principalId") == TTL_PRINCIPAL
    event_id = raw.get("eventID")
    return StreamRecord(
        event_name=event,
        pk=pk,
        sk=sk,
        new_image=_image(ddb, "NewImage"),
        old_image=_image(ddb, "OldImage"),
        sequence_number=sequence,
        approximate_creation=_creation_seconds(ddb.get("ApproximateCreationDateTime")),
        event_id=event_id if isinstance(event_id, str) else None,
        ttl_delete=ttl,
    )
