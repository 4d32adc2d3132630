"""Read exported stream records from local files or ``s3://bucket/prefix`` (``sidecar ingest``).

A file is either one JSON document (a Lambda event batch, a list of records) or JSON lines
(one record or one batch per line), plain or gzipped. Lines that are not JSON are yielded as
:class:`RecordError` with their position, so the caller dead-letters them and goes on.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from indexer.adapters.aws.objects import read_all
from indexer.core.jsonlines import json_lines, text_of
from indexer.core.records import RawRecord, unwrap

__all__ = ["RawRecord", "parse_blob", "read_sources"]


def parse_blob(data: bytes, source: str) -> Iterator[RawRecord]:
    """Every record in one file's bytes, whole-document JSON first, else JSON lines."""
    text = text_of(data, source)
    try:
        document = json.loads(text)
    except ValueError:
        document = None
    if document is not None:
        for i, raw in enumerate(unwrap(document)):
            yield RawRecord(f"{source}#{i}", raw)
        return
    for line in json_lines(text, source):
        if line.error is not None:
            yield RawRecord(line.where, line.value, line.error)
            continue
        for raw in unwrap(line.value):
            yield RawRecord(line.where, raw)


def read_sources(paths: Iterable[str], s3: Any = None) -> Iterator[RawRecord]:
    """Records of every path, in order; ``s3`` is a boto3 client, needed for ``s3://`` paths."""
    for path in paths:
        for name, blob in read_all(path, s3):
            yield from parse_blob(blob, name)
