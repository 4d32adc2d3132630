"""A rollout mistake loses nothing (issue 23, part 4): a real full-text worker writes through
the verifying SigV4 proxy (``tests/support/sigv4_proxy.py``); mid-run the proxy's key is revoked, so
OpenSearch answers every request with Amazon's 403 for a bad signature, while mail keeps
arriving. The worker stalls — retrying with backoff, counting ``sidecar_config_errors_total``,
``sidecar_stalled`` at 1, ``/readyz`` naming a credentials problem, a search answering 503 —
and dead-letters nothing. Once the key is restored every message is indexed, with 0 dead
letters. (Before this change each refused batch became dead letters at once: "gave up after 0
retries".)"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector

from indexer.adapters import factories
from indexer.adapters.aws import clients as aws
from indexer.adapters.opensearch.index import OpenSearchIndex, build_client
from indexer.pipeline.dispatch import celery_send, decode_dead_letter, only_stage
from indexer.pipeline.ingest import Ingestor
from indexer.settings import Settings
from indexer.sources.files import read_sources
from search_api.app import create_app
from search_api.auth import token_hash
from tests.support.api_fixtures import mail, store_all
from tests.support.pipeline_helpers import (
    export_stream,
    opensearch_docs,
    prepare_tables,
    wait_until,
    workers,
)
from tests.support.sigv4_proxy import SigV4Proxy, signing_proxy

pytestmark = pytest.mark.stack

KEY, SECRET = "AKIDSIDECARTEST00002", "sidecar-config-test-secret/with+chars"
BOX, TOKEN = "stalled@example.com", "config-token"
SENDER = ("Ops", "ops@example.org")


@pytest.fixture
def proxy(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[SigV4Proxy]:
    with signing_proxy(settings.opensearch_url, monkeypatch, KEY, SECRET) as running:
        yield running


def _signed(settings: Settings, proxy: SigV4Proxy) -> Settings:
    """Through the proxy; small batches and a short backoff cap (so the test resumes within
    seconds of the fix, not the default two minutes)."""
    return settings.model_copy(update={
        "opensearch_url": proxy.url, "opensearch_auth": "sigv4", "aws_region": "eu-west-1",
        "api_tokens": json.dumps({token_hash(TOKEN): [BOX]}), "batch_messages": 4,
        "retry_backoff_max_s": 2,
    })


def _send_stream(settings: Settings, tmp_path: Path, name: str) -> Ingestor:
    """The table's stream so far, fed to the full-text worker (the tasks are sent, not
    awaited): as a stream reader would, which checkpoints only after ``wait``."""
    records = tmp_path / f"{name}.jsonl"
    export_stream(settings, records)
    run = Ingestor(only_stage(celery_send(settings), "fulltext"), decode_dead_letter(settings),
                   settings.batch_messages)
    run.feed_all(read_sources([str(records)], aws.client(settings, "s3")))
    return run


def _metric(directory: Path, name: str) -> float:
    """A worker metric for OpenSearch, as the worker supervisor would serve it."""
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(directory))  # type: ignore[no-untyped-call]
    return registry.get_sample_value(name, {"component": "opensearch"}) or 0.0


def _mails(numbers: range) -> list[dict[str, object]]:
    return [mail(n, f"Rollout note {n}", f"budget review number {n}", sender=SENDER,
                 to=["team@example.org"]) for n in numbers]


def test_revoked_credentials_stall_the_worker_and_lose_nothing(
    settings: Settings, proxy: SigV4Proxy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    metrics = tmp_path / "metrics"
    metrics.mkdir()
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(metrics))  # the worker inherits it
    signed = _signed(settings, proxy)
    prepare_tables(signed)
    OpenSearchIndex(build_client(signed), signed.opensearch_index).ensure()
    store_all(signed, BOX, _mails(range(1, 9)))
    dead = factories.dead_letters(signed)
    with workers(signed, ("fulltext",)):
        assert _send_stream(signed, tmp_path, "before").wait(120).dead_lettered == 0

        proxy.revoke()
        store_all(signed, BOX, _mails(range(9, 21)))  # mail keeps arriving
        run = _send_stream(signed, tmp_path, "during")
        tasks = run.summary.batches
        # Every task refused at least once and some refused again: the worker retries them.
        assert wait_until(
            lambda: bool(dead.list())
            or (_metric(metrics, "sidecar_config_errors_total") >= tasks + 3
                and _metric(metrics, "sidecar_stalled") == 1),
            timeout=45, interval=0.3,
        ), (proxy.tally.rejected[-3:], _metric(metrics, "sidecar_config_errors_total"))
        assert dead.list() == [], "a refused batch was dead-lettered"

        with TestClient(create_app(signed, vectors=False)) as client:
            ready = client.get("/readyz")
            assert ready.status_code == 503 and "opensearch" in ready.json()["failing"]
            assert "credentials" in ready.json()["errors"]["opensearch"], ready.json()
            found = client.get(f"/v1/mailboxes/{BOX}/search", headers={
                "Authorization": f"Bearer {TOKEN}"}, params={"q": "budget", "mode": "fulltext"})
            assert found.status_code == 503, found.text  # the engine refused us, not the query

        proxy.restore()  # the operator's fix: the stalled tasks resume by themselves
        summary = run.wait(60)
        with TestClient(create_app(signed, vectors=False)) as client:
            assert client.get("/readyz").json()["failing"] == []

    assert summary.dead_lettered == 0 and summary.applied == summary.read - summary.ignored
    assert dead.list() == []
    subjects = {doc["subject"] for doc in opensearch_docs(settings, BOX).values()}
    assert subjects == {f"Rollout note {n}" for n in range(1, 21)}
    assert _metric(metrics, "sidecar_stalled") == 0
