"""End to end through real Celery workers: writer → moto stream → file → ingest → both indexes."""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from indexer.adapters import factories
from indexer.pipeline.redrive import redrive
from indexer.settings import Settings, to_env
from sidecar_tools.writer.files import load_file
from tests.conftest import CORPORA
from tests.support.pipeline_helpers import (
    embedded_hash,
    export_stream,
    ingest_files,
    opensearch_docs,
    prepare_tables,
    qdrant_points,
    table_messages,
    workers,
)

pytestmark = [pytest.mark.stack, pytest.mark.slow]
LKML = CORPORA / "notmuch-lkml.jsonl.gz"


def _corpus() -> dict[str, dict[str, object]]:
    with gzip.open(LKML, "rt", encoding="utf-8") as fh:
        return {json.loads(line)["messageId"]: json.loads(line) for line in fh}


def test_lkml_end_to_end(settings: Settings, tmp_path: Path) -> None:
    ddb = prepare_tables(settings)
    load_file(ddb, settings.table, LKML, "lkml")
    records = tmp_path / "stream.jsonl"
    assert export_stream(settings, records) > 176 * 4
    table = table_messages(ddb, settings.table, "lkml")
    assert len(table) == 176

    with workers(settings) as procs:
        summary = ingest_files(settings, [str(records)])
        assert summary.dead_lettered == 0 and summary.decode_failed == 0
        assert summary.applied + summary.ignored == summary.read
        assert summary.embedded > 0
        # The embedding worker gave up CPU priority (SIDECAR_VECTORS_NICE), full text (its
        # batches' worker and its recounts') did not.
        fulltext, contacts, vectors = (os.getpriority(os.PRIO_PROCESS, p.pid) for p in procs)
        assert vectors - fulltext == settings.vectors_nice == 10
        assert contacts == fulltext
        docs = opensearch_docs(settings, "lkml")

        # Re-delivery of every record: nothing is embedded again.
        again = ingest_files(settings, [str(records)])
        assert again.embedded == 0 and again.dead_lettered == 0

        # The same mail in a second mailbox, through the CLI: two documents and two points per
        # message, but identical forai texts are never embedded twice.
        load_file(ddb, settings.table, LKML, "lkml-copy")
        export_stream(settings, records)
        cli = subprocess.run(
            [sys.executable, "-m", "indexer.cli.main", "ingest", "--wait", str(records)],
            env={**os.environ, **to_env(settings)},
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert cli.returncode == 0, cli.stderr
        # Not a terminal: the summary is a JSON line (a table only in a terminal).
        (done,) = [e for e in map(json.loads, cli.stderr.splitlines())
                   if e["message"] == "ingest done"]
        assert done["embedded"] == 0 and done["dead_lettered"] == 0, done
        assert set(opensearch_docs(settings, "lkml-copy")) == set(table)

        # A term from a message's clean text finds that message.
        corpus = _corpus()
        probe = next(
            m
            for m in table.values()
            if len(re.findall(r"[a-z]{9,}", str(corpus[m["message_id"]]["content"]["clean"]))) > 3
        )  # type: ignore[index]
        words = re.findall(r"[a-z]{9,}", str(corpus[probe["message_id"]]["content"]["clean"]))  # type: ignore[index]
        client = factories.fulltext_index(settings).client
        body = {
            "query": {
                "bool": {
                    "filter": [{"term": {"mailbox_id": "lkml"}}],
                    "must": [{"match": {"clean": " ".join(words[:3])}}],
                }
            }
        }
        hits = client.search(index=settings.opensearch_index, body=body, routing="lkml")["hits"][
            "hits"
        ]
        assert probe["message_key"] in [h["_source"]["message_key"] for h in hits]

    assert set(docs) == set(table)
    for key, item in table.items():
        doc, email = docs[key], corpus[item["message_id"]]
        meta = email["metadata"]  # type: ignore[index]
        assert doc["subject"] == item["subject"] and doc["thread_key"] == item["thread_key"]
        assert doc["clean"] == email["content"]["clean"]  # type: ignore[index]
        assert doc["from"]["address"] == (meta["from"]["email"] or "").lower()  # type: ignore[index]
        assert doc["to"] == sorted({a["email"].lower() for a in meta["to"] if a.get("email")})  # type: ignore[index]
        assert doc["cc"] == sorted({a["email"].lower() for a in meta["cc"] if a.get("email")})  # type: ignore[index]
        assert doc["ts"] == item["ts"] and doc["spec_version"] == item["spec_version"]
        assert "forai" not in doc and "bcc" not in doc

    assert len(qdrant_points(settings, "lkml-copy")) == len(qdrant_points(settings, "lkml"))
    points = qdrant_points(settings, "lkml")
    with_text = {k for k, m in table.items() if (m.get("forai") or "").strip()}
    assert {k for (_, k) in points} == with_text
    for (_, key), payload in points.items():
        assert payload["content_hash"] == embedded_hash(table[key])  # subject + forai
        assert payload["thread_key"] == table[key]["thread_key"]


def test_poison_records_are_dead_lettered_and_the_rest_applied(
    settings: Settings, tmp_path: Path
) -> None:
    ddb = prepare_tables(settings)
    sample = tmp_path / "two.jsonl"
    with gzip.open(LKML, "rt", encoding="utf-8") as fh:
        sample.write_text("".join(next(fh) for _ in range(2)))
    load_file(ddb, settings.table, sample, "box")
    good = tmp_path / "good.jsonl"
    export_stream(settings, good)
    lines = good.read_text().splitlines()
    unknown = json.loads(lines[0])
    unknown["dynamodb"]["Keys"] = {"PK": {"S": "M#box#Q#zz"}, "SK": {"S": "?"}}
    wrong_type = json.loads(lines[0])
    wrong_type["dynamodb"]["Keys"]["PK"] = {"N": "12"}
    big = json.loads(lines[0])
    big["dynamodb"]["NewImage"]["clean"] = {"S": "x" * 400_000 + "\ud800"}
    poison = ["{not json", json.dumps(wrong_type), json.dumps(unknown), json.dumps(big)]
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text("\n".join(poison[:2] + lines + poison[2:]) + "\n")

    with workers(settings):
        summary = ingest_files(settings, [str(mixed)])
    assert summary.decode_failed == 4 and summary.dead_lettered == 4
    assert summary.applied + summary.ignored == len(lines)
    entries = factories.dead_letters(settings).list()
    reasons = " | ".join(e.reason for e in entries)
    assert len(entries) == 4
    assert "not JSON" in reasons and "lone surrogate" in reasons and "unknown item" in reasons
    assert any(e.source and e.source.endswith(":1") for e in entries)
    assert len(opensearch_docs(settings, "box")) == 2

    # Redrive: still-poison records come back with their reasons; a sink-stage entry for a
    # message that is fine now is applied and leaves the store.
    store = factories.dead_letters(settings)
    key = next(iter(opensearch_docs(settings, "box")))
    store.add(
        stage="vectors",
        reason="test",
        payload={"messages": [["box", key]], "participants": []},
        mailbox_id="box",
    )
    with workers(settings):
        result = redrive(settings, None, wait=True)
    # Dead letters keep only the trigger (keys), so the oversized record — its message is
    # fine in the table — is applied now; the three whose keys are unusable stay.
    assert result == {"redriven": 5, "failed_again": 3}
    still = sorted(e.reason for e in entries if "lone surrogate" not in e.reason)
    assert sorted(e.reason for e in store.list()) == still
    assert len(qdrant_points(settings, "box")) == 2
