"""CLI: ``sidecar backfill URI | --scan | --export [--from T --to T]`` — index what the table
already held before the stream (``--export`` asks DynamoDB for the export itself).

Safe alongside the live stream and from an export of any age, since records only trigger a
re-read of the table (see :mod:`indexer.sources.backfill`). Re-running resumes: done data files
(or scan segment pages) are skipped unless ``--restart``.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table
from rich.text import Text

from indexer.cli.preflight import require_tables
from indexer.cli.progress import progress, say
from indexer.settings import Settings, get_settings

if TYPE_CHECKING:
    from indexer.sources.backfill import BackfillSummary

console = Console(stderr=True)


class RateColumn(ProgressColumn):
    """Items (or files) per second, as rich measures it."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text(f"{speed:,.0f}/s" if speed else "–/s")


def backfill(
    uri: Annotated[
        str | None, typer.Argument(help="s3://bucket/prefix of a DynamoDB export to S3.")
    ] = None,
    scan: Annotated[bool, typer.Option("--scan", help="Scan the table instead.")] = False,
    segments: Annotated[int, typer.Option(min=1, help="Scan segments (threads).")] = 4,
    parallel: Annotated[int, typer.Option(min=1, help="Export data files read at once.")] = 4,
    rate_limit: Annotated[
        float | None, typer.Option(help="Scan: at most this many items per second.")
    ] = None,
    restart: Annotated[bool, typer.Option(help="Forget earlier progress marks.")] = False,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for one unit.")] = 3600.0,
    export: Annotated[
        bool, typer.Option("--export", help="Ask DynamoDB for a point-in-time export, then replay "
                           "it (resumes the export already requested).")
    ] = False,
    since: Annotated[
        str | None, typer.Option("--from", help="--export: incremental from this time "
                                 "(ISO 8601, UTC unless zoned; or epoch seconds).")
    ] = None,
    until: Annotated[
        str | None, typer.Option("--to", help="--export: incremental up to here (default now).")
    ] = None,
    bucket: Annotated[
        str | None, typer.Option(help="--export: S3 bucket (default SIDECAR_EXPORT_BUCKET).")
    ] = None,
    prefix: Annotated[
        str | None, typer.Option(help="--export: key prefix (default SIDECAR_EXPORT_PREFIX).")
    ] = None,
    poll: Annotated[
        float, typer.Option(min=0.05, help="--export: DescribeExport every S s.")
    ] = 10.0,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the summary as one JSON object on stdout.")
    ] = False,
) -> None:
    """Replay an export (or a Scan) of the mail table through the workers, resumably."""
    from indexer.core.export_window import ExportError
    from indexer.sources.backfill import backfill_export
    from indexer.sources.scan import backfill_scan

    if sum((scan, uri is not None, export)) != 1:
        raise typer.BadParameter("give one of: an s3:// export URI, --scan, --export")
    if (since or until) and not export:
        raise typer.BadParameter("--from/--to go with --export")
    settings = get_settings()
    if export:
        _export(settings, since, until, bucket, prefix, poll, as_json, parallel=parallel,
                restart=restart, timeout_s=timeout)
        return
    require_tables(settings)
    try:
        with progress(console, "backfill", settings.progress_interval_s, *_columns()) as bar:
            if uri is not None:
                summary = backfill_export(
                    settings, uri, parallel=parallel, restart=restart, progress=bar,
                    timeout_s=timeout,
                )
            else:
                summary = backfill_scan(
                    settings, segments=segments, rate_limit=rate_limit, restart=restart,
                    progress=bar, timeout_s=timeout,
                )
    except ExportError as exc:
        say(console, f"export unusable: {exc}")
        raise typer.Exit(2) from exc
    _report(summary, "segments" if scan else "files", as_json)


def _columns() -> tuple[ProgressColumn, ...]:
    return (
        TextColumn("{task.description:>6}"),
        BarColumn(),
        MofNCompleteColumn(),
        RateColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )


def _report(summary: BackfillSummary, unit: str, as_json: bool) -> None:
    """The totals — one JSON object on stdout with ``--json``, else a table in a terminal or
    a JSON line on stderr; exit 1 when anything was dead-lettered."""
    code = 1 if summary.dead_lettered else 0
    totals = {"unit": unit, **asdict(summary)}
    if as_json:
        print(json.dumps(totals, default=str))
        raise typer.Exit(code)
    if not console.is_terminal:
        say(console, "backfill done", **totals)
        raise typer.Exit(code)
    table = Table(title="backfill")
    table.add_row(unit, str(summary.units))
    table.add_row(f"{unit} already done", str(summary.skipped))
    for name in ("read", "deduplicated", "applied", "dead_lettered", "ignored", "batches",
                 "embedded"):
        table.add_row(name, str(getattr(summary, name)))
    console.print(table)
    raise typer.Exit(code)


def _windows(since: str | None, until: str | None) -> list[Any]:
    from indexer.core.export_window import Window, parse_time, windows

    if since is None:
        if until is not None:
            raise typer.BadParameter("--to needs --from (without both: a full export)")
        return [Window()]
    try:
        start = parse_time(since)
        end = parse_time(until) if until else int(time.time())
        return windows(start, end)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc


def _export(
    settings: Settings, since: str | None, until: str | None, bucket: str | None,
    prefix: str | None, poll: float, as_json: bool, **replay: Any,
) -> None:
    """Export (or resume the export of) each window, wait with progress, replay it."""
    from indexer.core.export_window import ExportError, iso
    from indexer.sources.export_backfill import export_and_backfill

    target = bucket or settings.export_bucket
    if not target:
        raise typer.BadParameter("--export needs --bucket or SIDECAR_EXPORT_BUCKET")
    plan = _windows(since, until)  # bad arguments are answered before anything is read
    require_tables(settings)
    for w in plan:
        span = "full export" if not w.incremental else f"incremental {iso(w.start)} .. {iso(w.end)}"
        say(console, f"export: {span} of {settings.table} to s3://{target}")
    started = time.monotonic()
    last: float | None = None  # when a status was last said

    def on_status(desc: dict[str, Any]) -> None:
        """Each DescribeExport in a terminal; outside one at most one line per progress
        interval (the poll may be far more frequent), the first and a finished one always."""
        nonlocal last
        now, status = time.monotonic(), desc.get("ExportStatus")
        if (not console.is_terminal and last is not None and status == "IN_PROGRESS"
                and now - last < settings.progress_interval_s):
            return
        last = now
        say(console,
            f"export {desc.get('ExportArn')}: {status} ({now - started:.0f} s, "
            f"{desc.get('ItemCount', 0)} items, {desc.get('BilledSizeBytes', 0)} bytes)",
            command="backfill", export_arn=desc.get("ExportArn"), status=status,
            elapsed_s=round(now - started, 1), items=desc.get("ItemCount"),
            billed_bytes=desc.get("BilledSizeBytes"))

    try:
        with progress(console, "backfill", settings.progress_interval_s, *_columns()) as bar:
            summary = export_and_backfill(
                settings, plan, bucket=target, prefix=prefix or settings.export_prefix,
                poll_s=poll, on_status=on_status, progress=bar, **replay,
            )
    except ExportError as exc:
        say(console, f"export unusable: {exc}")
        raise typer.Exit(2) from exc
    _report(summary, "files", as_json)


def register(app: typer.Typer) -> None:
    """Add ``backfill`` to the main app."""
    app.command("backfill")(backfill)
