"""CLI commands of the test writer: create the mail-store table, load, delete, rewrite mail.

They play the user's mail-store writer (so the demo, tests and benchmarks have real data);
the sidecar never runs them in production.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from indexer.settings import get_settings

console = Console()
err_console = Console(stderr=True)

FileArg = Annotated[Path, typer.Argument(help="NormalizedEmail JSON lines, plain or .gz.")]
MailboxOpt = Annotated[str, typer.Option("--mailbox", "-m", help="Mailbox id (no '#').")]


def _dynamodb() -> tuple[Any, str]:
    """The store's client and table name, from the process settings."""
    from indexer.adapters.aws.clients import client

    settings = get_settings()
    return client(settings, "dynamodb"), settings.table


def _fail(message: str) -> typer.Exit:
    err_console.print(f"[red]error:[/red] {message}")
    return typer.Exit(code=2)


def _run_file(
    path: Path, mailbox: str, what: str, run: Callable[[Callable[[int, int], None]], Any]
) -> Any:
    """Run a whole-file command under a progress bar; a bad mailbox or unreadable file exits 2."""
    from sidecar_tools.writer.parse import InvalidEmail, validate_mailbox_id

    try:
        validate_mailbox_id(mailbox)
        path.open("rb").close()
        columns = (
            TextColumn(f"{what} {path.name}"),
            BarColumn(),
            DownloadColumn(),
            TimeRemainingColumn(),
        )
        with Progress(*columns, console=console) as bar:
            task = bar.add_task(what, total=None)
            return run(lambda done, total: bar.update(task, completed=done, total=total))
    except OSError as err:
        raise _fail(f"cannot read {path}: {err}") from err
    except InvalidEmail as err:
        raise _fail(str(err)) from err


def _report(title: str, rows: list[tuple[str, int]], rejected: tuple[Any, ...]) -> None:
    """A summary table, then every rejected line with its number and reason."""
    console.print(title)
    table = Table(show_header=False)
    for label, count in rows:
        table.add_row(label, str(count))
    table.add_row("rejected lines", str(len(rejected)))
    console.print(table)
    for r in rejected:
        console.print(f"[yellow]line {r.line}:[/yellow] {r.reason}", markup=True, highlight=False)


table_app = typer.Typer(help="The mail-store table (the writer's side).", no_args_is_help=True)


@table_app.command("create")
def create_cmd() -> None:
    """Create the mail-store table with GSI1, GSI2 and a NEW_AND_OLD_IMAGES stream."""
    from sidecar_tools.writer.store import create_table

    ddb, table = _dynamodb()
    created = create_table(ddb, table)
    console.print(f"table {table}: {'created' if created else 'already exists, left as is'}")


def load_cmd(
    file: FileArg,
    mailbox: MailboxOpt,
    bulk: Annotated[
        bool,
        typer.Option("--bulk", help="Skip transactions (fast on moto; idempotent, not atomic)."),
    ] = False,
) -> None:
    """Store every email of FILE; malformed lines are listed and skipped."""
    from sidecar_tools.writer.files import load_file

    ddb, table = _dynamodb()
    summary = _run_file(
        file,
        mailbox,
        "loading",
        lambda progress: load_file(ddb, table, file, mailbox, progress, atomic=not bulk),
    )
    _report(
        f"{file} → table {table}, mailbox {mailbox!r}",
        [("stored", summary.stored), ("already present", summary.already_present)],
        summary.rejected,
    )


def delete_message_cmd(
    mailbox: MailboxOpt,
    message_id: Annotated[str, typer.Option("--message-id", help="The Message-ID to delete.")],
) -> None:
    """Delete one message: every item, and fix its thread summary."""
    from sidecar_tools.writer.parse import InvalidEmail
    from sidecar_tools.writer.store import delete_message

    ddb, table = _dynamodb()
    try:
        deleted = delete_message(ddb, table, mailbox, message_id)
    except InvalidEmail as err:
        raise _fail(str(err)) from err
    if not deleted:
        raise _fail(f"{message_id!r} is not stored in mailbox {mailbox!r}")
    console.print(f"deleted {message_id!r} from {mailbox!r}")


def rewrite_message_cmd(
    file: FileArg,
    mailbox: MailboxOpt,
    spec_version: Annotated[
        str | None,
        typer.Option("--spec-version", help="Override processing.specVersion of every email."),
    ] = None,
) -> None:
    """Rewrite the Message and Body of each email of FILE in place (the stream shows MODIFY)."""
    from sidecar_tools.writer.files import rewrite_file

    ddb, table = _dynamodb()
    summary = _run_file(
        file,
        mailbox,
        "rewriting",
        lambda progress: rewrite_file(ddb, table, file, mailbox, spec_version, progress),
    )
    _report(
        f"{file} → table {table}, mailbox {mailbox!r}",
        [("rewritten", summary.stored), ("not stored", summary.already_present)],
        summary.rejected,
    )


def register(app: typer.Typer) -> None:
    """Add the writer's commands to the main CLI."""
    app.add_typer(table_app, name="table")
    app.command("load")(load_cmd)
    app.command("delete-message")(delete_message_cmd)
    app.command("rewrite-message")(rewrite_message_cmd)
