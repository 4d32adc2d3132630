"""CLI: ``sidecar reconcile``, ``sidecar purge`` and ``sidecar contacts-rebuild``."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer
from rich.console import Console
from rich.progress import SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from indexer import logs
from indexer.cli.progress import interactive, progress, say
from indexer.settings import get_settings

if TYPE_CHECKING:
    from indexer.ops.reconcile import ReconcileReport

console = Console(stderr=True)
T = TypeVar("T")


def _or_exit(operation: Callable[[], T]) -> T:
    """Run an operation; an engine that cannot be used ends the command with status 2 and
    one line saying why (the embedded Qdrant store owned by another process, an engine down,
    a table missing)."""
    from indexer.adapters.dynamodb.tables import MissingTableError
    from indexer.adapters.qdrant.index import LegacyStoreError, StoreBusyError
    from indexer.adapters.qdrant.server import QdrantAuthError
    from indexer.core.errors import TransientError

    try:
        return operation()
    except (StoreBusyError, LegacyStoreError, QdrantAuthError, MissingTableError) as exc:
        logs.refuse(str(exc))
    except TransientError as exc:
        logs.refuse(f"an engine is unavailable, nothing was decided: {exc}")
    raise typer.Exit(2)


def reconcile(
    mailbox: Annotated[str | None, typer.Option(help="One mailbox (default: all).")] = None,
    repair: Annotated[bool, typer.Option(help="Fix drift through the pipeline's sync.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Compare the table with both indexes: messages missing from an index, present in an index
    but gone from the table, stale. Exit 0 only if nothing drifted (or all was repaired)."""
    from indexer.ops.reconcile import reconcile as run

    settings = get_settings()
    # A spinner in a terminal; elsewhere JSON progress lines (rich's own display wrote a
    # blank line into a pipe).
    with progress(console, "reconcile", settings.progress_interval_s, SpinnerColumn(),
                  TextColumn("table messages checked: {task.completed:,.0f}"),
                  TimeElapsedColumn()) as bar:
        task = bar.add_task("table messages", total=None)
        report = _or_exit(
            lambda: run(settings, mailbox, repair, progress=lambda n: bar.advance(task, n))
        )
    if as_json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        _print_report(report)
    raise typer.Exit(0 if report.drifted == 0 else 1)


def _print_report(report: ReconcileReport) -> None:
    """A table and the first 50 drifts in a terminal; elsewhere one JSON line on stderr (the
    counts per mailbox, the first 50 drifts left), as backfill's summary."""
    if not interactive(console):
        summary = report.to_json()
        del summary["drift"]
        summary["remaining"] = summary["remaining"][:50]
        say(console, "reconcile done", command="reconcile", **summary)
        return
    table = Table(title="reconcile")
    columns = ("mailbox", "table", "docs", "points")
    kinds = ("missing", "orphan", "stale")
    for name in columns + tuple(f"{i[:4]}.{k}" for i in ("fulltext", "vectors") for k in kinds):
        table.add_column(name, justify="left" if name == "mailbox" else "right")
    for m in report.mailboxes:
        drift = [str(m.drift[f"{i}.{k}"]) for i in ("fulltext", "vectors") for k in kinds]
        table.add_row(
            m.mailbox_id, str(m.table_messages), str(m.fulltext_docs), str(m.vector_points), *drift
        )
    Console().print(table)
    for d in report.remaining[:50]:
        fields = f" ({', '.join(d.fields)})" if d.fields else ""
        console.print(f"{d.index} {d.kind}: {d.ref.mailbox_id} {d.ref.message_key}{fields}")
    verb = f", repaired {report.repaired}" if report.repair else ""
    console.print(f"drift found {len(report.found)}{verb}, remaining {report.drifted}")


def purge(
    mailbox: Annotated[str, typer.Option(help="The mailbox to remove.")],
    rate: Annotated[float | None, typer.Option(
        help="Documents (and points) deleted per second from each engine; 0 = as fast as "
        "they go. Default: SIDECAR_PURGE_RATE.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Remove a mailbox from both indexes and every sidecar store (idempotent), paced so
    that everyone else's searches keep their latency."""
    from indexer.ops.purge import purge as run

    try:
        report = _or_exit(lambda: run(get_settings(), mailbox, rate))
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    if as_json:
        print(json.dumps(report.to_json(), indent=2))
    elif not interactive(console):
        say(console, f"purged {mailbox}", command="purge", **report.to_json())
    else:
        table = Table(title=f"purged {mailbox}")
        for name, value in report.to_json().items():
            if name != "mailbox_id":
                table.add_row(name, str(value))
        Console().print(table)
    if report.table_still_has_messages:
        say(console, "the mail table still holds this mailbox: stream records (or "
            "`reconcile --repair`) will index it again")


def contacts_rebuild(
    mailbox: Annotated[str | None, typer.Option(help="One mailbox (default: all).")] = None,
) -> None:
    """Recompute the contact summary (the contacts endpoint's index) from the full-text
    index: after an upgrade that adds it, or to repair it (idempotent)."""
    from indexer.pipeline.contacts_sync import keeper

    settings = get_settings()
    kept = _or_exit(lambda: keeper(settings))
    boxes = [mailbox] if mailbox else sorted(_or_exit(kept.index.messages.mailbox_ids))
    for box in boxes:
        written = _or_exit(lambda box=box: kept.rebuild(box))  # type: ignore[misc]
        print(json.dumps({"mailbox_id": box, "contacts": written}))


def register(app: typer.Typer) -> None:
    app.command()(reconcile)
    app.command()(purge)
    app.command("contacts-rebuild")(contacts_rebuild)
