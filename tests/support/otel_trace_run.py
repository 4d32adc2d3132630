"""Run by ``tests/integration/test_otel_traces.py`` in a process of its own (the tracer
provider is process-wide and must not leak into the rest of the suite): tracing set up with
an in-memory exporter, a real Celery worker (solo pool, in this process, the real broker) on
the test's full-text queue, ``sidecar ingest`` run as the CLI runs it, then a full-text search
through the real API. Prints every finished span as one JSON line on stdout; the test judges.

Arguments: the records file to ingest, the mailbox, the query, the bearer token. The
``SIDECAR_*`` environment is the test's namespace.
"""

from __future__ import annotations

import io
import json
import logging
import sys
import time

from celery.contrib.testing.worker import start_worker
from fastapi.testclient import TestClient
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from indexer import logs, otel
from indexer.settings import get_settings


def main(records: str, mailbox: str, query: str, token: str) -> None:
    exporter = InMemorySpanExporter()
    assert otel.setup("sidecar-test", exporter=exporter)
    from indexer.cli.main import app as cli
    from indexer.pipeline.celery_app import app as celery
    from search_api.app import create_app

    settings = get_settings()
    lines = io.StringIO()  # what the JSON formatter writes while a task runs
    handler = logging.StreamHandler(lines)
    handler.setFormatter(logs.JsonFormatter())
    engine = logging.getLogger("opensearch")  # opensearch-py logs each request at info
    engine.addHandler(handler)
    engine.setLevel(logging.INFO)

    with start_worker(celery, pool="solo", perform_ping_check=False,
                      queues=[settings.fulltext_queue], loglevel="WARNING"):
        code = cli(["ingest", records, "--no-wait"], standalone_mode=False)
        if code not in (0, None):  # click returns typer.Exit's code without standalone mode
            raise SystemExit(f"sidecar ingest exited {code}")
        deadline = time.monotonic() + 120
        while not any(s.name == "run/sidecar.fulltext" for s in exporter.get_finished_spans()):
            assert time.monotonic() < deadline, "the full-text task never ran"
            time.sleep(0.2)
    with TestClient(create_app(settings, vectors=False)) as client:
        # The index refreshes every 500 ms: wait for the hit, each try a traced request.
        for _ in range(50):
            answer = client.get(f"/v1/mailboxes/{mailbox}/search",
                                params={"q": query, "mode": "fulltext"},
                                headers={"Authorization": f"Bearer {token}"})
            assert answer.status_code == 200, answer.text
            if answer.json()["hits"]:
                break
            time.sleep(0.2)
    for span in exporter.get_finished_spans():
        ctx, parent = span.context, span.parent
        print(json.dumps({
            "name": span.name,
            "trace_id": format(ctx.trace_id, "032x"),
            "span_id": format(ctx.span_id, "016x"),
            "parent_id": format(parent.span_id, "016x") if parent else None,
            "kind": span.kind.name,
            "scope": span.instrumentation_scope.name if span.instrumentation_scope else None,
            "attributes": {k: str(v) for k, v in (span.attributes or {}).items()},
        }))
    for line in lines.getvalue().splitlines():
        print(json.dumps({"log": json.loads(line)}))


if __name__ == "__main__":
    main(*sys.argv[1:5])
