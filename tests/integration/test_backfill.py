"""Backfill from a DynamoDB export in S3 and from a parallel Scan.

Pure tests of the export parser on hand-made manifests and rows; then real-stack tests that
build a FULL export in moto's S3 in AWS's layout from the table itself, replay it through real
workers, and check resumability, stale exports (records are triggers: an old row never
resurrects a delete nor overwrites a rewrite), incremental REMOVE rows and the Scan path.
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import hashlib
import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from indexer.adapters import factories
from indexer.adapters.aws import clients as aws
from indexer.adapters.dynamodb.state import MarkStore
from indexer.core.errors import RecordError
from indexer.core.export_window import ExportError
from indexer.core.plan import plan_records
from indexer.core.records import EventName, decode_record
from indexer.settings import Settings
from indexer.sources.backfill import backfill_export, export_checkpoint_pk
from indexer.sources.exports import (
    export_rows,
    parse_manifest_files,
    parse_summary,
    summary_keys,
)
from indexer.sources.scan import RateLimiter, backfill_scan
from sidecar_tools.writer.files import load_file
from sidecar_tools.writer.mapping import to_items
from sidecar_tools.writer.store import delete_message, rewrite_message
from tests.conftest import CORPORA
from tests.support.pipeline_helpers import (
    export_stream,
    ingest_files,
    opensearch_docs,
    prepare_tables,
    qdrant_points,
    table_messages,
    workers,
)

LKML = CORPORA / "notmuch-lkml.jsonl.gz"
META = {"PK": {"S": "M#box#MSG#" + "a" * 64}, "SK": {"S": "META"}, "thread_key": {"S": "t"}}


# -- pure: exports.py ----------------------------------------------------------------------------
def _gz_lines(rows: list[Any]) -> bytes:
    text = "\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n"
    return gzip.compress(text.encode())


def test_summary_and_manifest_files_are_parsed() -> None:
    summary = parse_summary(
        json.dumps(
            {
                "exportArn": "arn:aws:dynamodb:us-east-1:1:table/t/export/01",
                "exportType": "FULL_EXPORT",
                "outputFormat": "DYNAMODB_JSON",
                "itemCount": 3,
                "manifestFilesS3Key": "p/AWSDynamoDB/01/manifest-files.json",
            }
        ).encode(),
        "p/AWSDynamoDB/01/manifest-summary.json",
    )
    assert summary.item_count == 3 and not summary.incremental
    assert summary.manifest_files_key.endswith("manifest-files.json")
    lines = [
        {"itemCount": 2, "md5Checksum": "x==", "etag": "e", "dataFileS3Key": "p/d/a.json.gz"},
        {"itemCount": 1, "md5Checksum": "y==", "etag": "f", "dataFileS3Key": "p/d/b.json.gz"},
    ]
    files = parse_manifest_files("\n".join(map(json.dumps, lines)).encode() + b"\n\n", "mf")
    assert [(f.key, f.item_count, f.md5) for f in files] == [
        ("p/d/a.json.gz", 2, "x=="),
        ("p/d/b.json.gz", 1, "y=="),
    ]
    assert summary_keys(["a/manifest-summary.json", "a/data/x.gz", "b/manifest-summary.json"]) == [
        "a/manifest-summary.json",
        "b/manifest-summary.json",
    ]


@pytest.mark.parametrize(
    ("doc", "reason"),
    [
        ({"outputFormat": "ION", "manifestFilesS3Key": "k"}, "not supported"),
        ({"exportType": "WEIRD", "manifestFilesS3Key": "k"}, "unknown exportType"),
        ({"exportType": "FULL_EXPORT"}, "manifestFilesS3Key"),
        ([], "JSON object"),
    ],
)
def test_unusable_summaries_are_refused(doc: object, reason: str) -> None:
    with pytest.raises(ExportError, match=reason):
        parse_summary(json.dumps(doc).encode(), "s")


def test_a_manifest_line_without_a_data_key_fails_the_export() -> None:
    with pytest.raises(ExportError, match="mf:2: no dataFileS3Key"):
        parse_manifest_files(b'{"dataFileS3Key": "a"}\n{"itemCount": 1}\n', "mf")


def test_full_rows_become_insert_triggers_and_bad_rows_carry_their_position() -> None:
    rows = [
        {"Item": META},
        "{not json",
        {"NoItem": 1},
        {"Item": {"PK": {"S": "x"}}},
        {"Item": [1]},
        "",
        {"Item": {**META, "SK": {"S": "BODY"}}},
    ]
    out = list(export_rows(_gz_lines(rows), "s3://b/d/0.json.gz", incremental=False))
    assert [r.source for r in out] == [f"s3://b/d/0.json.gz:{n}" for n in (1, 2, 3, 4, 5, 7)]
    good = [r for r in out if r.error is None]
    assert [r.source.rsplit(":", 1)[1] for r in good] == ["1", "7"]
    records = [decode_record(r.raw) for r in good]
    assert all(r.event_name is EventName.INSERT for r in records)
    assert (records[0].pk, records[0].sk) == (META["PK"]["S"], "META")
    assert records[0].new_image is not None and records[0].new_image["thread_key"] == "t"
    reasons = [r.error.reason for r in out if r.error is not None]
    assert "not JSON" in reasons[0] and "no 'Item'" in reasons[1]
    assert "no string SK" in reasons[2] and "must be an object" in reasons[3]
    plan = plan_records(records)
    assert {(m.mailbox_id, m.message_key) for m in plan.fulltext} == {("box", "a" * 64)}


def test_incremental_rows_become_insert_modify_remove() -> None:
    keys = {"PK": META["PK"], "SK": META["SK"]}
    meta = {"WriteTimestampMicros": {"N": "1700000000000000"}}
    rows = [
        {"Metadata": meta, "Keys": keys, "NewImage": META},
        {"Metadata": meta, "Keys": keys, "NewImage": META, "OldImage": META},
        {"Metadata": meta, "Keys": keys, "OldImage": META},
        {"Metadata": meta, "Keys": keys},
        {"Metadata": meta, "NewImage": META},
        {"Metadata": meta, "Keys": keys, "NewImage": "x"},
    ]
    plain = list(export_rows(json.dumps(rows[0]).encode() + b"\n", "f", incremental=True))
    assert decode_record(plain[0].raw).event_name is EventName.INSERT
    out = list(export_rows(_gz_lines(rows), "f", incremental=True))
    events = [decode_record(r.raw).event_name for r in out[:4]]
    assert events == [EventName.INSERT, EventName.MODIFY, EventName.REMOVE, EventName.REMOVE]
    assert decode_record(out[2].raw).new_image is None
    assert out[4].error is not None and "no 'Keys'" in out[4].error.reason
    assert out[5].error is not None and "NewImage must be an object" in out[5].error.reason
    assert out[5].source == "f:6"


def test_a_corrupt_gzip_data_file_is_an_export_error() -> None:
    with pytest.raises(ExportError, match="gzip"):
        list(export_rows(b"\x1f\x8b" + b"garbage", "f", incremental=False))


def test_rate_limiter_spaces_items() -> None:
    limiter = RateLimiter(200.0)
    start = time.monotonic()
    for _ in range(5):
        limiter.take(20)  # 100 items at 200/s: the last take starts after ~0.4 s
    assert time.monotonic() - start >= 0.35
    RateLimiter(None).take(10**9)  # unlimited: returns at once


def test_record_errors_are_record_errors() -> None:
    with pytest.raises(RecordError):
        decode_record({"eventName": "INSERT", "dynamodb": {"Keys": {}}})


# -- real stack ----------------------------------------------------------------------------------
def _scan_items(ddb: Any, table: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    args: dict[str, Any] = {"TableName": table}
    while True:
        page = ddb.scan(**args)
        items.extend(page["Items"])
        if "LastEvaluatedKey" not in page:
            return items
        args["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def _put_export(
    settings: Settings, rows: list[Any], files: int, *, incremental: bool = False
) -> tuple[str, list[str]]:
    """Write ``rows`` as an export in AWS's layout; returns its URI and data file keys.

    Rows are cut into contiguous runs, as AWS writes each data file from one key range (it also
    keeps a message's META and BODY together, so the test sends fewer batches).
    """
    s3 = aws.client(settings, "s3")
    bucket = f"bf-{settings.table[2:]}"
    with contextlib.suppress(s3.exceptions.BucketAlreadyOwnedByYou):
        s3.create_bucket(Bucket=bucket)
    export_id = f"{int(time.time() * 1000)}-{uuid.uuid4().hex[:8]}"
    base = f"exports/AWSDynamoDB/{export_id}"
    lines = []
    keys = []
    size = -(-len(rows) // files)
    for n in range(files):
        chunk = rows[n * size : (n + 1) * size]
        body = _gz_lines(chunk)
        key = f"{base}/data/{uuid.uuid4().hex}.json.gz"
        s3.put_object(Bucket=bucket, Key=key, Body=body)
        md5 = base64.b64encode(hashlib.md5(body).digest()).decode()
        lines.append({"itemCount": len(chunk), "md5Checksum": md5, "etag": "e", "dataFileS3Key": key})
        keys.append(key)
    s3.put_object(
        Bucket=bucket, Key=f"{base}/manifest-files.json", Body="\n".join(map(json.dumps, lines))
    )
    summary = {
        "version": "2023-08-01" if incremental else "2020-06-30",
        "exportArn": f"arn:aws:dynamodb:us-east-1:000000000000:table/{settings.table}/export/{export_id}",
        "exportType": "INCREMENTAL_EXPORT" if incremental else "FULL_EXPORT",
        "outputFormat": "DYNAMODB_JSON",
        "itemCount": len(rows),
        "manifestFilesS3Key": f"{base}/manifest-files.json",
    }
    s3.put_object(Bucket=bucket, Key=f"{base}/manifest-summary.json", Body=json.dumps(summary))
    return f"s3://{bucket}/exports", keys


def _full_export(settings: Settings, ddb: Any, files: int = 4) -> tuple[str, list[str], int]:
    items = sorted(_scan_items(ddb, settings.table), key=lambda i: (i["PK"]["S"], i["SK"]["S"]))
    uri, keys = _put_export(settings, [{"Item": i} for i in items], files)
    return uri, keys, len(items)


def _subset(tmp_path: Path, count: int) -> Path:
    sample = tmp_path / f"first-{count}.jsonl"
    with gzip.open(LKML, "rt", encoding="utf-8") as fh:
        sample.write_text("".join(next(fh) for _ in range(count)))
    return sample


def _emails(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _rewrite(ddb: Any, table: str, email: dict[str, Any], mailbox: str) -> str:
    subject = f"REWRITTEN {uuid.uuid4().hex[:6]}"
    edited = {**email, "metadata": {**email["metadata"], "subject": subject}}
    assert rewrite_message(ddb, table, to_items(edited, mailbox))
    return subject


def _assert_indexed(settings: Settings, ddb: Any, mailbox: str) -> dict[str, dict[str, Any]]:
    table = table_messages(ddb, settings.table, mailbox)
    docs = opensearch_docs(settings, mailbox)
    assert set(docs) == set(table)
    return docs


@pytest.mark.stack
@pytest.mark.slow
def test_full_export_backfill_is_exact_and_resumable(settings: Settings) -> None:
    ddb = prepare_tables(settings)
    load_file(ddb, settings.table, LKML, "lkml")
    uri, keys, count = _full_export(settings, ddb)
    table = table_messages(ddb, settings.table, "lkml")
    assert len(table) == 176

    with workers(settings):
        first = backfill_export(settings, uri, parallel=4, timeout_s=600)
        assert (first.units, first.skipped, first.read) == (4, 0, count)
        assert first.dead_lettered == 0
        assert first.applied + first.ignored + first.deduplicated == count
        # Two passes: each message's rows beyond its first (per index) are not sent again.
        assert 0 < first.deduplicated < count and first.batches < 2 * -(-len(table) // 64) + 4
        _assert_indexed(settings, ddb, "lkml")

        # A run that died before marking two files: only those two are read again.
        marks = MarkStore(ddb, settings.resolved_state_table, export_checkpoint_pk(uri))
        assert set(marks.load()) == set(keys) | {f"people#{key}" for key in keys}
        for key in keys[3:]:
            ddb.delete_item(
                TableName=settings.resolved_state_table,
                Key={"PK": {"S": export_checkpoint_pk(uri)}, "SK": {"S": key}},
            )
        second = backfill_export(settings, uri + "/", parallel=2, timeout_s=600)
        assert (second.units, second.skipped) == (4, 3)
        assert second.read == count - 3 * -(-count // 4)
        assert second.embedded == 0
        third = backfill_export(settings, uri, timeout_s=600)
        assert (third.skipped, third.read) == (4, 0)
        _assert_indexed(settings, ddb, "lkml")
    assert set(qdrant_points(settings, "lkml")) == {("lkml", k) for k in table}


@pytest.mark.stack
@pytest.mark.slow
def test_stale_export_never_resurrects_and_incremental_remove_deletes(
    settings: Settings, tmp_path: Path
) -> None:
    ddb = prepare_tables(settings)
    sample = _subset(tmp_path, 30)
    load_file(ddb, settings.table, sample, "box")
    emails = _emails(sample)
    uri, _, _ = _full_export(settings, ddb, files=3)

    with workers(settings):
        assert backfill_export(settings, uri, timeout_s=600).dead_lettered == 0
        _assert_indexed(settings, ddb, "box")

        # The live stream deletes three messages and rewrites three; it is ingested. Then the
        # (now stale) export is replayed: old rows only trigger re-reads of the table.
        for email in emails[:3]:
            assert delete_message(ddb, settings.table, "box", email["messageId"])
        subjects = {e["messageId"]: _rewrite(ddb, settings.table, e, "box") for e in emails[3:6]}
        stream = tmp_path / "stream.jsonl"
        export_stream(settings, stream)
        assert ingest_files(settings, [str(stream)]).dead_lettered == 0
        replay = backfill_export(settings, uri, restart=True, timeout_s=600)
        assert replay.skipped == 0 and replay.dead_lettered == 0
        docs = _assert_indexed(settings, ddb, "box")
        assert len(docs) == 27
        by_id = {d["message_id"]: d for d in docs.values()}
        assert not set(by_id) & {e["messageId"] for e in emails[:3]}
        assert {i: by_id[i]["subject"] for i in subjects} == subjects

        # An incremental export: a REMOVE row for a message deleted since (not yet indexed as
        # deleted), a MODIFY row for a rewritten one, and a malformed row.
        gone, changed = emails[6], emails[7]
        gone_key = next(k for k, d in docs.items() if d["message_id"] == gone["messageId"])
        changed_key = next(k for k, d in docs.items() if d["message_id"] == changed["messageId"])
        meta = ddb.get_item(
            TableName=settings.table, Key={"PK": {"S": f"M#box#MSG#{gone_key}"}, "SK": {"S": "META"}}
        )["Item"]
        assert delete_message(ddb, settings.table, "box", gone["messageId"])
        subject = _rewrite(ddb, settings.table, changed, "box")
        ckeys = {"PK": {"S": f"M#box#MSG#{changed_key}"}, "SK": {"S": "META"}}
        rows: list[Any] = [
            {"Metadata": {"WriteTimestampMicros": {"N": "1"}}, "Keys": {k: meta[k] for k in ("PK", "SK")},
             "OldImage": meta},
            {"Metadata": {"WriteTimestampMicros": {"N": "2"}}, "Keys": ckeys, "NewImage": ckeys,
             "OldImage": ckeys},
            "{broken",
        ]
        inc_uri, _ = _put_export(settings, rows, 1, incremental=True)
        inc = backfill_export(settings, inc_uri, timeout_s=600)
        assert (inc.read, inc.dead_lettered) == (3, 1)
        docs = _assert_indexed(settings, ddb, "box")
        assert gone_key not in docs and docs[changed_key]["subject"] == subject
        letters = factories.dead_letters(settings).list()
        assert len(letters) == 1 and letters[0].source and letters[0].source.endswith(":3")


@pytest.mark.stack
@pytest.mark.slow
def test_scan_backfill_indexes_the_table_and_resumes_per_segment(
    settings: Settings, tmp_path: Path
) -> None:
    ddb = prepare_tables(settings)
    load_file(ddb, settings.table, _subset(tmp_path, 25), "scan")
    items = len(_scan_items(ddb, settings.table))
    with workers(settings):
        summary = backfill_scan(settings, segments=3, rate_limit=2000, page_size=20, timeout_s=600)
        assert (summary.units, summary.skipped, summary.read) == (3, 0, items)
        assert summary.dead_lettered == 0
        assert len(_assert_indexed(settings, ddb, "scan")) == 25
        marks = MarkStore(ddb, settings.resolved_state_table, f"SCAN#{settings.table}#3")
        assert all(m["done"]["BOOL"] for m in marks.load().values())
        again = backfill_scan(settings, segments=3, timeout_s=600)
        assert (again.skipped, again.read) == (3, 0)
        fresh = backfill_scan(settings, segments=3, restart=True, timeout_s=600)
        assert (fresh.skipped, fresh.read, fresh.embedded) == (0, items, 0)
