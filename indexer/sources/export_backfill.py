"""``sidecar backfill --export``: ask DynamoDB for each window's export, wait for it, replay it
(the export API calls and their remembered jobs: :mod:`indexer.adapters.aws.export_jobs`)."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from indexer.adapters.aws.export_jobs import ExportJobs, Status, finish, start, wait
from indexer.core.export_window import Window
from indexer.settings import Settings
from indexer.sources.backfill import BackfillSummary, backfill_export, state_client


def export_and_backfill(
    settings: Settings,
    windows: list[Window],
    *,
    bucket: str,
    prefix: str,
    poll_s: float = 10.0,
    on_status: Status | None = None,
    **replay: Any,
) -> BackfillSummary:
    """Each window: export (or resume its export), wait, replay; the summaries added up.

    ``replay`` goes to :func:`indexer.sources.backfill.backfill_export` (parallel, progress,
    timeout_s, restart)."""
    ddb = state_client(settings)
    jobs = ExportJobs(ddb, settings.resolved_state_table, settings.table)
    total = BackfillSummary()
    for window in windows:
        job = wait(jobs, ddb, start(jobs, ddb, window, bucket, prefix), poll_s=poll_s,
                   on_status=on_status)
        part = backfill_export(settings, job.uri, **replay)
        finish(jobs, job)
        for f in fields(total):
            setattr(total, f.name, getattr(total, f.name) + getattr(part, f.name))
    return total
