"""CLI: ``sidecar export-onnx`` — the ONNX graph the torch-free encoder runs, made here.

The runtime's default encoder (``SIDECAR_EMBED_RUNTIME=onnx``) never fetches a graph and has no
torch to make one: it is exported from the model's weights where torch is installed (the dev
environment, the image's build stage) and copied beside the runtime (``SIDECAR_EMBED_ONNX_DIR``).
The export is checked against torch's hidden states before it is published.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def export_onnx(
    models: Annotated[
        list[str] | None,
        typer.Argument(help="SIDECAR_EMBED_MODEL values (none: SIDECAR_EMBED_MODEL and "
                            "SIDECAR_EMBED_MODELS)."),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(help="Directory (default: SIDECAR_EMBED_ONNX_DIR, else "
                          "~/.cache/mail-search-sidecar/onnx)."),
    ] = None,
    force: Annotated[bool, typer.Option(help="Export again even if the graph is there.")] = False,
) -> None:
    """Export each model's ONNX graph (named by a hash of its weights) and its int8 graph
    (quantized from it: SIDECAR_EMBED_PRECISION=int8), and print their paths."""
    from indexer.adapters.embedding.embedder import onnx_graph, with_precision
    from indexer.adapters.embedding.onnx_export import NEEDS, can_export
    from indexer.settings import get_settings

    settings = get_settings()
    if not can_export():
        typer.echo(f"error: the export needs {', '.join(NEEDS)}: install "
                   "'mail-search-sidecar[torch,vectors]'", err=True)
        raise typer.Exit(2)
    specs = models or list(dict.fromkeys((settings.embed_model, *settings.embed_models)))
    for spec in specs:
        fp32 = onnx_graph(spec, out or settings.embed_onnx_dir, force=force)
        int8 = onnx_graph(with_precision(spec, "int8"), out or settings.embed_onnx_dir,
                          force=force)
        # one path a line, the float32 graph last (scripts that copy "the graphs" take every
        # line: tests/integration/test_image.py)
        typer.echo(int8)
        typer.echo(fp32)


def register(app: typer.Typer) -> None:
    app.command("export-onnx")(export_onnx)
