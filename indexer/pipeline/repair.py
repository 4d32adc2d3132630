"""The API's read-repair sink on Celery, and the embedded-mode vectors consumer: what
``sidecar serve`` wires into ``search_api`` (which never imports the pipeline)."""

from __future__ import annotations

from collections.abc import Sequence

from indexer.core.plan import MessageRef
from indexer.core.task_payload import TaskPayload
from indexer.pipeline.dispatch import celery_send
from indexer.settings import Settings


class CeleryRepairs:
    """Enqueue the normal pipeline (both stages) for messages whose hot row is gone: the
    sync reads the table, finds them missing and deletes them from both indexes."""

    def __init__(self, settings: Settings) -> None:
        self._send = celery_send(settings)

    def request_repair(self, mailbox_id: str, message_keys: Sequence[str]) -> None:
        if message_keys:
            payload = TaskPayload.of(MessageRef(mailbox_id, key) for key in message_keys)
            self._send("fulltext", payload.to_json())
            self._send("vectors", payload.to_json())


def consume_vectors(settings: Settings) -> None:
    """Run the vectors queue's Celery worker (solo pool) in this thread: in embedded mode
    the API process owns the store, so it is also its only writer. Quiet (``-q``: no ASCII
    banner on the API's stdout) and its shutdown notice a JSON line: the API's output stays
    JSON lines only."""
    from indexer.pipeline import celery_logs
    from indexer.pipeline.celery_app import app

    celery_logs.celery_says_json()
    app.worker_main(
        [
            "-q",
            "worker",
            "-P",
            "solo",
            "-Q",
            settings.vectors_queue,
            "-n",
            "api-vectors@%h",
            "--without-gossip",
            "--without-mingle",
            "-l",
            "WARNING",
        ]
    )
