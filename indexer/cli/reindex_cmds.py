"""CLI: ``sidecar reindex`` — a new mapping version (or vector collection) behind the alias,
built beside the live one while searches and live updates go on (see :mod:`indexer.ops.reindex`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from indexer.settings import get_settings

if TYPE_CHECKING:
    from indexer.ops.reindex import ReindexReport

console = Console(stderr=True)


def _version_of(mapping: Path) -> int:
    """The version a mapping file declares; it must live in ``mappings/`` under its name."""
    from indexer.adapters.opensearch import MAPPINGS_DIR

    version = int(json.loads(mapping.read_text(encoding="utf-8"))["version"])
    expected = MAPPINGS_DIR / f"messages-v{version}.json"
    if mapping.resolve() != expected.resolve():
        raise typer.BadParameter(f"a version {version} mapping is read from {expected}")
    return version


def _status() -> None:
    from indexer.pipeline import deps

    index = deps.fulltext_index(get_settings())
    for alias, members in index.aliases().items():
        console.print(f"{alias}: {', '.join(members) or '-'}")


def _print_report(report: ReindexReport) -> None:
    table = Table(title=f"reindex {report.old} → {report.new} ({report.seconds:.1f}s)")
    for name in ("mailbox", "table", report.old, report.new):
        table.add_column(name)
    for mailbox, counts in sorted(report.counts.items()):
        table.add_row(mailbox, *map(str, counts))
    console.print(table)
    console.print(f"backfilled {report.backfilled} messages")


def _fulltext(action: str, version: int, opts: dict[str, float]) -> None:
    from indexer.ops import reindex as ops

    settings = get_settings()
    if action == "status":
        _status()
    elif action == "rollback":
        read, kept = ops.rollback(settings)
        console.print(f"searches read {read}; {kept} is kept in step")
    elif action == "finish":
        console.print(f"deleted {ops.finish(settings, opts['grace_s'], console.print)}")
    else:
        _print_report(
            ops.reindex(
                settings,
                version,
                settle_s=opts["settle_s"],
                verify_timeout_s=opts["verify_timeout"],
                say=console.print,
            )
        )


def _vectors(action: str, max_tokens: int | None, opts: dict[str, float]) -> None:
    from indexer.ops import reindex_vectors as ops

    settings = get_settings()
    if action == "status":
        read, extra, _ = ops.Admin(settings).state()
        console.print(f"vectors: {read or '-'}\nvectors-write: {extra or '-'}")
    elif action == "rollback":
        read, kept = ops.rollback_vectors(settings)
        console.print(f"searches read {read}; {kept} is kept in step")
    elif action == "finish":
        console.print(f"dropped {ops.finish_vectors(settings, opts['grace_s'], console.print)}")
    else:
        _print_report(
            ops.reindex_vectors(
                settings,
                max_tokens,
                settle_s=opts["settle_s"],
                verify_timeout_s=opts["verify_timeout"],
                say=console.print,
            )
        )


def reindex(
    to_version: Annotated[
        int | None, typer.Option(help="Mapping version (default: the one this code writes).")
    ] = None,
    mapping: Annotated[
        Path | None, typer.Option(help="A mappings/messages-v<N>.json file (instead of a version).")
    ] = None,
    vectors: Annotated[
        bool, typer.Option("--vectors", help="Reindex the vector collection instead.")
    ] = False,
    max_tokens: Annotated[
        int | None,
        typer.Option(help="--vectors: encoder truncation of the new collection (default: config)."),
    ] = None,
    rollback: Annotated[
        bool, typer.Option("--rollback", help="Swap back to the kept index.")
    ] = False,
    finish: Annotated[
        bool, typer.Option("--finish", help="Stop writing the kept index and delete it.")
    ] = False,
    status: Annotated[bool, typer.Option("--status", help="Show what each alias names.")] = False,
    settle_s: Annotated[float, typer.Option(help="Margin after adding the write target.")] = 2.0,
    verify_timeout: Annotated[float, typer.Option(help="Seconds for counts to agree.")] = 300.0,
    grace_s: Annotated[float, typer.Option(help="--finish: wait before deleting.")] = 30.0,
) -> None:
    """Build the index of a new mapping version (or, with --vectors, the collection of a new
    encoder) beside the live one, dual-written; backfill it from the table, verify counts, swap
    the alias atomically; the old one is kept in step for --rollback until --finish."""
    from indexer.adapters.opensearch import MAPPING_VERSION
    from indexer.ops.reindex import ReindexError

    if sum((rollback, finish, status)) > 1:
        raise typer.BadParameter("choose one of --rollback, --finish, --status")
    action = "rollback" if rollback else "finish" if finish else "status" if status else "build"
    opts = {"settle_s": settle_s, "verify_timeout": verify_timeout, "grace_s": grace_s}
    try:
        if vectors:
            _vectors(action, max_tokens, opts)
        else:
            version = _version_of(mapping) if mapping else (to_version or MAPPING_VERSION)
            _fulltext(action, version, opts)
    except ReindexError as exc:
        console.print(f"[red]reindex:[/red] {exc}")
        raise typer.Exit(2) from exc


def register(app: typer.Typer) -> None:
    """Add ``reindex`` to the main app."""
    app.command("reindex")(reindex)
