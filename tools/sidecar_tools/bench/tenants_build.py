"""``sidecar bench-tenants``' build: every mailbox's documents and points into the engines.

Walks the skew of :mod:`~sidecar_tools.bench.tenants_mail` over the pool, writes the
documents through the full-text adapter's bulk path and the points through the vector index,
in batches, timing each engine's share; keeps the searched mailboxes' messages (the queries
come from them) and their hot rows, which :func:`write_rows` puts in the table so that the
API's join reads real rows. Apart from the measurements: it writes, they only read.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from boto3.dynamodb.types import TypeSerializer

from indexer.adapters import factories
from indexer.adapters.aws import clients as aws
from indexer.adapters.dynamodb.tables import init_tables
from indexer.core.documents import search_document, vector_target
from indexer.core.plan import MessageRef
from indexer.settings import Settings
from sidecar_tools.bench.dataset import Message
from sidecar_tools.bench.tenants_mail import mailbox_sizes, noisy, perturbed, searched, state_of
from sidecar_tools.bench.tenants_options import Log, TenantOptions
from sidecar_tools.writer.mapping import MessageItems, to_items

DOC_BATCH = 2_000
POINT_BATCH = 512
_SER = TypeSerializer()


@dataclass
class Built:
    """What the build left: the searched mailboxes, their messages and rows, the timings."""

    mailboxes: dict[str, str]
    sizes: dict[str, int]
    messages: dict[str, list[Message]]
    rows: list[MessageItems] = field(default_factory=list)
    documents: int = 0
    points: int = 0
    fulltext_s: float = 0.0
    vectors_s: float = 0.0


def build(settings: Settings, opts: TenantOptions, pool: Sequence[Mapping[str, Any]],
          vectors: Sequence[np.ndarray | None], run_id: str, log: Log) -> Built:
    """Write every mailbox's documents and points; keep the searched mailboxes' items."""
    sizes = mailbox_sizes(opts.messages, opts.mailboxes, opts.whale_share, opts.mid_mailboxes,
                          opts.mid_share)
    chosen = searched(sizes, opts.mid_mailboxes)
    box = [f"t{n:05d}-{run_id}@tenants.example" for n in range(len(sizes))]
    out = Built({c: box[i] for c, i in chosen.items()}, {c: sizes[i] for c, i in chosen.items()},
                {c: [] for c in chosen})
    by_index = {i: c for c, i in chosen.items()}
    fulltext = factories.fulltext_index(settings)
    index = factories.vector_index(settings)
    docs: dict[MessageRef, Mapping[str, Any] | None] = {}
    points: list[tuple[MessageRef, Sequence[float], Mapping[str, Any]]] = []
    used = [0] * len(pool)
    cursor = 0

    def write_docs() -> None:
        began = time.perf_counter()
        rejected = fulltext.apply(docs)
        if rejected:
            raise RuntimeError(f"OpenSearch rejected {len(rejected)} documents: "
                               f"{next(iter(rejected.values()))}")
        out.documents += len(docs)
        out.fulltext_s += time.perf_counter() - began
        docs.clear()

    def write_points() -> None:
        began = time.perf_counter()
        index.upsert(points)
        index.flush()
        out.points += len(points)
        out.vectors_s += time.perf_counter() - began
        points.clear()

    for n, size in enumerate(sizes):
        for _ in range(size):
            slot = cursor % len(pool)
            cursor += 1
            copy = used[slot]
            used[slot] += 1
            items = to_items(perturbed(pool[slot], copy), box[n])
            state = state_of(items, box[n])
            docs[state.ref] = search_document(state)
            target = vector_target(state, settings.embed_recipe)
            base = vectors[slot]
            if target.text is not None and base is not None:
                vector = ([float(x) for x in base] if copy == 0
                          else noisy(base, f"{copy}|{box[n]}|{slot}"))
                points.append((state.ref, vector, target.payload))
            if n in by_index:
                out.rows.append(items)
                message = items.message
                forai = message.get("forai")
                out.messages[by_index[n]].append(Message(
                    state.ref, str(message["thread_key"]), int(message["ts"]),
                    forai if isinstance(forai, str) else None, perturbed(pool[slot], copy)))
            if len(docs) >= DOC_BATCH:
                write_docs()
            if len(points) >= POINT_BATCH:
                write_points()
        if n % 200 == 0:
            log(f"tenants: {n + 1}/{len(sizes)} mailboxes, {out.documents} documents written")
    if docs:
        write_docs()
    if points:
        write_points()
    began = time.perf_counter()
    fulltext.refresh()
    out.fulltext_s += time.perf_counter() - began
    return out


def write_rows(settings: Settings, rows: Sequence[MessageItems]) -> float:
    """The searched mailboxes' Message items (the hot rows: the only items the API's join
    reads, by key) into the table, in batches of 25; returns seconds. The Body, participant
    and pointer items are left out: no search reads them, and moto on 2 busy cores writes
    ~10 messages/s whole."""
    began = time.perf_counter()
    ddb = aws.client(settings, "dynamodb")
    init_tables(ddb, settings, mail_table=True)  # as `sidecar init --mail-table`: mail + state
    ddb.get_waiter("table_exists").wait(TableName=settings.table)
    requests = [{"PutRequest": {"Item": {k: _SER.serialize(v) for k, v in item.items()}}}
                for items in rows
                for item in (items.message,)]
    for start in range(0, len(requests), 25):
        pending = requests[start : start + 25]
        for attempt in range(10):
            left = ddb.batch_write_item(RequestItems={settings.table: pending})
            pending = left.get("UnprocessedItems", {}).get(settings.table, [])
            if not pending:
                break
            time.sleep(0.05 * 2**attempt)
        else:
            raise RuntimeError("moto kept items unprocessed")
    return time.perf_counter() - began
