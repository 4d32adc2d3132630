"""``sidecar bench-cost``: what indexing one stored message costs in AWS and OpenSearch
requests, per path, against the design's minimum M1 (issue 28, docs/results/cost.md).

The corpus (default: the shipped demo mailbox) is stored by the project's writer into a fresh
moto table; then each path runs on the same stored messages, each with a sidecar state table
and an OpenSearch index of its own (re-delivery reuses the live path's: it is that path's
records again), the worker's tasks in this process on metered clients
(:mod:`sidecar_tools.bench.cost_worker`):

- ``live``: the stream read by the product's :class:`~indexer.adapters.aws.streams.StreamReader`,
  every record fed as one shard page to the product's ``Ingestor`` (``feed_together``, batches
  of ``SIDECAR_BATCH_MESSAGES``), then the page's checkpoint saved, as the tailer does;
- ``live_sharded``: the same records as the tailer would batch them over ``shards`` shard
  pages — an **emulation**: moto's stream has one shard, so the records are partitioned by a
  hash of their partition key into ``shards`` pages, read in one sweep and applied together
  as the tailer applies a sweep (one ``Ingestor``), then each shard's checkpoint saved. All
  records fit one sweep here (a backlog); at a live trickle a message written while a sweep
  is under way may straddle two sweeps and be synced twice;
- ``redelivery``: the live page applied again, after the live path (a crash before the
  checkpoint, or a Lambda retry);
- ``export``: ``backfill_export`` of a full export written to moto's S3 in AWS's layout;
- ``scan``: ``backfill --scan`` (``backfill_scan``).

Counted per path: every DynamoDB, DynamoDB Streams and S3 request by operation, the DynamoDB
read and write units from item sizes (:mod:`sidecar_tools.bench.meter`), every OpenSearch
HTTP request, and how often each message was synced per index. Not counted: Qdrant requests,
the tailer's idle polling and lease renewals (per second, not per message), setup (tables,
index templates).

M1 (docs/results/cost.md): each message's Message, Body and META items and its participant items
read once, strongly consistent, and its PEOPLE item written once.
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import hashlib
import json
import shutil
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from indexer.adapters.aws import clients as aws
from indexer.adapters.aws.streams import StreamReader, latest_stream_arn, portable
from indexer.adapters.dynamodb.participants import SK as PEOPLE_SK
from indexer.adapters.dynamodb.state import ShardCheckpoint, ShardCheckpointStore
from indexer.adapters.dynamodb.store import DynamoStore
from indexer.adapters.dynamodb.tables import create, init_tables, mail_table_spec
from indexer.adapters.embedding.embedder import build_embedder, model_info
from indexer.adapters.factories import vector_slug
from indexer.adapters.opensearch.family import MAPPING_VERSION
from indexer.adapters.opensearch.index import OpenSearchIndex
from indexer.adapters.opensearch.index import build_client as build_opensearch
from indexer.adapters.qdrant.index import VectorIndex, build_store
from indexer.core.items import ItemKind, classify
from indexer.core.plan import MessageRef
from indexer.core.records import RawRecord
from indexer.pipeline.ingest import IngestSummary
from indexer.settings import Settings
from indexer.sources.backfill import BackfillSummary, backfill_export
from indexer.sources.scan import backfill_scan
from indexer.sources.tail.state import PAGE_LIMIT
from sidecar_tools.bench.cost_worker import InProcessWorker, instrumented
from sidecar_tools.bench.meter import Meter, item_size, read_units, write_units
from sidecar_tools.bench.namespaces import own_namespace
from sidecar_tools.writer.files import Rejected, load_file, read_emails

DEMO_CORPUS = Path(__file__).resolve().parents[1] / "demo_data" / "sample-mailbox.jsonl"
MAILBOX = "cost@example.org"
LIVE, SHARDED, REDELIVERY, EXPORT, SCAN = "live", "live_sharded", "redelivery", "export", "scan"
PATHS = (LIVE, SHARDED, REDELIVERY, EXPORT, SCAN)
M1_KINDS = (ItemKind.MESSAGE, ItemKind.BODY, ItemKind.POINTER, ItemKind.PARTICIPANT)

Say = Callable[[str], None]
Item = dict[str, Any]


@dataclass(frozen=True)
class CostOptions:
    corpus: Path | None = None  # NormalizedEmail JSON lines (plain or gzip); None: demo sample
    messages: int = 200  # the first N valid messages of the corpus
    shards: int = 8  # shard pages of the emulated multi-shard live path
    export_files: int = 4  # data files of the export (contiguous key ranges, as AWS writes)
    parallel: int = 4  # backfill --export: data files read at once (its default)
    segments: int = 4  # backfill --scan: segments (its default)
    page_size: int = 500  # backfill --scan: items per Scan page (its default)
    workdir: Path = Path(".sidecar/bench/cost")
    timeout_s: float = 1800.0


def for_path(settings: Settings, path: str) -> Settings:
    """The path's own sidecar table and index (same mail table, same vector store)."""
    name = f"{settings.table}-{path.replace('_', '-')}"
    return settings.model_copy(update={"state_table": f"{name}-state",
                                       "opensearch_index": name})


