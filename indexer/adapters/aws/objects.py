"""Files the sidecar reads, local or on S3 (``s3://bucket/prefix``): one door for both, so
ingest and backfill list and read them alike, with S3 errors classified at this adapter."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from indexer.adapters.aws.io import classify_error


def split_uri(uri: str) -> tuple[str, str]:
    """``s3://bucket/prefix`` → (bucket, prefix)."""
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    if not bucket:
        raise ValueError(f"{uri!r} names no bucket")
    return bucket, prefix


def s3_keys(s3: Any, bucket: str, prefix: str) -> list[str]:
    """Every object key under ``prefix`` (paged ``ListObjectsV2``), folders left out."""
    try:
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        return [obj["Key"] for page in pages for obj in page.get("Contents", [])
                if not obj["Key"].endswith("/")]
    except (ClientError, BotoCoreError) as exc:
        raise classify_error(exc) from exc


def s3_bytes(s3: Any, bucket: str, key: str) -> bytes:
    """One object's bytes."""
    try:
        return bytes(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    except (ClientError, BotoCoreError) as exc:
        raise classify_error(exc) from exc


def _local_files(path: Path) -> Iterator[Path]:
    if path.is_dir():
        yield from sorted(p for p in path.rglob("*") if p.is_file())
    else:
        yield path


def read_all(path: str, s3: Any = None) -> Iterator[tuple[str, bytes]]:
    """(name, bytes) of a file, every file of a folder, or every object under an S3 prefix."""
    if path.startswith("s3://"):
        if s3 is None:
            raise ValueError("an S3 client is needed to read s3:// paths")
        bucket, prefix = split_uri(path)
        for key in s3_keys(s3, bucket, prefix):
            yield f"s3://{bucket}/{key}", s3_bytes(s3, bucket, key)
        return
    for file in _local_files(Path(path)):
        yield str(file), file.read_bytes()
