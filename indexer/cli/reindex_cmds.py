"""CLI: ``sidecar reindex`` — a new mapping version (or vector collection) behind the alias,
built beside the live one while searches and live updates go on (see :mod:`indexer.ops.reindex`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from indexer.cli.progress import heartbeat, say
from indexer.settings import get_settings

if TYPE_CHECKING:
    from indexer.ops.reindex import ReindexReport

console = Console(stderr=True)


def _version_of(mapping: Path) -> int:
    """The version a mapping file declares; it must equal the shipped mapping of that version."""
    from indexer.adapters.opensearch.family import mapping_file

    raw = json.loads(mapping.read_text(encoding="utf-8"))
    version = int(raw["version"])
    raw.pop("_comment", None)
    try:
        shipped = mapping_file(version)
    except FileNotFoundError as exc:
        raise typer.BadParameter(f"no mapping version {version} ships with this sidecar") from exc
    if raw != shipped:
        raise typer.BadParameter(
            f"{mapping} differs from the shipped version {version} mapping; a new mapping is a "
            "new version in indexer/mappings/")
    return version


def _status(vectors: bool, as_json: bool = False) -> None:
    """What each alias names; with ``as_json`` one object on stdout: ``{"aliases": {alias:
    [members]}, "loose": [...]}`` (vectors: ``{"read": ..., "write": ...}``)."""
    settings = get_settings()
    if vectors:
        from indexer.ops.reindex_vectors import Admin

        read, extra, _ = Admin(settings).state()
        if as_json:
            print(json.dumps({"vectors": read, "vectors_write": extra}))
            return
        console.print(f"vectors: {read or '-'}\nvectors-write: {extra or '-'}")
        return
    from indexer.adapters import factories

    index = factories.fulltext_index(settings)
    aliases = index.aliases()
    family = set(index.client.indices.get(index=f"{index.alias}-v*"))
    loose = sorted(family - {i for members in aliases.values() for i in members})
    if as_json:
        print(json.dumps({"aliases": {a: list(m) for a, m in aliases.items()}, "loose": loose}))
        return
    for alias, members in aliases.items():
        console.print(f"{alias}: {', '.join(members) or '-'}")
    if loose:  # e.g. re-created by a batch older than --finish's grace period
        console.print(f"in no alias (safe to delete): {', '.join(loose)}")


def _print_report(report: ReindexReport, as_json: bool = False) -> None:
    """The counts per mailbox: a table in a terminal, else (or with ``as_json``, on stdout)
    one JSON object."""
    totals = {"old": report.old, "new": report.new, "seconds": round(report.seconds, 1),
              "backfilled": report.backfilled, "counts": report.counts}
    if as_json:
        print(json.dumps(totals, default=str))
        return
    if not console.is_terminal:
        say(console, "reindex done", command="reindex", **totals)
        return
    table = Table(title=f"reindex {report.old} → {report.new} ({report.seconds:.1f}s)")
    for name in ("mailbox", "table", report.old, report.new):
        table.add_column(name)
    for mailbox, counts in sorted(report.counts.items()):
        table.add_row(mailbox, *map(str, counts))
    console.print(table)
    console.print(f"backfilled {report.backfilled} messages")


def _run(
    action: str,
    vectors: bool,
    target: int | None,
    opts: dict[str, Any],
    model: str | None = None,
    recipe: str | None = None,
    as_json: bool = False,
) -> None:
    """One action on the full-text index (``target``: mapping version) or on the vector
    collection (``target``: encoder truncation, None = the configured one)."""
    from indexer.adapters.opensearch.family import MAPPING_VERSION
    from indexer.ops import reindex as text
    from indexer.ops import reindex_vectors as vec

    settings = get_settings()
    if action == "status":
        _status(vectors, as_json)
        return
    with heartbeat(console, "reindex", settings.progress_interval_s,
                   action=action, phase="starting") as state:

        def tell(message: str) -> None:
            """A phase message: shown (a JSON line outside a terminal) and, for the
            heartbeat, the phase now under way."""
            state["phase"] = message
            say(console, message, command="reindex")

        if action == "rollback":
            read, kept = (vec.rollback_vectors if vectors else text.rollback)(settings)
            tell(f"searches read {read}; {kept} is kept in step")
        elif action == "finish":
            drop = vec.finish_vectors if vectors else text.finish
            tell(f"deleted {drop(settings, opts['grace_s'], tell)}")
        else:
            kwargs: dict[str, Any] = {
                "settle_s": opts["settle_s"],
                "verify_timeout_s": opts["verify_timeout"],
                "say": tell,
            }
            if vectors:
                report = vec.reindex_vectors(
                    settings, target, model=model, recipe=recipe, **kwargs)
            else:
                report = text.reindex(settings, target or MAPPING_VERSION, **kwargs)
            _print_report(report, as_json)


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
    model: Annotated[
        str | None,
        typer.Option(help="--vectors: the new collection's model (a directory or model package "
                          "in the workers' SIDECAR_EMBED_MODELS; default: SIDECAR_EMBED_MODEL)."),
    ] = None,
    recipe: Annotated[
        str | None,
        typer.Option(help="--vectors: the new collection's embedded text (forai, subject-forai; "
                          "default: the workers' SIDECAR_EMBED_RECIPE)."),
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
    as_json: Annotated[
        bool, typer.Option("--json", help="--status, or a build: the result as one JSON "
                           "object on stdout.")
    ] = False,
) -> None:
    """Build the index of a new mapping version (or, with --vectors, the collection of a new
    encoder) beside the live one, dual-written; backfill it from the table, verify counts, swap
    the alias atomically; the old one is kept in step for --rollback until --finish."""
    from indexer.adapters.opensearch.family import MAPPING_VERSION
    from indexer.ops.reindex import ReindexError

    if sum((rollback, finish, status)) > 1:
        raise typer.BadParameter("choose one of --rollback, --finish, --status")
    action = "rollback" if rollback else "finish" if finish else "status" if status else "build"
    opts: dict[str, Any] = {
        "settle_s": settle_s, "verify_timeout": verify_timeout, "grace_s": grace_s
    }
    if recipe is not None:
        from indexer.core.recipes import RECIPES

        if recipe not in RECIPES:
            raise typer.BadParameter(f"--recipe: choose one of {', '.join(RECIPES)}")
    try:
        if vectors:
            _run(action, True, max_tokens, opts, model, recipe, as_json)
        else:
            version = _version_of(mapping) if mapping else (to_version or MAPPING_VERSION)
            _run(action, False, version, opts, as_json=as_json)
    except ReindexError as exc:
        say(console, f"reindex: {exc}", command="reindex", error=True)
        raise typer.Exit(2) from exc


def register(app: typer.Typer) -> None:
    """Add ``reindex`` to the main app."""
    app.command("reindex")(reindex)