def sample(path: Path, messages: int, out: Path) -> int:
    """The first ``messages`` valid emails of ``path`` written to ``out``; how many."""
    lines: list[str] = []
    for _, parsed in read_emails(path):
        if not isinstance(parsed, Rejected):
            lines.append(json.dumps(parsed, ensure_ascii=False))
        if len(lines) >= messages:
            break
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return len(lines)


def scan_all(ddb: Any, table: str) -> list[Item]:
    found: list[Item] = []
    for page in ddb.get_paginator("scan").paginate(TableName=table, ConsistentRead=True):
        found.extend(page["Items"])
    return found


def minimum(items: list[Item], people: list[Item]) -> dict[str, float]:
    """M1's read units (strong, each item once) and write units (each PEOPLE item once)."""
    reads, per_message = 0.0, Counter[MessageRef]()
    participants = 0
    for item in items:
        ref = classify(item["PK"]["S"], item["SK"]["S"])
        if ref.message_key is not None and ref.kind in M1_KINDS:
            reads += read_units(item_size(item), consistent=True)
            per_message[MessageRef(ref.mailbox_id, ref.message_key)] += 1
            participants += ref.kind is ItemKind.PARTICIPANT
    writes = sum(write_units(item_size(i)) for i in people)
    return {"read_units": reads, "write_units": float(writes),
            "participant_items": float(participants), "messages": float(len(per_message))}


# -- the stream and its pages ---------------------------------------------------------------
Page = tuple[str, list[Item]]  # (shard id, portable records in stream order)


def read_stream(streams: Any, arn: str) -> list[Item]:
    """Every record of the stream, read the tailer's way (shards, iterator, pages of
    ``PAGE_LIMIT``, until an empty page): the Streams requests a live path costs."""
    reader = StreamReader(streams)
    records: list[Item] = []
    for shard in reader.shards(arn):
        iterator = reader.iterator(arn, shard["ShardId"], "TRIM_HORIZON", None)
        while iterator:
            page, iterator = reader.records(iterator, PAGE_LIMIT)
            if not page:
                break
            records.extend(portable(r) for r in page)
    return records


def shard_of(record: Mapping[str, Any], shards: int) -> int:
    """The emulated shard of a record: a hash of its partition key (DynamoDB's own is
    internal; any uniform hash spreads a message's items alike)."""
    pk = str(record["dynamodb"]["Keys"]["PK"]["S"])
    return int(hashlib.md5(pk.encode()).hexdigest(), 16) % shards  # noqa: S324 - not security


def shard_pages(records: list[Item], shards: int) -> list[Page]:
    pages: list[list[Item]] = [[] for _ in range(shards)]
    for record in records:
        pages[shard_of(record, shards)].append(record)
    return [(f"emulated-{n}", page) for n, page in enumerate(pages) if page]


