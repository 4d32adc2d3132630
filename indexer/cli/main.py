"""The ``sidecar`` command: every subcommand honours the ``SIDECAR_*`` settings."""

from __future__ import annotations

import typer

from indexer.cli import pipeline_cmds

app = typer.Typer(
    name="sidecar",
    help="Keep OpenSearch and Qdrant in step with an AECS-1 DynamoDB mail store.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)

pipeline_cmds.register(app)
for name in ("stack_cmds", "writer_cmds", "demo_cmds"):
    try:
        module = __import__(f"indexer.cli.{name}", fromlist=["register"])
    except ModuleNotFoundError as exc:  # pragma: no cover - only while modules are being added
        if exc.name != f"indexer.cli.{name}":
            raise
        continue
    module.register(app)

if __name__ == "__main__":
    app()
