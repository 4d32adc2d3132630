"""``sidecar import PATH --mailbox M``: your own mail (mbox, Maildir, .eml folder), searchable."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from indexer.settings import get_settings

console = Console()
err_console = Console(stderr=True)


def _report(summary: object) -> None:
    from sidecar_tools.mailimport.run import ImportSummary

    assert isinstance(summary, ImportSummary)
    table = Table(title=f"{summary.source} ({summary.kind}) → mailbox", show_header=False)
    rate = (summary.stored + summary.already_present) / max(summary.seconds, 1e-9)
    for label, value in (
        ("files", summary.files),
        ("stored", summary.stored),
        ("already present", summary.already_present),
        ("indexed (both indexes)", summary.indexed),
        ("texts embedded", summary.embedded),
        ("not indexed (dead-lettered)", len(summary.not_indexed)),
        ("skipped (malformed)", len(summary.skipped)),
        ("seconds", f"{summary.seconds:.1f} ({rate:.1f} messages/s)"),
    ):
        table.add_row(label, str(value))
    console.print(table)
    for skipped in summary.skipped:
        console.print(f"[yellow]skipped {skipped.origin}:[/yellow] {skipped.reason}",
                      markup=True, highlight=False)
    for key, reason in summary.not_indexed.items():
        console.print(f"[yellow]not indexed {key}:[/yellow] {reason}", markup=True,
                      highlight=False)


def import_cmd(
    path: Annotated[Path, typer.Argument(help="An mbox file, a Maildir (cur/, new/), a folder "
                                              "of .eml files, or one message file.")],
    mailbox: Annotated[str, typer.Option("--mailbox", "-m", help="Mailbox id (no '#').")],
    index: Annotated[bool, typer.Option(
        "--index/--no-index",
        help="Index in this process (default), or only store (a running `sidecar tail` "
             "indexes from the stream).",
    )] = True,
) -> None:
    """Parse every message of PATH, store it with the writer and index it; malformed messages
    are listed with file and reason and skipped."""
    from sidecar_tools.mailimport.run import import_path
    from sidecar_tools.mailimport.sources import UnknownSource
    from sidecar_tools.writer.parse import InvalidEmail

    columns = (
        TextColumn("importing {task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TaskProgressColumn(),
        TextColumn("files {task.fields[files]}"),
        TextColumn("{task.fields[rate]} msg/s"),
        TimeElapsedColumn(),
    )
    try:
        with Progress(*columns, console=console) as bar:
            task = bar.add_task(path.name, total=None, files=0, rate="-")

            def progress(done: int, total: int, files: int) -> None:
                elapsed = bar.tasks[0].elapsed or 0.0
                rate = f"{done / elapsed:.1f}" if elapsed > 0 else "-"
                bar.update(task, completed=done, total=total, files=files, rate=rate)

            summary = import_path(get_settings(), path, mailbox, index=index, progress=progress)
    except (InvalidEmail, UnknownSource, OSError) as err:
        err_console.print(f"[red]error:[/red] {err}")
        raise typer.Exit(code=2) from err
    _report(summary)


def register(app: typer.Typer) -> None:
    app.command("import")(import_cmd)
