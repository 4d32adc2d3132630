"""``sidecar backfill --export`` end to end against moto, as far as moto goes.

What moto does: ``ExportTableToPointInTime`` (refused without point-in-time recovery, as AWS
does), an export that runs in a thread and writes the table's items as one gzipped
``DYNAMODB_JSON`` data file under ``<S3Prefix>/AWSDynamoDB/<id>/data/``, and
``DescribeExport`` / ``ListExports``.

Where this test stands in for AWS (moto 5.2.5 lacks it):
- moto writes **no manifest files**: after the export COMPLETED, the test writes
  ``manifest-files.json`` and ``manifest-summary.json`` next to moto's data file, as AWS lays
  them out (md5 and item count computed from the data file). The command's first run therefore
  stops at "no manifest-summary.json" (exit 2) and the second run resumes the same export.
- moto ignores ``ClientToken`` and ``IncrementalExportSpecification`` (it exports the whole
  table and echoes ``ExportType``); the request shapes are still checked by botocore against
  AWS's API model before they are sent, and resuming is checked through the sidecar's own
  state (one export per window, however often the command runs).
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from indexer.adapters.aws import clients as aws
from indexer.adapters.aws.export_jobs import ExportJob, ExportJobs, start
from indexer.adapters.dynamodb.state import ShardCheckpoint, ShardCheckpointStore
from indexer.core.export_window import Window, iso
from indexer.settings import Settings, to_env
from sidecar_tools.writer.files import load_file
from sidecar_tools.writer.store import delete_message
from tests.conftest import CORPORA
from tests.support.pipeline_helpers import (
    opensearch_docs,
    prepare_tables,
    qdrant_points,
    table_messages,
    workers,
)

SIDECAR = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "sidecar"
pytestmark = [pytest.mark.stack, pytest.mark.slow]


def _cli(settings: Settings, bucket: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **to_env(settings), "SIDECAR_EXPORT_BUCKET": bucket,
           "HF_HUB_OFFLINE": "1", "COLUMNS": "200"}
    return subprocess.run(
        [str(SIDECAR), "backfill", "--export", "--poll", "0.2", *args],
        env=env, capture_output=True, text=True, timeout=600, check=False,
    )


def _exports(ddb: Any, table: str) -> list[dict[str, Any]]:
    arn = ddb.describe_table(TableName=table)["Table"]["TableArn"]
    return list(ddb.list_exports(TableArn=arn)["ExportSummaries"])


def _write_manifests(s3: Any, bucket: str, prefix: str, arn: str) -> int:
    """Stand in for AWS: the two manifest files moto does not write. Returns the item count."""
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix=prefix)["Contents"]]
    (data_key,) = [k for k in keys if "/data/" in k]
    body = s3.get_object(Bucket=bucket, Key=data_key)["Body"].read()
    items = len(gzip.decompress(body).decode().splitlines())
    base = data_key.split("/data/")[0]
    line = {"itemCount": items, "md5Checksum": base64.b64encode(hashlib.md5(body).digest()).decode(),
            "etag": "e", "dataFileS3Key": data_key}
    s3.put_object(Bucket=bucket, Key=f"{base}/manifest-files.json", Body=json.dumps(line))
    summary = {"version": "2020-06-30", "exportArn": arn, "exportType": "FULL_EXPORT",
               "outputFormat": "DYNAMODB_JSON", "itemCount": items,
               "manifestFilesS3Key": f"{base}/manifest-files.json"}
    s3.put_object(Bucket=bucket, Key=f"{base}/manifest-summary.json", Body=json.dumps(summary))
    return items


def test_export_is_requested_awaited_resumed_and_replayed(
    settings: Settings, tmp_path: Path
) -> None:
    sample = tmp_path / "sample.jsonl"
    with gzip.open(CORPORA / "notmuch-lkml.jsonl.gz", "rt", encoding="utf-8") as fh:
        sample.write_text("".join(next(fh) for _ in range(12)))
    ddb = prepare_tables(settings)
    assert load_file(ddb, settings.table, sample, "box").stored == 12
    s3 = aws.client(settings, "s3")
    bucket = f"ex-{settings.table[2:]}"
    s3.create_bucket(Bucket=bucket)

    # `sidecar init --mail-table` turns point-in-time recovery on; a writer's table may have it
    # off, which the export refuses in words
    ddb.update_continuous_backups(
        TableName=settings.table,
        PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": False},
    )
    refused = _cli(settings, bucket)
    assert refused.returncode == 2
    assert "point-in-time recovery is off" in refused.stderr
    ddb.update_continuous_backups(
        TableName=settings.table,
        PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True},
    )

    first = _cli(settings, bucket)
    assert first.returncode == 2, first.stderr
    assert "COMPLETED" in first.stderr and "no manifest-summary.json" in first.stderr
    jobs = ExportJobs(ddb, settings.resolved_state_table, settings.table)
    job = jobs.get(Window())
    assert job is not None and job.arn and job.status == "COMPLETED" and not job.backfilled
    assert [e["ExportArn"] for e in _exports(ddb, settings.table)] == [job.arn]

    items = _write_manifests(s3, bucket, job.prefix, job.arn)
    # A change after the export's point in time: the replay must not bring the message back.
    gone = json.loads(sample.read_text().splitlines()[0])["messageId"]
    assert delete_message(ddb, settings.table, "box", gone)

    with workers(settings):
        second = _cli(settings, bucket)
        assert second.returncode == 0, second.stderr
    assert f"export {job.arn}: COMPLETED" in second.stderr
    assert [e["ExportArn"] for e in _exports(ddb, settings.table)] == [job.arn]  # resumed
    done = jobs.get(Window())
    assert done is not None and done.backfilled and done.arn == job.arn
    assert items > 12 * 5
    table = table_messages(ddb, settings.table, "box")
    assert len(table) == 11
    assert set(opensearch_docs(settings, "box")) == set(table)
    assert set(qdrant_points(settings, "box")) == {("box", k) for k in table}


def test_incremental_export_request_and_resume(settings: Settings) -> None:
    ddb = prepare_tables(settings)
    ddb.update_continuous_backups(
        TableName=settings.table,
        PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True},
    )
    s3 = aws.client(settings, "s3")
    bucket = f"ex-{settings.table[2:]}"
    s3.create_bucket(Bucket=bucket)
    end = int(time.time()) - 3600
    window = ["--from", iso(end - 1800), "--to", iso(end)]

    first = _cli(settings, bucket, *window)
    assert f"incremental {iso(end - 1800)} .. {iso(end)}" in first.stderr
    job = ExportJobs(ddb, settings.resolved_state_table, settings.table).get(
        Window(end - 1800, end)
    )
    assert job is not None and job.arn is not None
    described = ddb.describe_export(ExportArn=job.arn)["ExportDescription"]
    assert described["ExportType"] == "INCREMENTAL_EXPORT"
    assert first.returncode == 2  # moto wrote no manifest: the stand-in is the test above

    again = _cli(settings, bucket, *window)
    assert again.returncode == 2
    assert [e["ExportArn"] for e in _exports(ddb, settings.table)] == [job.arn]
    bad = _cli(settings, bucket, "--from", iso(end), "--to", iso(end - 60))
    assert bad.returncode == 2 and "before it starts" in bad.stderr

    # A crash after the token was stored but before the ARN: the next run sends the request
    # with that token (DynamoDB answers a repeated token with the same export) and keeps the
    # job's own prefix.
    jobs = ExportJobs(ddb, settings.resolved_state_table, settings.table)
    other = Window(end - 7200, end - 3600)
    jobs.put(ExportJob(other, "tok-1", bucket, "sidecar-exports/x/tok-1"))
    resumed = start(jobs, ddb, other, bucket, "ignored")
    assert (resumed.token, resumed.prefix) == ("tok-1", "sidecar-exports/x/tok-1")
    assert resumed.arn is not None and jobs.get(other) == resumed
    assert ddb.describe_export(ExportArn=resumed.arn)["ExportDescription"]["S3Prefix"] == (
        "sidecar-exports/x/tok-1"
    )

    # The tailer's checkpoints keep the last applied record's time: a gap's window starts there.
    store = ShardCheckpointStore(ddb, settings.resolved_state_table, "arn:stream")
    store.save(ShardCheckpoint("shard-1", "42", created=end))
    assert store.load() == {"shard-1": ShardCheckpoint("shard-1", "42", False, end)}
