"""CLI: ``sidecar bench-cluster`` — the single-node and the cluster stack side by side."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from indexer.settings import get_settings

console = Console(stderr=True)


def _counts(text: str, what: str) -> tuple[int, ...]:
    try:
        counts = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        counts = ()
    if not counts or min(counts) < 1:
        raise typer.BadParameter(f"{what}: positive integers, comma-separated (e.g. 1,8)")
    return counts


def bench_cluster(
    messages: Annotated[int, typer.Option(min=10, help="Messages through the pipeline into "
                                                       "the single stack.")] = 5000,
    copies: Annotated[int, typer.Option(min=1, help="Mailboxes they are copied into (both "
                                                    "stacks hold N x (copies+1)).")] = 19,
    corpus: Annotated[Path | None, typer.Option(help="Default: as for bench.")] = None,
    search_seconds: Annotated[float, typer.Option(help="Seconds per API search mode.")] = 8.0,
    clients: Annotated[str, typer.Option(help="Client counts, comma-separated.")] = "1,8",
    index_messages: Annotated[int, typer.Option(min=10, help="Messages of the indexing "
                                                             "throughput runs.")] = 500,
    processes: Annotated[str, typer.Option(help="Worker processes per role, comma-separated."
                                           )] = "1,2,4",
    heap: Annotated[str, typer.Option(help="JVM heap of each cluster OpenSearch node.")] = "1g",
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the figures here.")] = None,
    workdir: Annotated[Path, typer.Option(help="Cache and scratch space.")] = Path(
        ".sidecar/bench"
    ),
) -> None:
    """The single-node stack (its OpenSearch + one Qdrant server) and a cluster stack (3
    OpenSearch + 3 Qdrant nodes, replicated) in one run: API search p50/p95/p99 per mode and
    client count, write rates per backend, indexing throughput per worker processes per role."""
    from sidecar_tools.bench.cluster_bench import ClusterBenchOptions, run
    from sidecar_tools.bench.cluster_report import markdown

    opts = ClusterBenchOptions(corpus, messages, copies, search_seconds,
                               _counts(clients, "--clients"), index_messages,
                               _counts(processes, "--processes"), workdir, heap)
    result = run(opts, get_settings(), lambda line: console.print(f"[dim]bench:[/] {line}"))
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(markdown(result))


def register(app: typer.Typer) -> None:
    app.command("bench-cluster")(bench_cluster)
