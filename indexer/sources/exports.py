"""Parse a DynamoDB export to S3 into trigger records (pure: bytes in, records out).

Layout (AWS "export to S3", output format ``DYNAMODB_JSON``)::

    <prefix>/AWSDynamoDB/<export-id>/manifest-summary.json   one JSON object
    <prefix>/AWSDynamoDB/<export-id>/manifest-files.json     JSON lines, one per data file
    <prefix>/AWSDynamoDB/<export-id>/data/<name>.json.gz     gzipped JSON lines

Full exports hold ``{"Item": {...}}`` rows; incremental exports hold
``{"Metadata": {...}, "Keys": {...}, "NewImage": {...}, "OldImage": {...}}`` rows. Keys in the
manifests are bucket-relative, as AWS writes them.

Each row becomes a stream-record-shaped dict that :func:`indexer.core.records.decode_record`
accepts. The sidecar treats records as *triggers* (README, "records as triggers"): the row only
names an item, the worker re-reads the message's current state from the table. That is why an
export — a snapshot that may be hours older than the live stream — is safe to replay at any
time: a row for a message that was since rewritten indexes the rewritten version, and a row for
a message that was since deleted finds it gone and deletes (never resurrects) it. The event name
we synthesize is therefore informational only.

A malformed row is yielded as :class:`RawRecord` with a :class:`RecordError` and a
``file:line`` source, so the ingest path dead-letters it and the file goes on.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from indexer.core.errors import RecordError
from indexer.core.export_window import ExportError
from indexer.core.jsonlines import BlobError, json_lines, text_of
from indexer.core.records import RawRecord

SUMMARY_NAME = "manifest-summary.json"
FULL = "FULL_EXPORT"
INCREMENTAL = "INCREMENTAL_EXPORT"


@dataclass(frozen=True, slots=True)
class ExportManifest:
    """The fields of ``manifest-summary.json`` the backfill needs."""

    summary_key: str
    export_arn: str
    export_type: str
    item_count: int
    manifest_files_key: str

    @property
    def incremental(self) -> bool:
        return self.export_type == INCREMENTAL


@dataclass(frozen=True, slots=True)
class DataFile:
    """One line of ``manifest-files.json``."""

    key: str
    item_count: int
    md5: str | None = None
    etag: str | None = None


def _json_object(data: bytes, what: str) -> Mapping[str, Any]:
    try:
        value = json.loads(data)
    except ValueError as exc:
        raise ExportError(f"{what} is not JSON: {exc}") from exc
    if not isinstance(value, Mapping):
        raise ExportError(f"{what} must be a JSON object")
    return value


def _count(value: object, what: str) -> int:
    try:
        count = int(str(value)) if value is not None else 0
    except ValueError as exc:
        raise ExportError(f"{what}: itemCount {value!r} is not an integer") from exc
    return count


def parse_summary(data: bytes, summary_key: str) -> ExportManifest:
    """Validate one ``manifest-summary.json``; ION exports are refused (not decodable here)."""
    doc = _json_object(data, summary_key)
    export_type = str(doc.get("exportType") or FULL)
    if export_type not in (FULL, INCREMENTAL):
        raise ExportError(f"{summary_key}: unknown exportType {export_type!r}")
    output_format = str(doc.get("outputFormat") or "DYNAMODB_JSON")
    if output_format != "DYNAMODB_JSON":
        raise ExportError(f"{summary_key}: outputFormat {output_format} is not supported")
    files_key = doc.get("manifestFilesS3Key")
    if not isinstance(files_key, str) or not files_key:
        raise ExportError(f"{summary_key}: no manifestFilesS3Key")
    return ExportManifest(
        summary_key=summary_key,
        export_arn=str(doc.get("exportArn") or ""),
        export_type=export_type,
        item_count=_count(doc.get("itemCount"), summary_key),
        manifest_files_key=files_key,
    )


def parse_manifest_files(data: bytes, source: str) -> list[DataFile]:
    """Every data file of ``manifest-files.json`` (JSON lines); a bad line fails the export,
    since a silently skipped data file would be a silent hole in the backfill."""
    files: list[DataFile] = []
    for number, line in enumerate(data.decode("utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        row = _json_object(line.encode(), f"{source}:{number}")
        key = row.get("dataFileS3Key")
        if not isinstance(key, str) or not key:
            raise ExportError(f"{source}:{number}: no dataFileS3Key")
        files.append(
            DataFile(
                key=key,
                item_count=_count(row.get("itemCount"), f"{source}:{number}"),
                md5=row.get("md5Checksum") if isinstance(row.get("md5Checksum"), str) else None,
                etag=row.get("etag") if isinstance(row.get("etag"), str) else None,
            )
        )
    return files


def _keys_of(item: Mapping[str, Any]) -> dict[str, Any]:
    keys = {name: item.get(name) for name in ("PK", "SK")}
    for name, value in keys.items():
        if not (isinstance(value, Mapping) and isinstance(value.get("S"), str)):
            raise RecordError(f"item has no string {name}")
    return keys


def item_trigger(item: object) -> dict[str, Any]:
    """A synthetic INSERT record for one DynamoDB-JSON item (full export row, Scan item)."""
    if not isinstance(item, Mapping):
        raise RecordError("Item must be an object")
    return {"eventName": "INSERT", "dynamodb": {"Keys": _keys_of(item), "NewImage": dict(item)}}


def full_row(row: object) -> dict[str, Any]:
    """``{"Item": {...}}`` → INSERT trigger."""
    if not isinstance(row, Mapping) or "Item" not in row:
        raise RecordError("full export row has no 'Item'")
    return item_trigger(row["Item"])


def incremental_row(row: object) -> dict[str, Any]:
    """``{"Keys", "NewImage"?, "OldImage"?}`` → INSERT / MODIFY / REMOVE trigger.

    Without a NewImage the item was deleted; with both images it was modified; with only a
    NewImage it was created (or modified, for a NEW_IMAGE-only export — the difference does not
    matter to a trigger).
    """
    if not isinstance(row, Mapping) or not isinstance(row.get("Keys"), Mapping):
        raise RecordError("incremental export row has no 'Keys' object")
    new, old = row.get("NewImage"), row.get("OldImage")
    for name, image in (("NewImage", new), ("OldImage", old)):
        if image is not None and not isinstance(image, Mapping):
            raise RecordError(f"{name} must be an object")
    event = "REMOVE" if new is None else ("MODIFY" if old is not None else "INSERT")
    ddb: dict[str, Any] = {"Keys": _keys_of(row["Keys"])}
    if new is not None:
        ddb["NewImage"] = dict(new)
    if old is not None:
        ddb["OldImage"] = dict(old)
    return {"eventName": event, "dynamodb": ddb}


def export_rows(data: bytes, source: str, *, incremental: bool) -> Iterator[RawRecord]:
    """Trigger records of one data file, each sourced ``file:line``; bad rows carry an error."""
    convert = incremental_row if incremental else full_row
    try:
        text = text_of(data, source)
    except BlobError as exc:
        raise ExportError(str(exc)) from exc
    for line in json_lines(text, source, what="export row"):
        if line.error is not None:
            yield RawRecord(line.where, line.value, line.error)
            continue
        try:
            yield RawRecord(line.where, convert(line.value))
        except RecordError as exc:
            yield RawRecord(line.where, line.value, exc)


def summary_keys(keys: list[str]) -> list[str]:
    """The ``manifest-summary.json`` keys among listed keys, sorted (one per export)."""
    return sorted(k for k in keys if k.rsplit("/", 1)[-1] == SUMMARY_NAME)
