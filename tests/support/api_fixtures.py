"""A running API (``sidecar serve``, owner of the embedded store) + full-text worker, over a
small hand-built pair of mailboxes indexed by the real pipeline."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from indexer.adapters import factories
from indexer.adapters.aws import clients as aws
from indexer.pipeline.workers import spawn_workers, stop_workers
from indexer.settings import Settings, to_env
from search_api.auth import token_hash
from sidecar_tools.writer.mapping import to_items
from sidecar_tools.writer.store import store_message
from tests.support.pipeline_helpers import (
    export_stream,
    ingest_files,
    prepare_tables,
    wait_contacts,
)
from tests.support.waiting import wait_http_ok

TOKEN_A, TOKEN_B = "token-a-" + uuid.uuid4().hex, "token-b-" + uuid.uuid4().hex


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def mail(
    n: int,
    subject: str,
    clean: str,
    *,
    sender: tuple[str, str],
    to: list[str],
    cc: list[str] = (),
    thread: str | None = None,
    day: int = 1,
    attachments: int = 0,
    forai: str | None = None,
) -> dict[str, Any]:
    return {
        "messageId": f"<msg{n}@example.org>",
        "threadId": thread or f"<msg{n}@example.org>",
        "metadata": {
            "from": {"name": sender[0], "email": sender[1]},
            "to": [{"name": None, "email": a} for a in to],
            "cc": [{"name": None, "email": a} for a in cc],
            "bcc": [{"name": None, "email": "hidden-bcc@example.org"}],
            "subject": subject,
            "date": f"2024-03-{day:02d}T12:00:00Z",
            "timestamp": 1709294400 + (day - 1) * 86400 + n,
        },
        "content": {
            "text": clean,
            "clean": clean,
            "forAI": forai if forai is not None else f"{subject}. {clean}",
        },
        "attachments": [
            {"filename": f"f{i}.pdf", "contentType": "application/pdf", "size": 10}
            for i in range(attachments)
        ],
        "processing": {"processedAt": "2024-04-01T00:00:00Z", "specVersion": "1.0"},
    }


@dataclass
class Api:
    settings: Settings
    url: str
    mailbox_a: str
    mailbox_b: str
    procs: list[subprocess.Popen[bytes]]

    def get(self, path: str, token: str | None = TOKEN_A, **params: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.get(self.url + path, params=params, headers=headers, timeout=60)

    def search(
        self, q: str, token: str = TOKEN_A, mailbox: str | None = None, **params: Any
    ) -> httpx.Response:
        return self.get(f"/v1/mailboxes/{mailbox or self.mailbox_a}/search", token, q=q, **params)


def store_all(settings: Settings, mailbox: str, emails: list[dict[str, Any]]) -> None:
    ddb = aws.client(settings, "dynamodb")
    for email in emails:
        store_message(ddb, settings.table, to_items(email, mailbox))


def index_all(settings: Settings, tmp: Path) -> None:
    records = tmp / f"stream-{uuid.uuid4().hex[:6]}.jsonl"
    export_stream(settings, records)
    summary = ingest_files(settings, [str(records)], timeout=600)
    assert summary.dead_lettered == 0, summary
    # Indexed is not yet searchable: a write shows in searches after the index's next refresh
    # (refresh_interval, 500 ms by default), and ingest can now finish within it.
    factories.fulltext_index(settings).refresh()
    # the workers' contact summary: recounted by a task due a second after each batch
    wait_contacts(settings, sorted(factories.fulltext_index(settings).mailbox_ids()))


def serve_process(env: dict[str, str], log: Path, *options: str) -> subprocess.Popen[bytes]:
    """``sidecar serve`` in a process (and session) of its own, its output appended to ``log``."""
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "indexer.cli.main", "serve", *options],
            env=env,
            stdout=out,
            stderr=out,
            start_new_session=True,
        )


def start_api(settings: Settings, tmp: Path, mailbox_a: str, mailbox_b: str) -> Iterator[Api]:
    prepare_tables(settings)
    port = free_port()
    env = {
        **os.environ,
        **to_env(settings),
        "SIDECAR_API_PORT": str(port),
        "SIDECAR_API_TOKENS": json.dumps(
            {token_hash(TOKEN_A): [mailbox_a], token_hash(TOKEN_B): [mailbox_b]}
        ),
    }
    api = serve_process(env, tmp / "api.log")
    log = (tmp / "api.log").open("ab")
    workers = spawn_workers(
        settings, ("fulltext",), 1, loglevel="WARNING", own_session=True, log=log
    )
    url = f"http://127.0.0.1:{port}"
    procs = [api, *workers]
    try:
        wait_http_ok(url + "/healthz", timeout=180, proc=api, log=tmp / "api.log", what="the API")
        yield Api(settings.model_copy(update={"api_port": port}), url, mailbox_a, mailbox_b, procs)
    finally:
        stop_workers(procs)
