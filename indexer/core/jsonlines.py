"""The one reader of JSON-lines files, plain or gzipped: stream-record files (``sidecar
ingest``), export data files (``sidecar backfill``) and dead letters all go through it.

Pure: bytes in, parsed lines out. A line that is not JSON is yielded with a
:class:`~indexer.core.errors.RecordError` and its position, so the caller dead-letters it and
goes on; a file that is not valid gzip or UTF-8-ish text at all raises :class:`BlobError`.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

from indexer.core.errors import RecordError

GZIP_MAGIC = b"\x1f\x8b"


class BlobError(ValueError):
    """A whole file that cannot be read (a truncated or corrupt gzip stream)."""


@dataclass(frozen=True, slots=True)
class Line:
    """One non-blank line: where it is (``source:number``), its JSON value or the error."""

    where: str
    value: object
    error: RecordError | None = None


def text_of(data: bytes, source: str) -> str:
    """The file's text, gunzipped when it starts with the gzip magic. Undecodable bytes are
    kept (``surrogateescape``) so a bad line is dead-lettered, never silently altered."""
    if data[:2] == GZIP_MAGIC:
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise BlobError(f"{source}: not a valid gzip file: {exc}") from exc
    return data.decode("utf-8", errors="surrogateescape")


def json_lines(text: str, source: str, what: str = "line") -> Iterator[Line]:
    """Every non-blank line parsed as JSON, numbered from 1."""
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        where = f"{source}:{number}"
        try:
            yield Line(where, json.loads(raw))
        except ValueError as exc:
            yield Line(where, raw, RecordError(f"{what} is not JSON: {exc}"))
