"""``sidecar demo``: the main job end to end on the local stack, with data shipped in the repo.

Creates the table, loads the sample mailbox with the writer, exports the table's stream
records, runs real workers over them (``ingest --wait``), then queries both engines directly.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from sidecar_tools.stack.settings import StackSettings, get_stack_settings

SAMPLE = Path(__file__).resolve().parents[1] / "demo_data" / "sample-mailbox.jsonl"
console = Console()


def _stored(ddb: Any, settings: StackSettings, mailbox: str) -> None:
    from indexer.adapters.aws.io import plain
    from indexer.core.errors import RecordError
    from indexer.core.items import classify

    kinds: Counter[str] = Counter()
    for page in ddb.get_paginator("scan").paginate(TableName=settings.table):
        for raw in page["Items"]:
            item = plain(raw)
            try:
                ref = classify(item["PK"], item["SK"])
            except RecordError:
                kinds["unknown"] += 1
                continue
            if ref.mailbox_id == mailbox:
                kinds[ref.kind.value] += 1
    table = Table(title=f"items stored for mailbox {mailbox!r}")
    table.add_column("item")
    table.add_column("count", justify="right")
    for kind, count in sorted(kinds.items()):
        table.add_row(kind, str(count))
    console.print(table)


def _fulltext(settings: StackSettings, mailbox: str, queries: list[str]) -> None:
    from indexer.adapters import factories

    index = factories.fulltext_index(settings)
    index.client.indices.refresh(index=index.alias)
    for text in queries:
        body = {
            "size": 3,
            "query": {
                "bool": {
                    "filter": [{"term": {"mailbox_id": mailbox}}],
                    "must": [{"multi_match": {"query": text, "fields": ["subject^2", "clean"]}}],
                }
            },
        }
        hits = index.client.search(index=index.alias, body=body, routing=mailbox)["hits"]["hits"]
        console.print(f"[bold]full-text[/bold] {text!r}: {len(hits)} hit(s)")
        for hit in hits:
            console.print(f"  {hit['_score']:.2f}  {hit['_source']['subject']}")


def _neighbours(settings: StackSettings, mailbox: str) -> None:
    from indexer.adapters import factories
    from indexer.core.vectors import match

    index = factories.vector_index(settings)
    only = match("mailbox_id", mailbox)
    first = next(index.store.scroll(index.alias, only, None, with_vector=True), [])
    if not first or first[0].vector is None:
        console.print("[red]no vectors indexed[/red]")
        return
    source, vector = first[0], first[0].vector
    subjects = factories.fulltext_index(settings)
    hits = index.query(vector, only, 4)
    console.print(
        f"[bold]nearest neighbours[/bold] of {_subject(subjects, mailbox, source.payload)!r}:"
    )
    for hit in hits:
        if hit.id != source.id:
            console.print(f"  {hit.score:.3f}  {_subject(subjects, mailbox, hit.payload)}")


def _subject(index: Any, mailbox: str, payload: Any) -> str:
    from indexer.core.documents import point_id
    from indexer.core.plan import MessageRef

    ref = MessageRef(mailbox, str((payload or {}).get("message_key")))
    doc = index.client.get(index=index.alias, id=point_id(ref), routing=mailbox)["_source"]
    return str(doc.get("subject"))


def demo(
    mailbox: Annotated[
        str, typer.Option(help="Mailbox id to load the sample into.")
    ] = "demo@example.com",
    file: Annotated[
        Path,
        typer.Option(
            help="NormalizedEmail JSON lines.",
            show_default="the sample mailbox shipped with the tools",
        ),
    ] = SAMPLE,
    serve: Annotated[bool, typer.Option(help="End by serving the API (Ctrl-C stops).")] = True,
) -> None:
    """Load a sample mailbox, index it through real workers, query both engines, serve the API."""
    from indexer.adapters import factories
    from indexer.adapters.aws import clients as aws
    from indexer.adapters.aws.streams import export_records
    from indexer.adapters.dynamodb.tables import init_tables
    from indexer.pipeline.dispatch import ingestor
    from indexer.pipeline.workers import ROLES, spawn_workers, stop_workers
    from indexer.sources.files import read_sources
    from sidecar_tools.writer.files import load_file

    settings = get_stack_settings()
    ddb = aws.client(settings, "dynamodb")
    init_tables(ddb, settings, mail_table=True)  # a demo on an emulator: both tables
    summary = load_file(ddb, settings.table, file, mailbox)
    console.print(f"loaded {file.name}: {summary}")
    _stored(ddb, settings, mailbox)
    records = settings.state_dir / "demo-stream.jsonl"
    records.parent.mkdir(parents=True, exist_ok=True)
    count = export_records(ddb, aws.client(settings, "dynamodbstreams"), settings.table, records)
    console.print(f"exported {count} stream records to {records}")
    log_path = settings.state_dir / "logs" / "demo-workers.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        procs = spawn_workers(settings, ROLES, 1, loglevel="WARNING", log=log)
        console.print(f"workers started (log: {log_path})")
        try:
            run = ingestor(settings)
            run.feed_all(read_sources([str(records)]))
            result = run.wait(600)
        finally:
            stop_workers(procs)  # the vectors worker owns the embedded store: release it first
    console.print(
        f"ingest: read={result.read} applied={result.applied} "
        f"dead_lettered={result.dead_lettered} ignored={result.ignored} embedded={result.embedded}"
    )
    _fulltext(settings, mailbox, ["release checklist", "outage database", "café recipe"])
    _neighbours(settings, mailbox)
    factories.vector_index(settings).close()  # the API process becomes the store's owner
    if serve:
        from sidecar_tools.cli.demo_api import serve_and_show

        serve_and_show(settings, mailbox)


def register(app: typer.Typer) -> None:
    app.command()(demo)
