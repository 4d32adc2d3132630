"""The ``sidecar`` command: every subcommand honours the ``SIDECAR_*`` settings.

The indexer's commands are registered here; the API's ``serve`` (``search_api.cli``) and the
tooling installed beside it (the local stack, store writer, demo, bench, eval:
``mail-search-sidecar[local]``) register theirs through the ``mail_search_sidecar.commands``
entry point group, so the indexer never imports the API or the tooling, and a production
install simply has fewer commands.
"""

from __future__ import annotations

import logging
import sys
from enum import StrEnum
from importlib.metadata import PackageNotFoundError, entry_points, version
from typing import Annotated, Any

import typer
from pydantic import ValidationError

from indexer import logs, otel
from indexer.adapters.aws import audit as aws_audit
from indexer.cli import (
    backfill_cmds,
    init_cmds,
    ops_cmds,
    pipeline_cmds,
    reindex_cmds,
    tail_cmds,
)
from indexer.settings import invalid_settings

PLUGIN_GROUP = "mail_search_sidecar.commands"

# The IAM role (deploy/iam/<role>.json) each service command runs as: declared to the call
# audit here, the CLI's composition root. Tooling commands (stack, demo, bench…) have none.
ROLE_OF_COMMAND: dict[str, str] = {
    "tail": aws_audit.TAILER,
    "worker": aws_audit.WORKERS,
    "serve": aws_audit.API,
    "backfill": aws_audit.BACKFILL,
    "ingest": aws_audit.BACKFILL,
    "init": aws_audit.OPERATOR,
    "reconcile": aws_audit.OPERATOR,
    "purge": aws_audit.OPERATOR,
    "contacts-rebuild": aws_audit.OPERATOR,
    "reindex": aws_audit.OPERATOR,
    "dlq": aws_audit.OPERATOR,
}

LogLevel = StrEnum("LogLevel", {name.upper(): name for name in logs.LEVELS})  # type: ignore[misc]
BAD_CONFIGURATION = 2  # the exit status of a refused SIDECAR_* value (as for a bad option)


class _Sidecar(typer.Typer):
    """The CLI, whose one answer to a ``SIDECAR_*`` value the settings refuse — wherever a
    command first reads them — is one JSON line naming the variable and exit status 2, like a
    bad option, instead of pydantic's traceback (exit 1); outside a terminal, a crash is one
    JSON line too."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().__call__(*args, **kwargs)
        except ValidationError as exc:
            line = invalid_settings(exc)
            if line is None:
                raise
            logs.configure_unless_configured(logging.WARNING)
            logging.getLogger("sidecar").error(line)
            raise SystemExit(BAD_CONFIGURATION) from None
        except Exception:
            if sys.stderr.isatty():  # a person: typer's traceback, as it is
                raise
            # A container's log, a pipe: the crash is one JSON line (its traceback in
            # ``error``), not a traceback drawn over dozens of lines; exit 1 as Python's.
            logs.configure_unless_configured(logging.WARNING)
            logging.getLogger("sidecar").exception("the command failed")
            raise SystemExit(1) from None


# Roles that run until stopped: traced, but no span of their own (each task they send, each
# request they serve starts its trace). The worker supervisor traces nothing itself: its
# Celery workers do, each pool child set up after the fork (indexer.pipeline.celery_app).
LONG_RUNNING = frozenset({"tail", "serve"})
UNTRACED = frozenset({"worker", "stack", "demo"})

app = _Sidecar(
    name="sidecar",
    help="Keep OpenSearch and Qdrant in step with an AECS-1 DynamoDB mail store.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)


def package_version() -> str:
    """The installed distribution's version (PEP 621 metadata is its one source)."""
    try:
        return version("mail-search-sidecar")
    except PackageNotFoundError:  # pragma: no cover - only a bare source tree lacks metadata
        return "0+unknown"


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"sidecar {package_version()}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    show_version: Annotated[
        bool,
        typer.Option("--version", callback=_show_version, is_eager=True,
                     help="Print the installed version and exit."),
    ] = False,
    log_level: Annotated[
        LogLevel | None,
        typer.Option("--log-level", case_sensitive=False, help="For this command and the "
                     "processes it starts (default: SIDECAR_LOG_LEVEL, else the command's "
                     "own)."),
    ] = None,
) -> None:
    """Keep OpenSearch and Qdrant in step with an AECS-1 DynamoDB mail store."""
    # Before any subcommand imports a library: no progress bars, every line JSON on stderr.
    if log_level is not None:
        try:
            logs.choose_level(log_level.value)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--log-level") from exc
    logs.configure_unless_configured(logging.WARNING)
    command = ctx.invoked_subcommand or ""
    previous = aws_audit.declare(ROLE_OF_COMMAND.get(command))
    ctx.call_on_close(lambda: aws_audit.declare(previous))
    # Traces where OTEL_EXPORTER_OTLP_ENDPOINT is set (else nothing is imported); a finite
    # command is one span, the parent of every task it sends.
    if command not in UNTRACED and otel.setup(f"sidecar-{command}") and (
            command not in LONG_RUNNING):
        ctx.call_on_close(otel.command_span(command))


# The indexer's own commands. Through PLUGIN_GROUP: `serve` (search_api.cli, the API sits
# above the indexer) and the tooling's commands.
SERVICE_MODULES = (init_cmds, pipeline_cmds, tail_cmds, backfill_cmds, ops_cmds, reindex_cmds)
for module in SERVICE_MODULES:
    module.register(app)

for plugin in entry_points(group=PLUGIN_GROUP):
    plugin.load()(app)

# `sidecar --help` in panels, the production roles first (typer lists panels in the order of
# their first command, and commands in the order registered).
RUN, OPERATE, LOCAL, BENCH = ("Run (production roles)", "Operate", "Local stack and tools",
                              "Benchmarks, quality and capacity")
PANELS: dict[str, tuple[str, ...]] = {
    RUN: ("tail", "worker", "serve"),
    OPERATE: ("init", "backfill", "ingest", "reconcile", "purge", "contacts-rebuild", "reindex",
              "dlq", "export-onnx"),
    LOCAL: ("stack", "demo", "import", "load", "table", "delete-message", "rewrite-message"),
    BENCH: ("plan",),  # and every bench-* and eval* (panel_of)
}


def panel_of(name: str) -> str:
    """The help panel of a command: as listed, else benchmarks (bench-*, eval*) or tooling."""
    listed = next((panel for panel, names in PANELS.items() if name in names), None)
    return listed or (BENCH if name.startswith(("bench", "eval")) else LOCAL)


def _group_help(cli: typer.Typer) -> None:
    order = [RUN, OPERATE, LOCAL, BENCH]
    listed = [name for names in PANELS.values() for name in names]

    def rank(name: str) -> tuple[int, int]:
        return order.index(panel_of(name)), listed.index(name) if name in listed else len(listed)

    def command_name(info: Any) -> str:
        return str(info.name or typer.main.get_command_name(info.callback.__name__))

    for info in cli.registered_commands:
        info.rich_help_panel = panel_of(command_name(info))
    for group in cli.registered_groups:
        group.rich_help_panel = panel_of(str(group.name))
    cli.registered_commands.sort(key=lambda info: rank(command_name(info)))
    cli.registered_groups.sort(key=lambda group: rank(str(group.name)))


_group_help(app)

if __name__ == "__main__":
    app()
