"""Issue 40 part 4: every API log line of a request carries its ``request_id`` — the client's
``X-Request-ID``, else the ALB's ``X-Amzn-Trace-Id`` root, else a fresh one — and the answer
echoes it in ``X-Request-ID``; a header that is not a plain short token is not echoed."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from indexer import logs
from indexer.settings import Settings
from search_api.app import create_app

pytestmark = pytest.mark.stack

ALB = "Root=1-67891233-abcdef012345678912345678;Parent=463ac35c9f6413ad;Sampled=1"


@pytest.fixture
def lines() -> Iterator[io.StringIO]:
    """The API's log lines, as the JSON formatter writes them."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logs.JsonFormatter())
    logger = logging.getLogger("search_api")
    saved = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield stream
    finally:
        logger.removeHandler(handler)
        logger.setLevel(saved)


def _access_lines(stream: io.StringIO) -> list[dict[str, object]]:
    entries = [json.loads(line) for line in stream.getvalue().splitlines()]
    return [e for e in entries if e.get("message") == "request"]


def test_the_request_id_is_logged_and_echoed(settings: Settings, lines: io.StringIO) -> None:
    with TestClient(create_app(settings, vectors=False)) as client:
        given = client.get("/healthz", headers={"X-Request-ID": "req-42.a"})
        from_alb = client.get("/healthz", headers={"X-Amzn-Trace-Id": ALB})
        fresh = client.get("/healthz")
        hostile = client.get("/healthz", headers={"X-Request-ID": "x\" y" + "z" * 300})
        unauthorized = client.get("/v1/mailboxes/box/search?q=a")
    assert given.headers["X-Request-ID"] == "req-42.a"
    assert from_alb.headers["X-Request-ID"] == "1-67891233-abcdef012345678912345678"
    generated = fresh.headers["X-Request-ID"]
    assert len(generated) == 32 and generated != hostile.headers["X-Request-ID"]
    assert "z" * 100 not in hostile.headers["X-Request-ID"]
    assert unauthorized.status_code == 401 and unauthorized.headers["X-Request-ID"]
    logged = [e.get("request_id") for e in _access_lines(lines)]
    answered = [r.headers["X-Request-ID"] for r in (given, from_alb, fresh, hostile,
                                                     unauthorized)]
    assert logged == answered
