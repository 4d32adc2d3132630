"""CLI: ``sidecar tail`` — follow the table's DynamoDB stream into the indexes until stopped."""

from __future__ import annotations

import logging
import signal
import threading
from typing import Annotated

import typer

from indexer.logs import configure_unless_configured
from indexer.metrics import serve_process_metrics
from indexer.settings import Settings, get_settings
from indexer.sources.tail import StartAt, StreamTailer, TailOptions


def build_tailer(
    settings: Settings,
    start_at: StartAt = "trim_horizon",
    lease_s: float = 10.0,
    renew_s: float = 3.0,
) -> StreamTailer:
    """A tailer of ``settings.table``'s latest stream feeding the Celery pipeline.

    The send and dead-letter functions are built once; each page gets a fresh Ingestor so
    waiting for it covers exactly that page's tasks.
    """
    from indexer.adapters import aws
    from indexer.adapters.streams import latest_stream_arn
    from indexer.pipeline import deps
    from indexer.pipeline.ingest import Ingestor
    from indexer.pipeline.runner import celery_send, decode_dead_letter
    from indexer.sources.checkpoints import CheckpointStore, Lease

    ddb = aws.client(settings, "dynamodb")
    deps.store(settings).ensure_state_table()
    arn = latest_stream_arn(ddb, settings.table)
    state = settings.resolved_state_table
    send, dead_letter = celery_send(settings), decode_dead_letter(settings)
    return StreamTailer(
        aws.client(settings, "dynamodbstreams"),
        arn,
        CheckpointStore(ddb, state, arn),
        lambda: Ingestor(send, dead_letter, settings.batch_messages),
        lease=Lease(ddb, state, settings.table, duration_s=lease_s),
        options=TailOptions(start_at=start_at, renew_every_s=renew_s),
    )


def tail(
    table: Annotated[str | None, typer.Option(help="Mail table (default: SIDECAR_TABLE).")] = None,
    start_at: Annotated[
        str, typer.Option(help="Without a checkpoint: trim_horizon | latest.")
    ] = "trim_horizon",
    lease_s: Annotated[float, typer.Option(help="Lease duration (standby takeover).")] = 10.0,
    renew_s: Annotated[float, typer.Option(help="Lease renewal interval.")] = 3.0,
    metrics_port: Annotated[
        int | None, typer.Option(help="Serve /metrics here (default: SIDECAR_METRICS_PORT; 0 off).")
    ] = None,
) -> None:
    """Tail the table's stream until SIGTERM/SIGINT; exit 1 if records expired unread (a gap:
    run `sidecar backfill`). Several may run: one reads, the others stand by."""
    if start_at not in ("trim_horizon", "latest"):
        raise typer.BadParameter("--start-at must be trim_horizon or latest")
    settings = get_settings()
    if table:
        settings = settings.model_copy(update={"table": table})
    configure_unless_configured(logging.INFO)
    port = settings.metrics_port if metrics_port is None else metrics_port
    if port:
        serve_process_metrics(settings, port)
    tailer = build_tailer(
        settings, "latest" if start_at == "latest" else "trim_horizon", lease_s, renew_s
    )
    stop = threading.Event()

    def on_signal(_signum: int, _frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    tailer.run(stop)
    logging.getLogger("indexer.tail").info(
        "tail stopped", extra={"applied": tailer.applied, "gaps": len(tailer.gaps)}
    )
    raise typer.Exit(1 if tailer.gaps else 0)


def register(app: typer.Typer) -> None:
    app.command()(tail)
