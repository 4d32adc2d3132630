"""A backend that is down gives 503 with Retry-After, naming it — never a 500."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from indexer.settings import Settings
from search_api.app import create_app
from search_api.auth import DEV_TOKEN, token_hash
from tests.support.api_fixtures import free_port

pytestmark = pytest.mark.stack


def test_opensearch_down_is_503_not_500(settings: Settings, tmp_path: Path) -> None:
    down = settings.model_copy(update={
        "opensearch_url": f"http://127.0.0.1:{free_port()}",
        "api_tokens": json.dumps({token_hash("t0ken"): ["box"]}),
    })
    with TestClient(create_app(down)) as client:
        auth = {"Authorization": "Bearer t0ken"}
        for mode in ("fulltext", "hybrid"):
            response = client.get("/v1/mailboxes/box/search", params={"q": "x", "mode": mode}, headers=auth)
            assert response.status_code == 503, response.text
            assert response.headers["Retry-After"] == "5"
            assert response.json() == {"detail": "opensearch is unavailable"}
        ready = client.get("/readyz")
        body = ready.json()
        assert "opensearch" in body["failing"] and not body["ready"]
        assert "fulltext" not in body["serving"]
        # 503 only when nothing can be served: semantic search may still be (issue 40)
        assert ready.status_code == (503 if not body["serving"] else 200), body
        assert client.get("/healthz").status_code == 200


def test_dev_token_only_in_dev(settings: Settings) -> None:
    auth = {"Authorization": f"Bearer {DEV_TOKEN}"}
    with TestClient(create_app(settings)) as client:
        assert client.get("/v1/mailboxes/demo@example.com/search", params={"q": "x"}, headers=auth).status_code == 401
    dev = settings.model_copy(update={"env": "dev", "dev_mailboxes": ("demo-box",)})
    with TestClient(create_app(dev)) as client:
        assert client.get("/v1/mailboxes/other/search", params={"q": "x"}, headers=auth).status_code == 403
        response = client.get("/v1/mailboxes/demo-box/search", params={"q": "x"}, headers=auth)
        assert response.status_code == 200 and response.json()["hits"] == []
