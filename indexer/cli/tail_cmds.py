"""CLI: ``sidecar tail`` — follow the table's DynamoDB stream into the indexes until stopped."""

from __future__ import annotations

import logging
import signal
import threading
from typing import Annotated

import typer

from indexer.cli.preflight import require_tables
from indexer.core.records import RawRecord
from indexer.logs import configure_unless_configured
from indexer.metrics import serve_process_metrics
from indexer.settings import Settings, get_settings
from indexer.sources.tail.loop import StreamTailer
from indexer.sources.tail.positions import PREDECESSORS, READERS, SeededPositions
from indexer.sources.tail.state import PAGE_LIMIT, StartAt, TailOptions

log = logging.getLogger("indexer.tail")


def build_tailer(
    settings: Settings,
    start_at: StartAt = "trim_horizon",
    lease_s: float = 10.0,
    renew_s: float = 3.0,
    stage: str = "all",
) -> StreamTailer:
    """A tailer of ``settings.table``'s latest stream feeding the Celery pipeline.

    ``stage="all"``: one reader whose checkpoint advances once a page is applied in both
    indexes: one of DynamoDB Streams' two readers per shard. ``"fulltext"`` / ``"vectors"``: a
    reader of one stage with its own checkpoint and lease, so an index that is down holds back
    only its own reader (decode failures are dead-lettered by the full-text reader alone, so
    they are recorded once), at the cost of a second reader per shard. The send and
    dead-letter functions are built once; each page gets a fresh Ingestor so waiting for it
    covers exactly that page's tasks.
    """
    from indexer.adapters.aws import clients as aws
    from indexer.adapters.aws.streams import latest_stream_arn
    from indexer.adapters.broker import lost_task_check
    from indexer.adapters.dynamodb.state import Lease, ShardCheckpointStore
    from indexer.pipeline.dispatch import celery_send, decode_dead_letter, only_stage
    from indexer.pipeline.ingest import Ingestor

    if stage not in ("all", *READERS):
        raise ValueError(f"unknown stage {stage!r}")
    ddb = aws.client(settings, "dynamodb")
    arn = latest_stream_arn(ddb, settings.table)
    state = settings.resolved_state_table
    reader = "" if stage == "all" else stage
    send = celery_send(settings) if stage == "all" else only_stage(celery_send(settings), stage)
    write_dead_letter = decode_dead_letter(settings)
    lost = lost_task_check(settings)

    def dead_letter(item: RawRecord, reason: str) -> None:
        if stage != "vectors":
            write_dead_letter(item, reason)

    before = [ShardCheckpointStore(ddb, state, arn, r) for r in PREDECESSORS[reader]]
    poll_s = _poll_every(stage)
    return StreamTailer(
        aws.client(settings, "dynamodbstreams"),
        arn,
        SeededPositions(ShardCheckpointStore(ddb, state, arn, reader), before),
        lambda: Ingestor(send, dead_letter, settings.batch_messages, lost=lost),
        lease=Lease(ddb, state, settings.table + (f"#{reader}" if reader else ""),
                    duration_s=lease_s),
        options=TailOptions(start_at=start_at, renew_every_s=renew_s, reader=stage,
                            in_flight_batches=PAGE_LIMIT // settings.batch_messages + 1,
                            idle_s=poll_s, sweep_gap_s=poll_s),
    )


def _poll_every(stage: str) -> float:
    """A shard is read at most 4 times a second by its readers together (a Lambda
    event-source mapping's rate, under the stream's 5 reads per second per shard): one reader
    polls every 0.25 s, a reader of one stage (two share the shard) every 0.5 s."""
    return 0.25 if stage == "all" else 0.5


def _run_readers(tailers: dict[str, StreamTailer], stop: threading.Event) -> None:
    """Run each reader in its own thread until ``stop``; one that dies stops the others."""
    failed: list[str] = []

    def run(name: str, tailer: StreamTailer) -> None:
        try:
            tailer.run(stop)
        except BaseException:
            log.exception("reader %s died", name)
            failed.append(name)
            stop.set()

    threads = [threading.Thread(target=run, args=item, name=f"tail-{item[0]}")
               for item in tailers.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failed:
        raise RuntimeError(f"stream reader(s) died: {', '.join(failed)}")


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
    stage: Annotated[
        str,
        typer.Option(help="all: one reader per shard applying both indexes before each "
                     "checkpoint (default); each: one reader per index, two per shard (the "
                     "DynamoDB Streams limit); fulltext | vectors: only that reader."),
    ] = "all",
) -> None:
    """Tail the table's stream until SIGTERM/SIGINT; exit 1 if records expired unread (a gap:
    run `sidecar backfill`). Several may run: per reader, one reads, the others stand by.

    By default one reader per shard feeds both stages and checkpoints once both applied a
    page, so another consumer of the stream (DynamoDB Streams serves two readers per shard
    before throttling) can run beside it; an index that is down then holds back both. `--stage
    each` gives each index its own reader, checkpoint and lease (embedding goes on while
    OpenSearch is down) at the cost of both of a shard's reader slots. Each reader waits for
    its page's tasks, so the queues stay bounded by a page per reader.
    """
    if start_at not in ("trim_horizon", "latest"):
        raise typer.BadParameter("--start-at must be trim_horizon or latest")
    if stage not in ("each", "all", *READERS):
        raise typer.BadParameter("--stage must be each, all, fulltext or vectors")
    settings = get_settings()
    if table:
        settings = settings.model_copy(update={"table": table})
    configure_unless_configured(logging.INFO)
    port = settings.metrics_port if metrics_port is None else metrics_port
    if port:
        from indexer.adapters.broker import QueueCollector

        serve_process_metrics(settings, port, QueueCollector(settings))
    require_tables(settings)
    begin: StartAt = "latest" if start_at == "latest" else "trim_horizon"
    stages = READERS if stage == "each" else (stage,)
    tailers = {name: build_tailer(settings, begin, lease_s, renew_s, name) for name in stages}
    stop = threading.Event()

    def on_signal(_signum: int, _frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    _run_readers(tailers, stop)
    gaps = sum(len(t.gaps) for t in tailers.values())
    log.info("tail stopped", extra={
        "applied": {name: t.applied for name, t in tailers.items()}, "gaps": gaps})
    raise typer.Exit(1 if gaps else 0)


def register(app: typer.Typer) -> None:
    app.command()(tail)
