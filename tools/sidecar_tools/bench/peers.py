"""Two peers measured on the same messages: the per-record Lambda pattern, and notmuch.

*Naive*: the AWS sample's shape ("stream to OpenSearch" Lambda): for every record, one
synchronous PUT (or DELETE) of the decoded image, and for a record carrying ``forai`` one
single-text embedding and one single-point upsert. No batching, no dedup of unchanged text.

*notmuch*: ``notmuch new`` over a maildir the benchmark writes from the same emails — a
mature single-machine mail indexer (Xapian) on the same disk and cores.
"""

from __future__ import annotations

import email.utils
import json
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from email.message import EmailMessage
from pathlib import Path
from typing import Any

from opensearchpy import OpenSearch

from indexer.adapters.embedding.embedder import DIMENSION, Embedder
from indexer.adapters.factories import vector_slug
from indexer.adapters.qdrant.index import VectorIndex, build_store
from indexer.core.errors import RecordError
from indexer.core.plan import MessageRef, Plan
from indexer.core.records import EventName, StreamRecord, decode_record
from indexer.settings import Settings
from sidecar_tools.bench.limits import Throughput


def subset_records(stream: Path, subset: set[MessageRef]) -> list[StreamRecord]:
    """The stream records (in stream order) that touch a message of ``subset``."""
    chosen: list[StreamRecord] = []
    with stream.open(encoding="utf-8") as fh:
        for line in fh:
            try:
                record = decode_record(json.loads(line))
                touched = Plan().add(record)
            except RecordError:
                continue
            if touched & subset:
                chosen.append(record)
    return chosen


def _put_one(client: OpenSearch, index: str, record: StreamRecord) -> None:
    doc_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{record.pk}|{record.sk}"))
    if record.event_name is EventName.REMOVE or record.new_image is None:
        client.delete(index=index, id=doc_id, ignore=[404])
    else:
        client.index(index=index, id=doc_id, body=dict(record.new_image))


def naive_peer(
    settings: Settings,
    client: OpenSearch,
    embedder: Embedder,
    records: list[StreamRecord],
    messages: int,
) -> Throughput:
    """Messages/s of the per-record synchronous pattern over ``records``."""
    index = f"{settings.opensearch_index}-naive"
    client.indices.create(index=index, body={"settings": {"index.mapping.ignore_malformed": True}})
    qdrant = build_store(settings)
    vectors = VectorIndex(qdrant, settings.qdrant_collection, vector_slug(settings), DIMENSION)
    vectors.ensure()
    try:
        started = time.perf_counter()
        for record in records:
            _put_one(client, index, record)
            image = record.new_image or {}
            text = image.get("forai")
            if isinstance(text, str) and text.strip():
                ref = MessageRef(str(image["mailbox_id"]), str(image["message_key"]))
                vector = embedder.embed([text])[0]
                vectors.upsert([(ref, vector, {"mailbox_id": ref.mailbox_id})])
                vectors.flush()
        return Throughput(messages, time.perf_counter() - started)
    finally:
        client.indices.delete(index=index, ignore_unavailable=True)
        qdrant.close()


def _rfc822(raw: dict[str, Any]) -> bytes:
    """One email as a message file (headers from the metadata, body = the text part)."""
    meta, content = raw.get("metadata") or {}, raw.get("content") or {}
    msg = EmailMessage()
    sender = meta.get("from") or {}
    msg["From"] = email.utils.formataddr((sender.get("name") or "", sender.get("email") or ""))
    msg["To"] = ", ".join(a.get("email") or "" for a in meta.get("to") or []) or "undisclosed"
    msg["Subject"] = str(meta.get("subject") or "").replace("\n", " ")
    msg["Date"] = email.utils.formatdate(float(meta.get("timestamp") or 0), usegmt=True)
    msg["Message-ID"] = str(raw.get("messageId") or f"<{uuid.uuid4().hex}@bench>")
    msg.set_content(str(content.get("text") or ""), cte="8bit")
    return msg.as_bytes()


def write_maildir(emails: Iterator[dict[str, Any]], root: Path) -> int:
    """Write each email as a file of ``root/cur``; returns how many were written."""
    for sub in ("cur", "new", "tmp"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    count = 0
    for n, raw in enumerate(emails):
        try:
            blob = _rfc822(raw)
        except (ValueError, TypeError):
            continue
        (root / "cur" / f"{n:07d}.bench:2,S").write_bytes(blob)
        count += 1
    return count


def notmuch_peer(emails: Iterator[dict[str, Any]], workdir: Path) -> Throughput | None:
    """Messages/s of ``notmuch new`` on a fresh maildir of these emails; None without notmuch."""
    binary = shutil.which("notmuch")
    if binary is None:
        return None
    root = (workdir / "maildir").resolve()  # notmuch wants an absolute database path
    written = write_maildir(emails, root)
    config = root.parent / "notmuch-config"
    config.write_text(
        f"[database]\npath={root}\n[new]\ntags=inbox;\nignore=\n[search]\nexclude_tags=\n"
        "[maildir]\nsynchronize_flags=false\n",
        encoding="utf-8",
    )
    started = time.perf_counter()
    subprocess.run(
        [binary, f"--config={config}", "new", "--quiet"],
        check=True,
        capture_output=True,
        timeout=3600,
    )
    elapsed = time.perf_counter() - started
    return Throughput(written, elapsed)
