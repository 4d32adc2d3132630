"""``sidecar stack up | down | status | env``: thin Typer wrappers over the stack manager.

The manager returns data and raises :class:`StackError`; this module only renders tables, JSON
and exit codes, so tests can drive the same commands through ``CliRunner``.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from sidecar_tools.stack import manager
from sidecar_tools.stack.settings import get_stack_settings

__all__ = ["register"]

_STATE_STYLE = {"up": "green", "starting": "yellow", "down": "red"}


def _table(rows: list[manager.ComponentStatus]) -> Table:
    table = Table(title="sidecar stack")
    widest = max((len(row.address) for row in rows), default=0)
    table.add_column("component", no_wrap=True)
    table.add_column("address", no_wrap=True, min_width=widest)  # never truncate an address
    for column in ("state", "pid", "detail"):
        table.add_column(column, overflow="fold")
    for row in rows:
        style = _STATE_STYLE.get(row.state, "")
        table.add_row(
            row.name,
            row.address,
            f"[{style}]{row.state}[/{style}]",
            str(row.pid or "-"),
            row.detail,
        )
    return table


def _all_up(rows: list[manager.ComponentStatus]) -> bool:
    return all(row.state == "up" for row in rows)


_CLUSTER = typer.Option(False, "--cluster", help="The cluster stack instead: 3 OpenSearch + 3 "
                       "Qdrant nodes on loopback (tests, benchmarks); the single-node stack is "
                       "not touched.")


def _up(cluster: bool = _CLUSTER) -> None:
    """Start whatever is missing (concurrently), wait until everything answers."""
    console = Console()
    began = time.monotonic()
    if cluster:
        from sidecar_tools.stack import cluster_service

        stack = cluster_service.up(get_stack_settings())
        console.print(f"cluster up (3 OpenSearch + 3 Qdrant nodes, port base {stack.base}) in "
                      f"{time.monotonic() - began:.1f}s; `sidecar stack env --cluster` prints "
                      "its settings")
        return
    try:
        rows = manager.up(get_stack_settings())
    except manager.StackError as exc:
        # Log tails are full of [brackets]: escape them, and never re-wrap log lines.
        Console(stderr=True, soft_wrap=True, highlight=False).print(
            f"[red]stack up failed:[/red] {escape(str(exc))}"
        )
        raise typer.Exit(1) from exc
    console.print(_table(rows))
    console.print(f"ready in {time.monotonic() - began:.1f}s")
    if not _all_up(rows):
        down = ", ".join(row.name for row in rows if row.state != "up")
        Console(stderr=True).print(f"[red]not up:[/red] {down}")
        raise typer.Exit(1)


def _down(cluster: bool = _CLUSTER) -> None:
    """Stop only what ``stack up`` started; safe to run twice."""
    if cluster:
        from sidecar_tools.stack import cluster_service

        gone = cluster_service.down(get_stack_settings())
        Console().print(f"stopped: {', '.join(gone)}" if gone else "no cluster to stop")
        return
    stopped = manager.down(get_stack_settings())
    Console().print(f"stopped: {', '.join(stopped)}" if stopped else "nothing to stop")


def _status(
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Show each component; exit 0 only when all of them are up."""
    rows = manager.status(get_stack_settings())
    ok = _all_up(rows)
    if as_json:
        sys.stdout.write(json.dumps({"components": [asdict(r) for r in rows], "ok": ok}) + "\n")
    else:
        Console().print(_table(rows))
    if not ok:
        raise typer.Exit(1)


def _env(cluster: bool = _CLUSTER) -> None:
    """Print ``export SIDECAR_...`` lines; use as ``eval "$(sidecar stack env)"``."""
    settings = get_stack_settings()
    if cluster:
        from sidecar_tools.stack import cluster_service

        stack = cluster_service.running(settings)
        if stack is None:
            sys.stderr.write("no cluster running (`sidecar stack up --cluster`)\n")
            raise typer.Exit(1)
        for line in cluster_service.env_lines(stack):
            sys.stdout.write(line + "\n")
        return
    for line in manager.env_lines(settings):
        sys.stdout.write(line + "\n")
    if not _all_up(manager.status(settings)):
        sys.stderr.write("warning: not every stack component is up (see `sidecar stack status`)\n")


def register(app: typer.Typer) -> None:
    """Attach the ``stack`` command group to the main CLI."""
    stack = typer.Typer(
        help="Run the local stack (OpenSearch, Redis, moto; Qdrant embedded).", no_args_is_help=True
    )
    stack.command("up")(_up)
    stack.command("down")(_down)
    stack.command("status")(_status)
    stack.command("env")(_env)
    app.add_typer(stack, name="stack")
