"""Issue 40 part 5: with tracing on, one trace runs from ``sidecar ingest`` through the Celery
task's headers into the full-text worker and on to OpenSearch, and a search is one server span
with its engine calls as children; log lines written inside a span carry its trace id.

The traced process is ``tests/support/otel_trace_run.py`` (an in-memory exporter, a real worker in
that process, the real broker and engines); this test reads the spans it prints."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from indexer.settings import Settings, to_env
from search_api.auth import token_hash
from tests.support.api_fixtures import mail, store_all
from tests.support.pipeline_helpers import export_stream, prepare_tables

pytestmark = pytest.mark.stack

BOX, TOKEN = "traced@example.com", "otel-token"
SENDER = ("Ops", "ops@example.org")
Span = dict[str, Any]


def _ancestors(span: Span, by_id: Mapping[str, Span]) -> list[str]:
    """The names of a span's parents, nearest first."""
    names, parent = [], span["parent_id"]
    while parent in by_id:
        names.append(by_id[parent]["name"])
        parent = by_id[parent]["parent_id"]
    return names


def test_ingest_to_opensearch_is_one_trace_and_a_search_has_engine_children(
    settings: Settings, tmp_path: Path
) -> None:
    prepare_tables(settings)
    store_all(settings, BOX, [mail(n, f"tracing report {n}", "quarterly numbers",
                                   sender=SENDER, to=["a@example.com"]) for n in range(3)])
    records = tmp_path / "records.jsonl"
    export_stream(settings, records)
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env |= to_env(settings) | {"SIDECAR_API_TOKENS": json.dumps({token_hash(TOKEN): [BOX]})}
    script = Path(__file__).parents[1] / "support" / "otel_trace_run.py"
    done = subprocess.run(
        [sys.executable, str(script), str(records), BOX, "quarterly", TOKEN],
        env=env, capture_output=True, text=True, timeout=300,
        cwd=Path(__file__).parents[2],
    )
    assert done.returncode == 0, done.stderr[-3000:]
    printed = [json.loads(line) for line in done.stdout.splitlines()]
    spans: list[Span] = [p for p in printed if "name" in p]
    by_id = {s["span_id"]: s for s in spans}

    (ingest,) = [s for s in spans if s["name"] == "sidecar ingest"]
    trace = [s for s in spans if s["trace_id"] == ingest["trace_id"]]
    published = [s for s in trace if s["name"] == "apply_async/sidecar.fulltext"]
    ran = [s for s in trace if s["name"] == "run/sidecar.fulltext"]
    assert published and ran, sorted({s["name"] for s in spans})
    assert all("sidecar ingest" in _ancestors(s, by_id) for s in published)
    # The worker's span continues the sender's trace: its parent is the publish span.
    assert {s["parent_id"] for s in ran} <= {s["span_id"] for s in published}
    bulk = [s for s in trace if s["kind"] == "CLIENT" and "_bulk" in json.dumps(s["attributes"])]
    assert bulk and all("run/sidecar.fulltext" in _ancestors(s, by_id) for s in bulk)
    dynamodb = [s for s in trace if s["attributes"].get("rpc.service") == "DynamoDB"]
    assert dynamodb, "the task's table reads are in the trace too (botocore)"

    servers = [s for s in spans if s["kind"] == "SERVER" and "search" in s["name"]]
    assert servers, sorted({s["name"] for s in spans})
    searched = [s for s in spans if s["kind"] == "CLIENT" and "_search" in json.dumps(
        s["attributes"]) and s["trace_id"] in {v["trace_id"] for v in servers}]
    assert searched, "the engine's search call is a child of the request's span"
    for span in searched:
        assert any(by_id.get(p, {}).get("kind") == "SERVER"
                   for p in _span_ids_up(span, by_id)), span

    engine_lines = [p["log"] for p in printed if "log" in p]  # opensearch-py's, per request
    bulk_lines = [line for line in engine_lines if "_bulk" in line["message"]]
    assert bulk_lines and all(line.get("trace_id") == ingest["trace_id"] for line in bulk_lines)


def _span_ids_up(span: Span, by_id: Mapping[str, Span]) -> list[str]:
    ids, parent = [], span["parent_id"]
    while parent in by_id:
        ids.append(parent)
        parent = by_id[parent]["parent_id"]
    return ids
