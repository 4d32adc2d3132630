"""Adds the tooling's commands to the ``sidecar`` CLI (the entry point the runtime loads)."""

from __future__ import annotations

import typer

from sidecar_tools.cli import (
    bench_cluster_cmd,
    bench_cmds,
    demo_cmds,
    eval_cmds,
    import_cmds,
    onnx_cmds,
    stack_cmds,
    writer_cmds,
)


def register(app: typer.Typer) -> None:
    """Register every tooling command on ``app``."""
    for module in (stack_cmds, writer_cmds, import_cmds, demo_cmds, bench_cmds, bench_cluster_cmd,
                   eval_cmds, onnx_cmds):
        module.register(app)
