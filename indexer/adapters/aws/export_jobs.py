"""``sidecar backfill --export``: ask DynamoDB for a point-in-time export, wait, replay it.

Why it is shaped this way:
- One *job* per window (``full``, or one incremental ``[from, to)``), remembered in the
  sidecar's state table under ``PK=EXPORT#<table>``, ``SK=<window>``: the ``ClientToken`` is
  written *before* ``ExportTableToPointInTime`` is called and the export ARN right after, so a
  restart at any point resumes waiting for the same export (a crash between the call and the
  ARN's write re-sends the same token, which DynamoDB answers with the same export for 8 h)
  instead of paying for a second one.
- Each job exports under its own S3 prefix (``<prefix>/<table>/<token>``), so the replay reads
  exactly that export's manifests, whatever else the bucket holds.
- Waiting polls ``DescribeExport`` and reports status, items and bytes; a ``FAILED`` export
  ends the job (the next run starts a new one) with AWS's failure code and message.
- The replay is :func:`indexer.sources.backfill.backfill_export` (resumable per data file), so
  it runs beside the live tail like any backfill. A job is marked ``backfilled`` once the
  replay has finished; only then does a later run start a new export for the same window.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

from indexer.core.export_window import ExportError, Window

PENDING, DONE, FAILED = "IN_PROGRESS", "COMPLETED", "FAILED"
Status = Callable[[dict[str, Any]], None]


@dataclass(frozen=True, slots=True)
class ExportJob:
    """One requested export and where it stands."""

    window: Window
    token: str
    bucket: str
    prefix: str
    arn: str | None = None
    status: str = "REQUESTED"
    backfilled: bool = False

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"


class ExportJobs:
    """Export jobs of one table, in the sidecar's state table (strongly consistent reads)."""

    def __init__(self, ddb: Any, state_table: str, table: str) -> None:
        self._ddb, self._state, self.table = ddb, state_table, table
        self._pk = f"EXPORT#{table}"

    def get(self, window: Window) -> ExportJob | None:
        item = self._ddb.get_item(
            TableName=self._state,
            Key={"PK": {"S": self._pk}, "SK": {"S": window.key}},
            ConsistentRead=True,
        ).get("Item")
        if item is None:
            return None
        return ExportJob(
            window=window,
            token=item["token"]["S"],
            bucket=item["bucket"]["S"],
            prefix=item["prefix"]["S"],
            arn=item.get("arn", {}).get("S"),
            status=item.get("status", {}).get("S", "REQUESTED"),
            backfilled=bool(item.get("backfilled", {}).get("BOOL", False)),
        )

    def put(self, job: ExportJob) -> None:
        item: dict[str, Any] = {
            "PK": {"S": self._pk},
            "SK": {"S": job.window.key},
            "token": {"S": job.token},
            "bucket": {"S": job.bucket},
            "prefix": {"S": job.prefix},
            "status": {"S": job.status},
            "backfilled": {"BOOL": job.backfilled},
            "at": {"N": str(int(time.time()))},
        }
        if job.arn:
            item["arn"] = {"S": job.arn}
        self._ddb.put_item(TableName=self._state, Item=item)


def _refused(exc: ClientError, table: str) -> ExportError:
    error = exc.response.get("Error", {})
    code, message = error.get("Code", ""), error.get("Message", "")
    if code == "PointInTimeRecoveryUnavailableException":
        return ExportError(
            f"point-in-time recovery is off on table {table!r}: its owner enables it with "
            f"`aws dynamodb update-continuous-backups --table-name {table} "
            "--point-in-time-recovery-specification PointInTimeRecoveryEnabled=true` "
            "(the sidecar never changes the mail table)"
        )
    return ExportError(f"ExportTableToPointInTime refused ({code}): {message}")


def _request(ddb: Any, job: ExportJob, table: str) -> str:
    """Send the export request (idempotent through the job's ClientToken); its ARN."""
    try:
        table_arn = ddb.describe_table(TableName=table)["Table"]["TableArn"]
        args: dict[str, Any] = {
            "TableArn": table_arn,
            "S3Bucket": job.bucket,
            "S3Prefix": job.prefix,
            "ExportFormat": "DYNAMODB_JSON",
            "ClientToken": job.token,
        }
        start, end = job.window.start, job.window.end
        if start is not None and end is not None:
            args["ExportType"] = "INCREMENTAL_EXPORT"
            args["IncrementalExportSpecification"] = {
                "ExportFromTime": datetime.fromtimestamp(start, UTC),
                "ExportToTime": datetime.fromtimestamp(end, UTC),
                "ExportViewType": "NEW_AND_OLD_IMAGES",
            }
        else:
            args["ExportType"] = "FULL_EXPORT"
        answer = ddb.export_table_to_point_in_time(**args)
    except ClientError as exc:
        raise _refused(exc, table) from exc
    return str(answer["ExportDescription"]["ExportArn"])


def start(jobs: ExportJobs, ddb: Any, window: Window, bucket: str, prefix: str) -> ExportJob:
    """The window's export: the one already requested (not yet replayed), or a new one."""
    job = jobs.get(window)
    if job is None or job.backfilled or job.status == FAILED:
        token = uuid.uuid4().hex
        job = ExportJob(window, token, bucket, f"{prefix.strip('/')}/{jobs.table}/{token}")
        jobs.put(job)  # the token first: a crash from here on re-sends the same request
    if job.arn is None:
        job = replace(job, arn=_request(ddb, job, jobs.table), status=PENDING)
        jobs.put(job)
    return job


def wait(
    jobs: ExportJobs,
    ddb: Any,
    job: ExportJob,
    *,
    poll_s: float = 10.0,
    timeout_s: float = 6 * 3600.0,
    on_status: Status | None = None,
) -> ExportJob:
    """Poll ``DescribeExport`` until the export is COMPLETED; FAILED raises ExportError."""
    deadline = time.monotonic() + timeout_s
    while True:
        desc = ddb.describe_export(ExportArn=job.arn)["ExportDescription"]
        if on_status is not None:
            on_status(desc)
        status = str(desc.get("ExportStatus", PENDING))
        if status != job.status:
            job = replace(job, status=status)
            jobs.put(job)
        if status == DONE:
            return job
        if status == FAILED:
            raise ExportError(
                f"export {job.arn} failed ({desc.get('FailureCode')}): "
                f"{desc.get('FailureMessage')}; the next run requests a new one"
            )
        if time.monotonic() > deadline:
            raise ExportError(f"export {job.arn} still {status} after {timeout_s:.0f} s; "
                              "run the command again to keep waiting")
        time.sleep(poll_s)


def finish(jobs: ExportJobs, job: ExportJob) -> ExportJob:
    """The export was replayed: a later run for this window exports afresh."""
    done = replace(job, backfilled=True)
    jobs.put(done)
    return done
