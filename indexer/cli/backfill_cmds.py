"""CLI: ``sidecar backfill URI | --scan`` — index what the table already held before the stream.

Safe alongside the live stream and from an export of any age, since records only trigger a
re-read of the table (see :mod:`indexer.sources.backfill`). Re-running resumes: done data files
(or scan segment pages) are skipped unless ``--restart``.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table
from rich.text import Text

from indexer.cli.preflight import require_tables
from indexer.settings import get_settings

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
) -> None:
    """Replay an export (or a Scan) of the mail table through the workers, resumably."""
    from indexer.sources.backfill import backfill_export
    from indexer.sources.exports import ExportError
    from indexer.sources.scan import backfill_scan

    if scan == (uri is not None):
        raise typer.BadParameter("give either an s3:// export URI or --scan")
    settings = get_settings()
    require_tables(settings)
    columns = (
        TextColumn("{task.description:>6}"),
        BarColumn(),
        MofNCompleteColumn(),
        RateColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    try:
        with Progress(*columns, console=console) as bar:
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
        console.print(f"[red]export unusable:[/red] {exc}")
        raise typer.Exit(2) from exc
    table = Table(title="backfill")
    unit = "segments" if scan else "files"
    table.add_row(unit, str(summary.units))
    table.add_row(f"{unit} already done", str(summary.skipped))
    for name in ("read", "deduplicated", "applied", "dead_lettered", "ignored", "batches",
                 "embedded"):
        table.add_row(name, str(getattr(summary, name)))
    console.print(table)
    raise typer.Exit(1 if summary.dead_lettered else 0)


def register(app: typer.Typer) -> None:
    """Add ``backfill`` to the main app."""
    app.command("backfill")(backfill)
