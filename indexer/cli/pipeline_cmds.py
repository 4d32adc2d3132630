"""CLI: ``sidecar worker``, ``sidecar ingest`` and ``sidecar dlq``."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from indexer.cli.preflight import require_encoder, require_tables
from indexer.cli.progress import heartbeat, interactive, progress, say
from indexer.settings import Settings, get_settings

console = Console(stderr=True)
dlq_app = typer.Typer(help="Inspect and redrive the dead-letter store.", no_args_is_help=True)


class Role(StrEnum):
    """What a ``sidecar worker`` consumes: both queues, or one."""

    ALL = "all"
    FULLTEXT = "fulltext"
    VECTORS = "vectors"


class CeleryLevel(StrEnum):
    """Celery's ``-l``."""

    DEBUG = "DEBUG"
    INFO = "INFO"
    WARNING = "WARNING"
    ERROR = "ERROR"
    CRITICAL = "CRITICAL"


def worker(
    role: Annotated[Role, typer.Option(help="The queues to consume.")] = Role.ALL,
    concurrency: Annotated[
        int | None, typer.Option(min=1, help="Processes per role (default: full text 2, its "
                                 "batches mostly wait on I/O; vectors 1, and always 1 when "
                                 "embedded). The full-text role's contact recounts run on "
                                 "8 threads of one more process, whatever this says.")
    ] = None,
    loglevel: Annotated[
        CeleryLevel, typer.Option(case_sensitive=False, help="The workers' level "
                                  "(SIDECAR_LOG_LEVEL wins when set).")
    ] = CeleryLevel.INFO,
    metrics_port: Annotated[
        int | None,
        typer.Option(
            help="Serve the workers' /metrics here (default: SIDECAR_METRICS_PORT; 0 off)."
        ),
    ] = None,
) -> None:
    """Start Celery workers: one per queue (full text, its contact recounts, vectors), so
    full text never waits behind embedding."""
    from indexer.pipeline.workers import ROLES, spawn_workers, supervise

    roles = ROLES if role is Role.ALL else (role.value,)
    settings = get_settings()
    require_tables(settings)
    if "vectors" in roles:
        require_encoder(settings)
    port = settings.metrics_port if metrics_port is None else metrics_port
    with _worker_metrics(settings, port):
        code = supervise(spawn_workers(settings, roles, concurrency, loglevel.value))
    raise typer.Exit(code)


@contextmanager
def _worker_metrics(settings: Settings, port: int) -> Iterator[None]:
    """With a port: the workers (and their pool children) count in Prometheus's multiprocess
    mode under a fresh directory, and this supervisor serves the sum."""
    if not port:
        yield
        return
    from indexer.adapters.broker import QueueCollector
    from indexer.metrics import serve_multiprocess_metrics

    directory = tempfile.mkdtemp(prefix="sidecar-metrics-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = directory  # inherited by spawn_workers
    try:
        serve_multiprocess_metrics(settings, port, directory, QueueCollector(settings))
        yield
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def ingest(
    paths: Annotated[list[str], typer.Argument(help="Files, folders or s3://bucket/prefix.")],
    wait: Annotated[bool, typer.Option("--wait/--no-wait", help="Block until applied.")] = False,
    timeout: Annotated[float, typer.Option(help="Seconds to wait at most.")] = 3600.0,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the summary as one JSON object on stdout.")
    ] = False,
) -> None:
    """Feed exported stream records (Lambda batches, Kinesis records, JSON lines) to the workers.

    Exits 1 when any record or message was dead-lettered (``sidecar dlq list``), else 0."""
    from indexer.adapters.aws.clients import client
    from indexer.pipeline.dispatch import ingestor
    from indexer.sources.files import read_sources

    settings = get_settings()
    require_tables(settings)
    run = ingestor(settings)
    s3 = client(settings, "s3") if any(p.startswith("s3://") for p in paths) else None
    with progress(console, "ingest", settings.progress_interval_s, TextColumn("records"),
                  BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()) as bar:
        task = bar.add_task("records", total=None)
        run.feed_all(read_sources(paths, s3), progress=lambda n: bar.advance(task, n))
    if wait:
        with heartbeat(console, "ingest", settings.progress_interval_s, phase="waiting",
                       read=run.summary.read):
            summary = run.wait(timeout)
    else:
        summary = run.summary
    code = 1 if summary.dead_lettered else 0
    if as_json:
        print(json.dumps(asdict(summary)))
        raise typer.Exit(code)
    if not interactive(console):  # an ECS task, a Job, a pipe: a JSON line, as backfill's
        say(console, "ingest done", command="ingest", **asdict(summary))
        raise typer.Exit(code)
    table = Table(title="ingest")
    for name in ("read", "applied", "dead_lettered", "ignored", "batches", "embedded"):
        table.add_row(name, str(getattr(summary, name)))
    if not wait:
        table.add_row("applied", "(not waited: use --wait)")
    console.print(table)
    raise typer.Exit(code)


@dlq_app.command("list")
def dlq_list(
    limit: Annotated[int, typer.Option()] = 50,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print {count, entries} as one JSON object on stdout.")
    ] = False,
) -> None:
    """Dead letters, oldest first."""
    from indexer.adapters import factories

    settings = get_settings()
    require_tables(settings, mail=False)  # the store is the sidecar's table
    store = factories.dead_letters(settings)
    if as_json:
        entries = [{
            "id": e.id,
            "time": datetime.fromtimestamp(e.time, UTC).isoformat(timespec="seconds"),
            "stage": e.stage, "mailbox": e.mailbox_id, "reason": e.reason,
        } for e in store.list(limit)]
        print(json.dumps({"count": store.count(), "entries": entries}))
        return
    table = Table(title=f"dead letters ({store.count()})")
    for col in ("id", "time", "stage", "mailbox", "reason"):
        table.add_column(col)
    for entry in store.list(limit):
        when = datetime.fromtimestamp(entry.time, UTC).isoformat(timespec="seconds")
        table.add_row(entry.id, when, entry.stage, entry.mailbox_id or "", entry.reason[:80])
    Console().print(table)


@dlq_app.command("show")
def dlq_show(entry_id: str) -> None:
    """One dead letter in full (JSON)."""
    from indexer.adapters import factories

    settings = get_settings()
    require_tables(settings, mail=False)
    entry = factories.dead_letters(settings).get(entry_id)
    if entry is None:
        console.print(f"[red]no dead letter {entry_id}[/red]")
        raise typer.Exit(1)
    print(entry.to_json())


@dlq_app.command("redrive")
def dlq_redrive(
    entry_ids: Annotated[list[str] | None, typer.Argument(help="Ids; none = all.")] = None,
    wait: Annotated[bool, typer.Option("--wait/--no-wait")] = True,
) -> None:
    """Send dead letters through the pipeline again; those that fail again come back."""
    from indexer.pipeline.redrive import redrive

    settings = get_settings()
    require_tables(settings)  # the store, and the mail table the resent work re-reads
    summary = redrive(settings, entry_ids or None, wait=wait)
    print(json.dumps(summary))


def register(app: typer.Typer) -> None:
    app.command()(worker)
    app.command()(ingest)
    app.add_typer(dlq_app, name="dlq")
