"""Issue 40 part 4: a Celery worker's stdout and stderr are JSON lines only — no ASCII banner
(``celery -q``) — and the lines about a task carry ``task_id`` and ``task_name`` (replacing
Celery's task formatter with ours had dropped them). A real full-text worker at INFO indexes
a few messages sent by the ingestor; everything it wrote is read back. The role also runs the
contacts worker (a thread pool on ``<prefix>.contacts``): the test waits until it has run the
batch's contact recount, so the lines of both task names are checked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from indexer.adapters import factories
from indexer.pipeline.workers import spawn_workers, stop_workers
from indexer.settings import Settings
from tests.support.api_fixtures import mail, store_all
from tests.support.pipeline_helpers import ingest_fulltext, prepare_tables
from tests.support.waiting import wait_for

pytestmark = pytest.mark.stack

SENDER = ("Ops", "ops@example.org")


def test_a_workers_output_is_json_lines_with_the_task_on_task_lines(
    settings: Settings, tmp_path: Path
) -> None:
    prepare_tables(settings)
    store_all(settings, "box", [mail(n, f"report {n}", "numbers", sender=SENDER,
                                     to=["a@example.com"]) for n in range(3)])
    out = tmp_path / "worker.out"
    with out.open("wb") as log:
        procs = spawn_workers(settings, ("fulltext",), 1, "INFO", own_session=True, log=log)
        try:
            assert ingest_fulltext(settings, tmp_path) == 0
            wait_for(lambda: "succeeded" in out.read_text(errors="replace").partition(
                         "Task sidecar.contacts[")[2], timeout=60,
                     message="the contacts worker never ran the batch's recount")
        finally:
            stop_workers(procs)
    assert factories.redis_client(settings).llen(settings.contacts_queue) == 0
    lines = out.read_text(errors="replace").splitlines()
    assert lines, "the worker wrote nothing at INFO"
    entries = []
    for line in lines:
        entry = json.loads(line)  # any banner or plain-text line fails here
        assert isinstance(entry, dict), line
        entries.append(entry)
    about_tasks = [e for e in entries if "Task " in str(e.get("message"))]
    assert any("succeeded" in str(e["message"]) for e in about_tasks), entries
    for entry in about_tasks:
        assert entry.get("task_id") and entry["task_id"] in str(entry["message"]), entry
        assert entry.get("task_name") and f"{entry['task_name']}[" in str(entry["message"]), entry
    # Logged by a task's code: the full-text batch, and the contact recount it published.
    ran = {(e["task_name"], e["task_id"]) for e in about_tasks}
    inside = [e for e in entries if e.get("logger") == "opensearch"]
    assert {e.get("task_name") for e in inside} >= {"sidecar.fulltext", "sidecar.contacts"}, (
        inside)
    strays = [e for e in inside if (e.get("task_name"), e.get("task_id")) not in ran
              or e["task_name"] not in {"sidecar.fulltext", "sidecar.contacts"}]
    assert not strays, strays
