"""The ``sidecar`` command: every subcommand honours the ``SIDECAR_*`` settings."""

from __future__ import annotations

import typer

from indexer.cli import (
    api_cmds,
    backfill_cmds,
    bench_cmds,
    demo_cmds,
    eval_cmds,
    ops_cmds,
    pipeline_cmds,
    reindex_cmds,
    stack_cmds,
    tail_cmds,
    writer_cmds,
)

app = typer.Typer(
    name="sidecar",
    help="Keep OpenSearch and Qdrant in step with an AECS-1 DynamoDB mail store.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)

for module in (
    stack_cmds,
    writer_cmds,
    pipeline_cmds,
    tail_cmds,
    backfill_cmds,
    ops_cmds,
    reindex_cmds,
    api_cmds,
    demo_cmds,
    bench_cmds,
    eval_cmds,
):
    module.register(app)

if __name__ == "__main__":
    app()
