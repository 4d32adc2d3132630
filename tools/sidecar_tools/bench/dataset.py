"""The benchmark's table and its stream records: loaded once per corpus selection, then reused.

Loading through the writer is by far the slowest step on the local stack (moto), and it is
not what the benchmark measures, so the table is named after the selection's hash and its
exported stream is kept on disk: a later run with the same corpus and N finds both and starts
measuring at once. The stream file is the writer's real stream, exported from moto.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from indexer.adapters.aws import clients as aws
from indexer.adapters.aws.streams import export_records
from indexer.core.plan import MessageRef
from indexer.settings import Settings
from sidecar_tools.bench.corpus import Corpus
from sidecar_tools.writer.files import Rejected, load_file, read_emails
from sidecar_tools.writer.mapping import to_items
from sidecar_tools.writer.parse import InvalidEmail
from sidecar_tools.writer.store import create_table


@dataclass(frozen=True, slots=True)
class Message:
    """What the benchmark needs to know of one stored message."""

    ref: MessageRef
    thread_key: str
    ts: int
    forai: str | None
    email: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Dataset:
    table: str
    stream: Path
    records: int
    messages: list[Message]
    load_s: float  # seconds the load + export took (when first done)
    reused: bool  # True: table and stream came from an earlier run

    def as_json(self) -> dict[str, object]:
        return {
            "table": self.table,
            "stream": str(self.stream),
            "records": self.records,
            "messages": len(self.messages),
            "load_s": round(self.load_s, 1),
            "reused": self.reused,
        }


def table_name(corpus: Corpus) -> str:
    return f"bench-{corpus.key}"


def _table_exists(ddb: Any, table: str) -> bool:
    try:
        ddb.describe_table(TableName=table)
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
            return False
        raise
    return True


def messages_of(corpus: Corpus) -> list[Message]:
    """The messages the writer stores for this selection (its own mapping, no table read)."""
    found: dict[MessageRef, Message] = {}
    for mailbox, path in corpus.files.items():
        for _, email in read_emails(path):
            if isinstance(email, Rejected):
                continue
            stored = stored_message(mailbox, email)
            if stored is not None:
                found[stored.ref] = stored
    return list(found.values())


def stored_message(mailbox: str, email: dict[str, Any]) -> Message | None:
    """What the writer stores for ``email`` in ``mailbox`` (None: an email it refuses)."""
    try:
        items = to_items(email, mailbox)
    except InvalidEmail:
        return None
    row = items.message
    forai = row.get("forai")
    return Message(
        MessageRef(mailbox, str(row["message_key"])),
        str(row["thread_key"]),
        int(row["ts"]),
        forai if isinstance(forai, str) else None,
        email,
    )


def prepare(settings: Settings, corpus: Corpus, cache_dir: Path) -> Dataset:
    """The loaded table and exported stream of ``corpus``, from the cache when still valid."""
    ddb = aws.client(settings, "dynamodb")
    table = table_name(corpus)
    cache_dir.mkdir(parents=True, exist_ok=True)
    marker, stream = cache_dir / "loaded.json", cache_dir / "stream.jsonl"
    messages = messages_of(corpus)
    if marker.exists() and stream.exists() and _table_exists(ddb, table):
        meta = json.loads(marker.read_text(encoding="utf-8"))
        return Dataset(table, stream, int(meta["records"]), messages, float(meta["load_s"]), True)
    started = time.perf_counter()
    create_table(ddb, table)
    ddb.get_waiter("table_exists").wait(TableName=table)
    for mailbox, path in corpus.files.items():
        load_file(ddb, table, path, mailbox, atomic=False)
    records = export_records(ddb, aws.client(settings, "dynamodbstreams"), table, stream)
    load_s = time.perf_counter() - started
    marker.write_text(json.dumps({"records": records, "load_s": load_s}), encoding="utf-8")
    return Dataset(table, stream, records, messages, load_s, False)
