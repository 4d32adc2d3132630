"""Read exported stream records from local files or ``s3://bucket/prefix``.

A file is either one JSON document (a Lambda event batch, a list of records) or JSON lines
(one record or one batch per line), plain or gzipped. Lines that are not JSON are yielded as
:class:`RecordError` with their position, so the caller dead-letters them and goes on.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from indexer.core.errors import RecordError
from indexer.core.records import unwrap


@dataclass(frozen=True, slots=True)
class RawRecord:
    """One raw record (or the error that replaced it) and where it came from."""

    source: str
    raw: object
    error: RecordError | None = None


def _maybe_gunzip(data: bytes) -> bytes:
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def parse_blob(data: bytes, source: str) -> Iterator[RawRecord]:
    """Every record in one file's bytes, whole-document JSON first, else JSON lines."""
    text = _maybe_gunzip(data).decode("utf-8", errors="surrogateescape")
    try:
        document = json.loads(text)
    except ValueError:
        document = None
    if document is not None:
        for i, raw in enumerate(unwrap(document)):
            yield RawRecord(f"{source}#{i}", raw)
        return
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{source}:{number}"
        try:
            parsed = json.loads(line)
        except ValueError as exc:
            yield RawRecord(where, line, RecordError(f"line is not JSON: {exc}"))
            continue
        for raw in unwrap(parsed):
            yield RawRecord(where, raw)


def _s3_objects(s3: Any, uri: str) -> Iterator[tuple[str, bytes]]:
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    paginator = s3.get_paginator("list_objects_v2")
    for page in paginator.paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Contents", []):
            key = obj["Key"]
            if key.endswith("/"):
                continue
            body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
            yield f"s3://{bucket}/{key}", body


def _local_files(path: Path) -> Iterator[Path]:
    if path.is_dir():
        yield from sorted(p for p in path.rglob("*") if p.is_file())
    else:
        yield path


def read_sources(paths: Iterable[str], s3: Any = None) -> Iterator[RawRecord]:
    """Records of every path, in order; ``s3`` is a boto3 client, needed for ``s3://`` paths."""
    for path in paths:
        if path.startswith("s3://"):
            if s3 is None:
                raise ValueError("an S3 client is needed to read s3:// paths")
            for name, blob in _s3_objects(s3, path):
                yield from parse_blob(blob, name)
            continue
        for file in _local_files(Path(path)):
            yield from parse_blob(file.read_bytes(), str(file))