def apply_sweep(worker: InProcessWorker, batch: int, checkpoints: ShardCheckpointStore,
                pages: list[Page]) -> IngestSummary:
    """What the tailer does with one sweep over its shards: the pages fed together to one
    ``Ingestor`` (``feed_together``: grouped by message), waited for, then each shard's
    checkpoint saved."""
    sink = worker.ingestor(batch)
    sink.feed_together([
        RawRecord(f"stream:{shard_id}:{record['dynamodb']['SequenceNumber']}", record)
        for shard_id, records in pages for record in records
    ])
    summary = sink.wait()
    for shard_id, records in pages:
        last = records[-1]["dynamodb"]
        created = last.get("ApproximateCreationDateTime")
        checkpoints.save(ShardCheckpoint(shard_id, str(last["SequenceNumber"]),
                                         created=int(created) if created is not None else None))
    return summary


# -- the export -------------------------------------------------------------------------------
def _gz_lines(rows: list[Item]) -> bytes:
    return gzip.compress(("\n".join(json.dumps(r) for r in rows) + "\n").encode())


def write_export(s3: Any, bucket: str, table: str, items: list[Item], files: int) -> str:
    """A FULL export of ``items`` in AWS's layout under ``s3://bucket/exports``: data files
    of contiguous key ranges, ``manifest-files.json``, ``manifest-summary.json``."""
    s3.create_bucket(Bucket=bucket)
    rows = [{"Item": i} for i in sorted(items, key=lambda i: (i["PK"]["S"], i["SK"]["S"]))]
    export_id = f"{int(time.time() * 1000)}-{uuid.uuid4().hex[:8]}"
    base = f"exports/AWSDynamoDB/{export_id}"
    size = -(-len(rows) // files)
    lines = []
    for n in range(files):
        body = _gz_lines(rows[n * size:(n + 1) * size])
        key = f"{base}/data/{uuid.uuid4().hex}.json.gz"
        s3.put_object(Bucket=bucket, Key=key, Body=body)
        md5 = base64.b64encode(hashlib.md5(body).digest()).decode()  # noqa: S324 - checksum
        lines.append({"itemCount": len(rows[n * size:(n + 1) * size]), "md5Checksum": md5,
                      "etag": "e", "dataFileS3Key": key})
    s3.put_object(Bucket=bucket, Key=f"{base}/manifest-files.json",
                  Body="\n".join(map(json.dumps, lines)))
    summary = {"version": "2020-06-30", "exportType": "FULL_EXPORT",
               "exportArn": f"arn:aws:dynamodb:us-east-1:000000000000:table/{table}/export/"
                            f"{export_id}",
               "outputFormat": "DYNAMODB_JSON", "itemCount": len(rows),
               "manifestFilesS3Key": f"{base}/manifest-files.json"}
    s3.put_object(Bucket=bucket, Key=f"{base}/manifest-summary.json", Body=json.dumps(summary))
    return f"s3://{bucket}/exports"


# -- one run ----------------------------------------------------------------------------------
class _Run:
    """The run's shared pieces: settings, the unmetered client, item sizes, sinks."""

    def __init__(self, opts: CostOptions, settings: Settings, say: Say) -> None:
        self.opts, self.settings, self.say = opts, settings, say
        self.raw = aws.client(settings, "dynamodb")  # unmetered: setup and the meter's sizing
        self.sizes: dict[tuple[str, str], int] = {}
        model = model_info(settings.embed_model)
        self.vector_store = build_store(settings)
        self.vectors = VectorIndex(self.vector_store, settings.qdrant_collection,
                                   vector_slug(settings), model.dimension, settings.embed_recipe)
        self.vectors.ensure()
        self.embedder = build_embedder(settings)
        self.indices: list[OpenSearchIndex] = []

    def sizer(self, table: str, key: Mapping[str, Any]) -> int | None:
        """Stored size of an item: the mail table's from the scan (it does not change while
        the paths run), the sidecar table's read back."""
        if table == self.settings.table:
            return self.sizes.get((key["PK"]["S"], key["SK"]["S"]))
        item = self.raw.get_item(TableName=table, Key=dict(key), ConsistentRead=True).get("Item")
        return None if item is None else item_size(item)

    def worker(self, settings: Settings, meter: Meter) -> InProcessWorker:
        """A worker of the path: the sidecar table and index of ``settings``, metered."""
        init_tables(self.raw, settings)
        index = OpenSearchIndex(build_opensearch(settings), settings.opensearch_index)
        index.ensure()  # a worker's start-up, not a message's cost
        self.indices.append(index)
        meter.attach_opensearch(index.client)
        store = DynamoStore(meter.attach(aws.client(settings, "dynamodb")), settings.table,
                            settings.resolved_state_table)
        return InProcessWorker(store, index, self.vectors, self.embedder, settings.embed_recipe,
                               first_read=settings.first_read)

    def close(self) -> None:
        self.vector_store.close()


def _figures(meter: Meter, worker: InProcessWorker, seconds: float, **extra: Any
             ) -> dict[str, Any]:
    counts = meter.reset()
    meter.active = False
    if worker.undecodable:
        raise RuntimeError(f"undecodable records: {worker.undecodable[:3]}")
    return {
        "requests": dict(sorted(counts.requests.items())),
        "read_units": counts.read_units,
        "write_units": counts.write_units,
        "syncs": {stage: sum(c.values()) for stage, c in worker.syncs.items()},
        "synced_messages": {stage: len(c) for stage, c in worker.syncs.items()},
        "most_syncs": {stage: max(c.values(), default=0) for stage, c in worker.syncs.items()},
        "tasks": dict(worker.tasks),
        "seconds": round(seconds, 2),
        **extra,
    }


def _live(run: _Run, arn: str, path: str, settings: Settings, pages_of: Callable[
        [list[Item]], list[Page]], worker: InProcessWorker | None = None) -> tuple[
        dict[str, Any], InProcessWorker]:
    meter = Meter(run.sizer)
    if worker is None:
        worker = run.worker(settings, meter)
    else:  # re-delivery: the live path's worker, counted anew
        meter.attach_opensearch(worker.fulltext.client)
        worker = InProcessWorker(DynamoStore(meter.attach(aws.client(settings, "dynamodb")),
                                             settings.table, settings.resolved_state_table),
                                 worker.fulltext, worker.vectors, worker.embedder, worker.recipe,
                                 first_read=settings.first_read)
    started = time.perf_counter()
    records = read_stream(meter.attach(aws.client(settings, "dynamodbstreams")), arn)
    checkpoints = ShardCheckpointStore(meter.attach(aws.client(settings, "dynamodb")),
                                       settings.resolved_state_table, arn)
    pages = pages_of(records)
    summary = apply_sweep(worker, settings.batch_messages, checkpoints, pages)
    if summary.dead_lettered:
        raise RuntimeError(f"{path}: {summary.dead_lettered} dead-lettered")
    run.say(f"{path}: {len(records)} records in {len(pages)} page(s), "
            f"{sum(worker.tasks.values())} tasks")
    return _figures(meter, worker, time.perf_counter() - started, pages=len(pages),
                    records=len(records)), worker


def _backfill(run: _Run, path: str, settings: Settings,
              go: Callable[[Settings], BackfillSummary]) -> dict[str, Any]:
    meter = Meter(run.sizer)
    worker = run.worker(settings, meter)
    started = time.perf_counter()
    with instrumented(meter, worker):
        summary = go(settings)
    if summary.dead_lettered:
        raise RuntimeError(f"{path}: {summary.dead_lettered} dead-lettered")
    run.say(f"{path}: {summary.read} rows read, {summary.deduplicated} deduplicated, "
            f"{sum(worker.tasks.values())} tasks")
    return _figures(meter, worker, time.perf_counter() - started, rows=summary.read,
                    deduplicated=summary.deduplicated, units=summary.units)


def run(opts: CostOptions, base: Settings, say: Say) -> dict[str, Any]:
    """Store the corpus, run every path, return the figures (see ``cost_report``)."""
    run_id = uuid.uuid4().hex[:8]
    settings = own_namespace(base, f"bench-cost-{run_id}", opts.workdir / run_id / "qdrant")
    corpus = opts.corpus or DEMO_CORPUS
    shared = _Run(opts, settings, say)
    s3 = aws.client(settings, "s3")
    bucket = f"bench-cost-{run_id}"
    tables: list[str] = [settings.table]
    try:
        create(shared.raw, mail_table_spec(settings.table))  # as `sidecar init --mail-table`
        chosen = sample(corpus, opts.messages, opts.workdir / run_id / "corpus.jsonl")
        started = time.perf_counter()
        stored = load_file(shared.raw, settings.table, opts.workdir / run_id / "corpus.jsonl",
                           MAILBOX).stored
        items = scan_all(shared.raw, settings.table)
        shared.sizes = {(i["PK"]["S"], i["SK"]["S"]): item_size(i) for i in items}
        say(f"corpus {corpus}: {stored} of {chosen} messages stored ({len(items)} items) in "
            f"{time.perf_counter() - started:.0f}s; table {settings.table}")
        arn = latest_stream_arn(shared.raw, settings.table)
        paths: dict[str, Any] = {}
        live = for_path(settings, LIVE)
        tables.append(live.resolved_state_table)
        paths[LIVE], worker = _live(shared, arn, LIVE, live, lambda r: [("shard-0", r)])
        people = [i for i in scan_all(shared.raw, live.resolved_state_table)
                  if i["SK"]["S"] == PEOPLE_SK]
        paths[REDELIVERY], _ = _live(shared, arn, REDELIVERY, live,
                                     lambda r: [("shard-0", r)], worker)
        sharded = for_path(settings, SHARDED)
        tables.append(sharded.resolved_state_table)
        paths[SHARDED], _ = _live(shared, arn, SHARDED, sharded,
                                  lambda r: shard_pages(r, opts.shards))
        uri = write_export(s3, bucket, settings.table, items, opts.export_files)
        export = for_path(settings, EXPORT)
        tables.append(export.resolved_state_table)
        paths[EXPORT] = _backfill(shared, EXPORT, export, lambda s: backfill_export(
            s, uri, parallel=opts.parallel, timeout_s=opts.timeout_s))
        scan = for_path(settings, SCAN)
        tables.append(scan.resolved_state_table)
        paths[SCAN] = _backfill(shared, SCAN, scan, lambda s: backfill_scan(
            s, segments=opts.segments, page_size=opts.page_size, timeout_s=opts.timeout_s))
        return {
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "corpus": str(corpus),
            "messages": stored,
            "items": len(items),
            "stream_shards": 1,
            "options": {k: str(v) if isinstance(v, Path) else v
                        for k, v in asdict(opts).items()},
            "batch_messages": settings.batch_messages,
            "m1": minimum(items, people),
            "paths": {p: paths[p] for p in PATHS},
        }
    finally:
        shared.close()
        _clean(shared, settings, tables, s3, bucket)


def _clean(shared: _Run, settings: Settings, tables: list[str], s3: Any, bucket: str) -> None:
    """Drop the run's tables, indices and their templates, bucket and embedded store (best
    effort: never hide the figures)."""
    client = build_opensearch(settings)
    with contextlib.suppress(Exception):
        client.indices.delete(index=f"{settings.opensearch_index}*", ignore_unavailable=True,
                              expand_wildcards="all")
    for index in shared.indices:
        with contextlib.suppress(Exception):
            client.indices.delete_index_template(
                name=f"{index.alias}-messages-v{MAPPING_VERSION}")
    for table in tables:
        with contextlib.suppress(Exception):
            shared.raw.delete_table(TableName=table)
    with contextlib.suppress(Exception):
        for obj in s3.list_objects_v2(Bucket=bucket).get("Contents", []):
            s3.delete_object(Bucket=bucket, Key=obj["Key"])
        s3.delete_bucket(Bucket=bucket)
    shutil.rmtree(settings.qdrant_path.parent, ignore_errors=True)
