"""``sidecar serve`` as started: the model loads at start and ``/readyz`` waits for it; a
stale hit's repair that cannot be enqueued (Redis down) never fails the search; answers are
``no-store``; ``/docs`` is off outside dev (issue 16); its metrics are on their own port, not
the API's (issue 23)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import httpx
import pytest

from indexer.adapters import factories
from indexer.core.documents import point_id
from indexer.core.plan import MessageRef
from indexer.pipeline.workers import stop_workers
from indexer.settings import Settings, to_env
from search_api.auth import token_hash
from tests.support.api_fixtures import TOKEN_A, free_port, serve_process
from tests.support.pipeline_helpers import prepare_tables
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.stack, pytest.mark.slow]

MAILBOX = "stale-box"
KEY = hashlib.sha256(b"<stale@example.org>").hexdigest()


def stale_document(settings: Settings) -> None:
    """An indexed message whose hot row is not in the table (deleted meanwhile)."""
    index = factories.fulltext_index(settings)
    ref = MessageRef(MAILBOX, KEY)
    doc = {"mailbox_id": MAILBOX, "message_key": KEY, "thread_key": KEY, "ts": 1709294400}
    doc |= {"subject": "stale quarterly report", "clean": "stale words"}
    index.client.index(
        index=index.alias, id=point_id(ref), routing=MAILBOX, body=doc, refresh=True
    )


def test_serve_waits_for_the_model_and_survives_a_dead_broker(
    settings: Settings, tmp_path: Path
) -> None:
    prepare_tables(settings)
    stale_document(settings)
    port, metrics_port = free_port(), free_port()
    env = {
        **os.environ,
        **to_env(settings),
        "SIDECAR_REDIS_URL": "redis://127.0.0.1:1/0",  # nothing listens: every enqueue fails
        "SIDECAR_API_PORT": str(port),
        "SIDECAR_API_METRICS_PORT": str(metrics_port),
        "SIDECAR_API_TOKENS": json.dumps({token_hash(TOKEN_A): [MAILBOX]}),
    }
    api = serve_process(env, tmp_path / "api.log")
    url = f"http://127.0.0.1:{port}"
    try:
        readiness = _readiness_until_ready(url)
        assert readiness[-1] == (200, [])
        assert all(failing == ["model"] and status == 200
                   for status, failing in readiness[:-1]), readiness

        headers = {"Authorization": f"Bearer {TOKEN_A}"}
        search = f"{url}/v1/mailboxes/{MAILBOX}/search"
        for _ in range(2):
            answer = httpx.get(search, params={"q": "stale"}, headers=headers, timeout=60)
            assert answer.status_code == 200, answer.text
            assert answer.json()["hits"] == []  # dropped at the join; repair could not be sent
            assert answer.headers["cache-control"] == "no-store"
        assert httpx.get(f"{url}/metrics", timeout=10).status_code == 404  # not public
        metrics = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).text
        assert 'sidecar_api_repairs_total{outcome="failed"} 2.0' in metrics
        assert httpx.get(f"{url}/docs", timeout=10).status_code == 404
        assert httpx.get(f"{url}/openapi.json", timeout=10).status_code == 200
    finally:
        stop_workers([api], timeout_s=20)


def _readiness_until_ready(url: str) -> list[tuple[int, list[str]]]:
    """``/readyz`` answers from the first moment the API listens until it is ready."""
    seen: list[tuple[int, list[str]]] = []

    def ready() -> bool:
        try:
            answer = httpx.get(f"{url}/readyz", timeout=10)
        except httpx.HTTPError:
            return False
        seen.append((answer.status_code, answer.json()["failing"]))
        # full text is served while the model loads (200, serving ["fulltext"]); ready
        # once everything answers
        return bool(answer.json()["ready"])

    wait_for(ready, timeout=180, message=lambda: f"never ready: {seen[-3:]}")
    return seen
